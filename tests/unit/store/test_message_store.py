"""MessageStore read API, statuses, query by key, flush modes, lock, stats."""

import threading
import time

import pytest
from .conftest import inner, small_config

from mq.common.record import decode_record, decode_records
from mq.common.tags import java_hash_code
from mq.store.message_store import MessageStore
from mq.store.runtime_files import StoreLockedError
from mq.store.status import GetMessageStatus as G
from mq.store.status import PutMessageStatus as P


def test_get_message_statuses(make_store):
    s = make_store()
    assert s.get_message("g", "T", 0, 0, 32).status is G.NO_MATCHED_LOGIC_QUEUE
    for i in range(10):
        s.put_message(inner(body=str(i).encode()))
    r = s.get_message("g", "T", 0, 0, 4)
    assert r.status is G.FOUND and r.message_count == 4 and r.next_begin_offset == 4
    assert (r.min_offset, r.max_offset) == (0, 10)
    assert [m.body for m in decode_records(r.body)] == [b"0", b"1", b"2", b"3"]
    assert r.queue_offsets == [0, 1, 2, 3]
    r = s.get_message("g", "T", 0, 10, 4)
    assert r.status is G.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 10
    r = s.get_message("g", "T", 0, 15, 4)
    assert r.status is G.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 10
    r = s.get_message("g", "T", 0, 8, 100)
    assert r.status is G.FOUND and r.message_count == 2 and r.next_begin_offset == 10


def test_no_message_in_queue_and_too_small(make_store):
    s = make_store()
    s.put_message(inner(queue_id=1))
    s.cq_table.find("T", 5)  # queue exists but empty
    assert s.get_message("g", "T", 5, 0, 1).status is G.NO_MESSAGE_IN_QUEUE
    cq = s.cq_table.find("T", 1)
    cq.min_logic_offset = 20
    s.put_message(inner(queue_id=1))
    r = s.get_message("g", "T", 1, 0, 1)
    assert r.status is G.OFFSET_TOO_SMALL and r.next_begin_offset == 1


def test_transfer_limits(make_store):
    s = make_store()
    for i in range(50):
        s.put_message(inner(body=b"z" * 100))
    assert s.get_message("g", "T", 0, 0, 64).message_count == 32  # maxTransferCountOnMessageInMemory
    size = len(s.select_one_message_by_offset(0))
    r = s.get_message("g", "T", 0, 0, 64, max_total_bytes=3 * size - 1)
    assert r.message_count == 2 and r.buffer_total_size == 2 * size
    r = s.get_message("g", "T", 0, 0, 64, max_total_bytes=10)
    assert r.message_count == 1  # always at least one


def test_tag_filter_set_and_callable(make_store):
    s = make_store()
    for i in range(20):
        s.put_message(inner(tags="TagA" if i % 2 else "TagB", body=str(i).encode()))
    a = java_hash_code("TagA")
    r = s.get_message("g", "T", 0, 0, 32, {a})
    assert r.status is G.FOUND and {decode_record(b).tags for b in r.buffers} == {"TagA"}
    assert r.message_count == 10 and r.next_begin_offset == 20
    r = s.get_message("g", "T", 0, 0, 32, lambda code: code == java_hash_code("TagB"))
    assert r.message_count == 10
    r = s.get_message("g", "T", 0, 0, 32, {java_hash_code("TagC")})
    assert r.status is G.NO_MATCHED_MESSAGE and r.next_begin_offset == 20
    r = s.get_message("g", "T", 0, 0, 3, {a})
    assert r.message_count == 3 and r.next_begin_offset == 6  # stops after the 3rd match


def test_query_by_key_rechecks_topic_and_key(make_store):
    s = make_store()
    s.put_message(inner(topic="A", keys="order-1 shared"))
    s.put_message(inner(topic="B", keys="shared"))
    s.put_message(inner(topic="A", props={"UNIQ_KEY": "U1"}))
    # "Aa"/"BB" collide in Java hashCode; "A#Aa"/"A#BB" do as well
    s.put_message(inner(topic="A", keys="Aa"))
    s.put_message(inner(topic="A", keys="BB"))
    q = s.query_message("A", "shared", 32)
    assert [decode_record(b).topic for b in q.buffers] == ["A"]
    assert len(s.query_message("A", "U1", 32).buffers) == 1
    q = s.query_message("A", "Aa", 32)
    assert [decode_record(b).keys for b in q.buffers] == ["Aa"]
    assert s.query_message("A", "missing", 32).buffers == []


def test_offsets_and_times(make_store):
    clock = [1_000_000.0]
    s = make_store(_store_kw={"now": lambda: clock[0]})
    for i in range(10):
        clock[0] += 1.0
        s.put_message(inner())
    assert s.get_earliest_message_time("T", 0) == 1_000_001_000
    assert s.get_message_store_timestamp("T", 0, 4) == 1_000_005_000
    assert s.search_offset_by_timestamp("T", 0, 1_000_005_000) == 4
    assert s.search_offset_by_timestamp("T", 0, 1_000_005_400) == 4
    assert s.search_offset_by_timestamp("T", 0, 1_000_005_600) == 5
    assert s.search_offset_by_timestamp("T", 0, 0) == 0
    assert s.search_offset_by_timestamp("T", 0, 9_999_999_999_999) == 9
    assert s.get_min_offset("T", 0) == 0 and s.get_max_offset("T", 0) == 10
    assert s.get_commit_log_offset_in_queue("T", 0, 0) == 0
    msg = s.look_message_by_offset(s.get_commit_log_offset_in_queue("T", 0, 3))
    assert msg.queue_offset == 3


def test_on_dispatch_callback_and_delete_topic(make_store):
    seen = []
    s = make_store()
    s.dispatcher.on_dispatch = lambda t, q, mx, code: seen.append((t, q, mx, code))
    s.put_message(inner(topic="X", queue_id=2, tags="TagA"))
    assert seen == [("X", 2, 1, java_hash_code("TagA"))]
    assert s.delete_topic("X")
    assert s.get_message("g", "X", 2, 0, 1).status is G.NO_MATCHED_LOGIC_QUEUE
    assert s.put_message(inner(topic="X", queue_id=2)).queue_offset == 0


def test_a_failing_on_dispatch_callback_is_logged_and_loses_nothing(make_store, caplog):
    s = make_store()

    def broken(*_a):
        raise RuntimeError("listener broke")

    s.dispatcher.on_dispatch = broken
    with caplog.at_level("ERROR", logger="mq.store.dispatcher"):
        for _ in range(3):
            assert s.put_message(inner(topic="X", queue_id=1)).status is P.PUT_OK
    # logged once per interval (LogThrottle), the others counted
    assert [r.getMessage() for r in caplog.records] == ["on_dispatch callback failed"]
    assert s.dispatcher._throttle.suppressed("notify") == 2
    assert "listener broke" in caplog.text
    assert s.get_max_offset("X", 1) == 3 and s.get_message("g", "X", 1, 0, 8).status is G.FOUND


def test_lock_excludes_second_store(make_store, tmp_path):
    make_store()
    other = MessageStore(small_config(tmp_path / "store"))
    with pytest.raises(StoreLockedError):
        other.load()


def test_async_put_future_and_stats(make_store):
    s = make_store()
    fut = s.put_message_async(inner())
    assert fut.result(1).ok
    info = s.runtime_info()
    assert info["put_count"] == 1 and info["commit_log_max_offset"] > 0 and info["dispatch_behind_bytes"] == 0


def test_sync_flush_group_commit_many_threads(make_store):
    calls = []

    def fsync(fd):
        calls.append(fd)
        time.sleep(0.002)

    s = make_store(flush_disk_type="SYNC_FLUSH", _store_kw={"fsync": fsync})
    results = []

    def writer(n):
        for i in range(20):
            results.append(s.put_message(inner(queue_id=n % 4)).status)

    ts = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results.count(P.PUT_OK) == 320
    assert len(calls) < 320  # appends shared fsyncs
    futs = [s.put_message_async(inner()) for _ in range(10)]
    assert all(f.result(5).ok for f in futs)
    assert sum(s.get_max_offset("T", q) for q in range(4)) == 330


def test_sync_flush_visibility_waits_for_fsync(make_store):
    gate = threading.Event()

    def fsync(fd):
        gate.wait(5)

    s = make_store(flush_disk_type="SYNC_FLUSH", _store_kw={"fsync": fsync})
    fut = s.put_message_async(inner())
    time.sleep(0.05)
    assert not fut.done()
    assert s.get_message("g", "T", 0, 0, 1).status is G.NO_MATCHED_LOGIC_QUEUE  # not dispatched yet
    gate.set()
    assert fut.result(5).ok
    assert s.get_message("g", "T", 0, 0, 1).status is G.FOUND


def test_sync_flush_timeout_and_failure_never_put_ok(make_store, tmp_path):
    def slow(fd):
        time.sleep(0.5)

    s = make_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=100, _store_kw={"fsync": slow})
    assert s.put_message(inner()).status is P.FLUSH_DISK_TIMEOUT
    assert s.put_message_async(inner()).result(2).status is P.FLUSH_DISK_TIMEOUT

    def broken(fd):
        raise OSError(5, "Input/output error")

    s2 = make_store(root=tmp_path / "s2", flush_disk_type="SYNC_FLUSH", _store_kw={"fsync": broken})
    assert s2.put_message(inner()).status is P.FLUSH_DISK_TIMEOUT
    r = s2.put_message(inner())
    assert r.status is P.SERVICE_NOT_AVAILABLE and "flush failed" in r.remark


def test_wait_false_does_not_block(make_store):
    gate = threading.Event()
    s = make_store(flush_disk_type="SYNC_FLUSH", _store_kw={"fsync": lambda fd: gate.wait(5)})
    t = time.monotonic()
    assert s.put_message(inner(props={"WAIT": "false"})).ok
    assert time.monotonic() - t < 1
    gate.set()


def test_refuses_after_shutdown_and_page_cache_busy(make_store):
    s = make_store()
    s._begin_in_lock = time.monotonic() - 2
    assert s.put_message(inner()).status is P.OS_PAGECACHE_BUSY
    s._begin_in_lock = 0.0
    s.shutdown()
    assert s.put_message(inner()).status is P.SERVICE_NOT_AVAILABLE


def test_flush_group_releases_every_blocked_waiter_once_complete():
    """The gate a blocked putter waits on: every waiter sees the group's status, a late one returns at once,
    a second completion does not change the status, and a wait that runs out answers FLUSH_DISK_TIMEOUT."""
    from mq.store.flush import FlushGroup

    g = FlushGroup()
    assert g.wait(0.05) is P.FLUSH_DISK_TIMEOUT  # not completed yet
    seen: list = []
    threads = [threading.Thread(target=lambda: seen.append(g.wait(5))) for _ in range(16)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    assert seen == []
    g.complete(P.PUT_OK)
    for t in threads:
        t.join(5)
    assert seen == [P.PUT_OK] * 16
    g.complete(P.FLUSH_DISK_TIMEOUT)
    assert g.wait(0) is P.PUT_OK and g.status is P.PUT_OK
