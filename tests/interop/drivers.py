"""The Go and Java interop drivers behind one interface.

Both drivers (``go_driver/main.go``, ``java_driver/JavaDriver.java``) take the same modes and arguments and
print the same JSON lines (the Java client's names for send statuses and transaction states), so one set of
tests runs against both clients. They differ only in what they write into messages: bodies
``<name>-<i>-<tag>`` and keys ``<k>key-<i> <k>shared``."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import Callable

from tests.interop import go_client, java_client
from tests.interop.helpers import consumer_result, start_consumer


@dataclass(frozen=True)
class Driver:
    name: str  # "go" or "java"
    argv: tuple[str, ...]  # the command before the mode
    k: str  # the letter that starts its keys

    def body(self, i: int, tag: str) -> str:
        return f"{self.name}-{i}-{tag}"

    def keys(self, i: int) -> str:
        return f"{self.k}key-{i} {self.k}shared"

    def env(self, creds: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("MQ_ACCESS_KEY", "MQ_SECRET_KEY")}
        return {**env, **(creds or {})}

    def run(self, *args: str, timeout: float = 90, creds: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
        return subprocess.run([*self.argv, *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env(creds), stdin=subprocess.DEVNULL)

    def lines(self, *args: str, timeout: float = 90, creds: dict[str, str] | None = None) -> list[dict]:
        """Run to the end; its JSON lines. Fails unless it exited 0."""
        proc = self.run(*args, timeout=timeout, creds=creds)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]

    def produce(self, ns: str, topic: str, count: int, tags: str, mode: str = "sync") -> list[dict]:
        return self.lines("produce", ns, topic, f"GID_{self.name.upper()}_PRODUCER", str(count), tags, mode)

    def start_consumer(self, args: list[str]) -> subprocess.Popen:
        """Start ``consume ARGS`` and return once it printed that it runs."""
        return start_consumer([*self.argv, "consume", *args], self.env())

    def consume_while(self, args: list[str], during: Callable[[], None] | None = None,
                      exit_code: int = 0) -> list[dict]:
        """Run a consumer; once it runs, call ``during()``; its ``received`` list."""
        p = self.start_consumer(args)
        try:
            if during is not None:
                during()
        except BaseException:
            p.kill()
            p.communicate()
            raise
        return consumer_result(p, exit_code)


def build(name: str) -> Driver:
    """The named driver; ``ClientUnavailable`` (a skip) when this machine cannot build it."""
    if name == "go":
        return Driver("go", (str(go_client.build()),), "g")
    if name == "java":
        return Driver("java", tuple(java_client.build()), "j")
    raise ValueError(name)
