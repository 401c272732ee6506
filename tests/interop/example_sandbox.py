"""Run RocketMQ's own example programs (rocketmq-example 4.9.x, unmodified) against our name server and broker.

Most examples hard-code the name server ``127.0.0.1:9876`` (the others read ``$NAMESRV_ADDR``), so this module is
run in a network namespace of its own (``unshare -n``: its own loopback, where port 9876 is always free and no
other test sees it), or directly when 9876 is free. It reads a scenario as JSON on stdin, starts a name server on
127.0.0.1:9876 and a broker (``Daemons``, with the scenario's broker and store settings), runs the scenario's
steps and prints one JSON document: every program's output and what the broker stored.

    {"broker": {BrokerConfig field: value}, "store": {StoreConfig field: value},
     "steps": [{"run": NAME, "main": CLASS, "args": [...], "timeout": s,
                "until": [PATTERN, COUNT]},      # stop it once COUNT lines matched (else it must exit 0);
                                                 # [PATTERN, COUNT, "distinct"]: COUNT different matches
               {"start": NAME, "main": CLASS, "ready": PATTERN},   # in the background
               {"wait": NAME, "until": [PATTERN, COUNT], "timeout": s},
               {"stored": TOPIC, "count": N, "timeout": s},          # wait until the broker holds N messages
               {"sleep": seconds}],
     "create": {TOPIC: queues},                                      # topics made before the programs run
     "topics": [TOPIC, ...], "groups": [[GROUP, TOPIC], ...]}
    -> {"outputs": {NAME: text}, "timedOut": [NAME, ...],
        "stored": {TOPIC: [{"queueId", "queueOffset", "tags", "keys", "body", "properties", "reconsumeTimes",
                            "bornTimestamp", "storeTimestamp"}]},
        "offsets": {"GROUP@TOPIC": {queueId: offset}}}

The classpath is ``$MQ_JAVA_EXAMPLE_CLASSPATH``. Background programs are stopped at the end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

NAMESRV = "127.0.0.1:9876"


class Program:
    """One example program's JVM, its output collected line by line."""

    def __init__(self, name: str, main: str, args: list[str], classpath: str) -> None:
        self.name = name
        self.lines: list[str] = []
        self._changed = threading.Condition()
        env = {**os.environ, "NAMESRV_ADDR": NAMESRV}
        self.proc = subprocess.Popen(["java", "-Xmx256m", "-Drocketmq.client.logRoot=" + tempfile.gettempdir(),
                                      "-cp", classpath, main, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, stdin=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, pattern: str, count: int, mode: str = "lines", *, timeout: float) -> bool:
        """True once ``count`` occurrences of ``pattern`` were printed, or with ``mode`` "distinct" ``count``
        different ones (a message a consumer printed twice counts once); False after ``timeout`` s."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout

        def seen() -> int:
            found = [m for line in self.lines for m in regex.findall(line)]
            return len(set(found)) if mode == "distinct" else len(found)
        with self._changed:
            while seen() < count:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reading()):
                    return seen() >= count
                self._changed.wait(min(left, 0.5))
        return True

    def _reading(self) -> bool:
        return self.proc.stdout is not None and not self.proc.stdout.closed and self.proc.poll() is None

    def wait_exit(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
            time.sleep(0.2)  # the reader thread takes the last lines
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def output(self) -> str:
        with self._changed:
            return "".join(self.lines)


def _count(broker, topic: str) -> int:
    tc = broker.topic_config.get(topic)
    return sum(broker.store.get_max_offset(topic, q) for q in range(tc.read_queue_nums)) if tc is not None else 0


def _stored(broker, topic: str) -> list[dict]:
    from mq.common.record import decode_record

    out = []
    tc = broker.topic_config.get(topic)
    for qid in range(tc.read_queue_nums if tc is not None else 0):
        offset = 0
        while True:
            r = broker.store.get_message("example-sandbox", topic, qid, offset, 32)
            if not r.buffers:
                break
            for i, raw in enumerate(r.buffers):
                m = decode_record(raw)
                out.append({"queueId": qid, "queueOffset": m.queue_offset, "tags": m.properties.get("TAGS"),
                            "keys": m.properties.get("KEYS"), "body": (m.body or b"").decode("utf-8", "replace"),
                            "properties": dict(m.properties), "reconsumeTimes": m.reconsume_times,
                            "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp})
            offset = r.next_begin_offset
    return out


def run(scenario: dict) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.interop.conftest import Daemons

    classpath = os.environ["MQ_JAVA_EXAMPLE_CLASSPATH"]
    root = tempfile.mkdtemp(prefix="mq-examples-")
    d = Daemons(root, broker_options=scenario.get("broker"), namesrv_port=9876, **scenario.get("store", {}))
    d.start()
    for topic, queues in scenario.get("create", {}).items():
        from mq.protocol.bodies import TopicConfig

        d.broker.topic_config.put(TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues))
        d.call(d.broker.register_all(force=True))
    programs: dict[str, Program] = {}
    timed_out: list[str] = []
    try:
        for step in scenario["steps"]:
            if "sleep" in step:
                time.sleep(step["sleep"])
            elif "stored" in step:
                deadline = time.monotonic() + step.get("timeout", 120)
                while _count(d.broker, step["stored"]) < step["count"] and time.monotonic() < deadline:
                    time.sleep(0.2)
            elif "run" in step:
                p = programs[step["run"]] = Program(step["run"], step["main"], step.get("args", []), classpath)
                if "until" in step:
                    if not p.wait_for(*step["until"], timeout=step.get("timeout", 120)):
                        timed_out.append(p.name)
                    p.stop()
                elif not p.wait_exit(step.get("timeout", 120)):
                    timed_out.append(p.name)
                    p.stop()
            elif "start" in step:
                p = programs[step["start"]] = Program(step["start"], step["main"], step.get("args", []), classpath)
                if "ready" in step and not p.wait_for(step["ready"], 1, timeout=step.get("timeout", 60)):
                    timed_out.append(p.name)
            elif "wait" in step:
                if not programs[step["wait"]].wait_for(*step["until"], timeout=step.get("timeout", 120)):
                    timed_out.append(step["wait"])
        time.sleep(scenario.get("settle", 0))
        for p in programs.values():
            p.stop()
        stored = {t: _stored(d.broker, t) for t in scenario.get("topics", [])}
        table = d.broker.offsets.table()
        offsets = {f"{g}@{t}": {str(q): o for q, o in table.get(f"{t}@{g}", {}).items()}
                   for g, t in scenario.get("groups", [])}
        return {"outputs": {n: p.output for n, p in programs.items()}, "timedOut": timed_out, "stored": stored,
                "offsets": offsets}
    finally:
        for p in programs.values():
            p.stop()
        d.stop()


def main() -> None:
    if "--netns" in sys.argv:  # inside ``unshare -n``: bring the namespace's loopback up first
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    print(json.dumps(run(json.load(sys.stdin))), flush=True)


if __name__ == "__main__":
    main()
