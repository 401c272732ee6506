"""Index passes driven by the store's owner (the broker's event loop, through ``LoopPoster``) instead of a thread."""

from __future__ import annotations

import asyncio
import threading
import time

from .conftest import inner

from mq.common.record import decode_record
from mq.daemon.broker.long_polling import LoopPoster
from mq.store.index_dispatcher import IndexDispatcher


def _bodies(found) -> list[bytes]:
    return [decode_record(b).body for b in found.buffers]


def test_a_driven_store_runs_no_index_thread_and_indexes_on_its_owner_behind_the_puts(make_store, owner):
    s = owner.call(lambda: make_store(_store_kw={"index_scheduler": owner.poster}))
    assert not [t for t in threading.enumerate() if t.name == "mq-store-index"]
    owner.call(lambda: [s.put_message(inner(keys=f"k{i}", body=b"%d" % i)) for i in range(50)])
    deadline = time.monotonic() + 5
    while s.index_dispatcher.indexed_offset < s.commit_log.max_offset and time.monotonic() < deadline:
        time.sleep(0.005)  # the pass runs on the loop LINGER_S after the first put
    assert s.index_dispatcher.indexed_offset == s.commit_log.max_offset
    assert s.index_dispatcher.backlog == 0
    assert _bodies(s.query_message("T", "k7", 8)) == [b"7"]


def test_a_query_on_the_owner_thread_indexes_what_is_queued_at_once(make_store, owner):
    s = owner.call(lambda: make_store(_store_kw={"index_scheduler": owner.poster}))

    def put_and_query():
        s.put_message(inner(keys="fresh", body=b"x"))
        assert s.index_dispatcher.backlog == 1  # its pass is not due yet
        return s.query_message("T", "fresh", 8)  # waiting on the loop would wait for itself
    assert _bodies(owner.call(put_and_query)) == [b"x"]


def test_puts_from_other_threads_are_indexed_by_the_owner(make_store, owner):
    """SYNC_FLUSH dispatches from the flush thread: its passes are handed to the loop."""
    s = owner.call(lambda: make_store(_store_kw={"index_scheduler": owner.poster}, flush_disk_type="SYNC_FLUSH"))
    ran_on = []
    build = s.index.build_batch
    s.index.build_batch = lambda reqs: (ran_on.append(threading.current_thread().name), build(reqs))[1]
    for i in range(20):
        s.put_message(inner(keys=f"s{i}", body=b"%d" % i))  # this thread; dispatched by the flush thread
    assert s.index_dispatcher.wait_idle(5)
    assert set(ran_on) == {"owner-loop"}
    assert _bodies(s.query_message("T", "s19", 8)) == [b"19"]


def test_a_backlog_is_indexed_a_bounded_pass_at_a_time(make_store, owner, monkeypatch):
    monkeypatch.setattr(IndexDispatcher, "MAX_PASS", 4)
    s = owner.call(lambda: make_store(_store_kw={"index_scheduler": owner.poster}))
    passes = []
    build = s.index.build_batch
    s.index.build_batch = lambda reqs: (passes.append(len(reqs)), build(reqs))[1]
    owner.call(lambda: [s.put_message(inner(keys=f"b{i}", body=b"%d" % i)) for i in range(10)])
    assert s.index_dispatcher.wait_idle(5)
    assert passes == [4, 4, 2]  # one callback each: the loop runs other work between them
    assert all(_bodies(s.query_message("T", f"b{i}", 8)) == [b"%d" % i] for i in range(10))


def test_what_is_queued_when_the_store_shuts_down_is_indexed(make_store, owner):
    s = owner.call(lambda: make_store(_store_kw={"index_scheduler": owner.poster}))
    owner.call(lambda: [s.put_message(inner(keys=f"z{i}")) for i in range(5)])
    owner.call(s.shutdown)  # before the pass is due
    assert s.index_dispatcher.backlog == 0
    assert s.index_dispatcher.indexed_offset == s.commit_log.max_offset


def test_the_loop_scheduler_drops_passes_once_its_loop_is_closed():
    loop = asyncio.new_event_loop()
    poster = LoopPoster(loop)  # made on this thread: this is its owner thread
    ran = []
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    poster.call_later(0.0, lambda: ran.append("owner"))
    other = threading.Thread(target=poster.call_later, args=(0.0, lambda: ran.append("other")))
    other.start()
    other.join()
    assert ran == [] and poster.on_owner_thread()
