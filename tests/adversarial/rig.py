"""The daemons under attack and the invariants checked after every example.

A ``Rig`` runs a name server and a broker as their own processes (``python -m mq.cli.main``), so that a crash
is a process that exits, not a test runner that dies, and keeps them across the examples of a test. Its files::

    <root>/                    the test's tmp root: nothing may appear here but what the daemons made at start
      home/                    MQ_HOME of both daemons (pid files)
      logs/                    their logs
      namesrv/kvConfig.json    the name server's KV config (written by PUT_KV_CONFIG: allowed)
      d1/d2/.../d8/            the daemons' working directory, deep enough that "../" x 8 stays under <root>
        store/                 the broker's store: anything may appear in it, and ``store verify`` must pass
      abs/                     where hostile absolute paths point (``abs_target``)

After each example ``check()`` asks, in this order:

1. both daemons are alive (a dead one is a failure; it is restarted for the next example);
2. each answers a normal request on a new connection (any answer counts: a refusal is an answer);
3. ``verify_store`` (what ``mq store verify`` runs) finds the store consistent (retried for two seconds, since
   the broker may be between writing a record and dispatching it); a corrupt store is a failure, and the broker is
   restarted on a fresh store so that the next example starts clean;
4. the store holds only what the store lays out (``STORE_LAYOUT`` at its top, consume-queue directories named
   like topics, queue directories named like queue ids): a name with path pieces that became a path inside the
   store is found here, and the broker is restarted on a fresh store;
5. no path appeared under <root> outside the store since the last check, and no name carrying the hostile
   marker (``MARKER``) appeared next to <root>, in /tmp or in / (a path that escaped the store); such paths are
   listed in the failure and removed.

Every check failure raises ``AssertionError`` with the daemon's log tail, so hypothesis shrinks the example.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from mq.protocol.codes import RequestCode
from tests.adversarial.wire import Peer, json_frame
from tests.ports import free_port

#: Every hostile name that could become a path carries this, so an escaped file is found wherever it lands.
MARKER = "advx"
#: Directories between <root> and the daemons' working directory.
DEPTH = 8
#: Small store files, so the store stays small and ``verify_store`` fast.
BROKER_YAML = {
    "brokerClusterName": "AdvCluster", "brokerName": "adv-broker", "brokerId": 0,
    "mappedFileSizeCommitLog": 8 * 1024 * 1024, "mappedFileSizeConsumeQueue": 60_000,
    "maxHashSlotNum": 5_000, "maxIndexNum": 20_000, "haListenPort": 0, "grpcServerPort": -1,
}
HEALTH_TIMEOUT = 10.0
#: A store that does not verify is read again this many times, 0.3 s apart, before it counts as corrupt (the
#: broker may be between writing a record and dispatching it; a loaded CI machine makes that moment long).
VERIFY_TRIES = 8
#: Messages sent to AdvTopic queue 0 when a store is new.
SEED = 3
#: What a store root holds (mq.store, the timer, pop's revive log, the ACL file): anything else at its top is
#: misplaced.
STORE_LAYOUT = frozenset({"commitlog", "consumequeue", "index", "config", "checkpoint", "abort", "lock", "timer",
                          "pop", "conf", "acl"})
#: A topic name as the broker accepts it (mq.common.topic): a consume-queue directory named otherwise was made
#: from a name with path pieces.
TOPIC_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")


class Daemon:
    """One daemon process: ``start`` returns once its port accepts connections."""

    def __init__(self, kind: str, argv: list[str], port: int, cwd: Path, home: Path, log: Path) -> None:
        self.kind, self.argv, self.port, self.cwd, self.home, self.log_path = kind, argv, port, cwd, home, log
        self.proc: subprocess.Popen | None = None
        self.address = f"127.0.0.1:{port}"
        self.restarts = 0

    def start(self, timeout: float = 30.0) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("ROCKETMQ_HOME", "NAMESRV_ADDR")}
        env["MQ_HOME"] = str(self.home)
        (self.home / "run").mkdir(parents=True, exist_ok=True)
        for pid in (self.home / "run").glob(f"{self.kind}.pid"):
            pid.unlink()
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError(f"the {self.kind} exited with {self.proc.returncode}:\n{self.tail()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the {self.kind} did not listen within {timeout} s:\n{self.tail()}")
                time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 30 s; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def tail(self, n: int = 4000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text[-n:]


class Rig:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.logs = root / "logs"
        self.cwd = root.joinpath(*(f"d{i}" for i in range(1, DEPTH + 1)))
        self.store = self.cwd / "store"
        self.abs_target = root / "abs"
        for d in (self.home, self.logs, self.cwd, self.abs_target, root / "namesrv"):
            d.mkdir(parents=True, exist_ok=True)
        ns_port, broker_port = free_port(), free_port()
        ns_yaml = root / "namesrv.yaml"
        self._kv_config = str(root / "namesrv" / "kvConfig.json")
        ns_yaml.write_text(f"listenPort: {ns_port}\nkvConfigPath: {self._kv_config}\n")
        self.namesrv = Daemon("namesrv", [sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--host",
                                          "127.0.0.1", "--config", str(ns_yaml), "--log-level", "WARNING"],
                              ns_port, self.cwd, self.home, self.logs / "namesrv.log")
        broker_yaml = root / "broker.yaml"
        conf = {**BROKER_YAML, "listenPort": broker_port, "storePathRootDir": str(self.store),
                "namesrvAddr": self.namesrv.address}
        broker_yaml.write_text("".join(f"{k}: {v}\n" for k, v in conf.items()))
        self.broker = Daemon("broker", [sys.executable, "-m", "mq.cli.main", "broker", "start", "--config",
                                        str(broker_yaml), "--log-level", "WARNING"],
                             broker_port, self.cwd, self.home, self.logs / "broker.log")
        self._opaque = 1_000_000
        self._known: set[str] = set()
        self.examples = 0
        self.failures = 0

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.namesrv.start()
        self.broker.start()
        self.seed()
        self._known = self._outside_store()

    def seed(self) -> None:
        """What every example may refer to, again after each fresh store: ``SEED`` messages in queue 0 of
        ``registry.TOPIC`` (commit-log offset 0 holds one), so that a failing example replays the same way."""
        from mq.common import properties as P
        from mq.protocol import headers as H

        for i in range(SEED):
            hdr = H.SendMessageRequestHeaderV2(producer_group="AdvGroup", topic="AdvTopic", default_topic="TBW102",
                                               default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                               born_timestamp=int(time.time() * 1000), flag=0,
                                               properties=P.encode_properties({P.KEYS: f"seed{i}", P.TAGS: "S"}))
            opaque = self.next_opaque()
            with Peer(self.broker.address) as peer:
                resp = peer.call(json_frame(RequestCode.SEND_MESSAGE_V2, hdr.to_ext(), b"seed %d" % i,
                                            opaque=opaque), opaque, 10.0)
            assert resp is not None and resp.code == 0, resp

    def stop(self) -> dict[str, int | None]:
        return {"broker": self.broker.stop(), "namesrv": self.namesrv.stop()}

    def restart_broker(self, *, fresh_store: bool) -> None:
        self.broker.stop()
        if fresh_store:
            shutil.rmtree(self.store, ignore_errors=True)
        self.broker.restarts += 1
        self.broker.start()
        if fresh_store:
            self.seed()
        self._known = self._outside_store()

    def next_opaque(self) -> int:
        self._opaque += 1
        return self._opaque

    # -- invariants ----------------------------------------------------------------------------------------
    def _outside_store(self) -> set[str]:
        """Every path under <root> but the store's, the logs and the daemons' pid files (written after they
        listen: what the daemons make of their own accord)."""
        found = set()
        store = str(self.store)
        own = {str(self.logs), str(self.home / "run")}
        for dirpath, dirnames, filenames in os.walk(self.root):
            if dirpath == store or dirpath.startswith(store + os.sep) or dirpath in own:
                dirnames[:] = []
                continue
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if path != store and not path.startswith(self._kv_config):  # the name server's own file
                    found.add(path)
        return found

    def _misplaced_in_store(self) -> list[str]:
        """Paths inside the store that the store does not lay out: a top-level name it does not use, a consume
        queue directory whose name is not a topic name (a name with path pieces became a path), a queue
        directory that is not a queue id."""
        out = []
        try:
            top = os.listdir(self.store)
        except OSError:
            return out
        out += [str(self.store / n) for n in top if n not in STORE_LAYOUT]
        cq = self.store / "consumequeue"
        try:
            topics = os.listdir(cq)
        except OSError:
            topics = []
        for t in topics:
            if not TOPIC_NAME.fullmatch(t):
                out.append(str(cq / t))
                continue
            try:
                queues = os.listdir(cq / t)
            except OSError:
                continue
            out += [str(cq / t / q) for q in queues if not q.isdigit()]
        return out

    def _marked_elsewhere(self) -> list[str]:
        out = []
        for d in (self.root.parent, Path("/tmp"), Path("/")):
            try:
                names = os.listdir(d)
            except OSError:
                continue
            out += [str(d / n) for n in names if MARKER in n]
        return out

    def _answers(self, daemon: Daemon, code: int) -> str | None:
        """None when ``daemon`` answers ``code`` on a new connection, else what went wrong."""
        opaque = self.next_opaque()
        try:
            with Peer(daemon.address, timeout=HEALTH_TIMEOUT) as peer:
                resp = peer.call(json_frame(code, {}, opaque=opaque), opaque, HEALTH_TIMEOUT)
        except OSError as exc:
            return f"the {daemon.kind} refused a new connection: {exc}"
        if resp is None:
            return f"the {daemon.kind} did not answer request {code} within {HEALTH_TIMEOUT} s"
        return None

    def check(self, *, settle: float = 0.0) -> None:
        """Raise AssertionError naming every invariant the last example broke (see the module docstring)."""
        from mq.store.tools import verify_store

        self.examples += 1
        if settle:
            time.sleep(settle)
        problems: list[str] = []
        dead = [d for d in (self.namesrv, self.broker) if not d.alive()]
        for d in dead:
            problems.append(f"the {d.kind} died (exit code {d.proc.returncode if d.proc else None}):\n{d.tail()}")
        for d, code in ((self.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO),
                        (self.broker, RequestCode.GET_BROKER_RUNTIME_INFO)):
            if d.alive():
                why = self._answers(d, code)
                if why:
                    problems.append(why)
        corrupt = False
        if self.broker.alive() and self.store.exists():
            rep = None
            for _ in range(VERIFY_TRIES):
                rep = verify_store(self.store)
                if rep.ok:
                    break
                time.sleep(0.3)
            assert rep is not None
            if not rep.ok:
                corrupt = True
                problems.append(f"store verify fails: {rep.bad_records} bad record(s); "
                                f"{'; '.join(rep.problems[:5])}")
        misplaced = self._misplaced_in_store() if self.broker.alive() else []
        if misplaced:  # the broker holds them open: a fresh store, so that a replay makes them again
            problems.append(f"path(s) in the store that the store does not lay out: {misplaced}")
            corrupt = True
        now = self._outside_store()
        new = sorted(now - self._known)
        marked = self._marked_elsewhere()
        if new or marked:
            problems.append(f"path(s) outside the store directory {self.store}: {new + marked}")
            for p in new + marked:  # removed, so that the example can reproduce it when hypothesis replays it
                shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else _unlink(p)
            now = self._outside_store()
        self._known = now
        if dead and self.namesrv in dead:
            self.namesrv.restarts += 1
            self.namesrv.start()
        if (self.broker in dead) or corrupt:
            self.restart_broker(fresh_store=corrupt)
        if problems:
            self.failures += 1
            raise AssertionError("\n".join(problems))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
