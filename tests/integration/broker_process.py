"""A broker run as its own process (``python -m mq.cli.main broker start --config F``), for tests that must kill
it with SIGKILL or let it die: the in-process ``broker_factory`` cannot be killed without killing the test.

    b = BrokerProcess(tmp_path / "b1", {"brokerName": "broker-b", "namesrvAddr": ns_addr})
    b.start()            # returns once the port accepts connections; b.address is "127.0.0.1:<port>"
    b.kill()             # SIGKILL: no unregistering, no checkpoint, the abort file stays
    b.start()            # the same store and port again (crash recovery)
    b.stop()             # SIGTERM, waits; True when it exited 0

The config gets small store segments, a free listen port and any free HA port unless given, and no gRPC
endpoint unless ``grpcServerPort`` is given.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.ports import free_port  # noqa: F401  (re-exported for the tests that import it from here)


class BrokerProcess:
    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = int(config.get("listenPort") or free_port())
        self.config = {"listenPort": self.port, "storePathRootDir": str(self.workdir / "store"),
                       "mappedFileSizeCommitLog": 4 * 1024 * 1024, "mappedFileSizeConsumeQueue": 60_000,
                       "maxHashSlotNum": 5_000, "maxIndexNum": 20_000, "haListenPort": 0, "grpcServerPort": -1,
                       **config}
        self.address = f"127.0.0.1:{self.port}"
        self.log_path = self.workdir / "broker.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        conf = self.workdir / "broker.yaml"
        conf.write_text("".join(f"{k}: {v}\n" for k, v in self.config.items()))
        args = [sys.executable, "-m", "mq.cli.main", "broker", "start", "--config", str(conf)]
        if "namesrvAddr" not in self.config:
            args += ["--namesrv", ""]
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=dict(os.environ, MQ_HOME=str(self.workdir / "home")))
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError(f"the broker exited with {self.proc.returncode}:\n{self.log()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the broker did not listen within {timeout} s:\n{self.log()}")
                time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM and wait (SIGKILL after ``timeout``); True when the broker exited cleanly."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc is None or self.proc.returncode == 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return False
        return self.proc.returncode == 0

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""
