"""Commit log format: record bytes, BLANK end-of-file, segment names and sizes, limits."""

import os
import struct
import zlib

from .conftest import inner

from mq.common.record import BLANK_MAGIC_CODE, decode_record
from mq.store.status import PutMessageStatus


def test_record_bytes_match_the_layout(make_store):
    s = make_store()
    r = s.put_message(inner(topic="TopicA", body=b"hello", queue_id=2, tags="TagA", flag=5, reconsume_times=1))
    assert r.ok and r.wrote_offset == 0 and r.queue_offset == 0
    raw = s.select_one_message_by_offset(0)
    assert len(raw) == r.wrote_bytes == 91 + 5 + 6 + len("TAGS\x01TagA")
    total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts = struct.unpack_from(">iIiiiqqiq", raw)
    assert (total, magic, crc, qid, flag, qoff, phy) == (len(raw), 0xDAA320A7, zlib.crc32(b"hello") & 0x7FFFFFFF,
                                                         2, 5, 0, 0)
    assert raw[48:52] == bytes([10, 0, 0, 9]) and struct.unpack_from(">i", raw, 52)[0] == 4321
    assert raw[64:68] == bytes([127, 0, 0, 1]) and struct.unpack_from(">i", raw, 68)[0] == 10911
    assert struct.unpack_from(">i", raw, 72)[0] == 1
    m = decode_record(raw, check_crc=True)
    assert m.store_timestamp == r.store_timestamp and m.tags == "TagA"
    assert r.msg_ids == ["7F00000100002A9F0000000000000000"]


def test_segments_preallocated_named_and_blank_at_end(make_store, tmp_path):
    s = make_store()
    body = b"x" * 1000
    for i in range(200):  # ~220 KB: 4 segments of 64 KiB
        assert s.put_message(inner(body=body, queue_id=i % 4)).ok
    cl = tmp_path / "store" / "commitlog"
    names = sorted(os.listdir(cl))
    assert names[:2] == ["00000000000000000000", "00000000000000065536"]
    assert all(len(n) == 20 and (cl / n).stat().st_size == 64 * 1024 for n in names)
    # the first segment ends with an 8-byte BLANK record covering the rest
    rec_size = 91 + 1000 + 1 + 0
    n_fit = (64 * 1024 - 8) // rec_size
    blank_pos = n_fit * rec_size
    with open(cl / names[0], "rb") as f:
        f.seek(blank_pos)
        remaining, magic = struct.unpack(">iI", f.read(8))
    assert magic == BLANK_MAGIC_CODE and remaining == 64 * 1024 - blank_pos
    # records never span: the next record starts at the next segment
    assert s.get_commit_log_offset_in_queue("T", n_fit % 4, n_fit // 4) == 65536


def test_batch_is_one_call_consecutive_offsets(make_store):
    s = make_store()
    s.put_message(inner(queue_id=1))
    r = s.put_messages([inner(body=bytes([i]), queue_id=1) for i in range(5)])
    assert r.ok and r.queue_offset == 1 and r.msg_num == 5 and len(r.msg_ids) == 5
    assert s.get_max_offset("T", 1) == 6
    g = s.get_message("g", "T", 1, 1, 32)
    assert [decode_record(b).queue_offset for b in g.buffers] == [1, 2, 3, 4, 5]


def test_limits(make_store):
    s = make_store(max_message_size=1024)
    assert s.put_message(inner(body=b"x" * 1025)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert s.put_message(inner(body=b"x" * 1024)).ok
    assert s.put_message(inner(topic="t" * 128)).status is PutMessageStatus.MESSAGE_ILLEGAL
    big = inner(props={"P": "v" * 40000})
    assert s.put_message(big).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    mixed = [inner(queue_id=0), inner(queue_id=1)]
    assert s.put_messages(mixed).status is PutMessageStatus.MESSAGE_ILLEGAL
    # a batch larger than one segment is refused whole
    s2 = make_store(root=s.root.parent / "s2", max_message_size=60000)
    batch = [inner(body=b"y" * 30000) for _ in range(3)]
    assert s2.put_messages(batch).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert s2.get_max_offset("T", 0) == 0


def test_ipv6_born_host_sets_sysflag(make_store):
    s = make_store()
    r = s.put_message(_v6())
    m = decode_record(s.select_one_message_by_offset(r.wrote_offset))
    assert m.born_host == ("fe80::1", 7) and m.sys_flag & 0x10
    assert s.get_message("g", "T", 0, 0, 1).message_count == 1


def _v6():
    m = inner()
    m.born_host = ("fe80::1", 7)
    return m


def test_transaction_types(make_store):
    s = make_store()
    prepared = s.put_message(inner(sys_flag=0x4))
    assert prepared.ok and prepared.queue_offset == 0
    assert s.get_max_offset("T", 0) == 0  # PREPARED: no consume queue unit
    commit = s.put_message(inner(sys_flag=0x8, prepared_transaction_offset=prepared.wrote_offset))
    assert commit.queue_offset == 0 and s.get_max_offset("T", 0) == 1
    m = decode_record(s.select_one_message_by_offset(commit.wrote_offset))
    assert m.prepared_transaction_offset == prepared.wrote_offset


def test_delay_level_redirects_to_schedule_topic(make_store):
    s = make_store()
    r = s.put_message(inner(topic="Orders", queue_id=3, props={"DELAY": "3"}))
    assert r.ok
    assert s.get_max_offset("Orders", 3) == 0
    assert s.get_max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1
    m = decode_record(s.select_one_message_by_offset(r.wrote_offset))
    assert m.topic == "SCHEDULE_TOPIC_XXXX" and m.queue_id == 2
    assert m.properties["REAL_TOPIC"] == "Orders" and m.properties["REAL_QID"] == "3"
    unit = s.cq_table.find("SCHEDULE_TOPIC_XXXX", 2).get_unit(0)
    assert unit[2] == r.store_timestamp + 10_000  # tags code = deliver time
    r = s.put_message(inner(topic="Orders", props={"DELAY": "99"}))
    assert decode_record(s.select_one_message_by_offset(r.wrote_offset)).queue_id == 17  # clamped to 18
