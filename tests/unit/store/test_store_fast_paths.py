"""The store's fast paths give the same answers and bytes as the plain ones: PULL runs, batched index builds,
the prefix-hash shortcut, non-blocking puts with callbacks, the lazily woken index thread."""

from __future__ import annotations

import random
import threading
import time

from .conftest import inner
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.common.record import decode_records
from mq.common.sysflag import TRANSACTION_ROLLBACK_TYPE
from mq.common.tags import java_hash_code
from mq.store.commit_log import DispatchRequest
from mq.store.index_hash import _hash_u32, index_key_hash, prefixed_key_hash
from mq.store.index_service import IndexService
from mq.store.status import GetMessageStatus as G
from mq.store.status import PutMessageResult
from mq.store.status import PutMessageStatus as P


def test_runs_body_equals_record_buffers(make_store):
    s = make_store()
    rnd = random.Random(7)
    for i in range(200):  # interleaved queues: runs break wherever another queue's record sits between
        q = 0 if rnd.random() < 0.7 else 1
        s.put_message(inner(body=f"m{i}".encode(), queue_id=q, tags="A" if i % 3 else "B"))
    s.put_messages([inner(body=bytes([i]), queue_id=0) for i in range(40)])  # one adjacent run
    codes = {java_hash_code("A")}
    for tag_filter in (None, codes):
        offset = 0
        while True:
            plain = s.get_message("g", "T", 0, offset, 32, tag_filter)
            fast = s.get_message("g", "T", 0, offset, 32, tag_filter, runs=True)
            assert fast.status is plain.status
            assert (fast.next_begin_offset, fast.message_count, fast.buffer_total_size, fast.queue_offsets) == \
                (plain.next_begin_offset, plain.message_count, plain.buffer_total_size, plain.queue_offsets)
            assert fast.body == plain.body
            assert len(fast.buffers) <= len(plain.buffers)
            if plain.status is not G.FOUND:
                break
            offset = plain.next_begin_offset
    # the batch was stored adjacently: one copy serves the whole pull
    r = s.get_message("g", "T", 0, s.get_max_offset("T", 0) - 40, 32, runs=True)
    assert r.message_count == 32 and len(r.buffers) == 1
    assert [m.body for m in decode_records(r.body)] == [bytes([i]) for i in range(32)]


def test_runs_break_at_segment_end(make_store):
    s = make_store()  # 64 KiB segments: 1 KB records roll over a BLANK
    for i in range(150):
        s.put_message(inner(body=bytes([i % 256]) * 1000))
    plain = s.get_message("g", "T", 0, 40, 32)
    fast = s.get_message("g", "T", 0, 40, 32, runs=True)
    assert fast.body == plain.body and fast.message_count == plain.message_count > 1
    segments = {m.commit_log_offset // (64 * 1024) for m in decode_records(plain.body)}
    assert len(segments) == 2 and len(fast.buffers) == 2  # one run per commit-log segment


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=20), st.text(max_size=40))
def test_prefixed_key_hash_is_the_hash_of_the_concatenation(prefix, key):
    assert prefixed_key_hash(_hash_u32(prefix), key) == index_key_hash(prefix + key)


def _requests(n: int, topic: str = "T") -> list[DispatchRequest]:
    out = []
    for i in range(n):
        keys = " ".join(f"k{i % 7}-{j}" for j in range(i % 3)) or None
        uniq = f"7F00000100{i:022X}" if i % 5 else None
        tran = TRANSACTION_ROLLBACK_TYPE if i % 11 == 10 else 0
        out.append(DispatchRequest(topic, 0, i, 100 + i * 300, 300, 0, 1_700_000_000_000 + i * 7, keys, uniq, tran))
    return out


def _index_bytes(root) -> list[bytes]:
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


def test_build_batch_writes_the_same_files_as_build_index(tmp_path):
    reqs = _requests(700, topic="Tópico")  # non-ASCII topic: the prefix hash goes through UTF-16
    one = IndexService(tmp_path / "one", max_hash_slot_num=97, max_index_num=400)
    many = IndexService(tmp_path / "many", max_hash_slot_num=97, max_index_num=400)
    one.load(True)
    many.load(True)
    for r in reqs:
        if r.tran_type != TRANSACTION_ROLLBACK_TYPE and (r.keys or r.uniq_key):
            one.build_index(r.topic, r.keys, r.uniq_key, r.phy_offset, r.store_timestamp)
    for i in range(0, len(reqs), 64):
        many.build_batch(reqs[i:i + 64])
    many.build_batch(reqs[:100])  # a replay adds nothing
    assert [f.header() for f in one.files] == [f.header() for f in many.files]
    assert len(many.files) > 1  # the batch crossed full files
    names = [f.name for f in many.files]
    one.close()
    many.close()
    a, b = _index_bytes(tmp_path / "one"), _index_bytes(tmp_path / "many")
    assert len(a) == len(b) == len(names) and a == b


def test_put_messages_nowait_async_flush_returns_the_result(make_store):
    s = make_store()
    r = s.put_messages_nowait([inner()])
    assert isinstance(r, PutMessageResult) and r.ok and r.msg_num == 1


def test_put_messages_nowait_sync_flush_calls_back_once(make_store):
    s = make_store(flush_disk_type="SYNC_FLUSH")
    got: list[PutMessageResult] = []
    done = threading.Event()

    def cb(res: PutMessageResult) -> None:
        got.append(res)
        if len(got) == 20:
            done.set()

    for i in range(20):
        assert s.put_messages_nowait([inner(body=bytes([i]))], cb) is None
    assert done.wait(10)
    assert [r.status for r in got] == [P.PUT_OK] * 20
    assert sorted(r.queue_offset for r in got) == list(range(20))
    fut = s.put_messages_nowait([inner()])
    assert fut.result(10).ok  # without a callback: a Future
    wait_false = inner(props={"WAIT": "false"})
    assert isinstance(s.put_messages_nowait([wait_false], cb), PutMessageResult)
    deadline = time.monotonic() + 10  # units are written after the group commit covering them
    while s.get_max_offset("T", 0) < 22 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.get_max_offset("T", 0) == 22
    assert len(got) == 20


def test_sync_flush_failure_reaches_callbacks(make_store):
    def broken(fd: int) -> None:
        raise OSError(5, "EIO")

    s = make_store(flush_disk_type="SYNC_FLUSH", _store_kw={"fsync": broken})
    got: list[PutMessageResult] = []
    ev = threading.Event()
    s.put_messages_nowait([inner()], lambda r: (got.append(r), ev.set()))
    assert ev.wait(10)
    assert got[0].status is P.FLUSH_DISK_TIMEOUT


def test_index_thread_indexes_everything_submitted(make_store):
    s = make_store(message_index_enable=True)
    for i in range(300):
        s.put_message(inner(keys=f"key{i}"))
    assert s.index_dispatcher.wait_idle(10)
    assert s.index_dispatcher.backlog == 0
    for i in (0, 150, 299):
        q = s.query_message("T", f"key{i}", 4)
        assert len(q.buffers) == 1


def test_runs_stop_before_a_segment_unmapped_while_reading(make_store, monkeypatch):
    import mq.store.reader as ms

    s = make_store()
    for i in range(150):  # two commit-log segments inside one consume-queue segment
        s.put_message(inner(body=bytes([i % 256]) * 1000))
    plain = s.get_message("g", "T", 0, 40, 32)
    calls = []
    real = ms._slice

    def second_fails(mm, start, end):
        calls.append(start)
        return None if len(calls) == 2 else real(mm, start, end)

    monkeypatch.setattr(ms, "_slice", second_fails)
    r = s.get_message("g", "T", 0, 40, 32, runs=True)
    first_run = [m for m in decode_records(plain.body) if m.commit_log_offset < 64 * 1024]
    assert r.status is G.FOUND and r.message_count == len(first_run) > 0
    assert r.next_begin_offset == 40 + len(first_run)
    assert r.body == b"".join(plain.buffers[:len(first_run)])
    calls.clear()
    monkeypatch.setattr(ms, "_slice", lambda mm, start, end: None)
    r = s.get_message("g", "T", 0, 40, 32, runs=True)
    assert r.status is G.MESSAGE_WAS_REMOVING and r.message_count == 0 and r.next_begin_offset == 40
