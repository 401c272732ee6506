"""Warm-ahead (mq.store.warm): populating or zero-filling ahead of the writer never touches a written byte, the
writer waits for a chunk being zeroed, and a failing chunk only stops the warming."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from mq.common.record import decode_records
from mq.store import warm as W
from mq.store.mapped_file import NOT_ZEROING
from mq.store.status import PutMessageStatus

from .conftest import inner


def _all_records(store):
    out = []
    for mf in store.commit_log.queue.files:
        mv = memoryview(mf.mm)[:mf.wrote_position]
        pos = 0
        while pos < len(mv):
            size = int.from_bytes(mv[pos:pos + 4], "big")
            if int.from_bytes(mv[pos + 4:pos + 8], "big") == 0xCBD43194:  # BLANK: end of segment
                break
            out.extend(decode_records(mv[pos:pos + size], strict=True))
            pos += size
        del mv
    return out


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_warm_ahead_never_zeroes_written_records(make_store, mode):
    """Tiny chunks zeroed slowly (the pwrite sleeps first, GIL released) right in front of the writer, across
    many segment rolls: a record written into a chunk while it is being zeroed would read back as zeros, so
    every record reading back intact shows the writer waited. Under SYNC_FLUSH the puts do not wait for each
    other, so records are staged (not yet written) while chunks are chosen: none may be zeroed after its
    group commit wrote it."""
    import os

    def slow_pwrite(fd, data, offset):
        time.sleep(0.0003)
        return os.pwrite(fd, data, offset)

    store = make_store(warm_ahead_bytes=8192, start=False, flush_disk_type=mode)
    store.warm.chunk = 4096
    store.warm._zeros = bytes(4096)
    store.warm.idle_wait = 0
    store.warm.pwrite = slow_pwrite
    store.warm.populate = None  # the zero-fill way
    store.start()
    bodies = [bytes([i % 251]) * (100 + i % 900) for i in range(1500)]
    futures = [store.put_message_async(inner(body=body, queue_id=i % 4)) for i, body in enumerate(bodies)]
    assert all(f.result(30).status is PutMessageStatus.PUT_OK for f in futures)
    got = _all_records(store)
    assert [m.body for m in got] == bodies
    assert len(store.commit_log.queue.files) > 10  # 64 KiB segments: it rolled many times
    assert store.warm.warmed_bytes > 0


def test_writer_waits_for_a_chunk_being_zeroed(make_store):
    store = make_store(warm_ahead_bytes=0)  # no thread: drive the interlock by hand
    svc = W.WarmAheadService(store.commit_log.queue, store.put_lock)
    store.commit_log.warm = svc
    assert store.put_message(inner(body=b"first")).status is PutMessageStatus.PUT_OK
    mf = store.commit_log.queue.files[-1]
    mf.zeroing_from = mf.wrote_position + 10  # "a chunk starting 10 bytes on is being zeroed"
    done = threading.Event()

    def put():
        store.put_message(inner(body=b"x" * 200))
        done.set()

    t = threading.Thread(target=put)
    t.start()
    assert not done.wait(0.3)  # blocked: its record would reach into the chunk
    with svc._cond:
        mf.zeroing_from = NOT_ZEROING
        svc._cond.notify_all()
    assert done.wait(5)
    t.join()
    assert [m.body for m in _all_records(store)] == [b"first", b"x" * 200]


@pytest.mark.parametrize("way", ["zero-fill", "populate"])
def test_a_failed_chunk_stops_warming_and_puts_go_on(make_store, caplog, way):
    def full(fd, data, offset):
        raise OSError(28, "No space left on device")

    def broken(mm, start, length):
        raise OSError(5, "Input/output error")

    with caplog.at_level(logging.WARNING, logger="mq.store.warm"):
        store = make_store(warm_ahead_bytes=1 << 20, start=False)
        store.warm.pwrite = full
        store.warm.populate = broken if way == "populate" else None
        store.start()
        store.put_message(inner(body=b"first"))  # the log has a segment to warm from here on
        deadline = time.monotonic() + 5
        while not store.warm._failed and time.monotonic() < deadline:
            time.sleep(0.01)
        for i in range(20):
            assert store.put_message(inner(body=b"b%d" % i)).status is PutMessageStatus.PUT_OK
    assert store.warm._failed and store.warm.warmed_bytes == 0
    why = "Input/output error" if way == "populate" else "No space left on device"
    assert f"warm-ahead ({way})" in caplog.text and why in caplog.text
    assert store.commit_log.queue.files[-1].zeroing_from == NOT_ZEROING
    assert len(_all_records(store)) == 21


def test_warm_ahead_off_and_whole_segment(make_store, tmp_path):
    off = make_store(root=tmp_path / "off", warm_ahead_bytes=0)
    assert off.warm is None
    whole = make_store(root=tmp_path / "whole", warm_maped_file_enable=True)
    assert whole.warm is not None and whole.warm.ahead >= 64 * 1024
    whole.put_message(inner(body=b"w"))
    deadline = time.monotonic() + 5
    mf = whole.commit_log.queue.files[-1]
    while mf.warmed_to < mf.file_size and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mf.warmed_to == mf.file_size


needs_populate = pytest.mark.skipif(W.make_populate() is None, reason="no MADV_POPULATE_READ (Linux < 5.14)")


def test_default_warms_under_async_flush_with_cpus_to_spare(make_store, tmp_path):
    """warmAheadBytes = -1 (the default): 16 MiB ahead under ASYNC_FLUSH where the kernel can populate and at
    least MIN_CPUS CPUs are usable, never the zero-fill fallback; off with fewer CPUs and under SYNC_FLUSH; an
    explicit size applies in either mode."""
    populate = W.DEFAULT_AHEAD if W.can_populate() else 0
    assert W.default_ahead(sync_flush=False, cpus=W.MIN_CPUS) == populate
    assert W.default_ahead(sync_flush=False, cpus=64) == populate
    assert W.default_ahead(sync_flush=False, cpus=W.MIN_CPUS - 1) == 0
    assert W.default_ahead(sync_flush=True, cpus=64) == 0
    assert 1 <= W.usable_cpus() <= (os.cpu_count() or 1)
    async_store = make_store(root=tmp_path / "a", flush_disk_type="ASYNC_FLUSH")
    sync_store = make_store(root=tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    assert sync_store.warm is None
    if W.default_ahead(sync_flush=False):
        assert async_store.warm is not None and async_store.warm.ahead == W.DEFAULT_AHEAD
        assert async_store.warm.mode == "populate"
    else:
        assert async_store.warm is None
    explicit = make_store(root=tmp_path / "e", flush_disk_type="SYNC_FLUSH", warm_ahead_bytes=1 << 20)
    assert explicit.warm is not None and explicit.warm.ahead == 1 << 20


@needs_populate
def test_populate_brings_pages_in_without_changing_a_byte_or_blocking_the_writer(make_store):
    """The populate way runs right in front of the writer, across many segment rolls, and never sets the
    zeroing mark the writer would wait for; every record reads back intact and the pages ahead are resident."""
    store = make_store(warm_ahead_bytes=8192, start=False)
    assert store.warm.mode == "populate"
    store.warm.chunk = 4096
    store.warm.idle_wait = 0
    store.start()
    bodies = [bytes([i % 251]) * (100 + i % 900) for i in range(1500)]
    for i, body in enumerate(bodies):
        assert store.put_message(inner(body=body, queue_id=i % 4)).status is PutMessageStatus.PUT_OK
        assert store.commit_log.queue.files[-1].zeroing_from == NOT_ZEROING
    assert [m.body for m in _all_records(store)] == bodies
    assert len(store.commit_log.queue.files) > 10 and store.warm.warmed_bytes > 0


@needs_populate
def test_populate_changes_no_byte_and_stays_inside_the_mapping(tmp_path):
    import mmap
    import os

    path = tmp_path / "seg"
    with open(path, "wb") as f:
        f.truncate(64 * mmap.PAGESIZE)
    fd = os.open(path, os.O_RDWR)
    mm = mmap.mmap(fd, 64 * mmap.PAGESIZE)
    try:
        populate = W.make_populate()
        populate(mm, 8 * mmap.PAGESIZE, 16 * mmap.PAGESIZE)
        assert bytes(mm[:]) == bytes(64 * mmap.PAGESIZE)  # nothing changed
        with pytest.raises(ValueError):  # past the mapping: ctypes refuses before the kernel is asked
            populate(mm, 60 * mmap.PAGESIZE, 16 * mmap.PAGESIZE)
    finally:
        mm.close()
        os.close(fd)
