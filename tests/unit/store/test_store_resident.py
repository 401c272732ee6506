"""Releasing the store's mapped pages (mq.store.resident): what is released leaves the process's resident set
and nothing written is lost: reads through the mapping, and the file itself, still hold every record."""

from __future__ import annotations

import os

from mq.common.record import decode_records
from mq.store import resident as R
from mq.store.status import GetMessageStatus, PutMessageStatus

from .conftest import inner

SEG = 4 << 20


def mapped_rss(paths: set[str]) -> int:
    """Resident bytes of this process's mappings of ``paths`` (/proc/self/smaps)."""
    total, current = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
                current = len(head) >= 6 and head[5] in paths
            elif current and head and head[0] == "Rss:":
                total += int(head[1]) * 1024
    return total


def _store(make_store, **kw):
    store = make_store(mapped_file_size_commit_log=SEG, mapped_file_size_consume_queue=20 * 4096,
                       warm_ahead_bytes=0, **kw)
    store.trimmer.stop(final_pass=False)  # passes run by hand below
    return store


def _fill(store, n=9000):
    bodies = [bytes([i % 251]) * (900 + i % 200) for i in range(n)]
    for i, b in enumerate(bodies):
        assert store.put_message(inner(body=b, queue_id=i % 2)).status is PutMessageStatus.PUT_OK
    return bodies


def test_pages_behind_the_writer_leave_the_resident_set_and_records_stay(make_store):
    keep = 256 * 1024
    store = _store(make_store, resident_behind_writer_bytes=keep)
    bodies = _fill(store)
    files = store.commit_log.queue.files
    assert len(files) >= 3
    paths = {str(mf.path) for mf in files}
    before = mapped_rss(paths)
    assert before > 8 << 20  # everything written is mapped in
    store.trimmer.run_once()
    after = mapped_rss(paths)
    assert after <= keep + 2 * 4096, (before, after)

    # every record reads back through the mapping (pages mapped again on demand) ...
    for q in (0, 1):
        got, offset = [], 0
        while offset < len(bodies) // 2:
            r = store.get_message("g", "T", q, offset, 32)
            assert r.status is GetMessageStatus.FOUND
            got.extend(m.body for buf in r.buffers for m in decode_records(buf))
            offset = r.next_begin_offset
        assert got == bodies[q::2]
    assert mapped_rss(paths) > after  # the read mapped pages again ...
    store.trimmer.run_once()  # ... which the next pass releases (the segments a backlog drains through)
    assert mapped_rss(paths) <= keep + 2 * 4096

    # ... and the files hold them, though nothing was flushed since the release (dirty pages stay dirty)
    on_disk = []
    for mf in files:
        with open(mf.path, "rb") as f:
            data = f.read(mf.wrote_position)
        pos = 0
        while pos + 8 <= len(data) and int.from_bytes(data[pos + 4:pos + 8], "big") != 0xCBD43194:
            size = int.from_bytes(data[pos:pos + 4], "big")
            if size == 0:
                break
            on_disk.extend(m.body for m in decode_records(data[pos:pos + size], strict=True))
            pos += size
    assert on_disk == bodies


def test_old_segments_are_released_on_the_sweep(make_store):
    store = _store(make_store, resident_behind_writer_bytes=0)
    _fill(store, 20_000)
    files = store.commit_log.queue.files
    assert len(files) > R.RECENT + 1
    oldest = {str(mf.path) for mf in files[:-1 - R.RECENT]}
    recent = {str(mf.path) for mf in files[-1 - R.RECENT:]}
    store.trimmer.passes = 0
    store.trimmer.run_once()
    assert mapped_rss(recent) <= 4096 and mapped_rss(oldest) > 0  # the oldest wait for the sweep ...
    for _ in range(store.trimmer.cq_every - 1):
        store.trimmer.run_once()
    assert mapped_rss(oldest) == 0  # ... which comes every cq_every passes


def test_consume_queue_segments_no_longer_written_are_released(make_store):
    store = _store(make_store, resident_behind_writer_bytes=0)
    _fill(store)
    cq_files = [mf for cq in store.cq_table for mf in cq.queue.files[:-1]]
    assert cq_files  # 4,096 units per segment, 4,500 per queue
    paths = {str(mf.path) for mf in cq_files}
    assert mapped_rss(paths) > 0
    for _ in range(store.trimmer.cq_every):
        store.trimmer.run_once()
    assert mapped_rss(paths) == 0
    assert store.get_message("g", "T", 0, 0, 10).status is GetMessageStatus.FOUND


def test_a_pass_that_releases_much_brings_the_next_one_sooner(make_store):
    store = _store(make_store, resident_behind_writer_bytes=0)
    _fill(store, 14_000)  # about 14 MiB written through the mapping, all of it mapped
    trimmer = store.trimmer
    slow = trimmer.interval_ms / 1000.0
    assert trimmer.wait_s() == slow
    trimmer.run_once()  # releases everything: a consumer draining a backlog maps the log this fast
    assert trimmer.busy and trimmer.wait_s() == slow / R.BUSY_DIVISOR
    trimmer.run_once()  # nothing mapped since: back to the usual interval
    assert not trimmer.busy and trimmer.wait_s() == slow


def test_resident_bytes_is_this_process_rss(make_store):
    import resource
    rss = _store(make_store).trimmer.resident_bytes()
    assert 0 < rss <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_minus_one_keeps_every_page_mapped(make_store):
    store = make_store(resident_behind_writer_bytes=-1)
    assert store.trimmer is None
    assert store.put_message(inner(body=b"x")).status is PutMessageStatus.PUT_OK


def test_the_thread_releases_on_its_own_and_stops_with_the_store(make_store):
    store = make_store(mapped_file_size_commit_log=SEG, warm_ahead_bytes=0, resident_behind_writer_bytes=0)
    store.trimmer.interval_ms = 20
    store.trimmer.stop(final_pass=False)
    store.trimmer.start()
    _fill(store, 3000)
    paths = {str(mf.path) for mf in store.commit_log.queue.files}
    deadline = os.times().elapsed + 10
    while mapped_rss(paths) > 2 * 4096 and os.times().elapsed < deadline:
        os.sched_yield()
    assert mapped_rss(paths) <= 2 * 4096
    store.shutdown()
    assert store.trimmer._thread is None
