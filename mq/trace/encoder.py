"""RocketMQ 4.9 trace encoding: ``TraceDataEncoder`` (TRACE.md §3 and §8). Pure: no I/O, no pyspark.

A trace message body is a run of text records. Fields are separated by ``\\x01`` and every record,
the last included, ends with ``\\x02``. Values print with Java ``StringBuilder.append`` semantics:
``null`` for a missing string, ``true``/``false``, decimal numbers. Bodies of 4 KiB or more may be
zlib-compressed by the trace producer (message sysflag bit ``0x1``).

Record layouts (field index -> content)::

    +----+----------------+---------------+--------------+----------------------+
    | #  | Pub (14)       | SubBefore (8) | SubAfter (9) | EndTransaction (13)  |
    +----+----------------+---------------+--------------+----------------------+
    |  0 | "Pub"          | "SubBefore"   | "SubAfter"   | "EndTransaction"     |
    |  1 | timeStamp      | timeStamp     | requestId    | timeStamp            |
    |  2 | regionId       | regionId      | msgId        | regionId             |
    |  3 | groupName      | groupName     | costTime     | groupName            |
    |  4 | topic          | requestId     | success      | topic                |
    |  5 | msgId          | msgId         | keys         | msgId                |
    |  6 | tags           | retryTimes    | contextCode  | tags                 |
    |  7 | keys           | keys          | timeStamp    | keys                 |
    |  8 | storeHost      |               | groupName    | storeHost            |
    |  9 | bodyLength     |               |              | msgType ordinal (2)  |
    | 10 | costTime       |               |              | transactionId        |
    | 11 | msgType ord.   |               |              | transactionState     |
    | 12 | offsetMsgId    |               |              | fromTransactionCheck |
    | 13 | success        |               |              |                      |
    +----+----------------+---------------+--------------+----------------------+

Decoding accepts what Java's decoder accepts: Pub with 12 (no success), 13 (no offsetMsgId) or 15+
(clientHost at 14) fields; SubAfter with 6 (no contextCode), 7-8 (no timestamp/group) or 9+ fields;
extra trailing fields of SubBefore and EndTransaction are ignored. Unlike Java's ``String.split``, empty
trailing fields are kept (so an empty ``keys`` does not cause an index error), and a final record
without its ``\\x02`` terminator is malformed: that is how truncated bodies and the 4.9.5+ CLOUD-channel
SubAfter defect (TRACE.md §3.2) show up.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator

from mq.errors import MQError
from mq.trace.context import (
    CONTENT_SPLITOR,
    FIELD_SPLITOR,
    LocalTransactionState,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
)

#: Message sysflag bit meaning "body is zlib-compressed" (MessageSysFlag.COMPRESSED_FLAG).
SYSFLAG_COMPRESSED = 0x1
#: Bodies of at least this many bytes are compressed by the (trace) producer.
COMPRESS_THRESHOLD = 4096
#: Separator of message keys (MessageConst.KEY_SEPARATOR).
KEY_SEPARATOR = " "

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_MSG_TYPES = tuple(MessageType)
_TX_STATES = {s.value: s for s in LocalTransactionState}


class TraceDecodeError(MQError):
    """A trace record or body cannot be decoded. ``reason`` is a short code the analytics job counts by."""

    def __init__(self, reason: str, detail: str, record: str = "") -> None:
        self.reason = reason
        self.record = record[:200]
        super().__init__(f"{reason}: {detail}" + (f" in record {self.record!r}" if record else ""))


# --------------------------------------------------------------------------------------------- encoding


_ENUMS = (MessageType, LocalTransactionState, TraceType)


def _j(value: object) -> str:
    """Java ``StringBuilder.append`` of a value."""
    t = type(value)  # fast paths first: most fields are plain str or int (bool and enums are not exactly these)
    if t is str:
        return value  # type: ignore[return-value]
    if t is int:
        return str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, _ENUMS):
        return str(value.value)
    return str(value)


def encode_context(ctx: TraceContext) -> str:
    """``encoderFromContextBean(ctx).getTransData()``: the records of one context, each ``\\x02``-terminated."""
    s, t = CONTENT_SPLITOR, FIELD_SPLITOR
    tt = ctx.trace_type
    if tt is TraceType.Pub:
        b = ctx.beans[0]
        fields = (
            "Pub", ctx.timestamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
            b.store_host, b.body_length, ctx.cost_time, int(b.msg_type), b.offset_msg_id, ctx.success,
        )  # fmt: skip
        return s.join(map(_j, fields)) + t
    if tt is TraceType.SubBefore:
        head = s.join(map(_j, ("SubBefore", ctx.timestamp, ctx.region_id, ctx.group_name, ctx.request_id)))
        return "".join(f"{head}{s}{_j(b.msg_id)}{s}{_j(b.retry_times)}{s}{_j(b.keys)}{t}" for b in ctx.beans)
    if tt is TraceType.SubAfter:
        return "".join(
            s.join(
                map(
                    _j,
                    ("SubAfter", ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                     ctx.context_code, ctx.timestamp, ctx.group_name),
                )  # fmt: skip
            )
            + t
            for b in ctx.beans
        )
    if tt is TraceType.EndTransaction:
        b = ctx.beans[0]
        state = b.transaction_state.value if b.transaction_state is not None else None
        fields = (
            "EndTransaction", ctx.timestamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags,
            b.keys, b.store_host, int(b.msg_type), b.transaction_id, state, b.from_transaction_check,
        )  # fmt: skip
        return s.join(map(_j, fields)) + t
    raise TypeError(f"not a TraceType: {tt!r}")  # pragma: no cover - enum is closed


def encode_contexts(contexts: Iterable[TraceContext]) -> str:
    """The text of a trace message carrying ``contexts`` (records concatenated in order)."""
    return "".join(encode_context(c) for c in contexts)


def _java_split(text: str, sep: str) -> list[str]:
    """Java ``String.split`` with a one-character literal separator: trailing empty strings are removed."""
    if text == "":
        return [""]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def trans_keys(ctx: TraceContext) -> list[str]:
    """``TraceTransferBean.transKey`` of one context (TRACE.md §3.4), de-duplicated in first-seen order."""
    out: dict[str, None] = {}
    for b in ctx.beans:
        out[_j(b.msg_id)] = None
        if b.keys:
            for k in _java_split(b.keys, KEY_SEPARATOR):
                out[k] = None
    return list(out)


def trace_message_keys(contexts: Iterable[TraceContext]) -> str:
    """The ``KEYS`` property of a trace message: the union of trans keys, space-joined.

    Java 4.9 ``Message.setKeys(Collection)`` appends each key plus a space and then ``trim()`` s the
    result (stripping every char <= U+0020 at both ends). Java iterates a ``HashSet``, so its order is
    arbitrary; ours is first-seen order.
    """
    keys: dict[str, None] = {}
    for ctx in contexts:
        for k in trans_keys(ctx):
            keys[k] = None
    joined = "".join(k + KEY_SEPARATOR for k in keys)
    start, end = 0, len(joined)
    while start < end and joined[start] <= " ":
        start += 1
    while end > start and joined[end - 1] <= " ":
        end -= 1
    return joined[start:end]


# --------------------------------------------------------------------------------------------- decoding


def _int(text: str, record: str, lo: int = _INT_MIN, hi: int = _INT_MAX) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: ASCII digits with an optional sign, range-checked."""
    if _INT_RE.match(text) is None:
        raise TraceDecodeError("bad_number", f"not a number: {text!r}", record)
    value = int(text)
    if not lo <= value <= hi:
        raise TraceDecodeError("bad_number", f"out of range: {text!r}", record)
    return value


def _long(text: str, record: str) -> int:
    return _int(text, record, _LONG_MIN, _LONG_MAX)


def _bool(text: str) -> bool:
    """``Boolean.parseBoolean``: only a case-insensitive ``true`` is true."""
    return text.lower() == "true"


def _opt(text: str) -> str | None:
    """Fields Java may print from a null string (tags, keys, regionId): the text ``null`` means None."""
    return None if text == "null" else text


def _msg_type(text: str, record: str) -> MessageType:
    n = _int(text, record)
    if not 0 <= n < len(_MSG_TYPES):
        raise TraceDecodeError("bad_enum", f"no MessageType ordinal {n}", record)
    return _MSG_TYPES[n]


def _need(line: list[str], n: int, record: str) -> None:
    if len(line) < n:
        raise TraceDecodeError("too_few_fields", f"{line[0]} needs {n} fields, got {len(line)}", record)


def _decode_pub(line: list[str], rec: str) -> TraceContext:
    _need(line, 12, rec)
    n = len(line)
    offset_msg_id, success, client_host = "", True, None
    if n == 13:
        success = _bool(line[12])
    elif n >= 14:
        offset_msg_id, success = line[12], _bool(line[13])
        if n >= 15:
            client_host = line[14]
    bean = TraceBean(
        topic=line[4], msg_id=line[5], tags=_opt(line[6]), keys=_opt(line[7]), store_host=line[8],
        body_length=_int(line[9], rec), msg_type=_msg_type(line[11], rec), offset_msg_id=offset_msg_id,
        client_host=client_host,
    )  # fmt: skip
    return TraceContext(
        TraceType.Pub, timestamp=_long(line[1], rec), region_id=_opt(line[2]), group_name=line[3],
        cost_time=_int(line[10], rec), success=success, beans=(bean,),
    )  # fmt: skip


def _decode_sub_before(line: list[str], rec: str) -> TraceContext:
    _need(line, 8, rec)
    bean = TraceBean(msg_id=line[5], retry_times=_int(line[6], rec), keys=_opt(line[7]))
    return TraceContext(
        TraceType.SubBefore, timestamp=_long(line[1], rec), region_id=_opt(line[2]), group_name=line[3],
        request_id=line[4], beans=(bean,),
    )  # fmt: skip


def _decode_sub_after(line: list[str], rec: str) -> TraceContext:
    _need(line, 6, rec)
    n = len(line)
    context_code = _int(line[6], rec) if n >= 7 else 0
    timestamp, group = (_long(line[7], rec), line[8]) if n >= 9 else (None, "")
    bean = TraceBean(msg_id=line[2], keys=_opt(line[5]))
    return TraceContext(
        TraceType.SubAfter, timestamp=timestamp, region_id="", group_name=group, request_id=line[1],
        cost_time=_int(line[3], rec), success=_bool(line[4]), context_code=context_code, beans=(bean,),
    )  # fmt: skip


def _decode_end_transaction(line: list[str], rec: str) -> TraceContext:
    _need(line, 13, rec)
    state = _TX_STATES.get(line[11])
    if state is None:
        raise TraceDecodeError("bad_enum", f"no LocalTransactionState {line[11]!r}", rec)
    bean = TraceBean(
        topic=line[4], msg_id=line[5], tags=_opt(line[6]), keys=_opt(line[7]), store_host=line[8],
        msg_type=_msg_type(line[9], rec), transaction_id=_opt(line[10]), transaction_state=state,
        from_transaction_check=_bool(line[12]),
    )  # fmt: skip
    return TraceContext(
        TraceType.EndTransaction, timestamp=_long(line[1], rec), region_id=_opt(line[2]),
        group_name=line[3], beans=(bean,),
    )  # fmt: skip


_DECODERS = {
    "Pub": _decode_pub,
    "SubBefore": _decode_sub_before,
    "SubAfter": _decode_sub_after,
    "EndTransaction": _decode_end_transaction,
}


def decode_record(record: str) -> TraceContext:
    """Decode one record (without its ``\\x02``). Raises ``TraceDecodeError`` (reason ``unknown_type``
    for a type Java would silently skip)."""
    line = record.split(CONTENT_SPLITOR)
    decoder = _DECODERS.get(line[0])
    if decoder is None:
        raise TraceDecodeError("unknown_type", f"unknown trace type {line[0][:40]!r}", record)
    return decoder(line, record)


def iter_decode_text(text: str) -> Iterator[TraceContext | TraceDecodeError]:
    """Decode every record of a body's text, yielding a context or the error of each record (lenient)."""
    pieces = text.split(FIELD_SPLITOR)
    last = pieces.pop()  # "" when the body ends with the terminator, else an unterminated record
    for piece in pieces:
        if piece == "":
            continue  # Java decodes an empty piece to an unknown type and skips it
        try:
            yield decode_record(piece)
        except TraceDecodeError as exc:
            yield exc
    if last != "":
        yield TraceDecodeError("unterminated", "record not terminated by \\x02", last)


def decode_text(text: str) -> list[TraceContext]:
    """``decoderFromTraceDataString``: all contexts of a body's text, one bean each; raises on malformed
    records, skips records of unknown type like Java does."""
    out: list[TraceContext] = []
    for item in iter_decode_text(text):
        if isinstance(item, TraceDecodeError):
            if item.reason == "unknown_type":
                continue
            raise item
        out.append(item)
    return out


def looks_compressed(body: bytes) -> bool:
    """True when ``body`` starts with a zlib header (CMF 0x78, FCHECK valid). Trace text never starts with
    ``x`` (a record starts with its type name)."""
    return len(body) >= 2 and body[0] == 0x78 and ((body[0] << 8) | body[1]) % 31 == 0


def inflate_body(body: bytes, compressed: bool | None = None) -> bytes:
    """The raw body text bytes. ``compressed``: True/False from the message sysflag, None to detect."""
    if compressed is None:
        compressed = looks_compressed(body)
    if not compressed:
        return body
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise TraceDecodeError("bad_zlib", f"cannot inflate {len(body)}-byte body: {exc}") from exc


def body_text(body: bytes, compressed: bool | None = None) -> str:
    """Body bytes -> text, inflating if needed. Invalid UTF-8 becomes U+FFFD, as Java's ``new String``."""
    return inflate_body(body, compressed).decode("utf-8", errors="replace")


def decode_body(body: bytes, compressed: bool | None = None) -> list[TraceContext]:
    """Decode a whole trace message body (strict; see ``decode_text``)."""
    return decode_text(body_text(body, compressed))


def iter_decode_body(body: bytes, compressed: bool | None = None) -> Iterator[TraceContext | TraceDecodeError]:
    """Lenient form of ``decode_body``: a body that cannot be inflated yields one ``bad_zlib`` error."""
    try:
        text = body_text(body, compressed)
    except TraceDecodeError as exc:
        yield exc
        return
    yield from iter_decode_text(text)


def encode_body(contexts: Iterable[TraceContext], *, compress_threshold: int | None = COMPRESS_THRESHOLD) -> tuple[bytes, bool]:
    """A trace message body for ``contexts`` as the producer would store it: ``(bytes, compressed)``.

    Bodies of ``compress_threshold`` bytes or more are zlib-compressed (None: never compress).
    """
    raw = encode_contexts(contexts).encode("utf-8")
    if compress_threshold is not None and len(raw) >= compress_threshold:
        return zlib.compress(raw, 5), True
    return raw, False
