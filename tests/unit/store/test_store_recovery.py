"""Recovery: clean restart, crash restart rebuilding consume queues, and the torn tail at every byte."""

import os
import shutil

import pytest
from .conftest import inner, small_config

from mq.common.record import decode_record, decode_records
from mq.store import tools
from mq.store.message_store import MessageStore

N = 5


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine") / "store"
    s = MessageStore(small_config(root))
    s.start()
    offsets = []
    for i in range(N):
        r = s.put_message(inner(body=b"body-%d" % i, tags="TagA", keys=f"k{i}", queue_id=i % 2))
        offsets.append((r.wrote_offset, r.wrote_bytes))
    s.shutdown()
    return root, offsets


def _reopen(root):
    s = MessageStore(small_config(root))
    s.start()
    return s


def _read_all(s):
    out = []
    for q in (0, 1):
        r = s.get_message("g", "T", q, 0, 32)
        out += decode_records(r.body) if r.message_count else []
    return sorted(out, key=lambda m: m.commit_log_offset)


def _mutated_copy(pristine, tmp_path, name, mutate):
    root, offsets = pristine
    dst = tmp_path / name
    shutil.copytree(root, dst)
    seg = dst / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as f:
        mutate(f)
    (dst / "abort").touch()  # as after kill -9
    return dst


def test_clean_restart_is_fast_path(pristine, tmp_path):
    root, _ = pristine
    dst = tmp_path / "clean"
    shutil.copytree(root, dst)
    s = _reopen(dst)
    try:
        assert s.recovery.last_exit_ok and s.recovery.redispatched == 0
        assert [m.body for m in _read_all(s)] == [b"body-%d" % i for i in range(N)]
        assert s.put_message(inner(queue_id=0)).queue_offset == 3
    finally:
        s.shutdown()


def test_crash_restart_rebuilds_missing_consume_queue(pristine, tmp_path):
    root, _ = pristine
    dst = tmp_path / "nocq"
    shutil.copytree(root, dst)
    shutil.rmtree(dst / "consumequeue")
    (dst / "abort").touch()
    s = _reopen(dst)
    try:
        assert not s.recovery.last_exit_ok and s.recovery.redispatched == N
        assert [m.body for m in _read_all(s)] == [b"body-%d" % i for i in range(N)]
        assert len(s.query_message("T", "k3", 10).buffers) == 1
    finally:
        s.shutdown()
    assert tools.verify_store(dst).ok


@pytest.mark.parametrize("mode", ["truncate", "corrupt"])
def test_torn_tail_every_byte(pristine, tmp_path, mode):
    root, offsets = pristine
    last_off, last_size = offsets[-1]
    expected = [b"body-%d" % i for i in range(N)]
    must_drop = set(range(0, 12)) | set(range(28, 36)) | set(range(84, 88 + len(b"body-4")))
    for p in range(last_size):
        if mode == "truncate":
            def mutate(f, p=p):
                f.seek(last_off + p)
                f.write(b"\x00" * (last_size - p))
        else:
            def mutate(f, p=p):
                f.seek(last_off + p)
                b = f.read(1)
                f.seek(last_off + p)
                f.write(bytes([b[0] ^ 0xA5]))
        dst = _mutated_copy(pristine, tmp_path, f"{mode}-{p}", mutate)
        s = _reopen(dst)
        try:
            got = _read_all(s)
            if mode == "truncate" or p in must_drop:
                assert [m.body for m in got] == expected[:-1], (mode, p)
                assert s.get_max_phy_offset() == last_off
                assert s.query_message("T", "k4", 10).buffers == []
            else:
                # a flip outside what RocketMQ validates may leave a valid (different) record: never garbage
                assert [m.body for m in got][:N - 1] == expected[:-1]
                assert s.get_max_phy_offset() in (last_off, last_off + last_size)
            # the next append continues right after the valid prefix
            r = s.put_message(inner(body=b"next", queue_id=0))
            assert r.wrote_offset == s.get_max_phy_offset() - r.wrote_bytes
            assert decode_record(s.select_one_message_by_offset(r.wrote_offset)).body == b"next"
        finally:
            s.shutdown()
        if mode == "truncate" or p in must_drop:
            rep = tools.verify_store(dst)
            assert rep.ok, (mode, p, rep.problems)
        shutil.rmtree(dst)


def test_consume_queue_units_beyond_log_are_cut(pristine, tmp_path):
    root, offsets = pristine
    last_off, last_size = offsets[-1]

    def mutate(f):
        f.seek(last_off)
        f.write(b"\x00" * last_size)

    dst = _mutated_copy(pristine, tmp_path, "cqcut", mutate)
    s = _reopen(dst)
    try:
        assert s.get_max_offset("T", 0) == 2  # the unit for the 5th message (queue 0, offset 2) is gone
        assert s.put_message(inner(queue_id=0)).queue_offset == 2
    finally:
        s.shutdown()


def test_wrong_segment_size_refuses_to_load(pristine, tmp_path):
    root, _ = pristine
    dst = tmp_path / "badsize"
    shutil.copytree(root, dst)
    with open(dst / "commitlog" / "00000000000000000000", "r+b") as f:
        f.truncate(1000)
    s = MessageStore(small_config(dst))
    with pytest.raises(Exception, match="exactly"):
        s.load()
    assert not os.path.exists(dst / "lock") or True


def test_a_bad_record_in_the_middle_is_set_aside_and_the_later_ones_kept(pristine, tmp_path):
    """Issue 28, defect 2: RocketMQ's recovery ends the log at the first record that fails its checks; a body
    byte changed in record 2 of 5 cut records 2, 3 and 4. Now record 2 is set aside (its consume-queue unit a
    filler) and 3 and 4 stay."""
    root, offsets = pristine
    off, size = offsets[2]

    def mutate(f):
        f.seek(off + 88)  # the first body byte: the body CRC no longer matches
        f.write(b"X")

    dst = _mutated_copy(pristine, tmp_path, "middle", mutate)
    s = _reopen(dst)
    try:
        assert s.recovery.skipped_records == 1 and s.recovery.skipped_bytes == size
        assert [m.body for m in _read_all(s)] == [b"body-%d" % i for i in (0, 1, 3, 4)]
        assert s.get_max_phy_offset() == offsets[-1][0] + offsets[-1][1]
        assert s.put_message(inner(queue_id=0)).queue_offset == 3  # queue 0 held 0, 2 (set aside) and 4
    finally:
        s.shutdown()
    rep = tools.verify_store(dst)
    assert rep.bad_records == 1 and not [p for p in rep.problems if "consume queue" in p], rep.problems


def test_a_record_whose_host_bits_misdescribe_it_is_repaired(pristine, tmp_path):
    """Issue 28, defect 2: a client could make the broker write an IPv4 record with the IPv6 store-host bit.
    Exactly one reading of the host bits makes such a record whole; recovery writes that back."""
    root, offsets = pristine
    off, _ = offsets[1]

    def mutate(f):
        f.seek(off + 36)
        flag = int.from_bytes(f.read(4), "big")
        f.seek(off + 36)
        f.write((flag | 0x20).to_bytes(4, "big"))

    dst = _mutated_copy(pristine, tmp_path, "misflag", mutate)
    s = _reopen(dst)
    try:
        assert s.recovery.repaired_records == 1 and s.recovery.skipped_records == 0
        assert [m.body for m in _read_all(s)] == [b"body-%d" % i for i in range(N)]
        assert decode_record(s.select_one_message_by_offset(off)).sys_flag & 0x20 == 0
    finally:
        s.shutdown()
    assert tools.verify_store(dst).ok


def test_resync_never_takes_back_records_older_than_the_last_good_one(pristine, tmp_path):
    """Bytes left past an earlier cut are records of a log since rewritten: valid-looking, but older than the
    records before them. A scan past a bad record never takes such a record back (it would give two records one
    queue offset); the log ends at the bad record instead."""
    root, offsets = pristine
    off2, size2 = offsets[2]

    def mutate(f):
        f.seek(off2)
        f.write(b"\x00" * size2)  # record 2 gone
        for off, _size in offsets[3:]:  # records 3 and 4: stored "before" record 1
            f.seek(off + 56)
            f.write((1).to_bytes(8, "big"))

    dst = _mutated_copy(pristine, tmp_path, "stale", mutate)
    s = _reopen(dst)
    try:
        assert [m.body for m in _read_all(s)] == [b"body-0", b"body-1"]
        assert s.get_max_phy_offset() == off2
    finally:
        s.shutdown()


def test_a_cut_gives_back_the_bytes_after_it(pristine, tmp_path):
    """What recovery cuts is zeros afterwards (blocks given back), so that no stale record or unit there can
    look valid to a later recovery once new writes end short of it."""
    root, offsets = pristine
    off, size = offsets[-1]

    def mutate(f):
        f.seek(off + 4)
        f.write(b"\x00\x00\x00\x00")  # the last record's magic: a torn tail

    dst = _mutated_copy(pristine, tmp_path, "cut", mutate)
    s = _reopen(dst)
    try:
        assert s.get_max_phy_offset() == off
    finally:
        s.shutdown()
    with open(dst / "commitlog" / "00000000000000000000", "rb") as f:
        f.seek(off)
        assert f.read(size) == b"\x00" * size


def test_verify_takes_a_recreated_topic_as_a_new_queue_generation(tmp_path):
    """A deleted topic that a later send re-creates starts at queue offset 0 again: verify accepts it."""
    root = tmp_path / "recreated"
    s = MessageStore(small_config(root))
    s.start()
    try:
        for _ in range(3):
            s.put_message(inner(queue_id=0))
        assert s.delete_topic("T")
        assert s.put_message(inner(queue_id=0)).queue_offset == 0
        assert s.put_message(inner(queue_id=0)).queue_offset == 1
    finally:
        s.shutdown()
    rep = tools.verify_store(root)
    assert rep.ok, rep.problems


def test_verify_reports_two_records_with_one_queue_offset(pristine, tmp_path):
    """Queue 0 holds records 0, 2 and 4 at queue offsets 0, 1 and 2: record 4 rewritten to offset 1 duplicates
    record 2, and verify names both."""
    root, offsets = pristine
    dst = tmp_path / "dup"
    shutil.copytree(root, dst)
    seg = dst / "commitlog" / "00000000000000000000"
    phy, _size = offsets[4]
    with open(seg, "r+b") as f:
        f.seek(phy + 20)  # TOTALSIZE, MAGIC, BODYCRC, QUEUEID, FLAG: QUEUEOFFSET follows
        f.write((1).to_bytes(8, "big"))
    rep = tools.verify_store(dst, check_crc=False)
    assert any("both hold T/0 queue offset 1" in p for p in rep.problems), rep.problems
