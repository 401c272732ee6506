"""The HA byte stream (mq.daemon.broker.ha.protocol): layouts, incremental decoding, bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.daemon.broker.ha.protocol import (HEADER_SIZE, REPORT_SIZE, OffsetReportDecoder, TransferDecoder,
                                          TransferFrame, encode_offset_report, encode_transfer,
                                          encode_transfer_header)
from mq.errors import RemoteProtocolError

offsets = st.integers(min_value=0, max_value=2**63 - 1)
frames = st.lists(st.tuples(offsets, st.binary(max_size=300)), max_size=12)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({min(p, len(data)) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def test_layouts_are_big_endian_and_sized():
    assert encode_offset_report(0x0102030405060708) == bytes(range(1, 9))
    assert REPORT_SIZE == 8 and HEADER_SIZE == 12
    assert encode_transfer_header(1 << 40, 5) == struct.pack(">qi", 1 << 40, 5)
    assert encode_transfer(7, b"abc") == b"\0" * 7 + b"\x07" + b"\0\0\0\x03abc"
    with pytest.raises(ValueError):
        encode_offset_report(-1)
    with pytest.raises(ValueError):
        encode_transfer_header(0, -1)


def test_report_decoder_keeps_only_the_newest_complete_value():
    d = OffsetReportDecoder()
    stream = encode_offset_report(10) + encode_offset_report(20) + encode_offset_report(30)[:5]
    assert d.feed(stream) == 20
    assert d.pending == 5
    assert d.feed(b"") is None
    assert d.feed(encode_offset_report(30)[5:]) == 30
    assert d.pending == 0
    assert d.feed(encode_offset_report(40)[:7]) is None


def test_report_decoder_rejects_negative_offsets():
    with pytest.raises(RemoteProtocolError):
        OffsetReportDecoder().feed(struct.pack(">q", -5))


def test_transfer_decoder_heartbeats_and_partial_frames():
    d = TransferDecoder()
    stream = encode_transfer_header(100, 0) + encode_transfer(100, b"hello") + encode_transfer(105, b"xy")
    assert d.feed(stream[:11]) == []
    assert d.feed(stream[11:20]) == [TransferFrame(100, b"")]
    assert d.feed(stream[20:]) == [TransferFrame(100, b"hello"), TransferFrame(105, b"xy")]
    assert d.pending == 0
    assert TransferFrame(1, b"").is_heartbeat and not TransferFrame(1, b"a").is_heartbeat


@pytest.mark.parametrize("header", [struct.pack(">qi", -1, 0), struct.pack(">qi", 0, -1),
                                    struct.pack(">qi", 0, 1025)])
def test_transfer_decoder_rejects_bad_headers(header):
    with pytest.raises(RemoteProtocolError):
        TransferDecoder(max_body=1024).feed(header)


@settings(max_examples=150, deadline=None)
@given(frames, st.lists(st.integers(min_value=0, max_value=5000), max_size=10))
def test_transfer_stream_cut_anywhere_decodes_to_the_same_frames(items, points):
    stream = b"".join(encode_transfer(o, b) for o, b in items)
    d = TransferDecoder()
    out = []
    for piece in cut(stream, points):
        out += d.feed(piece)
    assert out == [TransferFrame(o, b) for o, b in items]
    assert d.pending == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(offsets, min_size=1, max_size=20), st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_report_stream_cut_anywhere_ends_on_the_last_report(values, points):
    stream = b"".join(encode_offset_report(v) for v in values)
    d = OffsetReportDecoder()
    seen = [v for piece in cut(stream, points) if (v := d.feed(piece)) is not None]
    assert seen[-1] == values[-1]
    assert all(v in values for v in seen)
    assert d.pending == 0


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_the_remote_protocol_error(data):
    d = TransferDecoder(max_body=64)
    try:
        for f in d.feed(data):
            assert len(f.body) <= 64
    except RemoteProtocolError:
        pass


def test_broker_conf_keys_map_to_the_ha_fields():
    from mq.config import broker_configs_from_mapping

    b, s = broker_configs_from_mapping({"brokerIP2": "10.0.0.2", "haListenPort": "10912", "brokerRole": "SLAVE",
                                        "haMasterAddress": "10.0.0.1:10912", "slaveReadEnable": "true",
                                        "haSendHeartbeatInterval": 1000, "haHousekeepingInterval": 4000,
                                        "haTransferBatchSize": 65536, "haSlaveFallbehindMax": 1024})
    assert b.broker_ip2 == "10.0.0.2"
    assert (s.ha_listen_port, s.ha_master_address, s.slave_read_enable, s.broker_role) == \
        (10912, "10.0.0.1:10912", True, "SLAVE")
    assert (s.ha_send_heartbeat_interval, s.ha_housekeeping_interval, s.ha_transfer_batch_size,
            s.ha_slave_fallbehind_max) == (1000, 4000, 65536, 1024)
