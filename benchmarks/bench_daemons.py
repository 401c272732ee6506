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
            procs.append(spawn_broker(env, f"127.0.0.1:{ns_port}", "store", broker_port or free_port(), broker_yaml))
        yield f"127.0.0.1:{ns_port}", env
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)  # a broker's store reserves its 1 GiB segments up front


def spawn_broker(env: dict[str, str], namesrv: str, name: str, port: int, broker_yaml: str = "") -> subprocess.Popen:
    """`mq broker start` on ``port`` with its store (and config file, when ``broker_yaml`` is given) under
    ``$MQ_HOME/<name>``; returns once the port is open (and kills it when the port does not open)."""
    root = os.path.join(env["MQ_HOME"], name)
    argv = [sys.executable, "-m", "mq.cli.main", "broker", "start", "--namesrv", namesrv, "--port", str(port),
            "--store", root, "--log-level", "WARNING"]
    if "grpcServerPort" not in broker_yaml:  # off unless asked for: another broker may hold 8081
        argv += ["--grpc-port", "-1"]
    if broker_yaml:
        conf = f"{root}.yaml"
        with open(conf, "w") as f:
            f.write(broker_yaml)
        argv += ["--config", conf]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
    except BaseException:  # it never opened its port: stop it rather than leave it running
        proc.kill()
        proc.wait()
        raise
    return proc


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
        try:  # a failed start (missing classpath, a JVM that exited) stops what did start
            try:
                cluster.start()
            except JavaBrokerUnavailable as exc:
                raise SystemExit(f"cannot run RocketMQ's broker: {exc}") from None
            yield cluster.namesrv, _broker_process(["org.apache.rocketmq.broker.BrokerStartup",
                                                    str(cluster.root / "broker.properties")])
        finally:
            cluster.stop()


@contextmanager
def replicated_brokers(kind: str, flush: str = "ASYNC_FLUSH") -> Iterator[tuple[str, psutil.Process, psutil.Process]]:
    """A name server, a master (ASYNC_MASTER) and its slave (brokerId 1) of one broker name, ours or RocketMQ's,
    both with ``slaveReadEnable``: what lets consumers read from the slave (a master suggests the slave for a
    group whose ``brokerId`` is 1). Yields (name server address, master process, slave process)."""
    if kind == "mq":
        ha_port = free_port()
        common = f"flushDiskType: {flush}\nbrokerName: broker-a\nslaveReadEnable: true\n"
        with daemons(broker_yaml=f"{common}brokerRole: ASYNC_MASTER\nhaListenPort: {ha_port}\n") as (ns, env):
            slave = spawn_broker(env, ns, "slave", free_port(), f"{common}brokerId: 1\nbrokerRole: SLAVE\n"
                                 f"haMasterAddress: 127.0.0.1:{ha_port}\n")
            try:
                yield ns, _broker_process(["broker", os.path.join(env["MQ_HOME"], "store")]), psutil.Process(slave.pid)
            finally:
                slave.terminate()
                slave.wait(timeout=30)
        return
    if kind != "rocketmq":
        raise ValueError(f"unknown broker kind {kind!r}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.interop.java_broker import JavaBrokerUnavailable, JavaCluster

    with tempfile.TemporaryDirectory(prefix="mq-rocketmq-bench-") as root:
        master = JavaCluster(Path(root) / "master", heap="2g", flushDiskType=flush, brokerRole="ASYNC_MASTER",
                             slaveReadEnable="true")
        slave = JavaCluster(Path(root) / "slave", heap="2g", namesrv=master.namesrv, flushDiskType=flush,
                            brokerId=1, brokerRole="SLAVE", slaveReadEnable="true")
        try:  # a failed start stops what did start
            try:
                master.start()
                slave.start()
            except JavaBrokerUnavailable as exc:
                raise SystemExit(f"cannot run RocketMQ's brokers: {exc}") from None
            procs = [_broker_process(["org.apache.rocketmq.broker.BrokerStartup", str(c.root / "broker.properties")])
                     for c in (master, slave)]
            yield master.namesrv, procs[0], procs[1]
        finally:
            slave.stop()
            master.stop()
