"""Helpers for benchmarks that run the name server and broker as their own processes (`mq ... start`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil

sys.path.append(str(Path(__file__).resolve().parents[1]))
from tests.ports import free_port  # noqa: E402,F401  (the benchmarks import it from here)

#: whose name server and broker ``brokers`` starts
BROKER_KINDS = ("mq", "rocketmq")


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] if s else 0.0


@contextmanager
def daemons(*, broker: bool = True, broker_yaml: str = "", broker_port: int = 0
            ) -> Iterator[tuple[str, dict[str, str]]]:
    """Start `mq namesrv start` (and `mq broker start`, on ``broker_port`` when given) on free ports with a
    temporary MQ_HOME and store; yield (name server address, environment) and always stop them and remove the
    MQ_HOME."""
    home = tempfile.mkdtemp(prefix="mq-bench-")
    env = dict(os.environ, MQ_HOME=home)
    ns_port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--port", str(ns_port),
                               "--log-level", "WARNING"], env=env, stderr=subprocess.DEVNULL)]
    try:
        wait_port(ns_port)
        if broker:
            br_port = broker_port or free_port()
            argv = [sys.executable, "-m", "mq.cli.main", "broker", "start", "--namesrv", f"127.0.0.1:{ns_port}",
                    "--port", str(br_port), "--store", os.path.join(home, "store"), "--log-level", "WARNING"]
            if "grpcServerPort" not in broker_yaml:  # off unless asked for: another broker may hold 8081
                argv += ["--grpc-port", "-1"]
            if broker_yaml:
                conf = os.path.join(home, "broker.yaml")
                with open(conf, "w") as f:
                    f.write(broker_yaml)
                argv += ["--config", conf]
            procs.append(subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL))
            wait_port(br_port)
        yield f"127.0.0.1:{ns_port}", env
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)  # a broker's store reserves its 1 GiB segments up front


def _broker_process(match: list[str]) -> psutil.Process:
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if all(m in cmd for m in match):
            return p
    raise SystemExit("the broker process was not found")


@contextmanager
def brokers(kind: str, flush: str = "ASYNC_FLUSH", mq_settings: str = "") -> Iterator[tuple[str, psutil.Process]]:
    """A name server and a broker, ours (``mq``: ``daemons``) or Apache RocketMQ 4.9's own (``rocketmq``:
    ``tests/interop/java_broker.py``, classpath in ``$MQ_JAVA_BROKER_CLASSPATH``, 2 GiB heaps, RocketMQ's store
    defaults otherwise); yields (name server address, the broker's process) and always stops both.
    ``mq_settings``: more lines of ``mq``'s broker config (YAML), e.g. ``"warmAheadBytes: 0\n"``."""
    if kind == "mq":
        with daemons(broker_yaml=f"flushDiskType: {flush}\n{mq_settings}") as (ns, env):
            yield ns, _broker_process(["broker", os.path.join(env["MQ_HOME"], "store")])
        return
    if kind != "rocketmq":
        raise ValueError(f"unknown broker kind {kind!r}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.interop.java_broker import JavaBrokerUnavailable, JavaCluster

    with tempfile.TemporaryDirectory(prefix="mq-rocketmq-bench-") as root:
        cluster = JavaCluster(Path(root), heap="2g", flushDiskType=flush)
        try:
            cluster.start()
        except JavaBrokerUnavailable as exc:
            cluster.stop()
            raise SystemExit(f"cannot run RocketMQ's broker: {exc}") from None
        try:
            yield cluster.namesrv, _broker_process(["org.apache.rocketmq.broker.BrokerStartup",
                                                    str(cluster.root / "broker.properties")])
        finally:
            cluster.stop()
