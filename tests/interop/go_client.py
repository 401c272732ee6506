"""Build the interop driver (``go_driver/main.go``) against the official RocketMQ Go client.

``github.com/apache/rocketmq-client-go/v2`` is a complete implementation of the 4.x remoting protocol in Go,
sharing no code with the Java or C++ clients. Two ways to get it:

- module mode (the default): ``go mod tidy`` fetches the client and its dependencies through the machine's
  Go proxy settings (``GOPROXY``), then ``go build``;
- GOPATH mode, for machines without a module proxy: ``$MQ_GO_GOPATH`` lists GOPATH roots that hold the client's
  sources (``src/github.com/apache/rocketmq-client-go/v2`` at tag v2.1.2) and its dependencies, for example
  Debian's ``golang-*-dev`` packages under ``/usr/share/gocode``.

Without a Go toolchain, or when the module download fails, the tests skip and say why. A driver that does not
compile is an error, not a skip. The binary is cached (``build_cache``) under a name that changes with the
driver's source."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.interop.build_cache import ClientUnavailable, cached, run_tool

CLIENT_MODULE = "github.com/apache/rocketmq-client-go/v2"
CLIENT_VERSION = "v2.1.2"
SOURCE = Path(__file__).with_name("go_driver") / "main.go"
GO_MOD = f"""module mqinterop/godriver

go 1.13

require {CLIENT_MODULE} {CLIENT_VERSION}
"""


class GoClientUnavailable(ClientUnavailable):
    """What is missing to build the driver (the toolchain, the client's sources)."""


def build() -> Path:
    """The path of the compiled driver."""
    go = shutil.which("go")
    if go is None:
        raise GoClientUnavailable("go is not on PATH")
    gopath = os.environ.get("MQ_GO_GOPATH")
    digest = hashlib.sha256(SOURCE.read_bytes() + (gopath or "modules").encode()).hexdigest()[:12]
    name = f"go-driver-{CLIENT_VERSION}-{digest}"
    if gopath:
        root = cached(name, lambda work: _build_gopath(go, work, gopath))
    else:
        root = cached(name, lambda work: _build_modules(go, work))
    return root / "go_driver"


def _build_modules(go: str, work: Path) -> None:
    src = work / "src"
    src.mkdir()
    shutil.copy(SOURCE, src / "main.go")
    (src / "go.mod").write_text(GO_MOD)
    env = {**os.environ, "GO111MODULE": "on", "GOFLAGS": "-mod=mod"}
    proc = subprocess.run([go, "mod", "tidy"], cwd=src, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, env=env)
    if proc.returncode != 0:
        raise GoClientUnavailable(f"go mod tidy could not fetch {CLIENT_MODULE} {CLIENT_VERSION} (set MQ_GO_GOPATH "
                                  f"to build from local sources): {(proc.stdout + proc.stderr)[-800:]}")
    run_tool([go, "build", "-o", str(work / "go_driver"), "."], cwd=src, env=env)


def _build_gopath(go: str, work: Path, gopath: str) -> None:
    roots = [p for p in gopath.split(os.pathsep) if p]
    if not any((Path(r) / "src" / CLIENT_MODULE).is_dir() for r in roots):
        raise GoClientUnavailable(f"MQ_GO_GOPATH ({gopath}) holds no src/{CLIENT_MODULE}")
    src = work / "src" / "mqdriver"
    src.mkdir(parents=True)
    shutil.copy(SOURCE, src / "main.go")
    env = {**os.environ, "GO111MODULE": "off", "GOFLAGS": "", "GOPATH": os.pathsep.join([str(work), *roots])}
    run_tool([go, "build", "-o", str(work / "go_driver"), "."], cwd=src, env=env)
