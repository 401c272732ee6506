"""The C frame codec (mq/protocol/_codec.c) gives the same commands, bytes and errors as its Python twins in
mq/protocol/codec.py, and leaves to them every command it does not handle."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mq.config import FrameLimits
from mq.errors import LocalProtocolError, RemoteProtocolError
from mq.protocol import codec
from mq.protocol.codes import LanguageCode, SerializeType
from mq.protocol.command import RemotingCommand

pytestmark = pytest.mark.skipif(not codec.C_CODEC, reason="the C codec is not built (no C compiler at install) "
                                "or MQ_PURE_PYTHON is set")

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT32 = st.integers(-2**31, 2**31 - 1)
INT16 = st.integers(-2**15, 2**15 - 1)
#: text with lone surrogates and one-byte keys (which the C decoder shares) among the rest
text = st.one_of(st.text(max_size=20), st.sampled_from(["a", "b", "m", "\x7f", "é", "\ud800", ""]))
LIMITS = FrameLimits(max_frame=4096, max_header=1024)


def _fields(cmd: RemotingCommand) -> tuple:
    return (cmd.code, type(cmd.code), cmd.language, type(cmd.language), cmd.version, cmd.opaque, cmd.flag,
            cmd.remark, cmd.ext_fields, list(cmd.ext_fields), cmd.body, type(cmd.body), cmd.serialize_type,
            type(cmd.serialize_type), cmd.wire_size)


def _outcome(fn, *args):
    """What ``fn(*args)`` gives: its value or the exception's type and text."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return ("raised", type(exc), str(exc))


def _decode_both(data: bytes, limits: FrameLimits = LIMITS):
    outcomes = []
    for pure in (False, True):
        dec = codec.FrameDecoder(limits, pure_python=pure)
        res = _outcome(dec.feed, data)
        if res[0] == "ok":
            res = ("ok", [_fields(c) for c in res[1]], dec.buffered)
        outcomes.append(res)
    return outcomes


@st.composite
def commands(draw):
    stype = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
    return RemotingCommand(
        draw(INT16), opaque=draw(INT32), flag=draw(INT32), remark=draw(st.none() | text),
        ext_fields=draw(st.dictionaries(text, st.none() | text, max_size=6)),
        body=draw(st.none() | st.binary(max_size=100) | st.binary(max_size=50).map(bytearray)
                  | st.binary(max_size=50).map(memoryview)),
        language=draw(st.sampled_from(list(LanguageCode)) | st.integers(-3, 200)),
        version=draw(INT16), serialize_type=stype)


@st.composite
def odd_commands(draw):
    """Commands the C encoder hands back to Python: fields out of range or of other types."""
    cmd = draw(commands())
    which = draw(st.integers(0, 7))
    if which == 0:
        cmd.code = draw(st.integers(2**15, 2**40) | st.integers(-2**40, -2**15 - 1))
    elif which == 1:
        cmd.opaque = draw(st.integers(2**31, 2**40))
    elif which == 2:
        cmd.ext_fields = {"k": draw(st.integers() | st.booleans() | st.floats(allow_nan=False))}
    elif which == 3:
        cmd.ext_fields = {"x" * draw(st.integers(0x7FFF, 0x8001)): "v"}
    elif which == 4:
        cmd.serialize_type = draw(st.integers(2, 5))
    elif which == 5:
        cmd.remark = draw(st.integers(1, 5))
    elif which == 6:
        cmd.version = "401"
    else:
        cmd.body = draw(st.binary(max_size=20)).decode("latin-1")
    return cmd


def _encode_both(cmd: RemotingCommand):
    outs = []
    for fn in (codec.encode_into, codec.py_encode_into):
        out = bytearray(b"prefix")
        outs.append((_outcome(fn, out, cmd), bytes(out)))
    return outs


@SETTINGS
@given(commands())
@example(RemotingCommand(1, language=127, serialize_type=SerializeType.ROCKETMQ))
@example(RemotingCommand(1, language=128, serialize_type=SerializeType.ROCKETMQ))
@example(RemotingCommand(1, language=-1, remark="", body=b"", serialize_type=SerializeType.ROCKETMQ))
@example(RemotingCommand(-2**15, opaque=-2**31, flag=2**31 - 1, version=2**15 - 1, remark="r\u00e9",
                         ext_fields={"\u00e9": "\U0001d11e", "n": None}, serialize_type=SerializeType.ROCKETMQ))
@example(RemotingCommand(310, ext_fields={"a": "\x00\x1f\"\\/\x7f\u2028\b\t\n\f\r", "\x01": ""},
                         remark="\x00\"", language=LanguageCode.GO))  # every escape orjson writes
@example(RemotingCommand(True, opaque=2**63 - 1, flag=-2**63, language=True))  # a bool is no number; 64 bits
@example(RemotingCommand(1, opaque=2**63, language=2**70))  # past 64 bits; a language no name has
@example(RemotingCommand(1, ext_fields={"k" * 3000: "v" * 5000}, remark="r" * 2000))  # past the stack buffer
def test_encode_into_matches_python(cmd):
    c, py = _encode_both(cmd)
    assert c == py


@SETTINGS
@given(odd_commands())
def test_odd_commands_encode_or_fail_as_python_does(cmd):
    c, py = _encode_both(cmd)
    assert c == py


@SETTINGS
@given(commands())
def test_rocketmq_header_matches_python(cmd):
    cmd.serialize_type = SerializeType.ROCKETMQ
    assert _outcome(codec.encode_header, cmd) == _outcome(codec.encode_rocketmq_header, cmd)


@SETTINGS
@given(st.lists(commands(), min_size=1, max_size=5), st.data())
def test_decode_matches_python_on_any_cuts(cmds, data):
    frames = []
    for cmd in cmds:
        try:
            frames.append(codec.encode(cmd))
        except (LocalProtocolError, UnicodeEncodeError):
            continue
    stream = b"".join(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoders = [codec.FrameDecoder(pure_python=pure) for pure in (False, True)]
    prev = 0
    for cut in cuts + [len(stream)]:
        chunk = stream[prev:cut]
        got = [[_fields(c) for c in d.feed(bytearray(chunk) if cut % 2 else memoryview(chunk))] for d in decoders]
        assert got[0] == got[1]
        assert decoders[0].buffered == decoders[1].buffered
        prev = cut


@SETTINGS
@given(st.binary(max_size=400))
def test_random_bytes_decode_or_fail_as_python_does(data):
    c, py = _decode_both(data)
    assert c == py


def _rocketmq_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (1 << 24) | len(header)) + header + body


@st.composite
def binary_headers(draw):
    """ROCKETMQ headers whose lengths are sometimes wrong: cut entries, remark and ext lengths off by a little,
    bytes that are not UTF-8."""
    fixed = struct.pack(">hbhii", draw(INT16), draw(st.integers(-128, 127)), draw(INT16), draw(INT32), draw(INT32))
    remark = draw(st.binary(max_size=12))
    rlen = len(remark) + draw(st.sampled_from([0, 0, 0, -1, 1, -len(remark) - 1]))
    ext = b""
    for _ in range(draw(st.integers(0, 4))):
        k, v = draw(st.binary(max_size=6)), draw(st.binary(max_size=10))
        klen = len(k) + draw(st.sampled_from([0, 0, 0, 1, 3, 0xFFFF - len(k)]))
        vlen = len(v) + draw(st.sampled_from([0, 0, 0, 1, 5, 2**32 - 1 - len(v)]))
        ext += struct.pack(">H", klen & 0xFFFF) + k + struct.pack(">I", vlen & 0xFFFFFFFF) + v
    ext = ext[:len(ext) - draw(st.integers(0, 3))] if ext else ext
    elen = len(ext) + draw(st.sampled_from([0, 0, 0, -1, 1]))
    return fixed + struct.pack(">i", rlen) + remark + struct.pack(">i", elen) + ext


_FIXED = struct.pack(">hbhii", 310, 0, 401, 7, 0) + struct.pack(">i", 0)


def _ext_header(ext: bytes) -> bytes:
    return _FIXED + struct.pack(">i", len(ext)) + ext


@SETTINGS
@given(binary_headers(), st.binary(max_size=20))
@example(_ext_header(b"\x00"), b"")  # the key length cut: truncated
@example(_ext_header(b"\x00\x01a\x00\x00"), b"")  # the value length cut: truncated
@example(_ext_header(b"\x00\x03ab"), b"")  # the key runs to the end: truncated
@example(_ext_header(b"\x00\x01a\x00\x00\x00\x05ab"), b"")  # the value runs past the end
@example(_ext_header(b"\x00\x01\xff\x00\x00\x00\x00"), b"")  # a key that is not UTF-8
@example(_ext_header(b"\x00\x01a\x00\x00\x00\x01\xc3"), b"")  # a value cut inside a character
@example(struct.pack(">hbhii", 1, 127, 1, 1, 1) + struct.pack(">ii", 0, 0), b"")  # the last known language
@example(struct.pack(">hbhii", 1, -128, 1, 1, 1) + struct.pack(">ii", 1, 0) + b"\xff", b"")  # remark not UTF-8
@example(struct.pack(">hbhii", 1, 12, 1, 1, 1) + struct.pack(">ii", 0, 0), b"")  # language RUST
@example(struct.pack(">hbhii", 1, 13, 1, 1, 1) + struct.pack(">ii", 0, 0), b"")  # unknown: OTHER
def test_binary_headers_decode_or_fail_as_python_does(header, body):
    c, py = _decode_both(_rocketmq_frame(header, body))
    assert c == py


@SETTINGS
@given(st.integers(-2**31, 2**31 - 1), st.integers(0, 2**32 - 1), st.binary(max_size=30))
def test_prefix_checks_as_python(length, word, rest):
    c, py = _decode_both(struct.pack(">iI", length, word) + rest)
    assert c == py


def test_decoded_command_is_a_plain_remoting_command():
    frame = codec.encode(RemotingCommand(310, ext_fields={"a": "g", "b": "T"}, body=b"x" * 10,
                                         serialize_type=SerializeType.ROCKETMQ))
    (cmd,) = codec.FrameDecoder().feed(frame)
    assert type(cmd) is RemotingCommand
    assert cmd.serialize_type is SerializeType.ROCKETMQ
    assert cmd.wire_size == len(frame)
    cmd.remark = "settable"  # the slots the C decoder filled stay ordinary attributes
    assert codec.decode_frame(codec.encode(cmd)).remark == "settable"


def test_json_header_errors_pass_through():
    bad = b"{not json"
    frame = struct.pack(">iI", 4 + len(bad), len(bad)) + bad
    with pytest.raises(RemoteProtocolError, match="not valid JSON"):
        codec.FrameDecoder().feed(frame)


def _json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), len(header)) + header + body


#: text JSON can carry (no lone surrogates), with the one-byte keys
jtext = st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
                  st.sampled_from(["a", "b", "m", "\x7f", "é", ""]))
#: what a JSON header field may hold: the usual and every type a hostile or foreign client may put there
json_value = st.one_of(
    INT32, st.integers(-2**40, 2**40), st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.0, -2.0, 2.0**31, "12", "0x1F", "-7", "JAVA", "CPP", "GO", "RUST", "COBOL", 0, 13, 127]),
    jtext, st.lists(st.integers(-9, 9), max_size=2), st.dictionaries(jtext, st.integers(-9, 9), max_size=2))
FIELDS = ["code", "language", "version", "opaque", "flag", "remark", "extFields", "serializeTypeCurrentRPC"]


@st.composite
def json_headers(draw):
    """JSON headers as Java, C++, Go or a hostile client may write them: each field absent, usual or odd."""
    obj = {}
    for name in FIELDS:
        choice = draw(st.integers(0, 3))
        if choice == 0:
            continue  # absent
        if choice == 1:  # usual
            obj[name] = {"code": draw(INT16), "language": draw(st.sampled_from(["JAVA", "CPP", "GO", "OTHER"])),
                         "version": draw(INT16), "opaque": draw(INT32), "flag": draw(INT32),
                         "remark": draw(st.none() | jtext), "serializeTypeCurrentRPC": "JSON",
                         "extFields": draw(st.dictionaries(jtext, jtext, max_size=5))}[name]
        elif name == "extFields" and choice == 2:  # values of any kind
            obj[name] = draw(st.dictionaries(jtext, json_value, max_size=4))
        else:
            obj[name] = draw(json_value)
    top = draw(st.sampled_from(["object", "object", "object", "array", "number"]))
    return orjson.dumps(obj if top == "object" else [obj] if top == "array" else 5)


@SETTINGS
@given(json_headers(), st.binary(max_size=10))
@example(b'{"code":310,"opaque":1}', b"")  # language, flag, version absent: JAVA and zeros
@example(b'{"code":true,"opaque":1}', b"")  # a boolean is not a number
@example(b'{"code":"310","language":12,"extFields":{"a":1,"b":null}}', b"")
@example(b'{"code":1,"language":99,"extFields":null,"remark":null}', b"")
@example(b'{"code":1,"opaque":2147483648}', b"")  # out of int32
@example(b'{"code":1,"remark":5}', b"")
@example(b'{"code":1,"extFields":[]}', b"")
def test_json_headers_decode_or_fail_as_python_does(header, body):
    c, py = _decode_both(_json_frame(header, body))
    assert c == py
