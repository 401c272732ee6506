"""Records built field by field from the layout table (MESSAGE.md §1) decode to the same fields."""

import struct
import zlib

import pytest

from mq.common import sysflag as SF
from mq.common.message import Message, MessageExt
from mq.common.record import (BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, decode_batch, decode_record, decode_records,
                              encode_batch, encode_record, iter_batch, record_length)
from mq.errors import RemoteProtocolError


def build_from_table(*, body, topic, props, queue_id=3, flag=7, queue_offset=11, phy=4096, sys_flag=0,
                     born_ts=1_700_000_000_123, born=(b"\x0a\x00\x00\x01", 5555), store_ts=1_700_000_000_456,
                     store=(b"\x7f\x00\x00\x01", 10911), reconsume=2, prepared=99):
    tb, pb = topic.encode(), props.encode()
    fields = [
        struct.pack(">i", 91 + len(body) + len(tb) + len(pb) + (len(born[0]) - 4) + (len(store[0]) - 4)),  # 1
        struct.pack(">I", 0xDAA320A7),  # 2 MAGICCODE
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),  # 3 BODYCRC
        struct.pack(">i", queue_id), struct.pack(">i", flag), struct.pack(">q", queue_offset),
        struct.pack(">q", phy), struct.pack(">i", sys_flag), struct.pack(">q", born_ts),
        born[0] + struct.pack(">i", born[1]), struct.pack(">q", store_ts), store[0] + struct.pack(">i", store[1]),
        struct.pack(">i", reconsume), struct.pack(">q", prepared), struct.pack(">i", len(body)), body,
        struct.pack(">b", len(tb)), tb, struct.pack(">h", len(pb)), pb,
    ]
    return b"".join(fields)


def test_layout_table_decodes_to_the_same_fields():
    props = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC"
    raw = build_from_table(body=b"hello", topic="TopicTest", props=props)
    m = decode_record(raw, check_crc=True)
    assert (m.topic, m.body, m.queue_id, m.flag, m.queue_offset, m.commit_log_offset) == \
        ("TopicTest", b"hello", 3, 7, 11, 4096)
    assert m.born_host == ("10.0.0.1", 5555) and m.store_host == ("127.0.0.1", 10911)
    assert (m.born_timestamp, m.store_timestamp, m.reconsume_times, m.prepared_transaction_offset) == \
        (1_700_000_000_123, 1_700_000_000_456, 2, 99)
    assert m.tags == "TagA" and m.keys == "k1 k2" and m.uniq_key == "ABC"
    assert m.store_size == len(raw) == record_length(5, 9, len(props))
    assert m.msg_id == "7F00000100002A9F0000000000001000"
    assert m.body_crc == zlib.crc32(b"hello") & 0x7FFFFFFF
    # and encoding the decoded message gives the same bytes back
    assert encode_record(m, properties_string=props) == raw


def test_fixed_offsets_v4():
    raw = build_from_table(body=b"", topic="T", props="")
    assert struct.unpack_from(">I", raw, 4)[0] == MESSAGE_MAGIC_CODE
    assert struct.unpack_from(">q", raw, 20)[0] == 11
    assert struct.unpack_from(">q", raw, 28)[0] == 4096
    assert struct.unpack_from(">q", raw, 56)[0] == 1_700_000_000_456
    assert len(raw) == 92


def test_ipv6_hosts_shift_fields():
    raw = build_from_table(body=b"b", topic="T", props="", sys_flag=SF.BORNHOST_V6 | SF.STOREHOST_V6,
                           born=(b"\xfe\x80" + b"\x00" * 13 + b"\x01", 1), store=(b"\x00" * 15 + b"\x02", 2))
    m = decode_record(raw)
    assert m.born_host == ("fe80::1", 1) and m.store_host == ("::2", 2)
    assert len(raw) == 92 + 1 + 24
    assert len(m.msg_id) == 56
    assert encode_record(m) == raw


def test_run_of_records_and_truncation():
    a = build_from_table(body=b"1", topic="A", props="TAGS\x01x", phy=0)
    b = build_from_table(body=b"22", topic="B", props="", phy=len(a))
    msgs = decode_records(a + b)
    assert [m.topic for m in msgs] == ["A", "B"]
    assert [m.topic for m in decode_records(a + b[:-1])] == ["A"]  # Java: failure ends the list
    with pytest.raises(RemoteProtocolError):
        decode_records(a + b[:-1], strict=True)
    bad = bytearray(a)
    bad[4:8] = struct.pack(">I", BLANK_MAGIC_CODE)
    with pytest.raises(RemoteProtocolError):
        decode_record(bytes(bad))
    corrupt = bytearray(a)
    corrupt[-7] ^= 0xFF  # inside the body? no: body is 1 byte at 88
    corrupt = bytearray(a)
    corrupt[88] ^= 0x01
    with pytest.raises(RemoteProtocolError, match="CRC"):
        decode_record(bytes(corrupt), check_crc=True)


def test_decompress_zlib_body():
    body = zlib.compress(b"x" * 5000)
    raw = build_from_table(body=body, topic="T", props="", sys_flag=SF.COMPRESSED | SF.COMPRESSION_ZLIB)
    assert decode_record(raw, decompress=True).body == b"x" * 5000
    assert decode_record(raw).body == body


def test_batch_body_roundtrip_and_layout():
    msgs = [Message("T", b"one", 1, {"UNIQ_KEY": "A", "TAGS": "t"}), Message("T", b"", 2, {})]
    body = encode_batch(msgs)
    total, magic, crc, flag, blen = struct.unpack_from(">iiiii", body, 0)
    assert (magic, crc, flag, blen) == (0, 0, 1, 3)
    assert total == 20 + 3 + 2 + len("UNIQ_KEY\x01A\x02TAGS\x01t")
    assert [(f, b, p) for f, b, p in iter_batch(body)][1] == (2, b"", "")
    out = decode_batch(body, "T")
    assert [(m.flag, m.body, m.properties) for m in out] == [(m.flag, m.body, m.properties) for m in msgs]
    with pytest.raises(RemoteProtocolError):
        list(iter_batch(body[:-1]))


def test_message_ext_offset_msg_id():
    m = MessageExt("T", store_host=("127.0.0.1", 10911), commit_log_offset=0)
    assert m.offset_msg_id == "7F00000100002A9F0000000000000000"


def test_the_sysflag_bits_a_send_keeps():
    """Issue 28, defect 2: the bits that describe a record's layout are the store's, the transaction type comes
    from TRAN_MSG; a send keeps compression and the tag filter type only."""
    from mq.common import sysflag as SF

    assert SF.sent_sys_flag(-1) == SF.COMPRESSED | SF.MULTI_TAGS | SF.COMPRESSION_MASK
    assert SF.sent_sys_flag(SF.STOREHOST_V6 | SF.BORNHOST_V6 | SF.TRANSACTION_PREPARED_TYPE) == 0
    assert SF.store_sys_flag(-1) == SF.PRODUCER_BITS
    assert SF.store_sys_flag(SF.LAYOUT_BITS | SF.TRANSACTION_COMMIT_TYPE) == SF.TRANSACTION_COMMIT_TYPE
