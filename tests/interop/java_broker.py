"""Apache RocketMQ's own name server and broker (4.9.x, ``NamesrvStartup`` and ``BrokerStartup``) for the tests
that point our tools at a real RocketMQ cluster.

They are not on PyPI, so the classpath is given: ``$MQ_JAVA_BROKER_CLASSPATH`` lists rocketmq-namesrv and
rocketmq-broker 4.9.x with their dependencies (a RocketMQ 4.9.x binary distribution's ``lib/*`` will do). Without
it, or without ``java``, ``JavaCluster.start`` raises ``JavaBrokerUnavailable`` and the tests skip. Everything the
two processes write (store, config, logs, the name server's kvConfig) stays under the given directory: both run
with ``user.home`` and ``ROCKETMQ_HOME`` there, and with logback files that log to it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.integration.broker_process import free_port
from tests.interop.build_cache import ClientUnavailable

#: Java 17 needs these for the store's mmap cleaner (RocketMQ 4.9 reaches into sun.nio.ch by reflection)
JVM_OPENS = ["--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
             "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED"]
_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<configuration><appender name="F" class="ch.qos.logback.core.FileAppender"><file>{log}</file>
<encoder><pattern>%d %p %c{{1}} - %m%n</pattern></encoder></appender><root level="INFO"><appender-ref ref="F"/></root>
</configuration>
"""


class JavaBrokerUnavailable(ClientUnavailable):
    """What is missing to run RocketMQ's name server and broker."""


def _free_port(avoid: frozenset[int] = frozenset()) -> int:
    while (port := free_port()) in avoid:
        pass
    return port


def _free_broker_port() -> int:
    """A listen port whose neighbours are free too: RocketMQ's broker also binds listenPort - 2 (the VIP channel)
    and listenPort + 1 (HA), and fails to start when either is taken."""
    while True:
        port = _free_port()
        socks = []
        try:
            for p in (port - 2, port - 1, port, port + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()


class JavaCluster:
    """A RocketMQ 4.9 name server and one broker (``brokerName`` java-broker, cluster DefaultCluster) on free
    loopback ports; with ``namesrv`` (an address) only the broker, registering there. ``broker_conf`` adds or
    overrides broker.conf keys."""

    def __init__(self, root: Path, heap: str = "256m", namesrv: str | None = None, **broker_conf: object) -> None:
        self.root = Path(root)
        self.heap = heap
        self._external_namesrv = namesrv
        self.classpath = os.environ.get("MQ_JAVA_BROKER_CLASSPATH", "")
        self.broker_conf = broker_conf
        self.broker_port = _free_broker_port()
        self.namesrv_port = _free_port(frozenset(range(self.broker_port - 2, self.broker_port + 2)))
        self.store = self.root / "store"
        self._procs: list[subprocess.Popen] = []
        self._outs: list = []  # each process's stdout file, closed on stop

    @property
    def namesrv(self) -> str:
        return self._external_namesrv or f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def start(self) -> None:
        java = shutil.which("java")
        if java is None:
            raise JavaBrokerUnavailable("java is not on PATH")
        if not self.classpath:
            raise JavaBrokerUnavailable("MQ_JAVA_BROKER_CLASSPATH is not set (rocketmq-broker and rocketmq-namesrv "
                                        "4.9.x with their dependencies)")
        conf = self.root / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        for name in ("namesrv", "broker"):
            (conf / f"logback_{name}.xml").write_text(_LOGBACK.format(log=self.root / f"{name}.log"))
        (self.root / "namesrv.properties").write_text(f"listenPort={self.namesrv_port}\n")
        broker = {"brokerClusterName": "DefaultCluster", "brokerName": "java-broker", "brokerId": 0,
                  "namesrvAddr": self.namesrv, "listenPort": self.broker_port, "brokerIP1": "127.0.0.1",
                  "storePathRootDir": self.store, "storePathCommitLog": self.store / "commitlog",
                  "autoCreateTopicEnable": "true", **self.broker_conf}
        (self.root / "broker.properties").write_text("".join(f"{k}={v}\n" for k, v in broker.items()))
        env = {**os.environ, "ROCKETMQ_HOME": str(self.root)}
        base = [java, f"-Xms{self.heap}", f"-Xmx{self.heap}", *JVM_OPENS, f"-Duser.home={self.root}", "-cp", self.classpath]
        if self._external_namesrv is None:
            self._spawn(base + ["org.apache.rocketmq.namesrv.NamesrvStartup", "-c",
                                str(self.root / "namesrv.properties")], env, "The Name Server boot success")
        self._spawn(base + ["org.apache.rocketmq.broker.BrokerStartup", "-c", str(self.root / "broker.properties")],
                    env, "boot success")

    def _spawn(self, argv: list[str], env: dict[str, str], ready: str, timeout: float = 60.0) -> None:
        out = open(self.root / f"{len(self._procs)}.out", "w+")
        self._outs.append(out)
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL,
                             cwd=self.root)
        self._procs.append(p)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out.seek(0)
            text = out.read()
            if ready in text:
                return
            if p.poll() is not None:
                raise AssertionError(f"{argv[-3]} exited ({p.returncode}): {text[-3000:]}")
            time.sleep(0.2)
        raise AssertionError(f"{argv[-3]} did not start within {timeout:.0f} s")

    def stop_broker(self) -> None:
        """Stop the broker (SIGTERM: its shutdown hook flushes and closes the store), leaving the name server."""
        if len(self._procs) > (0 if self._external_namesrv else 1):
            self._stop(self._procs.pop())

    def stop(self) -> None:
        while self._procs:
            self._stop(self._procs.pop())
        while self._outs:
            self._outs.pop().close()

    @staticmethod
    def _stop(p: subprocess.Popen) -> None:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
