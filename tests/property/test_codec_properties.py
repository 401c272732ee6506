"""Hypothesis properties of the frame codec (STYLE.md: round trips, cut streams, garbage in)."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.config import FrameLimits
from mq.errors import RemoteProtocolError
from mq.protocol import codec
from mq.protocol.codes import LanguageCode, SerializeType
from mq.protocol.command import RemotingCommand

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT32 = st.integers(-2**31, 2**31 - 1)
INT16 = st.integers(-2**15, 2**15 - 1)
text = st.text(max_size=30)


@st.composite
def commands(draw, serialize_type=None):
    stype = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ])) if serialize_type is None \
        else serialize_type
    small = stype == SerializeType.ROCKETMQ
    remark = draw(st.none() | st.text(min_size=1 if small else 0, max_size=40))
    return RemotingCommand(
        draw(INT16 if small else INT32),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=remark,
        ext_fields=draw(st.dictionaries(text, text, max_size=8)),
        body=draw(st.none() | st.binary(max_size=200)),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(INT16 if small else INT32),
        serialize_type=stype,
    )


@SETTINGS
@given(commands())
def test_round_trip(cmd):
    frame = codec.encode(cmd)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert codec.decode_frame(frame) == cmd


@SETTINGS
@given(commands(SerializeType.JSON))
def test_json_and_rocketmq_carry_the_same_command(cmd):
    binary = RemotingCommand(cmd.code & 0x7FFF, opaque=cmd.opaque, flag=cmd.flag, remark=cmd.remark or None,
                             ext_fields=cmd.ext_fields, body=cmd.body, language=cmd.language,
                             version=cmd.version & 0x7FFF, serialize_type=SerializeType.ROCKETMQ)
    as_json = RemotingCommand(binary.code, opaque=binary.opaque, flag=binary.flag, remark=binary.remark,
                              ext_fields=binary.ext_fields, body=binary.body, language=binary.language,
                              version=binary.version, serialize_type=SerializeType.JSON)
    a = codec.decode_frame(codec.encode(binary))
    b = codec.decode_frame(codec.encode(as_json))
    a.serialize_type = b.serialize_type
    assert a == b


@SETTINGS
@given(st.lists(commands(), min_size=1, max_size=6), st.data())
def test_stream_cut_anywhere_decodes_the_same(cmds, data):
    stream = b"".join(codec.encode(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    dec = codec.FrameDecoder()
    got: list[RemotingCommand] = []
    prev = 0
    for cut in cuts + [len(stream)]:
        chunk = stream[prev:cut]
        got += dec.feed(bytearray(chunk) if cut % 2 else memoryview(chunk))
        prev = cut
    assert got == cmds
    assert dec.buffered == 0


LIMITS = FrameLimits(max_frame=4096, max_header=1024)


def _feed_garbage(chunks):
    dec = codec.FrameDecoder(LIMITS)
    try:
        for chunk in chunks:
            for cmd in dec.feed(chunk):
                assert isinstance(cmd, RemotingCommand)
            assert dec.buffered < 4 + LIMITS.max_frame
    except RemoteProtocolError:
        pass


@SETTINGS
@given(st.lists(st.binary(max_size=300), max_size=6))
def test_random_bytes_only_raise_remote_protocol_error(chunks):
    _feed_garbage(chunks)


@SETTINGS
@given(st.binary(min_size=0, max_size=200), st.sampled_from([0, 1]), st.integers(0, 300))
def test_plausible_prefix_with_random_header(header, stype, extra):
    frame = struct.pack(">iI", 4 + len(header) + extra, (stype << 24) | len(header)) + header + b"\0" * extra
    _feed_garbage([frame])


@SETTINGS
@given(commands(), st.data())
def test_mutated_frames_only_raise_remote_protocol_error(cmd, data):
    frame = bytearray(codec.encode(cmd))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        frame = frame[:data.draw(st.integers(0, len(frame)))]
    _feed_garbage([bytes(frame)])


@SETTINGS
@given(st.integers(LIMITS.max_frame + 1, 2**31 - 1) | st.integers(-2**31, 3))
def test_bad_length_prefix_rejected_at_once(length):
    dec = codec.FrameDecoder(LIMITS)
    try:
        dec.feed(struct.pack(">i", length))
    except RemoteProtocolError:
        assert dec.buffered <= 4
    else:
        raise AssertionError(f"length {length} was accepted")


@SETTINGS
@given(st.integers(5, LIMITS.max_frame), st.integers(0, 0xFFFFFF))  # never a whole frame
def test_header_longer_than_frame_raises(length, hlen):
    dec = codec.FrameDecoder(LIMITS)
    try:
        dec.feed(struct.pack(">iI", length, hlen))
    except RemoteProtocolError:
        assert hlen > length - 4 or hlen > LIMITS.max_header
    else:
        assert hlen <= length - 4 and hlen <= LIMITS.max_header
