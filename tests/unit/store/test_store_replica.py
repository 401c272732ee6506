"""Replication, store side: read_replica on a master, append_replica on a slave (STORE.md §13).

Real stores in tmp_path with small segments, so segment rolls and BLANK tails happen in every copy."""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.record import BLANK, BLANK_MAGIC_CODE, decode_records
from mq.store import tools
from mq.store.mapped_file import StoreError
from mq.store.replica import ChunkAssembler, whole_units
from mq.store.message_store import MessageStore
from mq.store.status import PutMessageStatus, ReplicaOffsetError

from .conftest import inner, small_config

SEG = 64 * 1024
CHUNK = 32 * 1024
TOPICS = ("TA", "TB", "TC")


# -- helpers ---------------------------------------------------------------------------------------------
def fill(store: MessageStore, rng: random.Random, n: int, *, first: int = 0, max_body: int = 2500) -> list[str]:
    """Put about ``n`` random messages (some batches, some delayed, some prepared); returns the keys used."""
    keys = []
    i = first
    while i < first + n:
        topic, qid = rng.choice(TOPICS), rng.randrange(4)
        kind = rng.random()
        count = rng.randint(2, 5) if kind < 0.15 else 1
        msgs = []
        for _ in range(count):
            key = f"k{i}"
            keys.append(key)
            props = {P.KEYS: key + (f" alt{i % 7}" if i % 3 == 0 else "")}
            if rng.random() < 0.7:
                props[P.TAGS] = rng.choice(("a", "b", "c"))
            if rng.random() < 0.3:
                props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = f"U{i:08X}"
            sys_flag = 0
            if count == 1 and 0.15 <= kind < 0.2:
                props[P.DELAY_TIME_LEVEL] = "2"
            elif count == 1 and 0.2 <= kind < 0.24:
                sys_flag = SF.TRANSACTION_PREPARED_TYPE  # stored, but no consume-queue unit
            body = rng.randbytes(rng.randint(0, max_body))
            msgs.append(inner(topic=topic, queue_id=qid, body=body, props=props, sys_flag=sys_flag))
            i += 1
        res = store.put_messages(msgs)
        assert res.ok, res
    return keys


def copy(master: MessageStore, slave: MessageStore, *, chunk: int | list[int] = CHUNK, start: int | None = None,
         max_chunks: int | None = None) -> int:
    """The HA loop: read from the slave's max offset (or ``start`` for an empty slave), append; returns how
    many chunks were copied."""
    off = slave.get_max_phy_offset() if start is None else start
    sizes = chunk if isinstance(chunk, list) else [chunk]
    n = 0
    while max_chunks is None or n < max_chunks:
        data = master.read_replica(off, sizes[n % len(sizes)])
        assert data is not None
        if not data:
            break
        new = slave.append_replica(off, data)
        assert new == off + len(data) == slave.get_max_phy_offset()
        off = new
        n += 1
    return n


def segment_bytes(store: MessageStore) -> dict[str, bytes]:
    d = Path(store.config.commit_log_dir())
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name.isdigit()} if d.is_dir() else {}


def assert_same_log(master: MessageStore, slave: MessageStore, start: int) -> None:
    """The slave's segments equal the master's byte for byte over [start, slave max)."""
    end = slave.get_max_phy_offset()
    assert end == master.get_max_phy_offset()
    m, s = segment_bytes(master), segment_bytes(slave)
    names = [n for n in m if int(n) + SEG > start and int(n) < end]
    assert sorted(s) == names
    for name in names:
        base = int(name)
        lo, hi = max(start, base) - base, min(end, base + SEG) - base
        assert s[name][lo:hi] == m[name][lo:hi], name
        assert len(s[name]) == SEG


def queues(store: MessageStore) -> list[tuple[str, int]]:
    return sorted((cq.topic, cq.queue_id) for cq in store.cq_table)


def read_queue_all(store: MessageStore, topic: str, qid: int, frm: int) -> list[bytes]:
    out, off = [], frm
    while off < store.get_max_offset(topic, qid):
        r = store.get_message("g", topic, qid, off, 64)
        assert r.message_count > 0, (topic, qid, off, r.status)
        out += r.buffers
        off = r.next_begin_offset
    return out


def assert_same_derived(master: MessageStore, slave: MessageStore, start: int, keys: list[str]) -> None:
    """Consume queues unit by unit, reads, max offsets, the per-queue offset table and the index agree for
    every record at or after ``start``."""
    assert queues(slave) == [q for q in queues(master) if master.cq_table.find(*q, create=False).max_physic_offset
                             > start]
    for topic, qid in queues(slave):
        mx = master.get_max_offset(topic, qid)
        assert slave.get_max_offset(topic, qid) == mx
        assert slave.commit_log.topic_queue_table[(topic, qid)] == master.commit_log.topic_queue_table[(topic, qid)]
        # the first queue offset whose record was copied
        frm = next(o for o in range(master.get_min_offset(topic, qid), mx)
                   if master.get_commit_log_offset_in_queue(topic, qid, o) >= start)
        assert slave.get_min_offset(topic, qid) == frm
        units_m = master.query_consume_queue(topic, qid, frm, mx - frm)
        units_s = slave.query_consume_queue(topic, qid, frm, mx - frm)
        assert units_s[2] == units_m[2] and units_s[2]
        got = read_queue_all(slave, topic, qid, frm)
        assert got == read_queue_all(master, topic, qid, frm)
        assert all(m.commit_log_offset >= start for m in decode_records(b"".join(got)))
    found = 0
    for key in keys:
        for t in TOPICS:
            rm = master.query_message(t, key, 64)
            rs = slave.query_message(t, key, 64)
            want = [(p, b) for p, b in zip(rm.phy_offsets, rm.buffers) if p >= start]
            assert list(zip(rs.phy_offsets, rs.buffers)) == want, (t, key)
            found += len(want)
    assert found > len(keys) // 3


def master_store(make_store, root, **kw) -> MessageStore:
    return make_store(root, **kw)


def slave_store(make_store, root, **kw) -> MessageStore:
    return make_store(root, broker_role="SLAVE", **kw)


# -- the copy loop ---------------------------------------------------------------------------------------
def test_copy_loop_gives_an_identical_slave(make_store, tmp_path):
    rng = random.Random(1)
    master = master_store(make_store, tmp_path / "m")
    seen: list[tuple] = []
    slave = slave_store(make_store, tmp_path / "s", _store_kw={"on_dispatch": lambda *a: seen.append(a)})
    keys = fill(master, rng, 400)
    assert len(master.commit_log.queue.files) >= 5
    n = copy(master, slave)
    assert n > 10
    assert_same_log(master, slave, 0)
    assert_same_derived(master, slave, 0, keys[::7])
    # long polling was told about every unit, in order, with the master's queue offsets
    last = {}
    for topic, qid, next_off, _tc in seen:
        assert next_off == last.get((topic, qid), 0) + 1
        last[(topic, qid)] = next_off
    assert {k: v for k, v in last.items()} == {q: master.get_max_offset(*q) for q in queues(master)}
    assert slave.runtime_info()["replica_bytes"] == master.get_max_phy_offset()
    # BLANK tails were copied: every full slave segment ends with the master's BLANK record
    for name, data in segment_bytes(slave).items():
        if int(name) + SEG <= slave.get_max_phy_offset():
            pos = data.rfind(BLANK.pack(0, BLANK_MAGIC_CODE)[4:])
            assert pos > 0 and BLANK.unpack_from(data, pos - 4)[0] == SEG - (pos - 4)


def test_copy_with_sync_flush_slave(make_store, tmp_path):
    rng = random.Random(2)
    calls = []
    master = master_store(make_store, tmp_path / "m")
    slave = slave_store(make_store, tmp_path / "s", flush_disk_type="SYNC_FLUSH",
                        _store_kw={"fsync": lambda fd: calls.append(fd)})
    keys = fill(master, rng, 250)
    n = copy(master, slave, chunk=8 * 1024)
    assert len(calls) >= n  # one flush per chunk, before append_replica returned
    assert slave.commit_log.queue.flushed_where == slave.get_max_phy_offset()
    assert slave.checkpoint.physic_msg_timestamp == master.commit_log.last_store_timestamp
    assert_same_log(master, slave, 0)
    assert_same_derived(master, slave, 0, keys[::5])


def test_slave_starting_at_the_masters_last_segment(make_store, tmp_path):
    rng = random.Random(3)
    master = master_store(make_store, tmp_path / "m")
    slave = slave_store(make_store, tmp_path / "s")
    keys = fill(master, rng, 350)
    mx = master.get_max_phy_offset()
    start = mx - mx % SEG
    assert start >= 3 * SEG
    copy(master, slave, start=start)
    assert slave.get_min_phy_offset() == start
    assert sorted(segment_bytes(slave)) == [f"{start:020d}"]
    keys += fill(master, rng, 150, first=10_000)  # rolls into new segments on both
    copy(master, slave)
    assert_same_log(master, slave, start)
    assert_same_derived(master, slave, start, keys[::3])


def test_interleaved_appends_and_copying(make_store, tmp_path):
    rng = random.Random(4)
    master = master_store(make_store, tmp_path / "m")
    slave = slave_store(make_store, tmp_path / "s")
    keys: list[str] = []
    for round_ in range(12):
        keys += fill(master, rng, rng.randint(5, 40), first=round_ * 1000)
        copy(master, slave, chunk=rng.choice([512, 4096, CHUNK]), max_chunks=rng.randint(1, 4))
    copy(master, slave)
    assert_same_log(master, slave, 0)
    assert_same_derived(master, slave, 0, keys[::4])


def test_copy_while_the_master_appends_from_another_thread(make_store, tmp_path):
    master = master_store(make_store, tmp_path / "m")
    slave = slave_store(make_store, tmp_path / "s")
    keys: list[str] = []
    done = threading.Event()

    def writer():
        try:
            keys.extend(fill(master, random.Random(5), 600))
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    off = 0
    while not done.is_set() or off < master.get_max_phy_offset():
        data = master.read_replica(off, 2048)
        assert data is not None
        if data:
            off = slave.append_replica(off, data)  # raises if a chunk held a half-written record
        else:
            time.sleep(0.0005)
    t.join()
    assert_same_log(master, slave, 0)
    assert_same_derived(master, slave, 0, keys[::9])


# -- read_replica edges ----------------------------------------------------------------------------------
def test_read_replica_bounds_and_units(make_store, tmp_path):
    master = master_store(make_store, tmp_path / "m")
    assert master.read_replica(0, CHUNK) == b""  # empty store: nothing yet
    r1 = master.put_message(inner(body=b"x" * 100))
    r2 = master.put_message(inner(body=b"y" * 5000))
    mx = master.get_max_phy_offset()
    assert master.read_replica(mx, CHUNK) == b""
    assert master.read_replica(mx + 1, CHUNK) is None
    assert master.read_replica(-1, CHUNK) is None
    # max_bytes cuts at a record boundary; a first record larger than max_bytes comes whole
    assert len(master.read_replica(0, r1.wrote_bytes + 10)) == r1.wrote_bytes
    assert len(master.read_replica(0, 1)) == r1.wrote_bytes
    assert len(master.read_replica(r1.wrote_bytes, 100)) == r2.wrote_bytes
    with pytest.raises(ValueError):
        master.read_replica(10, CHUNK)  # not a record start
    # roll: the BLANK tail comes whole and alone
    while len(master.commit_log.queue.files) < 2:
        master.put_message(inner(body=b"z" * 3000))
    files = master.commit_log.queue.files
    first = files[0]
    assert len(master.read_replica(0, SEG)) == SEG  # records and the tail, when all fit
    data = master.read_replica(0, SEG - 1)
    assert 0 < len(data) < SEG and BLANK.unpack_from(data, len(data) - 8)[1] != BLANK_MAGIC_CODE
    blank_at = len(data)
    tail = master.read_replica(blank_at, 16)
    assert len(tail) == SEG - blank_at == BLANK.unpack_from(tail, 0)[0]
    assert BLANK.unpack_from(tail, 0)[1] == BLANK_MAGIC_CODE
    assert tail == first.mm[blank_at:SEG]
    assert master.read_replica(SEG, CHUNK)[:8] == files[1].mm[:8]


def test_read_replica_of_deleted_segments_is_none(make_store, tmp_path):
    master = master_store(make_store, tmp_path / "m")
    fill(master, random.Random(6), 200)
    assert len(master.commit_log.queue.files) >= 3
    master.commit_log.queue.delete_first(2)
    assert master.get_min_phy_offset() == 2 * SEG
    assert master.read_replica(0, CHUNK) is None
    assert master.read_replica(SEG, CHUNK) is None
    assert master.read_replica(2 * SEG, CHUNK)


# -- append_replica refusals -----------------------------------------------------------------------------
def _state(slave: MessageStore):
    return slave.get_max_phy_offset(), segment_bytes(slave), queues(slave), dict(slave.commit_log.topic_queue_table)


def test_wrong_offset_and_garbage_write_nothing(make_store, tmp_path):
    master = master_store(make_store, tmp_path / "m")
    slave = slave_store(make_store, tmp_path / "s")
    fill(master, random.Random(7), 120)
    # empty slave: only a segment boundary
    with pytest.raises(ReplicaOffsetError):
        slave.append_replica(100, b"x")
    assert slave.get_max_phy_offset() == 0 and not segment_bytes(slave)
    copy(master, slave, max_chunks=3)
    before = _state(slave)
    off = slave.get_max_phy_offset()
    good = master.read_replica(off, 4096)
    for bad_off in (off - 1, off + 1, off + len(good), 0, off - off % SEG + SEG):
        with pytest.raises(ReplicaOffsetError) as ei:
            slave.append_replica(bad_off, good)
        assert ei.value.expected == off and ei.value.got == bad_off
    assert _state(slave) == before
    bodyflip = bytearray(good)
    bodyflip[11] ^= 0x01  # the first record's BODYCRC: no longer the body's CRC
    garbage = [b"\x00" * 64, random.Random(8).randbytes(3000), good[:-1], good[:50], good + b"\x00" * 8,
               bytes(bodyflip), good[:8] + b"\xff" * (len(good) - 8)]
    for data in garbage:
        with pytest.raises(ValueError):
            slave.append_replica(off, data)
        assert _state(slave) == before
    # a chunk shipped for another offset (PHYSICALOFFSET fields say where its records belong)
    with pytest.raises(ValueError):
        slave.append_replica(off, master.read_replica(0, 4096))
    assert _state(slave) == before
    # and the store carries on
    copy(master, slave)
    assert_same_log(master, slave, 0)


def test_blank_tail_must_close_the_segment(make_store, tmp_path):
    master = master_store(make_store, tmp_path / "m")
    slave = slave_store(make_store, tmp_path / "s")
    while len(master.commit_log.queue.files) < 2:
        master.put_message(inner(body=b"z" * 3000))
    off = 0
    while True:
        data = master.read_replica(off, 1)  # one unit at a time
        if BLANK.unpack_from(data, 0)[1] == BLANK_MAGIC_CODE:
            break
        off = slave.append_replica(off, data)
    before = _state(slave)
    for bad in (data[:-1], data[:8], BLANK.pack(len(data) - 1, BLANK_MAGIC_CODE) + data[8:],
                data + master.read_replica(SEG, 200)):
        with pytest.raises(ValueError):
            slave.append_replica(off, bad)
        assert _state(slave) == before
    assert slave.append_replica(off, data) == SEG


def test_slave_refuses_puts_and_master_refuses_replica(make_store, tmp_path):
    slave = slave_store(make_store, tmp_path / "s")
    msg = inner()
    for res in (slave.put_message(msg), slave.put_messages([msg, msg]), slave.put_messages_nowait([msg]),
                slave.put_message_async(msg).result(1), slave.put_messages_async([msg]).result(1)):
        assert res.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "slave mode" in res.remark
    assert slave.get_max_phy_offset() == 0
    master = master_store(make_store, tmp_path / "m")
    master.put_message(msg)
    with pytest.raises(StoreError):
        master.append_replica(master.get_max_phy_offset(), master.read_replica(0, CHUNK))
    stopped = MessageStore(small_config(tmp_path / "x", broker_role="SLAVE"))
    with pytest.raises(StoreError):
        stopped.append_replica(0, b"")


def test_disk_full_on_a_new_segment_writes_nothing(make_store, tmp_path, monkeypatch):
    master = master_store(make_store, tmp_path / "m")
    slave = slave_store(make_store, tmp_path / "s")
    fill(master, random.Random(9), 100)
    off = 0
    while off < SEG:
        off = slave.append_replica(off, master.read_replica(off, CHUNK))
    before = _state(slave)
    q = slave.commit_log.queue

    def no_room(start):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(q, "create_file", no_room)
    with pytest.raises(OSError):
        slave.append_replica(off, master.read_replica(off, CHUNK))
    assert _state(slave) == before
    monkeypatch.undo()
    copy(master, slave)
    assert_same_log(master, slave, 0)


def test_failed_sync_flush_makes_nothing_visible(make_store, tmp_path):
    master = master_store(make_store, tmp_path / "m")
    fail = [False]

    def fsync(fd):
        if fail[0]:
            raise OSError(5, "Input/output error")

    slave = slave_store(make_store, tmp_path / "s", flush_disk_type="SYNC_FLUSH", _store_kw={"fsync": fsync})
    fill(master, random.Random(10), 60)
    copy(master, slave, max_chunks=2)
    before_max, before_q = slave.get_max_phy_offset(), queues(slave)
    fail[0] = True
    with pytest.raises(OSError):
        slave.append_replica(before_max, master.read_replica(before_max, CHUNK))
    assert slave.get_max_phy_offset() == before_max and queues(slave) == before_q
    with pytest.raises(StoreError):  # a failed flush stops the store's writes, as for local puts
        slave.append_replica(before_max, master.read_replica(before_max, CHUNK))


# -- restart and crash -----------------------------------------------------------------------------------
def _reopen_slave(root: Path, **kw) -> MessageStore:
    s = MessageStore(small_config(root, broker_role="SLAVE", **kw))
    s.start()
    return s


def test_slave_reopened_cleanly_resumes(make_store, tmp_path):
    master = master_store(make_store, tmp_path / "m")
    keys = fill(master, random.Random(11), 300)
    root = tmp_path / "s"
    slave = _reopen_slave(root)
    try:
        copy(master, slave, max_chunks=6)
        mid = slave.get_max_phy_offset()
    finally:
        slave.shutdown()
    slave = _reopen_slave(root)
    try:
        assert slave.recovery.last_exit_ok and slave.get_max_phy_offset() == mid
        copy(master, slave)
        assert_same_log(master, slave, 0)
        assert_same_derived(master, slave, 0, keys[::6])
    finally:
        slave.shutdown()
    assert tools.verify_store(root).ok


@pytest.mark.parametrize("start_at_last_segment", [False, True])
def test_slave_crash_mid_append_recovers_and_resumes(make_store, tmp_path, start_at_last_segment):
    master = master_store(make_store, tmp_path / "m")
    keys = fill(master, random.Random(12), 300)
    mx = master.get_max_phy_offset()
    start = mx - mx % SEG if start_at_last_segment else 0
    keys += fill(master, random.Random(13), 200, first=5000)
    root = tmp_path / "s"
    slave = _reopen_slave(root)
    try:
        copy(master, slave, start=start, max_chunks=4)
        copy(master, slave, chunk=3000, max_chunks=3)
        while True:  # tear a record, not a BLANK tail
            torn_at = slave.get_max_phy_offset()
            last = master.read_replica(torn_at, 3000)
            if BLANK.unpack_from(last, 0)[1] != BLANK_MAGIC_CODE:
                break
            slave.append_replica(torn_at, last)
        slave.append_replica(torn_at, last)
    finally:
        slave.shutdown()
    crashed = tmp_path / "crashed"
    shutil.copytree(root, crashed)
    # the last chunk's first record only half reached the disk: zero it from its middle on
    seg = crashed / "commitlog" / f"{torn_at - torn_at % SEG:020d}"
    rel = torn_at % SEG
    size = BLANK.unpack_from(last, 0)[0]
    with open(seg, "r+b") as f:
        f.seek(rel + size // 2)
        f.write(b"\x00" * (SEG - rel - size // 2))
    (crashed / "abort").touch()
    slave = _reopen_slave(crashed)
    try:
        assert not slave.recovery.last_exit_ok
        assert slave.get_max_phy_offset() == torn_at
        assert slave.get_min_phy_offset() == start
        copy(master, slave)
        assert_same_log(master, slave, start)
        assert_same_derived(master, slave, start, keys[::5])
    finally:
        slave.shutdown()
    assert tools.verify_store(crashed).ok


def test_empty_slave_with_an_empty_segment_restarts_where_the_master_says(make_store, tmp_path):
    """A slave whose only segment was torn before its first record holds an empty segment: it may still be
    started at any segment boundary."""
    master = master_store(make_store, tmp_path / "m")
    keys = fill(master, random.Random(14), 250)
    root = tmp_path / "s"
    slave = _reopen_slave(root)
    try:
        slave.append_replica(0, master.read_replica(0, 3000))
    finally:
        slave.shutdown()
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.write(b"\x00" * 200)
    (root / "abort").touch()
    slave = _reopen_slave(root)
    try:
        assert slave.get_max_phy_offset() == slave.get_min_phy_offset() == 0
        start = 2 * SEG
        copy(master, slave, start=start)
        assert sorted(segment_bytes(slave))[0] == f"{start:020d}"
        assert_same_log(master, slave, start)
        assert_same_derived(master, slave, start, keys[::5])
    finally:
        slave.shutdown()


# -- property --------------------------------------------------------------------------------------------
_SMALL_SEG = 8 * 1024


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60),
       chunks=st.lists(st.integers(1, 3 * _SMALL_SEG), min_size=1, max_size=8),
       start_last=st.booleans(), sync=st.booleans())
def test_copy_property(seed, n, chunks, start_last, sync):
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        kw = dict(mapped_file_size_commit_log=_SMALL_SEG)
        master = MessageStore(small_config(Path(d) / "m", **kw))
        slave = MessageStore(small_config(Path(d) / "s", broker_role="SLAVE",
                                          flush_disk_type="SYNC_FLUSH" if sync else "ASYNC_FLUSH", **kw),
                             fsync=lambda fd: None)
        master.start()
        slave.start()
        try:
            fill(master, rng, n, max_body=1500)
            mx = master.get_max_phy_offset()
            start = mx - mx % _SMALL_SEG if start_last else 0
            off, i = start, 0
            while off < master.get_max_phy_offset():
                if i == len(chunks):
                    fill(master, rng, 3, first=n + i, max_body=1500)  # the master keeps writing meanwhile
                data = master.read_replica(off, chunks[i % len(chunks)])
                off = slave.append_replica(off, data)
                i += 1
            m = {p.name: p.read_bytes() for p in Path(master.config.commit_log_dir()).iterdir()}
            s = {p.name: p.read_bytes() for p in Path(slave.config.commit_log_dir()).iterdir()}
            assert off == slave.get_max_phy_offset() == master.get_max_phy_offset()
            for name, data in s.items():
                base = int(name)
                lo, hi = max(base, start) - base, min(off, base + _SMALL_SEG) - base
                assert data[lo:hi] == m[name][lo:hi]
            for cq in slave.cq_table:
                t, q = cq.topic, cq.queue_id
                mx_q = master.get_max_offset(t, q)
                assert cq.max_offset == mx_q
                frm = cq.min_offset
                assert master.query_consume_queue(t, q, frm, mx_q - frm)[2] == \
                    slave.query_consume_queue(t, q, frm, mx_q - frm)[2]
                assert master.get_commit_log_offset_in_queue(t, q, frm) >= start
                if frm > 0:
                    assert master.get_commit_log_offset_in_queue(t, q, frm - 1) < start
            assert slave.commit_log.topic_queue_table == {
                k: v for k, v in master.commit_log.topic_queue_table.items() if slave.cq_table.find(*k, create=False)}
        finally:
            master.shutdown()
            slave.shutdown()


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), cuts=st.lists(st.integers(1, 5000), min_size=1,
                                                                          max_size=8), start_last=st.booleans())
def test_a_stream_cut_anywhere_as_rocketmq_sends_it_gives_an_identical_slave(seed, n, cuts, start_last):
    """RocketMQ's master sends raw log in pieces of haTransferBatchSize, cutting records (and BLANK tails)
    anywhere; ChunkAssembler hands the slave whole units only, and the slave ends byte-identical."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        kw = dict(mapped_file_size_commit_log=_SMALL_SEG)
        master = MessageStore(small_config(Path(d) / "m", **kw))
        slave = MessageStore(small_config(Path(d) / "s", broker_role="SLAVE", **kw))
        master.start()
        slave.start()
        try:
            fill(master, rng, n, max_body=1500)
            end = master.get_max_phy_offset()
            start = end - end % _SMALL_SEG if start_last else 0
            segments = {int(p.name): p.read_bytes() for p in Path(master.config.commit_log_dir()).iterdir()
                        if p.name.isdigit()}
            assembler = ChunkAssembler(_SMALL_SEG)
            off, i = start, 0
            while off < end:  # frames never cross a segment end, as RocketMQ's do not
                base = off - off % _SMALL_SEG
                size = min(cuts[i % len(cuts)], base + _SMALL_SEG - off, end - off)
                frame = segments[base][off - base:off - base + size]
                for at, chunk in assembler.feed(off, frame, slave.get_max_phy_offset(), empty=off == start):
                    slave.append_replica(at, chunk)
                off += size
                i += 1
            assert assembler.held == 0
            assert slave.get_max_phy_offset() == end
            for name, data in {p.name: p.read_bytes() for p in Path(slave.config.commit_log_dir()).iterdir()
                               if p.name.isdigit()}.items():
                base = int(name)
                lo, hi = max(base, start) - base, min(end, base + _SMALL_SEG) - base
                assert data[lo:hi] == segments[base][lo:hi]
            for cq in slave.cq_table:
                assert cq.max_offset == master.get_max_offset(cq.topic, cq.queue_id)
            with pytest.raises(ValueError, match="offset mismatch"):
                assembler.feed(end + 8, b"x", slave.get_max_phy_offset())
        finally:
            master.shutdown()
            slave.shutdown()


def test_whole_units_keeps_a_cut_record_and_refuses_garbage(make_store, tmp_path):
    s = make_store(tmp_path / "m", mapped_file_size_commit_log=SEG)
    sizes = [s.put_message(inner(body=b"x" * (100 + i))).wrote_bytes for i in range(3)]
    data = Path(s.config.commit_log_dir(), "0" * 20).read_bytes()[:s.get_max_phy_offset()]
    assert len(data) == sum(sizes)
    assert whole_units(data, 0, SEG) == len(data)
    assert whole_units(data[:-1], 0, SEG) == sizes[0] + sizes[1]  # the cut third record waits
    assert whole_units(data[:sizes[0] - 1], 0, SEG) == 0
    assert whole_units(data[:sizes[0] + 3], 0, SEG) == sizes[0]  # not even the next record's size yet
    with pytest.raises(ValueError, match="no record starts"):
        whole_units(b"\0" * 16, 0, SEG)
    blank = BLANK.pack(100, BLANK_MAGIC_CODE)
    assert whole_units(blank + b"\0" * 50, SEG - 100, SEG) == 0  # the tail runs to the segment end
    assert whole_units(blank + b"\0" * 92, SEG - 100, SEG) == 100
    with pytest.raises(ValueError, match="does not close"):
        whole_units(BLANK.pack(40, BLANK_MAGIC_CODE), SEG - 100, SEG)


def test_a_replicated_record_whose_topic_is_no_name_makes_no_path(make_store, tmp_path):
    """Issue 28, defect 1 (HA): a record whose topic cannot be a directory ("../../x", written by an older master
    whose timer delivered there) is copied byte for byte, but the slave makes no consume queue for it, in or out
    of its store; the records after it are dispatched as usual."""
    from mq.common.message import MessageExt
    from mq.common.record import encode_record

    slave = slave_store(make_store, tmp_path / "s")
    chunk, pos = b"", 0
    for i, topic in enumerate(["Good", "../../x", "Good", "Good"]):
        rec = bytearray(encode_record(MessageExt(
            topic=topic, body=b"m%d" % i, queue_id=0, queue_offset=(0, 0, 1, 2)[i], commit_log_offset=pos,
            born_host=("10.0.0.1", 1), store_host=("10.0.0.2", 2), store_timestamp=1_700_000_000_000 + i)))
        if i == 3:  # an IPv6 store-host bit on an IPv4 record, as an older master wrote one: read as it is
            rec[39] |= SF.STOREHOST_V6
        chunk += rec
        pos += len(rec)
    assert slave.append_replica(0, chunk) == len(chunk)
    assert slave.dispatcher.unqueued == 1 and slave.dispatcher.error is None
    assert slave.get_max_offset("Good", 0) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    assert sorted(p.name for p in (tmp_path / "s" / "consumequeue").iterdir()) == ["Good"]


def test_a_consume_queue_is_made_only_for_a_valid_name(tmp_path):
    from mq.errors import InvalidTopicError
    from mq.store.consume_queue import ConsumeQueue, ConsumeQueueTable

    for topic, qid in (("../x", 0), ("a/b", 0), ("x\n", 0), ("T", -1), ("T", 2**31), ("T", "0")):
        with pytest.raises(InvalidTopicError):
            ConsumeQueue(topic, qid, tmp_path / "cq", 2000)
    root = tmp_path / "cq"
    (root / "Good" / "0").mkdir(parents=True)
    (root / "bad name" / "0").mkdir(parents=True)
    (root / "Good" / "-1").mkdir(parents=True)
    table = ConsumeQueueTable(root, 2000)
    table.load()
    assert {t: sorted(q) for t, q in table.queues.items()} == {"Good": [0]}
