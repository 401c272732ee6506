"""Message record v1 (MESSAGE.md §1, STORE.md §3.2) and the batch request body (MESSAGE.md §7).

One record, big-endian, offsets for IPv4 hosts (each IPv6 host adds 12 bytes and shifts later fields)::

    +--------+------+------------------------------+--------------------------------------------+
    | offset | size | field                        | notes                                      |
    +--------+------+------------------------------+--------------------------------------------+
    |      0 |    4 | TOTALSIZE                    | whole record incl. this field              |
    |      4 |    4 | MAGICCODE                    | 0xDAA320A7                                 |
    |      8 |    4 | BODYCRC                      | crc32(body) & 0x7FFFFFFF                   |
    |     12 |    4 | QUEUEID                      |                                            |
    |     16 |    4 | FLAG                         | producer's user flag                       |
    |     20 |    8 | QUEUEOFFSET                  | consume-queue index                        |
    |     28 |    8 | PHYSICALOFFSET               | commit-log offset of this record           |
    |     36 |    4 | SYSFLAG                      | mq.common.sysflag                          |
    |     40 |    8 | BORNTIMESTAMP                | ms                                         |
    |     48 |  8/20| BORNHOST                     | ip(4|16) + int32 port                      |
    |     56 |    8 | STORETIMESTAMP               | ms                                         |
    |     64 |  8/20| STOREHOST                    | ip(4|16) + int32 port                      |
    |     72 |    4 | RECONSUMETIMES               |                                            |
    |     76 |    8 | PREPAREDTRANSACTIONOFFSET    |                                            |
    |     84 |    4 | BODYLENGTH (n)               |                                            |
    |     88 |    n | BODY                         |                                            |
    |   88+n |    1 | TOPICLENGTH (t, signed)      |                                            |
    |   89+n |    t | TOPIC (UTF-8)                |                                            |
    | 89+n+t |    2 | PROPERTIESLENGTH (p, signed) |                                            |
    | 91+n+t |    p | PROPERTIES (UTF-8)           | name\\x01value\\x02...                     |
    +--------+------+------------------------------+--------------------------------------------+

Batch request body entry (one per message, concatenated, no count)::

    +------+-----------------------------+
    | size | field                       |
    +------+-----------------------------+
    |    4 | TOTALSIZE = 20 + n + 2 + p  |
    |    4 | MAGICCODE (0, ignored)      |
    |    4 | BODYCRC (0, ignored)        |
    |    4 | FLAG                        |
    |    4 | BODYLENGTH (n)              |
    |    n | BODY                        |
    |    2 | PROPERTIESLENGTH (p)        |
    |    p | PROPERTIES                  |
    +------+-----------------------------+
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable, Iterator

try:  # zlib-ng's CRC-32 (PCLMUL/AVX where the CPU has them): the same values, 1 KiB in ~40 ns instead of ~270
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - a platform without zlib-ng wheels
    from zlib import crc32

from mq.common import sysflag as SF
from mq.common.hosts import pack_host, unpack_host
from mq.common.message import Message, MessageExt
from mq.common.msg_id import create_offset_msg_id_raw
from mq.common.properties import decode_properties, encode_properties
from mq.errors import RecordContentError, RemoteProtocolError

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194
#: Fixed part of a record with two IPv4 hosts, up to and including BODYLENGTH.
RECORD_HEADER_V4_FORMAT = ">iIiiiqqiq8sq8siqi"
RECORD_HEADER_V4 = struct.Struct(RECORD_HEADER_V4_FORMAT)
RECORD_HEADER_V4_SIZE = RECORD_HEADER_V4.size  # 88
#: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP
RECORD_PREFIX_FORMAT = ">iIiiiqqiq"
RECORD_PREFIX = struct.Struct(RECORD_PREFIX_FORMAT)  # 48 bytes
BLANK_FORMAT = ">iI"
BLANK = struct.Struct(BLANK_FORMAT)
BATCH_ENTRY_HEADER_FORMAT = ">iiiii"
BATCH_ENTRY_HEADER = struct.Struct(BATCH_ENTRY_HEADER_FORMAT)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_TAIL = struct.Struct(">iqi")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
_V6_HOSTS = SF.BORNHOST_V6 | SF.STOREHOST_V6


#: Largest body a consumer inflates from a compressed record (a zlib bomb of 4 MiB would inflate to 4 GiB).
#: A producer checks maxMessageSize (4 MiB by default) before it compresses, so real bodies stay far below.
MAX_INFLATED_BODY = 64 * 1024 * 1024
_CODEC_NAMES = {SF.COMPRESSION_LZ4: "LZ4", SF.COMPRESSION_ZSTD: "ZSTD"}


def inflate(body: bytes, sys_flag: int, limit: int = MAX_INFLATED_BODY) -> bytes:
    """The body of a record flagged compressed (sysFlag bit 0x1), inflated; ValueError saying why it cannot
    be: not a zlib stream, more than ``limit`` bytes once inflated, or a codec (LZ4, ZSTD) this client lacks."""
    codec = sys_flag & SF.COMPRESSION_MASK
    if codec not in (0, SF.COMPRESSION_ZLIB):
        name = _CODEC_NAMES.get(codec, f"unknown codec 0x{codec:03X}")
        raise ValueError(f"body is compressed with {name}; this client inflates zlib only")
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"body is flagged zlib-compressed but does not inflate: {exc}") from None
    if len(out) > limit:
        raise ValueError(f"body inflates past {limit} bytes")
    if not inflater.eof:
        raise ValueError(f"body is flagged zlib-compressed but its {len(body)}-byte zlib stream is truncated")
    return out


def body_crc(body: bytes | memoryview) -> int:
    """RocketMQ ``UtilAll.crc32``: zlib CRC32 with the top bit cleared."""
    return crc32(body) & 0x7FFFFFFF


def record_length(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0) -> int:
    """``calMsgLength``: 91 + n + t + p, +12 per IPv6 host."""
    extra = (12 if sys_flag & SF.BORNHOST_V6 else 0) + (12 if sys_flag & SF.STOREHOST_V6 else 0)
    return 91 + body_len + topic_len + props_len + extra


def encode_record(msg: MessageExt, *, properties_string: str | None = None) -> bytes:
    """Encode ``msg`` as one v1 record (all fields taken from ``msg``; CRC computed from the body).

    The IPv6 sysflag bits are set from the hosts' address families."""
    body = msg.body or b""
    topic_b = msg.topic.encode("utf-8")
    props = properties_string if properties_string is not None else encode_properties(msg.properties)
    props_b = props.encode("utf-8")
    born = pack_host(*msg.born_host)
    store = pack_host(*msg.store_host)
    sys_flag = msg.sys_flag & ~(SF.BORNHOST_V6 | SF.STOREHOST_V6)
    if len(born) == 20:
        sys_flag |= SF.BORNHOST_V6
    if len(store) == 20:
        sys_flag |= SF.STOREHOST_V6
    if len(topic_b) > 127:
        raise ValueError(f"topic is {len(topic_b)} bytes; a record holds at most 127")
    if len(props_b) > 32767:
        raise ValueError(f"properties are {len(props_b)} bytes; a record holds at most 32767")
    total = record_length(len(body), len(topic_b), len(props_b), sys_flag)
    return b"".join((
        RECORD_PREFIX.pack(total, MESSAGE_MAGIC_CODE, body_crc(body), msg.queue_id, msg.flag, msg.queue_offset,
                           msg.commit_log_offset, sys_flag, msg.born_timestamp),
        born, _I64.pack(msg.store_timestamp), store,
        _I32.pack(msg.reconsume_times), _I64.pack(msg.prepared_transaction_offset), _I32.pack(len(body)),
        body, bytes((len(topic_b),)), topic_b, _I16.pack(len(props_b)), props_b,
    ))


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, *, read_body: bool = True,
                  decompress: bool = False, check_crc: bool = False,
                  max_inflated: int = MAX_INFLATED_BODY) -> MessageExt:
    """Decode the record starting at ``buf[pos]``; raises RemoteProtocolError if it is malformed.

    A record whose framing holds but whose topic is not UTF-8, or (``decompress``) whose body flagged
    compressed cannot be inflated (``inflate``), raises RecordContentError: its ``size`` lets a reader step
    over it, its ``stored`` is the record as stored."""
    mv = buf if buf.__class__ is memoryview else memoryview(buf)
    try:
        if len(mv) - pos >= RECORD_HEADER_V4_SIZE:  # one unpack for the whole fixed part, read as IPv4 hosts
            (total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_raw, store_ts, store_raw,
             reconsume, prepared, body_len) = RECORD_HEADER_V4.unpack_from(mv, pos)
        else:  # too short to be a record: the checks below say why
            (total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts) = RECORD_PREFIX.unpack_from(
                mv, pos)
        if magic != MESSAGE_MAGIC_CODE:
            raise RemoteProtocolError(f"bad record magic 0x{magic:08X} at {pos}")
        if total < 91 or pos + total > len(mv):
            raise RemoteProtocolError(f"bad record size {total} at {pos}")
        if not sys_flag & _V6_HOSTS:  # both hosts IPv4 (the usual case): the unpack above holds
            p = pos + 88
        else:  # an IPv6 host shifts the later fields: read them again from their real positions
            p = pos + 48
            hl = 20 if sys_flag & SF.BORNHOST_V6 else 8
            born_raw = bytes(mv[p:p + hl])
            p += hl
            (store_ts,) = _I64.unpack_from(mv, p)
            p += 8
            hl = 20 if sys_flag & SF.STOREHOST_V6 else 8
            store_raw = bytes(mv[p:p + hl])
            p += hl
            reconsume, prepared, body_len = _TAIL.unpack_from(mv, p)
            p += 16
        if body_len < 0 or p + body_len > pos + total:
            raise RemoteProtocolError(f"bad body length {body_len} at {pos}")
        body = bytes(mv[p:p + body_len]) if read_body else b""
        if check_crc and body_crc(mv[p:p + body_len]) != crc:
            raise RemoteProtocolError(f"body CRC mismatch at {pos}")
        p += body_len
        topic_len = mv[p]
        if topic_len > 127:
            raise RemoteProtocolError(f"bad topic length at {pos}")
        topic_raw = mv[p + 1:p + 1 + topic_len]
        p += 1 + topic_len
        (props_len,) = _I16.unpack_from(mv, p)
        p += 2
        if props_len < 0 or p + props_len != pos + total:
            raise RemoteProtocolError(f"record length mismatch at {pos}")
        props = decode_properties(str(mv[p:p + props_len], "utf-8", "replace"))
        born_host, store_host = unpack_host(born_raw), unpack_host(store_raw)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, RemoteProtocolError):
            raise
        raise RemoteProtocolError(f"truncated or malformed record at {pos}: {exc}") from None
    # The framing holds from here on: a failure is the content's, and the next record starts at pos + total.
    try:
        topic, bad_topic = str(topic_raw, "utf-8"), None
    except UnicodeDecodeError as exc:
        topic, bad_topic = str(topic_raw, "utf-8", "replace"), exc
    msg = MessageExt(
        topic=topic, body=body, flag=flag, properties=props, queue_id=queue_id, store_size=total,
        queue_offset=queue_offset, sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host,
        store_timestamp=store_ts, store_host=store_host, msg_id=create_offset_msg_id_raw(store_raw, phy),
        commit_log_offset=phy, body_crc=crc, reconsume_times=reconsume, prepared_transaction_offset=prepared,
    )
    if bad_topic is not None:
        raise RecordContentError(f"topic is not UTF-8 ({bad_topic})", size=total, stored=msg)
    if decompress and read_body and sys_flag & SF.COMPRESSED:
        try:
            msg.body = inflate(body, sys_flag, max_inflated)
        except ValueError as exc:
            raise RecordContentError(str(exc), size=total, stored=msg) from None
    return msg


def iter_records(buf: bytes | bytearray | memoryview, *, strict: bool = False, decompress: bool = False,
                 max_inflated: int = MAX_INFLATED_BODY) -> Iterator[MessageExt]:
    """Decode a run of concatenated records (a PULL / QUERY body).

    Unless ``strict`` (which raises), a record whose content cannot be decoded (RecordContentError) is stepped
    over and a record whose framing is broken ends the run, both silently: readers that must say what they
    skipped use ``mq.common.record_scan.scan_records``."""
    mv = memoryview(buf)
    pos, end = 0, len(mv)
    while pos < end:
        try:
            msg = decode_record(mv, pos, decompress=decompress, max_inflated=max_inflated)
        except RecordContentError as exc:
            if strict:
                raise
            pos += exc.size
            continue
        except RemoteProtocolError:
            if strict:
                raise
            return
        yield msg
        pos += msg.store_size


def decode_records(buf: bytes | bytearray | memoryview, *, strict: bool = False, decompress: bool = False,
                   max_inflated: int = MAX_INFLATED_BODY) -> list[MessageExt]:
    return list(iter_records(buf, strict=strict, decompress=decompress, max_inflated=max_inflated))


# -- batch request body -----------------------------------------------------------------------------------

def encode_batch(messages: Iterable[Message]) -> bytes:
    """Java ``MessageDecoder.encodeMessages``: one entry per message, magic and CRC written as 0."""
    parts: list[bytes] = []
    for m in messages:
        body = m.body or b""
        props_b = encode_properties(m.properties).encode("utf-8")
        total = 20 + len(body) + 2 + len(props_b)
        parts.append(BATCH_ENTRY_HEADER.pack(total, 0, 0, m.flag, len(body)))
        parts.append(body)
        parts.append(_I16.pack(len(props_b)))
        parts.append(props_b)
    return b"".join(parts)


def iter_batch(body: bytes | memoryview) -> Iterator[tuple[int, bytes, str]]:
    """Yield ``(flag, body, properties_string)`` for each entry; malformed input raises RemoteProtocolError."""
    mv = memoryview(body)
    pos, end = 0, len(mv)
    while pos < end:
        if pos + 22 > end:
            raise RemoteProtocolError(f"truncated batch entry at {pos}")
        total, _magic, _crc, flag, body_len = BATCH_ENTRY_HEADER.unpack_from(mv, pos)
        p = pos + 20
        if body_len < 0 or p + body_len + 2 > end:
            raise RemoteProtocolError(f"bad batch body length {body_len} at {pos}")
        b = bytes(mv[p:p + body_len])
        p += body_len
        (props_len,) = _I16.unpack_from(mv, p)
        p += 2
        if props_len < 0 or p + props_len > end:
            raise RemoteProtocolError(f"bad batch properties length {props_len} at {pos}")
        props = bytes(mv[p:p + props_len]).decode("utf-8", "replace")
        p += props_len
        if total != p - pos:
            raise RemoteProtocolError(f"batch entry size {total} != {p - pos} at {pos}")
        yield flag, b, props
        pos = p


def decode_batch(body: bytes | memoryview, topic: str = "") -> list[Message]:
    """Decode a batch body into Messages (properties parsed)."""
    return [Message(topic=topic, body=b, flag=f, properties=decode_properties(p)) for f, b, p in iter_batch(body)]
