"""SYNC_FLUSH staging (``CommitLog.staging``): records wait in a user-space buffer until a commit hands them to
the OS with one pwrite; nobody reads them before, an acknowledged put has been committed, the bytes equal what
storing through the mapping writes, and a failed commit is never PUT_OK."""

from __future__ import annotations

import os

import pytest

from mq.common.hosts import pack_host
from mq.common.message import MessageExtBrokerInner
from mq.common.record import decode_records
from mq.store import commit_log as CL
from mq.store.commit_log import CommitLog
from mq.store.message_store import MessageStore
from mq.store.status import PutMessageStatus
from mq.store import replica

from .conftest import inner, small_config


def _log(root, staging: bool, file_size: int = 4096) -> CommitLog:
    log = CommitLog(root, file_size, ("192.168.0.7", 10911), max_message_size=1024)
    log.staging = staging
    return log


def _prepared(log: CommitLog, i: int):
    m = MessageExtBrokerInner(topic="T", queue_id=i % 3, body=bytes([i % 256]) * (20 + i * 7 % 300),
                              properties={"KEYS": f"k{i}"}, born_host=pack_host("10.0.0.1", 5))
    return log.prepare(m)


def _segments(log: CommitLog) -> list[bytes]:
    return [bytes(mf.mm[:mf.wrote_position]) for mf in log.queue.files]


@pytest.mark.parametrize("every", [1, 3, 1000])
def test_staged_records_are_the_same_bytes_across_segment_rolls(tmp_path, every):
    staged, mapped = _log(tmp_path / "s", True), _log(tmp_path / "m", False)
    for i in range(120):
        rs = staged.append([_prepared(staged, i)], 1_700_000_000_000 + i)
        rm = mapped.append([_prepared(mapped, i)], 1_700_000_000_000 + i)
        assert rs == rm
        if i % every == every - 1:
            staged.commit()
    staged.commit()
    assert len(staged.queue.files) > 5  # 4 KiB segments: many rolls, each committing what it staged first
    assert _segments(staged) == _segments(mapped)
    on_disk = [os.pread(mf.fd, mf.wrote_position, 0) for mf in staged.queue.files]
    assert on_disk == _segments(mapped)
    staged.close()
    mapped.close()


def test_staged_records_are_invisible_until_committed(tmp_path):
    log = _log(tmp_path, True, 1 << 20)
    first = log.append([_prepared(log, 0)], 1)[0]
    assert log.staged_bytes == first.size and log.max_offset == 0
    assert log.read(first.phy_offset, first.size) is None and replica.read_chunk(log, 0, 1 << 20) == b""
    assert log.append_end(log.queue.files[-1]) == first.size
    log.commit()
    assert log.staged_bytes == 0 and log.max_offset == first.size
    assert decode_records(log.read(first.phy_offset, first.size))[0].keys == "k0"
    log.close()


def test_a_put_that_would_overfill_the_buffer_commits_first(tmp_path, monkeypatch):
    monkeypatch.setattr(CL, "STAGE_LIMIT", 1000)
    log = _log(tmp_path, True, 1 << 20)
    sizes = []
    for i in range(50):
        log.append([_prepared(log, i)], 1)
        sizes.append(log.staged_bytes)
    assert max(sizes) <= 1000 + 400 and log.max_offset > 0  # one record may pass the limit, never two
    log.commit()
    assert len(list(decode_records(_segments(log)[0]))) == 50
    log.close()


def test_an_acknowledged_sync_put_is_with_the_os(make_store):
    s = make_store(flush_disk_type="SYNC_FLUSH")
    assert s.commit_log.staging
    res = s.put_message(inner(body=b"waited"))
    nowait = s.put_message(inner(body=b"not waited", props={"WAIT": "false"}))
    assert res.ok and nowait.ok and s.commit_log.staged_bytes == 0  # WAIT=false: committed before the answer
    mf = s.commit_log.queue.files[-1]
    raw = os.pread(mf.fd, nowait.wrote_offset + nowait.wrote_bytes, 0)
    assert [m.body for m in decode_records(raw)] == [b"waited", b"not waited"]


def test_a_failed_commit_is_never_put_ok_and_stops_writes(make_store, tmp_path):
    s = make_store(flush_disk_type="SYNC_FLUSH")
    first = s.put_message(inner(body=b"one"))
    assert first.ok
    mf = s.commit_log.queue.files[-1]
    fd, mf.fd = mf.fd, os.open(mf.path, os.O_RDONLY)  # the commit's pwrite fails (EBADF)
    try:
        failed = s.put_message(inner(body=b"two"))
        nowait = s.put_message(inner(body=b"three", props={"WAIT": "false"}))
    finally:
        os.close(mf.fd)
        mf.fd = fd
    assert failed.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert "Bad file descriptor" in failed.remark
    assert nowait.status is PutMessageStatus.SERVICE_NOT_AVAILABLE  # the failed group stopped writes first
    after = s.put_message(inner(body=b"four"))
    assert after.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "flush failed" in after.remark
    assert s.commit_log.max_offset == first.wrote_offset + first.wrote_bytes  # nothing past the failure
    s.shutdown()
    again = MessageStore(small_config(tmp_path / "store", flush_disk_type="SYNC_FLUSH"))
    again.start()
    try:
        r = again.get_message("g", "T", 0, 0, 32)
        assert [m.body for m in decode_records(r.body)] == [b"one"]
        assert again.put_message(inner(body=b"five")).queue_offset == 1
    finally:
        again.shutdown()


def test_a_put_answered_at_once_whose_commit_fails_is_not_put_ok(make_store):
    s = make_store(flush_disk_type="SYNC_FLUSH")
    first = s.put_message(inner(body=b"one"))
    mf = s.commit_log.queue.files[-1]
    fd, mf.fd = mf.fd, os.open(mf.path, os.O_RDONLY)
    try:
        nowait = s.put_message(inner(body=b"two", props={"WAIT": "false"}))
        assert nowait.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert "cannot write to the commit log segment" in nowait.remark and "Bad file descriptor" in nowait.remark
        after = s.put_message(inner(body=b"three"))  # the flush thread's own commit failed too: writes stop
        assert after.status in (PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.SERVICE_NOT_AVAILABLE)
        assert s.put_message(inner(body=b"four")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        os.close(mf.fd)
        mf.fd = fd
    assert s.commit_log.max_offset == first.wrote_offset + first.wrote_bytes
