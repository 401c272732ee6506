"""Crash test: a child process appends and reports every acknowledged message; it is killed with SIGKILL at
random moments. After each kill every acknowledged message must be readable, nothing half-written may be
visible, and consume queues and index must agree with the log. Both flush modes, >= 20 rounds each."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mq.common.record import decode_record
from mq.config import StoreConfig
from mq.store import tools
from mq.store.message_store import MessageStore
from mq.store.status import GetMessageStatus

ROUNDS = 20
CHILD = r"""
import os, random, sys, threading
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties
from mq.config import StoreConfig
from mq.store.message_store import MessageStore

root, mode, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024,
                  mapped_file_size_consume_queue=20 * 500, flush_disk_type=mode, max_hash_slot_num=4096,
                  max_index_num=20000, flush_interval_commit_log=20, flush_interval_consume_queue=20)
store = MessageStore(cfg)
store.start()
os.write(1, b"READY\n")
lock = threading.Lock()

def body_for(key, size):
    return (key.encode() * (size // len(key) + 1))[:size]

def writer(t):
    rng = random.Random(rnd * 100 + t)
    i = 0
    while True:
        i += 1
        key = f"r{rnd}t{t}n{i}"
        size = rng.choice([0, 10, 100, 1000, 3000])
        qid = rng.randrange(4)
        props = {"KEYS": key, "TAGS": rng.choice(["TagA", "TagB", "标签"])}
        m = MessageExtBrokerInner(topic=f"Crash{qid % 2}", body=body_for(key, size), queue_id=qid,
                                  properties=props, properties_string=encode_properties(props),
                                  born_host=("10.1.2.3", 999), born_timestamp=1)
        r = store.put_message(m)
        if r.status.name == "PUT_OK":
            os.write(1, f"{m.topic} {qid} {r.queue_offset} {r.wrote_offset} {key} {size}\n".encode())

for t in range(4 if mode == "SYNC_FLUSH" else 1):
    threading.Thread(target=writer, args=(t,), daemon=True).start()
threading.Event().wait()
"""


def _config(root: Path, mode: str) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=256 * 1024,
                       mapped_file_size_consume_queue=20 * 500, flush_disk_type=mode, max_hash_slot_num=4096,
                       max_index_num=20000)


def _run_child(root: Path, mode: str, rnd: int, rng: random.Random) -> list[tuple]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(root), mode, str(rnd)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    buf = b""
    try:
        deadline = time.monotonic() + 30
        while b"READY\n" not in buf:
            r, _, _ = select.select([p.stdout], [], [], 1.0)
            if r:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError(f"child died: {p.stderr.read().decode()[-2000:]}")
                buf += chunk
            assert time.monotonic() < deadline, "child did not start"
        end = time.monotonic() + rng.uniform(0.02, 0.4)
        while time.monotonic() < end:
            r, _, _ = select.select([p.stdout], [], [], 0.01)
            if r:
                buf += os.read(p.stdout.fileno(), 1 << 20)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        buf += p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
    lines = buf.split(b"\n")
    acked = []
    for line in lines:
        if line and line != b"READY":
            parts = line.decode().split()
            if len(parts) == 6:  # the last line may be cut by the kill: it was never fully reported
                t, q, qoff, phy, key, size = parts
                acked.append((t, int(q), int(qoff), int(phy), key, int(size)))
    return acked


def _body_for(key: str, size: int) -> bytes:
    return (key.encode() * (size // len(key) + 1))[:size]


def _check_offline(root: Path, acked: list[tuple]) -> None:
    rep = tools.verify_store(root)
    assert rep.ok, rep.problems[:5]
    units = {}
    for t in ("Crash0", "Crash1"):
        for q in range(4):
            for qoff, phy, size, _tc in tools.iter_consume_queue(root, t, q):
                units[(t, q, qoff)] = phy
    for t, q, qoff, phy, key, size in acked:
        assert units.get((t, q, qoff)) == phy, f"acked {key} at {phy} has no consume queue unit"


def _check_online(root: Path, mode: str, acked: list[tuple], rng: random.Random) -> None:
    s = MessageStore(_config(root, mode))
    s.start()
    try:
        assert not s.recovery.last_exit_ok
        for t, q, qoff, phy, key, size in acked:
            r = s.get_message("g", t, q, qoff, 1)
            assert r.status is GetMessageStatus.FOUND, (key, r.status)
            m = decode_record(r.buffers[0], check_crc=True)
            assert (m.commit_log_offset, m.keys, m.queue_offset, m.body) == (phy, key, qoff, _body_for(key, size))
        for t, q, qoff, phy, key, size in rng.sample(acked, min(20, len(acked))):
            found = s.query_message(t, key, 4)
            assert found.phy_offsets == [phy], key
    finally:
        s.shutdown()
    assert tools.verify_store(root).ok


@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_kill_minus_nine(tmp_path, mode):
    rng = random.Random(hash(mode) & 0xFFFF)
    root = tmp_path / "store"
    all_acked: list[tuple] = []
    for rnd in range(ROUNDS):
        acked = _run_child(root, mode, rnd, rng)
        all_acked += acked
        _check_offline(root, all_acked)
        if rnd % 4 == 3 or rnd == ROUNDS - 1:  # also recover in-process (then the next child starts clean)
            _check_online(root, mode, all_acked, rng)
    assert len(all_acked) > ROUNDS  # the children did acknowledge work
