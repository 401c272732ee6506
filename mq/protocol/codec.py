"""Frames and header serialization of the RocketMQ remoting protocol. No I/O (PROTOCOL.md §1, §2).

Frame layout (all integers big-endian)::

    +--------+----------------------------+-----------------+---------------+
    | length | serialize type | header len|     header      |     body      |
    | int32  | 1 byte         | 3 bytes   |  H bytes        |  B bytes      |
    +--------+----------------------------+-----------------+---------------+
      length = 4 + H + B  (the bytes after the length field)

JSON header (type 0): an object with ``code``, ``language`` (name), ``version``, ``opaque``, ``flag``,
``remark`` (optional) and ``extFields`` (string -> string).

ROCKETMQ binary header (type 1)::

    code int16 | language int8 | version int16 | opaque int32 | flag int32 |
    remarkLen int32 | remark | extLen int32 | { keyLen int16 | key | valLen int32 | value }*

The decoder is incremental: ``FrameDecoder.feed`` takes chunks of any size and returns whole commands.
It checks every length against ``FrameLimits`` before it waits for or allocates the claimed bytes (the length
from the first 4 bytes, the serialize type and header length from the next 4), so it never buffers more than
one frame under the limit; it raises only ``RemoteProtocolError`` on bad input. When nothing is buffered it
decodes straight from the caller's chunk and keeps a copy of the incomplete tail only.

Where ``_codec.c`` is built (``setup.py``; ``mq.common.native`` decides), the per-frame loop of ``FrameDecoder``,
the ROCKETMQ binary header both ways and the frame layout of ``encode_into`` run in C; the JSON header stays with
orjson, called from there. The Python functions here are their twins (same commands, bytes and errors: a
hypothesis test compares them), used where the C module is not, and for whatever it hands back (a command of
unusual field types or out of range, which the Python code encodes or refuses).

Decoding follows PROTOCOL.md §3.5: JSON ``extFields`` values that are numbers/booleans (C++, ali-ons) become
Java's text, ``null`` values are dropped; a C++ header's trailing newline is accepted. Encoding writes the JSON
keys in fastjson's sorted order, so a response is byte-identical to a Java broker's.
"""

from __future__ import annotations

import struct

import orjson

from mq.common import native
from mq.common.javanum import parse_java_int
from mq.config import FrameLimits
from mq.errors import LocalProtocolError, RemoteProtocolError
from mq.protocol.codes import LanguageCode, SerializeType
from mq.protocol.command import RemotingCommand

LENGTH = struct.Struct(">i")
PREFIX = struct.Struct(">iI")  # length, header word
BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
INT32 = struct.Struct(">i")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")

_LANG_BY_NAME = {m.name: int(m) for m in LanguageCode}
_LANG_NAME = {int(m): m.name for m in LanguageCode}
_SERIALIZE_NAME = {0: "JSON", 1: "ROCKETMQ"}
_MAX_HEADER_WORD_LEN = 0xFFFFFF


# ---------------------------------------------------------------------------------------------
# value normalisation (PROTOCOL.md §3.5)
# ---------------------------------------------------------------------------------------------
def _text(value: object) -> str | None:
    """A JSON extFields value as RocketMQ's string form; None means "absent"."""
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    # Objects or arrays inside extFields are not RocketMQ; keep their JSON text rather than fail.
    return orjson.dumps(value).decode()


def normalize_ext(ext: dict) -> dict[str, str]:
    """extFields as sent by C++ / Node clients (numbers, booleans, nulls) -> Java's string map."""
    for v in ext.values():
        if type(v) is not str:
            break
    else:
        return ext
    out: dict[str, str] = {}
    for k, v in ext.items():
        t = _text(v)
        if t is not None:
            out[str(k)] = t
    return out


# ---------------------------------------------------------------------------------------------
# JSON header
# ---------------------------------------------------------------------------------------------
def encode_json_header(cmd: RemotingCommand) -> bytes:
    ext = cmd.ext_fields
    for v in ext.values():
        if type(v) is not str:
            ext = normalize_ext(ext)
            break
    # Keys in fastjson's sorted order, so our frames are byte-identical to a Java peer's.
    if cmd.remark is None:
        header = {"code": cmd.code, "extFields": ext, "flag": cmd.flag,
                  "language": _LANG_NAME.get(cmd.language, "OTHER"), "opaque": cmd.opaque,
                  "serializeTypeCurrentRPC": "JSON", "version": cmd.version}
    else:
        header = {"code": cmd.code, "extFields": ext, "flag": cmd.flag,
                  "language": _LANG_NAME.get(cmd.language, "OTHER"), "opaque": cmd.opaque,
                  "remark": cmd.remark, "serializeTypeCurrentRPC": "JSON", "version": cmd.version}
    try:
        return orjson.dumps(header)
    except TypeError as exc:
        raise LocalProtocolError(f"cannot encode header: {exc}") from None


def _as_int(obj: dict, key: str, default: int | None = None) -> int:
    v = obj.get(key, default)
    if type(v) is int:
        return v
    if v is None:
        raise RemoteProtocolError(f"JSON header has no {key!r}")
    try:
        if type(v) is str:  # fastjson reads a quoted number with Integer.parseInt
            return parse_java_int(v)
        if type(v) is float and v.is_integer():
            return int(v)
        raise ValueError
    except (ValueError, OverflowError):
        raise RemoteProtocolError(f"JSON header field {key!r} is not an integer: {str(v)[:40]!r}") from None


def decode_json_header(data: bytes | memoryview) -> RemotingCommand:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise RemoteProtocolError(f"header is not valid JSON: {exc}") from None
    if type(obj) is not dict:
        raise RemoteProtocolError("JSON header is not an object")
    get = obj.get
    code = get("code")
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    version = get("version", 0)
    if type(code) is not int or type(opaque) is not int or type(flag) is not int or type(version) is not int:
        code = _as_int(obj, "code")
        opaque = _as_int(obj, "opaque", 0)
        flag = _as_int(obj, "flag", 0)
        version = _as_int(obj, "version", 0)
    if not (-0x80000000 <= opaque <= 0x7FFFFFFF and -0x80000000 <= code <= 0x7FFFFFFF
            and -0x80000000 <= flag <= 0x7FFFFFFF and -0x80000000 <= version <= 0x7FFFFFFF):
        raise RemoteProtocolError("JSON header integer out of int32 range")
    lang = get("language", "JAVA")
    if type(lang) is str:
        language = _LANG_BY_NAME.get(lang, LanguageCode.OTHER)
    elif type(lang) is int:
        language = lang if lang in _LANG_NAME else LanguageCode.OTHER
    else:
        language = LanguageCode.OTHER
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        remark = _text(remark)
    ext = get("extFields")
    if ext is None:
        ext = {}
    elif type(ext) is not dict:
        raise RemoteProtocolError("JSON header extFields is not an object")
    else:
        ext = normalize_ext(ext)
    return RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, language=language,
                           version=version, serialize_type=SerializeType.JSON)


# ---------------------------------------------------------------------------------------------
# ROCKETMQ binary header
# ---------------------------------------------------------------------------------------------
def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    parts = []
    for k, v in cmd.ext_fields.items():
        if v is None:
            continue
        kb = k.encode()
        vb = (v if type(v) is str else (_text(v) or "")).encode()
        if len(kb) > 0x7FFF:
            raise LocalProtocolError(f"extFields key too long for the ROCKETMQ header: {k[:40]!r}...")
        parts.append(INT16.pack(len(kb)))
        parts.append(kb)
        parts.append(INT32.pack(len(vb)))
        parts.append(vb)
    ext = b"".join(parts)
    remark = cmd.remark.encode() if cmd.remark else b""
    if not -0x8000 <= cmd.code <= 0x7FFF or not -0x8000 <= cmd.version <= 0x7FFF:
        raise LocalProtocolError(f"code {cmd.code} / version {cmd.version} do not fit the ROCKETMQ header")
    if not (-0x80000000 <= cmd.opaque <= 0x7FFFFFFF and -0x80000000 <= cmd.flag <= 0x7FFFFFFF):
        raise LocalProtocolError(f"opaque {cmd.opaque} / flag {cmd.flag} do not fit int32")
    lang = cmd.language if 0 <= cmd.language <= 127 else LanguageCode.OTHER
    return b"".join((BIN_FIXED.pack(cmd.code, lang, cmd.version, cmd.opaque, cmd.flag),
                     INT32.pack(len(remark)), remark, INT32.pack(len(ext)), ext))


def decode_rocketmq_header(data: bytes | memoryview) -> RemotingCommand:
    data = bytes(data)
    n = len(data)
    if n < BIN_FIXED.size + 8:
        raise RemoteProtocolError(f"ROCKETMQ header of {n} bytes is shorter than its fixed part")
    code, lang, version, opaque, flag = BIN_FIXED.unpack_from(data, 0)
    pos = BIN_FIXED.size
    (rlen,) = INT32.unpack_from(data, pos)
    pos += 4
    if rlen < 0 or pos + rlen + 4 > n:
        raise RemoteProtocolError(f"ROCKETMQ header remark length {rlen} exceeds the header")
    try:
        remark = data[pos:pos + rlen].decode() if rlen else None
    except UnicodeDecodeError:
        raise RemoteProtocolError("ROCKETMQ header remark is not UTF-8") from None
    pos += rlen
    (elen,) = INT32.unpack_from(data, pos)
    pos += 4
    if elen < 0 or pos + elen != n:
        raise RemoteProtocolError(f"ROCKETMQ header extFields length {elen} does not match the header")
    ext: dict[str, str] = {}
    # Lengths are read unsigned, so every step moves forward; a length that runs past the end shows as
    # pos != n after the loop (slices stop at the end of ``data``).
    u16 = UINT16.unpack_from
    u32 = UINT32.unpack_from
    try:
        while pos < n:
            (klen,) = u16(data, pos)
            pos += 2
            key = data[pos:pos + klen].decode()
            pos += klen
            (vlen,) = u32(data, pos)
            pos += 4
            ext[key] = data[pos:pos + vlen].decode()
            pos += vlen
    except UnicodeDecodeError:
        raise RemoteProtocolError("extFields entry is not UTF-8") from None
    except struct.error:
        raise RemoteProtocolError("truncated extFields entry") from None
    if pos != n:
        raise RemoteProtocolError("extFields entry exceeds the header")
    language = lang if lang in _LANG_NAME else LanguageCode.OTHER
    return RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, language=language,
                           version=version, serialize_type=SerializeType.ROCKETMQ)


# ---------------------------------------------------------------------------------------------
# frames
# ---------------------------------------------------------------------------------------------
def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == SerializeType.ROCKETMQ and _c_rocketmq_header is not None:
        header = _c_rocketmq_header(cmd)
        if header is not None:
            return header
    return py_encode_header(cmd)


def py_encode_header(cmd: RemotingCommand) -> bytes:
    """``encode_header`` in Python alone (the twin of the C one)."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return encode_rocketmq_header(cmd)
    return encode_json_header(cmd)


def encode_prefix(cmd: RemotingCommand, header: bytes | None = None) -> bytes:
    """Length, header word and header (``encode_header``'s, unless given): everything of the frame but the body."""
    if header is None:
        header = encode_header(cmd)
    hlen = len(header)
    if hlen > _MAX_HEADER_WORD_LEN:
        raise LocalProtocolError(f"header of {hlen} bytes does not fit 24 bits")
    blen = len(cmd.body) if cmd.body is not None else 0
    total = 4 + hlen + blen
    if total > 0x7FFFFFFF:
        raise LocalProtocolError(f"frame of {total} bytes is over the int32 length")
    return PREFIX.pack(total, (int(cmd.serialize_type) << 24) | hlen) + header


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame as bytes."""
    if _c_encode_into is not None:
        out = bytearray()
        if _c_encode_into(out, cmd):
            return bytes(out)
    prefix = encode_prefix(cmd)
    if cmd.body:
        return prefix + bytes(cmd.body)
    return prefix


def encode_into(out: bytearray, cmd: RemotingCommand) -> None:
    """Append the frame to ``out`` (used to answer many frames with one write)."""
    if _c_encode_into is not None and out.__class__ is bytearray and _c_encode_into(out, cmd):
        return
    py_encode_into(out, cmd)


def py_encode_into(out: bytearray, cmd: RemotingCommand) -> None:
    """``encode_into`` in Python alone (the twin of the C one)."""
    out += encode_prefix(cmd, py_encode_header(cmd))
    if cmd.body:
        out += cmd.body


def decode_frame(frame: bytes | memoryview, limits: FrameLimits | None = None) -> RemotingCommand:
    """Decode one whole frame (with its length prefix)."""
    dec = FrameDecoder(limits)
    cmds = dec.feed(frame)
    if len(cmds) != 1 or dec.buffered:
        raise RemoteProtocolError(f"expected exactly one frame, got {len(cmds)} and {dec.buffered} stray bytes")
    return cmds[0]


class FrameDecoder:
    """Incremental frame decoder: ``feed`` bytes, get back the whole commands they complete.

    After it raises ``RemoteProtocolError`` the stream is unusable: the caller closes the connection.
    """

    __slots__ = ("_buf", "_limits", "_broken", "_frames")

    def __init__(self, limits: FrameLimits | None = None, *, pure_python: bool = False) -> None:
        self._buf = bytearray()
        self._limits = limits or FrameLimits()
        self._broken = False
        self._frames = _py_decode_frames if pure_python or _c_decode_frames is None else _c_decode_frames

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        if self._broken:
            raise RemoteProtocolError("stream already failed to decode")
        buf = self._buf
        if buf:
            buf += data
            src = buf
        else:
            src = data  # fast path: decode straight from the caller's chunk, keep only its tail
        try:
            out, pos = self._frames(src, 0, self._limits.max_frame, self._limits.max_header)
        except RemoteProtocolError:
            self._broken = True
            raise
        except (struct.error, ValueError, TypeError, OverflowError, UnicodeDecodeError) as exc:
            self._broken = True
            raise RemoteProtocolError(f"malformed frame: {exc}") from None
        n = len(src)
        if src is buf:
            if pos:
                del buf[:pos]
        elif pos < n:
            buf += src[pos:] if pos else src
        return out


def _py_decode_frames(src: bytes | bytearray | memoryview, pos: int, max_frame: int, max_header: int
                      ) -> tuple[list[RemotingCommand], int]:
    """The whole frames of ``src`` from ``pos``, and where the first incomplete one starts (``FrameDecoder.feed``'s
    loop; the twin of the C ``decode_frames``)."""
    out: list[RemotingCommand] = []
    n = len(src)
    mv = memoryview(src)
    try:
        while n - pos >= 4:
            (length,) = LENGTH.unpack_from(mv, pos)
            if length < 4:
                raise RemoteProtocolError(f"frame length {length} is invalid (less than 4)")
            if length > max_frame:
                raise RemoteProtocolError(f"frame length {length} is over the limit of {max_frame} bytes")
            if n - pos < 8:
                break
            # Validate the header word as soon as it arrives, not when the whole frame does.
            (word,) = UINT32.unpack_from(mv, pos + 4)
            stype = word >> 24
            hlen = word & 0xFFFFFF
            if stype > 1:
                raise RemoteProtocolError(f"unknown serialize type {stype}")
            if hlen > length - 4:
                raise RemoteProtocolError(f"header length {hlen} is longer than the frame ({length - 4} bytes)")
            if hlen > max_header:
                raise RemoteProtocolError(f"header length {hlen} is over the limit of {max_header} bytes")
            end = pos + 4 + length
            if end > n:
                break
            hstart = pos + 8
            if stype == 0:
                cmd = decode_json_header(mv[hstart:hstart + hlen])
            else:
                cmd = decode_rocketmq_header(mv[hstart:hstart + hlen])
            if end > hstart + hlen:
                cmd.body = bytes(mv[hstart + hlen:end])
            cmd.wire_size = length + 4
            out.append(cmd)
            pos = end
    finally:
        mv.release()
    return out, pos


_c_setup, _c_setup_json, _c_decode_frames, _c_encode_into, _c_rocketmq_header = native.load(
    "mq.protocol._codec", "setup", "setup_json", "decode_frames", "encode_into", "rocketmq_header")
if _c_setup is not None:
    _c_setup(RemotingCommand, RemoteProtocolError, (SerializeType.JSON, SerializeType.ROCKETMQ),
             frozenset(_LANG_NAME), LanguageCode.OTHER, decode_json_header, encode_json_header)
    _c_setup_json(orjson.loads, _LANG_BY_NAME, _LANG_NAME)
#: True where the C frame codec is used
C_CODEC = _c_decode_frames is not None
