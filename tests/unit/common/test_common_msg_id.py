import re

import pytest

from mq.common.msg_id import (UniqKeyGenerator, create_offset_msg_id, decode_offset_msg_id, uniq_key_ip,
                              uniq_key_timestamp)


def test_offset_msg_id_examples():
    assert create_offset_msg_id(("127.0.0.1", 10911), 0) == "7F00000100002A9F0000000000000000"
    assert create_offset_msg_id(("10.0.0.1", 10911), 4294967296) == "0A00000100002A9F0000000100000000"
    assert decode_offset_msg_id("0A00000100002A9F0000000100000000") == (("10.0.0.1", 10911), 4294967296)


def test_offset_msg_id_ipv6_roundtrip():
    mid = create_offset_msg_id(("fe80::1", 10911), 77)
    assert len(mid) == 56
    assert decode_offset_msg_id(mid) == (("fe80::1", 10911), 77)


def test_offset_msg_id_maps_v4_in_v6():
    assert create_offset_msg_id(("::ffff:10.0.0.1", 1), 5) == create_offset_msg_id(("10.0.0.1", 1), 5)


def test_bad_ids():
    with pytest.raises(ValueError):
        decode_offset_msg_id("XYZ")
    with pytest.raises(ValueError):
        decode_offset_msg_id("00" * 10)


def test_uniq_key_layout():
    g = UniqKeyGenerator("192.168.1.10", pid=12345, salt=0x12345678)
    k1, k2 = g.next(), g.next()
    assert re.fullmatch(r"[0-9A-F]{32}", k1)
    assert k1.startswith("C0A8010A303912345678")
    assert int(k2[-4:], 16) == int(k1[-4:], 16) + 1
    assert uniq_key_ip(k1) == "192.168.1.10"


def test_uniq_key_timestamp_roundtrip():
    g = UniqKeyGenerator("10.0.0.1", pid=1, salt=1)
    now = 1_795_262_375_399
    k = g.next(now_ms=now)
    assert uniq_key_timestamp(k, now_ms=now + 10) == now
