"""``MessageStore.get_message(..., message_filter=...)``: commit-log-level filtering after the tag filter (the
SQL92 path), on real store files in tmp_path."""

from __future__ import annotations

from mq.common import sysflag as SF
from mq.common.message import MessageExt
from mq.common.record import decode_record, decode_records, encode_record
from mq.common.sql_filter import compile_sql92
from mq.common.tags import java_hash_code
from mq.daemon.broker.property_filter import commit_log_filter, record_properties
from mq.store.status import GetMessageStatus as G

from .conftest import inner


def _fill(s, n=20, body=b"b", topic="T"):
    for i in range(n):
        s.put_message(inner(topic=topic, tags="TagA" if i % 2 else "TagB", body=body + str(i).encode(),
                            props={"i": str(i), "mod3": str(i % 3)}))


def _by_props(pred):
    calls = []

    def f(rec: bytes) -> bool:
        props = decode_record(rec, read_body=False).properties
        calls.append(int(props["i"]))
        return pred(props)
    return f, calls


def test_filter_selects_records_and_keeps_offsets(make_store):
    s = make_store()
    _fill(s)
    f, calls = _by_props(lambda p: p["mod3"] == "0")
    for runs in (False, True):
        calls.clear()
        r = s.get_message("g", "T", 0, 0, 32, None, runs=runs, message_filter=f)
        assert r.status is G.FOUND and r.message_count == 7
        assert [m.properties["i"] for m in decode_records(b"".join(r.buffers))] == [str(i) for i in range(0, 20, 3)]
        assert r.queue_offsets == list(range(0, 20, 3))
        assert r.next_begin_offset == 20
        assert calls == list(range(20))  # every unit's record was offered once
        if runs:  # no two selected records are adjacent: one run each
            assert len(r.buffers) == 7


def test_filter_runs_after_the_tag_filter(make_store):
    s = make_store()
    _fill(s)
    f, calls = _by_props(lambda p: int(p["i"]) > 10)
    r = s.get_message("g", "T", 0, 0, 32, {java_hash_code("TagA")}, runs=True, message_filter=f)
    assert calls == list(range(1, 20, 2))  # only TagA records reach the message filter
    assert r.queue_offsets == [11, 13, 15, 17, 19]
    assert [decode_record(b).tags for b in _split(r.buffers)] == ["TagA"] * 5


def _split(buffers):
    out = []
    for buf in buffers:
        pos = 0
        while pos < len(buf):
            size = int.from_bytes(buf[pos:pos + 4], "big")
            out.append(buf[pos:pos + size])
            pos += size
    return out


def test_nothing_matched_moves_the_offset(make_store):
    s = make_store()
    _fill(s)
    r = s.get_message("g", "T", 0, 0, 32, None, runs=True, message_filter=lambda rec: False)
    assert r.status is G.NO_MATCHED_MESSAGE and r.message_count == 0 and r.next_begin_offset == 20
    assert r.buffers == []
    r = s.get_message("g", "T", 0, 20, 32, None, message_filter=lambda rec: False)
    assert r.status is G.OFFSET_OVERFLOW_ONE  # statuses before the scan are unchanged


def test_max_count_counts_matches_only(make_store):
    s = make_store()
    _fill(s)
    f, _ = _by_props(lambda p: int(p["i"]) % 2 == 0)
    r = s.get_message("g", "T", 0, 0, 3, None, runs=True, message_filter=f)
    assert r.queue_offsets == [0, 2, 4] and r.next_begin_offset == 5


def test_adjacent_matches_share_a_run(make_store):
    s = make_store()
    _fill(s)
    f, _ = _by_props(lambda p: int(p["i"]) in (3, 4, 5, 9))
    r = s.get_message("g", "T", 0, 0, 32, None, runs=True, message_filter=f)
    assert r.queue_offsets == [3, 4, 5, 9] and len(r.buffers) == 2
    assert [m.properties["i"] for m in decode_records(b"".join(r.buffers))] == ["3", "4", "5", "9"]


def test_none_filter_is_the_plain_read(make_store):
    s = make_store()
    _fill(s)
    a = s.get_message("g", "T", 0, 0, 32, None, runs=True)
    b = s.get_message("g", "T", 0, 0, 32, None, runs=True, message_filter=None)
    assert (a.status, a.next_begin_offset, a.queue_offsets, a.buffers) == \
           (b.status, b.next_begin_offset, b.queue_offsets, b.buffers)


def test_sql92_filter_across_segments(make_store):
    """1 KiB bodies over 64 KiB segments: records on both sides of a roll, evaluated by the broker's
    commit_log_filter (properties read without decoding the body)."""
    s = make_store()
    _fill(s, n=150, body=b"x" * 1024)
    assert len(s.commit_log.queue.files) > 1
    flt = commit_log_filter(compile_sql92("i BETWEEN 50 AND 80 AND TAGS IN ('TagA') AND mod3 <> '1'"))
    want = [i for i in range(50, 81) if i % 2 and i % 3 != 1]
    got, off = [], 0
    while True:
        r = s.get_message("g", "T", 0, off, 8, None, runs=True, message_filter=flt)
        if r.status is G.FOUND:
            got += [int(m.properties["i"]) for m in decode_records(b"".join(r.buffers))]
        elif r.status is not G.NO_MATCHED_MESSAGE:
            break
        off = r.next_begin_offset
    assert got == want


def test_record_properties_reads_only_properties(make_store):
    s = make_store()
    s.put_message(inner(body=b"\x01\x02body with separators\x02", props={"k": "v", "n": "1"}, tags="T1"))
    recs = [s.select_one_message_by_offset(0)]
    assert record_properties(recs[0]) == {"k": "v", "n": "1", "TAGS": "T1"}
    for born, stored in ((("2001:db8::1", 9876), ("127.0.0.1", 1)), (("10.0.0.1", 1), ("fe80::1", 2)),
                         (("2001:db8::2", 3), ("2001:db8::3", 4))):
        flags = (SF.BORNHOST_V6 if ":" in born[0] else 0) | (SF.STOREHOST_V6 if ":" in stored[0] else 0)
        rec = encode_record(MessageExt(topic="T", body=b"v6 body \x01k\x02", properties={"k": "w", "z": "1"},
                                       born_host=born, store_host=stored, sys_flag=flags))
        assert decode_record(rec).born_host == born
        assert record_properties(rec) == {"k": "w", "z": "1"}
    assert record_properties(b"\x00" * 10) == {}
    assert record_properties(recs[0][:100]) == {}
