"""A full disk: segments reserve their blocks, and a file that cannot be created stops writes without losing
or reordering anything. ``posix_fallocate`` is made to fail with ENOSPC for chosen directories; the real
full-disk run (a small tmpfs, the broker daemon) is in tests/integration/broker/test_broker_disk_full.py."""

from __future__ import annotations

import errno
import logging
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import LoopThread, inner

from mq.common.record import decode_record, decode_records
from mq.store import mapped_file
from mq.store.commit_log import CL_RESERVE_STEP
from mq.store.consume_queue import CQ_RESERVE_STEP
from mq.store.index_file import ENTRY_SIZE, HEADER_SIZE, INDEX_RESERVE_STEP
from mq.store.status import GetMessageStatus as G
from mq.store.status import PutMessageStatus as P

_real_fallocate = os.posix_fallocate


class DiskFull:
    """``os.posix_fallocate`` that fails with ENOSPC for files under the ``full`` directories."""

    def __init__(self) -> None:
        self.full: set[str] = set()
        self.refused = 0

    def __call__(self, fd: int, offset: int, length: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if any(path.startswith(d) for d in self.full):
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        _real_fallocate(fd, offset, length)


@pytest.fixture
def disk(monkeypatch) -> DiskFull:
    d = DiskFull()
    monkeypatch.setattr(os, "posix_fallocate", d)
    return d


def _bodies(s, topic: str, queue_id: int) -> list[bytes]:
    out, offset = [], 0
    while True:
        r = s.get_message("g", topic, queue_id, offset, 32)
        if r.status is not G.FOUND:
            return out
        out += [m.body for b in r.buffers for m in decode_records(b)]
        offset = r.next_begin_offset


def test_a_new_segment_has_its_blocks_reserved(make_store):
    s = make_store()
    s.put_message(inner())
    f = s.commit_log.queue.files[-1]
    st = os.stat(f.path)
    assert st.st_size == f.file_size == 64 * 1024
    assert st.st_blocks * 512 >= f.file_size  # allocated, not a hole a full disk could leave unfillable
    cq = s.cq_table.find("T", 0).queue.files[-1]
    assert os.stat(cq.path).st_blocks * 512 >= cq.file_size


def test_consume_queue_segments_reserve_blocks_as_they_fill(make_store, disk, tmp_path):
    """A topic with many queues takes the disk its units need, not a whole segment per queue (Java's
    BenchmarkTest has 1,024 queues: 5.8 GB of default-size segments), and stores only into reserved blocks."""
    unit_step = CQ_RESERVE_STEP // 20
    s = make_store(mapped_file_size_consume_queue=20 * 300_000)  # RocketMQ's default: 5.7 MB per segment
    for q in range(16):
        assert s.put_message(inner(topic="Many", queue_id=q)).status is P.PUT_OK
    segments = [s.cq_table.find("Many", q).queue.files[-1] for q in range(16)]
    for f in segments:
        st = os.stat(f.path)
        assert st.st_size == 20 * 300_000  # full length, as RocketMQ reads it
        assert CQ_RESERVE_STEP <= st.st_blocks * 512 < 2 * CQ_RESERVE_STEP  # one step reserved, the rest a hole
        assert f.reserved_to == CQ_RESERVE_STEP
    for i in range(1, unit_step + 10):  # past the first step: the next one is reserved before the store
        assert s.put_message(inner(topic="Many", queue_id=0, body=b"%d" % i)).status is P.PUT_OK
    assert segments[0].reserved_to == 2 * CQ_RESERVE_STEP
    assert os.stat(segments[0].path).st_blocks * 512 >= 2 * CQ_RESERVE_STEP

    # a full disk fails the unit whose step cannot be reserved; it waits, and nothing is stored into a hole
    in_two_steps = 2 * CQ_RESERVE_STEP // 20  # units that fit whole in the reserved bytes
    for i in range(unit_step + 10, in_two_steps):
        assert s.put_message(inner(topic="Many", queue_id=0, body=b"%d" % i)).status is P.PUT_OK
    disk.full.add(str(tmp_path / "store" / "consumequeue"))
    assert s.put_message(inner(topic="Many", queue_id=0, body=b"waits")).status is P.PUT_OK  # in the log
    assert s.get_max_offset("Many", 0) == in_two_steps and s.dispatcher.error is not None
    assert segments[0].reserved_to == 2 * CQ_RESERVE_STEP
    assert s.put_message(inner(topic="Many", queue_id=1)).status is P.SERVICE_NOT_AVAILABLE
    disk.full.clear()
    assert s.dispatcher.retry() is True
    assert s.get_max_offset("Many", 0) == in_two_steps + 1
    assert _bodies(s, "Many", 0)[-1] == b"waits"


def test_commit_log_segments_reserve_blocks_as_they_fill(make_store, disk, tmp_path):
    """A 256 MiB segment takes the disk its records need, reserved CL_RESERVE_STEP at a time before any store;
    a step that cannot be reserved is a status, and nothing is stored past the reserved bytes."""
    s = make_store(mapped_file_size_commit_log=256 * 1024 * 1024)
    body = b"x" * (1024 * 1024)
    assert s.put_message(inner(body=body)).status is P.PUT_OK
    seg = s.commit_log.queue.files[-1]
    assert os.stat(seg.path).st_size == 256 * 1024 * 1024 and seg.reserved_to == CL_RESERVE_STEP
    assert os.stat(seg.path).st_blocks * 512 < 2 * CL_RESERVE_STEP
    fit = CL_RESERVE_STEP // seg.wrote_position  # records that fit in the first step
    for _ in range(fit - 1):
        assert s.put_message(inner(body=body)).status is P.PUT_OK
    assert seg.reserved_to == CL_RESERVE_STEP
    disk.full.add(str(tmp_path / "store" / "commitlog"))
    failed = s.put_message(inner(body=body))
    assert failed.status is P.CREATE_MAPPED_FILE_FAILED and "No space left on device" in failed.remark
    assert seg.reserved_to == CL_RESERVE_STEP and seg.wrote_position <= CL_RESERVE_STEP
    disk.full.clear()
    assert s.put_message(inner(body=body)).status is P.PUT_OK
    assert seg.reserved_to == 2 * CL_RESERVE_STEP
    assert len(_bodies(s, "T", 0)) == fit + 1


def test_a_file_system_that_cannot_reserve_leaves_segments_sparse_with_a_warning(make_store, monkeypatch,
                                                                                   caplog):
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    monkeypatch.setattr(mapped_file, "_warned_sparse", set())
    with caplog.at_level(logging.WARNING, logger="mq.store.mapped_file"):
        s = make_store()
        for i in range(40):
            assert s.put_message(inner(body=b"x" * 3000)).status is P.PUT_OK
    assert len(s.commit_log.queue.files) >= 2
    assert all(os.stat(f.path).st_size == f.file_size for f in s.commit_log.queue.files)
    warned = [r for r in caplog.records if "cannot reserve blocks" in r.getMessage()]
    assert len(warned) == 1  # once per file system, not once per file
    assert len(_bodies(s, "T", 0)) == 40


def test_no_room_for_a_commit_log_segment_is_a_status_then_writes_resume(make_store, disk, tmp_path):
    s = make_store()
    for _ in range(15):  # 3000-byte records: 21 fit in one 64 KiB segment
        assert s.put_message(inner(body=b"a" * 3000)).status is P.PUT_OK
    disk.full.add(str(tmp_path / "store" / "commitlog"))
    results = [s.put_message(inner(body=b"b" * 3000)) for _ in range(10)]
    ok = [r for r in results if r.status is P.PUT_OK]
    failed = [r for r in results if r.status is not P.PUT_OK]
    assert len(ok) == 6 and len(failed) == 4  # the segment filled, the next could not be created
    assert all(r.status is P.CREATE_MAPPED_FILE_FAILED for r in failed)
    assert "No space left on device" in failed[0].remark
    assert not any(p.name.endswith(mapped_file.TMP_SUFFIX) for p in (tmp_path / "store" / "commitlog").iterdir())
    disk.full.clear()
    assert s.put_message(inner(body=b"c" * 3000)).status is P.PUT_OK
    assert _bodies(s, "T", 0) == [b"a" * 3000] * 15 + [b"b" * 3000] * 6 + [b"c" * 3000]


def test_no_room_for_a_consume_queue_segment_holds_dispatch_back_and_refuses_writes(make_store, disk, tmp_path):
    s = make_store()  # 64 units per consume-queue segment
    for i in range(60):
        assert s.put_message(inner(body=b"%d" % i)).status is P.PUT_OK
    disk.full.add(str(tmp_path / "store" / "consumequeue"))
    results = [s.put_message(inner(body=b"%d" % i)) for i in range(60, 80)]
    # Units 60..63 fit; the record whose unit needs segment 2 is stored (PUT_OK: it is in the log and will be
    # dispatched) and everything after is refused with the reason.
    assert [r.status for r in results[:5]] == [P.PUT_OK] * 5
    refused = results[5:]
    assert all(r.status is P.SERVICE_NOT_AVAILABLE for r in refused)
    assert "cannot write consume queue T-0" in refused[0].remark and "No space" in refused[0].remark
    assert s.get_max_offset("T", 0) == 64  # the 65th record waits
    assert s.dispatcher.retry() is False  # still no room
    disk.full.clear()
    assert s.dispatcher.retry() is True
    assert s.dispatcher.error is None
    assert s.put_message(inner(body=b"after")).status is P.PUT_OK
    assert _bodies(s, "T", 0) == [b"%d" % i for i in range(65)] + [b"after"]
    assert s.dispatch_behind_bytes() == 0


def test_the_store_retries_held_back_dispatch_by_itself(make_store, disk, tmp_path):
    s = make_store()
    for i in range(64):
        s.put_message(inner(body=b"%d" % i))
    disk.full.add(str(tmp_path / "store" / "consumequeue"))
    assert s.put_message(inner(body=b"64")).status is P.PUT_OK
    assert s.put_message(inner(body=b"65")).status is P.SERVICE_NOT_AVAILABLE
    disk.full.clear()
    deadline = time.monotonic() + 10
    while s.dispatcher.error is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert s.dispatcher.error is None
    assert _bodies(s, "T", 0) == [b"%d" % i for i in range(65)]


@pytest.mark.parametrize("driven", [False, True], ids=["index-thread", "driven-by-a-loop"])
def test_no_room_for_an_index_file_keeps_the_entries_until_there_is(make_store, disk, tmp_path, driven, request):
    kw = {}
    if driven:  # the broker's way: passes and retries run on its event loop
        owner = LoopThread()
        request.addfinalizer(owner.close)
        kw["_store_kw"] = {"index_scheduler": owner.poster}
    s = make_store(max_hash_slot_num=64, max_index_num=16, **kw)  # 15 entries per index file
    assert (s.index_dispatcher._thread is None) == driven
    for i in range(10):
        s.put_message(inner(keys=f"k{i} x{i}", body=b"%d" % i))  # 2 keys per message (no UNIQ_KEY)
    s.index_dispatcher.wait_idle(10)
    disk.full.add(str(tmp_path / "store" / "index"))
    for i in range(10, 20):
        s.put_message(inner(keys=f"k{i} x{i}", body=b"%d" % i))
    deadline = time.monotonic() + 10
    while not s.index.pending and time.monotonic() < deadline:
        time.sleep(0.02)
    assert s.index.pending > 0 and disk.refused > 0
    disk.full.clear()
    assert s.index_dispatcher.wait_idle(10)
    assert s.index.pending == 0
    for i in range(20):
        for key in (f"k{i}", f"x{i}"):
            found = s.query_message("T", key, 8)
            assert [decode_record(b).body for b in found.buffers] == [b"%d" % i], key  # every key, each exactly once


def test_an_index_file_reserves_its_slots_at_once_and_its_entries_as_they_fill(make_store, disk, tmp_path):
    """RocketMQ's default index file is 420 MB; a fresh store takes the 20 MB of slots and one step of entries.
    A step the disk cannot give writes nothing of the batch: its entries wait, then go in, each exactly once."""
    slots, entries = 5_000_000, 20_000_000  # the defaults
    s = make_store(max_hash_slot_num=slots, max_index_num=entries)
    s.put_message(inner(keys="first"))
    assert s.index_dispatcher.wait_idle(10)
    f = s.index._files[-1]
    slots_end = HEADER_SIZE + slots * 4
    step_end = -(-(slots_end + 2 * ENTRY_SIZE) // INDEX_RESERVE_STEP) * INDEX_RESERVE_STEP
    st = os.stat(f.path)
    assert st.st_size == HEADER_SIZE + slots * 4 + entries * ENTRY_SIZE  # full length, as RocketMQ reads it
    assert f.reserved_to == step_end
    assert slots_end <= st.st_blocks * 512 < step_end + INDEX_RESERVE_STEP  # slots reserved, most entries a hole

    room = (f.reserved_to - slots_end) // ENTRY_SIZE - f.index_count  # entries that fit in the reserved bytes
    s.index.build_batch([_Req(f"k{i}", 1000 + i) for i in range(room)])
    assert f.reserved_to == step_end
    disk.full.add(str(tmp_path / "store" / "index"))
    with pytest.raises(OSError):
        s.index.build_batch([_Req("waits", 10**9), _Req("too", 10**9 + 1)])
    assert f.reserved_to == step_end and f.index_count == room + 2  # nothing written past the reserved bytes
    assert s.index.pending == 2
    disk.full.clear()
    assert s.index.retry_pending() == 2
    assert f.reserved_to == step_end + INDEX_RESERVE_STEP
    assert s.index.query("T", "waits", 8, 0, 2**62) == [10**9]


class _Req:
    """What ``IndexService.build_batch`` reads of a dispatched record."""

    def __init__(self, key: str, phy: int) -> None:
        self.topic, self.keys, self.uniq_key, self.phy_offset = "T", key, None, phy
        self.store_timestamp, self.tran_type = int(time.time() * 1000), 0


def test_the_checkpoint_has_its_block_and_a_failed_write_at_shutdown_still_shuts_down(make_store, tmp_path):
    s = make_store()
    for i in range(5):
        s.put_message(inner(body=b"%d" % i))
    cp = tmp_path / "store" / "checkpoint"
    assert os.stat(cp).st_blocks * 512 >= 4096  # rewritten in place, so it needs no new block

    def no_space() -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    s.checkpoint.flush = no_space
    s.shutdown()  # does not raise; the abort file stays so the next start recovers as after a crash
    assert (tmp_path / "store" / "abort").exists()
    again = make_store()  # the lock was released
    assert not again.recovery.last_exit_ok
    assert _bodies(again, "T", 0) == [b"%d" % i for i in range(5)]


def test_too_many_open_files_for_a_consume_queue_holds_dispatch_back_and_names_the_limit(make_store, monkeypatch,
                                                                                          tmp_path):
    """A broker that reaches its open-file limit when a new topic queue needs its consume queue: the record is
    kept (stored, dispatched once the file can be opened), writes are refused with the limit to raise, and
    nothing raises out of the put."""
    s = make_store()
    assert s.put_message(inner(topic="Old", body=b"old")).status is P.PUT_OK
    real_open = os.open
    refused = str(tmp_path / "store" / "consumequeue" / "New")

    def open_at_the_limit(path, flags, mode=0o777, **kw):
        if str(path).startswith(refused):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", open_at_the_limit)
    first = s.put_message(inner(topic="New", body=b"new-0"))
    assert first.status is P.PUT_OK  # in the log; its unit waits
    then = s.put_message(inner(topic="Old", body=b"refused"))
    assert then.status is P.SERVICE_NOT_AVAILABLE
    assert "cannot write consume queue New-0" in then.remark and "Too many open files" in then.remark
    assert "ulimit -n" in then.remark
    monkeypatch.setattr(os, "open", real_open)
    assert s.dispatcher.retry() is True
    assert s.put_message(inner(topic="New", body=b"new-1")).status is P.PUT_OK
    assert _bodies(s, "New", 0) == [b"new-0", b"new-1"]
    assert _bodies(s, "Old", 0) == [b"old"]


def test_a_mapping_refused_for_a_commit_log_segment_is_a_status_naming_vm_max_map_count(make_store, monkeypatch,
                                                                                         tmp_path):
    import mmap

    s = make_store()
    for _ in range(15):  # 3000-byte records: 21 fit in one 64 KiB segment
        assert s.put_message(inner(body=b"a" * 3000)).status is P.PUT_OK
    real_mmap = mmap.mmap
    log_dir = str(tmp_path / "store" / "commitlog")

    def mmap_at_the_limit(fd, *args, **kw):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(log_dir):
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        return real_mmap(fd, *args, **kw)

    monkeypatch.setattr(mmap, "mmap", mmap_at_the_limit)
    results = [s.put_message(inner(body=b"b" * 3000)) for _ in range(8)]
    failed = [r for r in results if r.status is not P.PUT_OK]
    assert failed and all(r.status is P.CREATE_MAPPED_FILE_FAILED for r in failed)
    assert "vm.max_map_count" in failed[0].remark
    monkeypatch.setattr(mmap, "mmap", real_mmap)
    assert s.put_message(inner(body=b"c" * 3000)).status is P.PUT_OK
    ok = sum(r.status is P.PUT_OK for r in results)
    assert _bodies(s, "T", 0) == [b"a" * 3000] * 15 + [b"b" * 3000] * ok + [b"c" * 3000]


def test_recovery_on_a_full_disk_counts_the_records_waiting_for_their_consume_queue(make_store, disk, tmp_path):
    """Issue 28, defect 6: after a crash on a full disk, a restart still on it cannot write the consume-queue
    unit of a record the log holds; that record's queue offset is taken all the same, and the offsets given
    out after the disk has room again start past it (two records had one offset)."""
    import shutil

    s = make_store()  # 64 units per consume-queue segment
    for i in range(64):
        s.put_message(inner(body=b"%d" % i))
    disk.full.add(str(tmp_path / "store" / "consumequeue"))
    assert s.put_message(inner(body=b"64")).status is P.PUT_OK  # in the log; its unit waits
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path / "store", crashed)  # as kill -9 leaves it: the abort file is there
    disk.full.add(str(crashed / "consumequeue"))
    r = make_store(root=crashed)  # restarted on the still full disk
    assert r.dispatcher.error is not None
    assert r.commit_log.topic_queue_table[("T", 0)] == 65
    disk.full.clear()
    assert r.dispatcher.retry() is True
    res = r.put_message(inner(body=b"after"))
    assert res.status is P.PUT_OK and res.queue_offset == 65
    assert _bodies(r, "T", 0) == [b"%d" % i for i in range(65)] + [b"after"]
    r.shutdown()
    from mq.store import tools

    rep = tools.verify_store(crashed)
    assert rep.ok, rep.problems


@pytest.fixture
def ext4(tmp_path):
    """A 32 MiB ext4 file system on a loop device (skipped where it cannot be made or mounted)."""
    import subprocess

    img, mnt = tmp_path / "ext4.img", tmp_path / "ext4"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(32 << 20)
    try:
        if subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], capture_output=True, timeout=60).returncode:
            pytest.skip("mkfs.ext4 failed")
        proc = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount an ext4 image here: {exc}")
    if proc.returncode:
        pytest.skip(f"cannot mount an ext4 image here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=20)


def _free(path) -> int:
    st = os.statvfs(path)
    return st.f_bfree * st.f_frsize  # this process may be root, which may use the blocks ext4 keeps for it


def test_a_failed_reservation_gives_back_what_ext4_allocated(ext4):
    """Issue 28, defect 8: ext4 keeps the blocks a failed fallocate allocated before it ran out, so a refused
    64 MiB step left the disk at 100 % for every other file. A step that does not fit is halved down to what
    the write needs, and each failed attempt's blocks are given back."""
    with open(ext4 / "hog", "wb") as f:
        f.write(b"\0" * (_free(ext4) - (6 << 20)))  # about 6 MiB left
    seg = mapped_file.MappedFile(ext4 / "00000000000000000000", 1 << 30, create=True,
                                 reserve_step=CL_RESERVE_STEP)
    try:
        seg.reserve_to(4096)  # 64 MiB does not fit: a smaller step does
        assert 4096 <= seg.reserved_to < CL_RESERVE_STEP
        free = _free(ext4)
        with pytest.raises(OSError) as err:
            seg.reserve_to(seg.reserved_to + free + (1 << 20))  # a write that cannot fit
        assert err.value.errno == errno.ENOSPC
        assert _free(ext4) >= free - 65536, "the failed reservation kept blocks"
    finally:
        seg.close()


def test_a_reservation_step_halves_down_to_what_the_write_needs(tmp_path, monkeypatch):
    """Issue 28, defect 8: with less room than a 64 MiB step, the step is halved until it fits, never below what
    the write needs, and every failed attempt gives back [keep, its end)."""
    room = 5 << 20
    attempts, punched = [], []

    def fallocate(fd, offset, length):
        attempts.append((offset, length))
        if length > room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    monkeypatch.setattr(mapped_file, "punch_hole", lambda fd, off, n: punched.append((off, n)) or True)
    path = tmp_path / "f"
    with open(path, "wb") as f:
        end = mapped_file.reserve_range(f.fileno(), 4096, 4096 + CL_RESERVE_STEP, 1 << 30, path, need=8192,
                                        keep=6000)
        assert 8192 <= end <= 4096 + room
        assert [n for _o, n in attempts] == [64 << 20, 32 << 20, 16 << 20, 8 << 20, 4 << 20]
        assert punched == [(6000, 4096 + n - 6000) for n in (64 << 20, 32 << 20, 16 << 20, 8 << 20)]
        attempts.clear()
        with pytest.raises(OSError):  # the write itself does not fit: refused, nothing kept
            mapped_file.reserve_range(f.fileno(), 0, 64 << 20, 1 << 30, path, need=room + 1)
        assert attempts[-1] == (0, room + 1)


def test_refused_puts_on_a_full_disk_log_once_per_interval(make_store, disk, tmp_path, caplog):
    """Issue 28, defect 10: every put refused on a full disk logged an ERROR. The cause is logged once per
    ``storeErrorLogIntervalMs``, with a count of the ones held back; every caller still gets the reason."""
    s = make_store()
    for _ in range(21):  # 3000-byte records: 21 fill a 64 KiB segment
        assert s.put_message(inner(body=b"a" * 3000)).status is P.PUT_OK
    disk.full.add(str(tmp_path / "store" / "commitlog"))
    with caplog.at_level(logging.ERROR, logger="mq.store.commit_log"):
        results = [s.put_message(inner(body=b"b" * 3000)) for _ in range(50)]
    assert all(r.status is P.CREATE_MAPPED_FILE_FAILED and "No space left" in r.remark for r in results)
    assert len([r for r in caplog.records if r.name == "mq.store.commit_log"]) == 1
    assert sum(s.commit_log._throttle.suppressed(k) for k in ("reserve", "create", "write")) == 49


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.integers(0, 1 << 30), step=st.integers(1, 64 << 20), need_frac=st.floats(0, 1),
       room=st.integers(0, 80 << 20))
def test_a_reservation_takes_few_attempts_and_never_less_than_the_write_needs(tmp_path, start, step, need_frac,
                                                                              room):
    end = start + step
    need = start + int(step * need_frac)
    attempts = []

    def fallocate(fd, offset, length):
        attempts.append(offset + length)
        if length > room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real = os.posix_fallocate, mapped_file.punch_hole
    os.posix_fallocate, mapped_file.punch_hole = fallocate, lambda *a: True
    try:
        got = mapped_file.reserve_range(0, start, end, 1 << 31, tmp_path / "f", need=need)
    except OSError:
        got = None
    finally:
        os.posix_fallocate, mapped_file.punch_hole = real
    assert len(attempts) <= 16
    if need - start <= room:
        assert got is not None and need <= got <= end and got - start <= room
    else:
        assert got is None and attempts[-1] == need
