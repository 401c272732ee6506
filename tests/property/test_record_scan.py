"""scan_records: every record of a run that decodes, and each one it cannot decode named with its offsets."""

from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from mq.common import sysflag as SF
from mq.common.message import MessageExt
from mq.common.record import decode_records, encode_record, inflate
from mq.common.record_scan import RecordScan, ask_alone, scan_records, settle

#: what a record of the run is: fine, fine and compressed, or one of the ways a body cannot be inflated
KINDS = ("plain", "zlib", "not_zlib", "truncated_zlib", "lz4", "zstd", "unknown_codec", "bomb")


def record(i: int, kind: str, *, limit: int) -> bytes:
    body, flag = b"body %d" % i, 0
    if kind == "zlib":
        body, flag = zlib.compress(body), SF.COMPRESSED | SF.COMPRESSION_ZLIB
    elif kind == "not_zlib":
        flag = SF.COMPRESSED
    elif kind == "truncated_zlib":
        body, flag = zlib.compress(body * 50)[:-6], SF.COMPRESSED
    elif kind == "lz4":
        flag = SF.COMPRESSED | SF.COMPRESSION_LZ4
    elif kind == "zstd":
        flag = SF.COMPRESSED | SF.COMPRESSION_ZSTD
    elif kind == "unknown_codec":
        flag = SF.COMPRESSED | 0x500
    elif kind == "bomb":
        body, flag = zlib.compress(b"\0" * (limit + 1)), SF.COMPRESSED
    m = MessageExt(topic="ScanT", body=body, queue_id=3, queue_offset=100 + i, commit_log_offset=10_000 + 1_000 * i,
                   sys_flag=flag, born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 10911),
                   properties={"TAGS": "t"})
    return encode_record(m)


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(st.sampled_from(KINDS), max_size=12), tail=st.binary(max_size=40))
def test_scan_names_every_skipped_record_and_keeps_the_others(kinds: list[str], tail: bytes) -> None:
    limit = 4096
    parts = [record(i, k, limit=limit) for i, k in enumerate(kinds)]
    buf = b"".join(parts) + tail
    scan = scan_records(buf, decompress=True, max_inflated=limit)
    good = [i for i, k in enumerate(kinds) if k in ("plain", "zlib")]
    assert [m.body for m in scan.messages] == [b"body %d" % i for i in good]
    content = [s for s in scan.skipped if not s.framing_lost]
    bad = [i for i, k in enumerate(kinds) if k not in ("plain", "zlib")]
    assert [(s.queue_id, s.queue_offset, s.commit_log_offset, s.topic) for s in content] == [
        (3, 100 + i, 10_000 + 1_000 * i, "ScanT") for i in bad]
    assert [s.position for s in content] == [sum(len(p) for p in parts[:i]) for i in bad]
    assert all(s.stored is not None and s.size == len(parts[i]) for s, i in zip(content, bad))
    if tail:  # bytes that are not a record end the run, and are named
        lost = scan.framing_lost
        assert lost is not None and lost.position == len(buf) - len(tail) and lost.size == len(tail)
    else:
        assert scan.framing_lost is None
    # the silent reader steps over the same records
    assert [m.body for m in decode_records(buf, decompress=True, max_inflated=limit)] == [m.body for m in
                                                                                        scan.messages]


def test_each_reason_is_said() -> None:
    reasons = {k: scan_records(record(0, k, limit=4096), decompress=True, max_inflated=4096).skipped[0].reason
               for k in KINDS if k not in ("plain", "zlib")}
    assert "does not inflate" in reasons["not_zlib"]
    assert "truncated" in reasons["truncated_zlib"]
    assert "LZ4" in reasons["lz4"] and "ZSTD" in reasons["zstd"]
    assert "unknown codec 0x500" in reasons["unknown_codec"]
    assert "inflates past 4096 bytes" in reasons["bomb"]


def test_inflate_stops_at_the_limit_without_inflating_the_rest() -> None:
    bomb = zlib.compress(b"\0" * (64 * 1024 * 1024))  # 64 KiB of zlib
    try:
        inflate(bomb, SF.COMPRESSED, limit=1024)
    except ValueError as exc:
        assert "inflates past 1024" in str(exc)
    else:
        raise AssertionError("a bomb was inflated")


def test_without_decompress_compressed_records_are_delivered_as_stored() -> None:
    buf = record(0, "not_zlib", limit=64) + record(1, "plain", limit=64)
    scan = scan_records(buf)
    assert [m.queue_offset for m in scan.messages] == [100, 101] and not scan.skipped


def _scan(n_good: int, broken: bool) -> RecordScan:
    parts = [record(i, "plain", limit=64) for i in range(n_good)]
    if broken:
        parts.append(b"\x00\x00\x01\x00garbage")
    return scan_records(b"".join(parts))


def test_settle_reads_a_broken_record_again_at_the_start_of_the_next_answer() -> None:
    scan = _scan(3, broken=True)  # records 100..102 decode, then the framing breaks
    assert not ask_alone(scan, 32)
    nxt, skipped = settle(scan, 100, 110)
    assert nxt == 103 and skipped == []  # nothing stepped over yet: 103 starts the next answer


def test_settle_steps_over_a_record_that_does_not_decode_alone() -> None:
    scan = _scan(0, broken=True)
    assert ask_alone(scan, 32) and not ask_alone(scan, 1)
    nxt, skipped = settle(scan, 103, 104)  # the answer to a pull of 103 alone
    assert nxt == 104 and [s.queue_offset for s in skipped] == [103] and skipped[0].framing_lost


def test_settle_leaves_a_clean_answer_alone() -> None:
    assert settle(_scan(2, broken=False), 100, 102) == (102, [])
