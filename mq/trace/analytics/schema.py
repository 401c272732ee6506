"""The flat record schema the trace analytics run on, and the bodies -> rows seam.

One row per decoded trace record (one bean), with the provenance of the trace message that carried it.
Fields a record type does not carry are NULL (a SubBefore has no topic; only Pub and EndTransaction do).

    +-------------------+---------+-----------------------------------------------------------------+
    | column            | type    | filled from                                                     |
    +-------------------+---------+-----------------------------------------------------------------+
    | trace_type        | string  | Pub / SubBefore / SubAfter / EndTransaction (NULL if malformed) |
    | timestamp         | long    | record timeStamp, ms (NULL for a pre-4.9 SubAfter)              |
    | region_id         | string  | regionId ("null" text -> NULL)                                  |
    | region_name       | string  | never encoded, always NULL from the wire                        |
    | group             | string  | producer group (Pub, EndTransaction) / consumer group (Sub*)    |
    | topic             | string  | Pub, EndTransaction                                             |
    | msg_id            | string  | unique (client) msg id                                          |
    | tags, keys        | string  | "null" text -> NULL                                             |
    | store_host        | string  | broker ip:port (Pub, EndTransaction)                            |
    | client_host       | string  | Pub field 14 when present, else the trace message's born host   |
    | body_length       | int     | Pub                                                             |
    | cost_time         | int     | Pub (send), SubAfter (consume, per message)                     |
    | msg_type          | int     | MessageType ordinal (Pub, EndTransaction)                       |
    | offset_msg_id     | string  | Pub                                                             |
    | success           | boolean | Pub, SubAfter                                                   |
    | retry_times       | int     | SubBefore (reconsumeTimes)                                      |
    | request_id        | string  | SubBefore, SubAfter (pairs them)                                |
    | context_code      | int     | SubAfter (ConsumeReturnType ordinal)                            |
    | store_time        | long    | Pub: estimated timeStamp + costTime / 2, as the Java hook does   |
    | transaction_id    | string  | EndTransaction                                                  |
    | transaction_state | string  | EndTransaction                                                  |
    | from_check        | boolean | EndTransaction                                                  |
    | broker            | string  | provenance: broker that stored the trace message                |
    | queue_id          | int     | provenance: trace topic queue                                   |
    | queue_offset      | long    | provenance: offset of the trace message in that queue           |
    | trace_store_time  | long    | provenance: store timestamp of the trace message, ms            |
    | error             | string  | TraceDecodeError.reason for a malformed record, else NULL       |
    +-------------------+---------+-----------------------------------------------------------------+

This module does not import pyspark at import time: ``rows_from_bodies`` is what every reader (the JSONL
reader of ``job.py`` now, the broker PULL reader per Spark task later) feeds to Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from mq.trace.context import TraceContext, TraceType
from mq.trace.encoder import TraceDecodeError, body_text, decode_record, iter_decode_body

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.types import StructType

#: (column, Spark SQL type name) in row order.
FIELDS: tuple[tuple[str, str], ...] = (
    ("trace_type", "string"),
    ("timestamp", "long"),
    ("region_id", "string"),
    ("region_name", "string"),
    ("group", "string"),
    ("topic", "string"),
    ("msg_id", "string"),
    ("tags", "string"),
    ("keys", "string"),
    ("store_host", "string"),
    ("client_host", "string"),
    ("body_length", "int"),
    ("cost_time", "int"),
    ("msg_type", "int"),
    ("offset_msg_id", "string"),
    ("success", "boolean"),
    ("retry_times", "int"),
    ("request_id", "string"),
    ("context_code", "int"),
    ("store_time", "long"),
    ("transaction_id", "string"),
    ("transaction_state", "string"),
    ("from_check", "boolean"),
    ("broker", "string"),
    ("queue_id", "int"),
    ("queue_offset", "long"),
    ("trace_store_time", "long"),
    ("error", "string"),
)
COLUMNS: tuple[str, ...] = tuple(name for name, _ in FIELDS)
#: Partition columns of the Parquet archive (UTC date "yyyy-MM-dd" and hour 0-23 of the event time).
PARTITION_COLUMNS = ("date", "hour")


class TraceBody(NamedTuple):
    """One trace message as a reader delivers it. ``compressed`` is the sysflag bit, or None to detect."""

    broker: str | None
    queue_id: int | None
    queue_offset: int | None
    store_time: int | None
    body: bytes
    compressed: bool | None = None
    born_host: str | None = None
    #: KEYS property of the trace message (its trans keys); readers ignore it, senders set it.
    keys: str | None = None


def spark_schema() -> "StructType":
    """The Spark ``StructType`` of ``FIELDS`` (imports pyspark)."""
    from pyspark.sql.types import (
        BooleanType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    types = {"string": StringType(), "long": LongType(), "int": IntegerType(), "boolean": BooleanType()}
    return StructType([StructField(name, types[t], True) for name, t in FIELDS])


def context_to_row(
    ctx: TraceContext,
    broker: str | None = None,
    queue_id: int | None = None,
    queue_offset: int | None = None,
    trace_store_time: int | None = None,
    born_host: str | None = None,
) -> tuple[Any, ...]:
    """A decoded context (one bean) -> a row tuple in ``COLUMNS`` order."""
    b = ctx.beans[0]
    tt = ctx.trace_type
    is_pub = tt is TraceType.Pub
    is_tx = tt is TraceType.EndTransaction
    has_topic = is_pub or is_tx
    is_sub = not has_topic
    after = tt is TraceType.SubAfter
    ts = ctx.timestamp
    return (
        tt.value,
        ts,
        ctx.region_id if ctx.region_id != "" or not after else None,
        ctx.region_name or None,
        ctx.group_name if ctx.group_name != "" or not after else None,
        b.topic if has_topic else None,
        b.msg_id,
        b.tags if has_topic else None,
        b.keys,
        b.store_host if has_topic else None,
        b.client_host if b.client_host is not None else born_host,
        b.body_length if is_pub else None,
        ctx.cost_time if (is_pub or after) else None,
        int(b.msg_type) if has_topic else None,
        b.offset_msg_id if is_pub else None,
        ctx.success if (is_pub or after) else None,
        b.retry_times if tt is TraceType.SubBefore else None,
        ctx.request_id if is_sub else None,
        ctx.context_code if after else None,
        (ts + ctx.cost_time // 2 if ts is not None else None) if is_pub else None,
        b.transaction_id if is_tx else None,
        b.transaction_state.value if is_tx and b.transaction_state is not None else None,
        b.from_transaction_check if is_tx else None,
        broker,
        queue_id,
        queue_offset,
        trace_store_time,
        None,
    )


_N_ROW_FIELDS = len(FIELDS)


def error_row(
    reason: str,
    broker: str | None = None,
    queue_id: int | None = None,
    queue_offset: int | None = None,
    trace_store_time: int | None = None,
) -> tuple[Any, ...]:
    """A row standing for one malformed record: everything NULL but provenance and ``error``."""
    return (None,) * (_N_ROW_FIELDS - 5) + (broker, queue_id, queue_offset, trace_store_time, reason)


def _num(text: str, max_len: int) -> int:
    """Fast ``parseInt``/``parseLong`` of plain ASCII digits; ValueError sends the record to the slow path."""
    if len(text) > max_len or not text.isascii() or not text.isdigit():
        raise ValueError(text)
    return int(text)


def fast_record_row(rec: str, broker: Any, queue_id: Any, queue_offset: Any, store_time: Any,
                    born_host: Any) -> tuple[Any, ...]:
    """``context_to_row(decode_record(rec))`` without building objects, for the shapes 4.9 clients write
    (Pub 14 fields, SubBefore 8, SubAfter 9, non-negative numbers). Raises ValueError for anything else;
    the caller then takes the exact slow path, so the two always agree."""
    f = rec.split("\x01")
    t = f[0]
    n = len(f)
    if t == "SubBefore" and n == 8:
        keys = f[7]
        return ("SubBefore", _num(f[1], 18), None if f[2] == "null" else f[2], None, f[3], None, f[5], None,
                None if keys == "null" else keys, None, born_host, None, None, None, None, None, _num(f[6], 9),
                f[4], None, None, None, None, None, broker, queue_id, queue_offset, store_time, None)
    if t == "SubAfter" and n == 9:
        keys = f[5]
        return ("SubAfter", _num(f[7], 18), None, None, f[8] or None, None, f[2], None,
                None if keys == "null" else keys, None, born_host, None, _num(f[3], 9), None, None,
                f[4].lower() == "true", None, f[1], _num(f[6], 9), None, None, None, None,
                broker, queue_id, queue_offset, store_time, None)
    if t == "Pub" and n == 14:
        mt = _num(f[11], 1)
        if mt > 3:
            raise ValueError(f[11])
        ts, cost = _num(f[1], 18), _num(f[10], 9)
        tags, keys = f[6], f[7]
        return ("Pub", ts, None if f[2] == "null" else f[2], None, f[3], f[4], f[5],
                None if tags == "null" else tags, None if keys == "null" else keys, f[8], born_host,
                _num(f[9], 9), cost, mt, f[12], f[13].lower() == "true", None, None, None, ts + cost // 2,
                None, None, None, broker, queue_id, queue_offset, store_time, None)
    raise ValueError(t)


def _slow_record_row(rec: str, broker: Any, queue_id: Any, queue_offset: Any, store_time: Any,
                     born_host: Any) -> tuple[Any, ...] | None:
    try:
        ctx = decode_record(rec)
    except TraceDecodeError as exc:
        return error_row(exc.reason, broker, queue_id, queue_offset, store_time)
    return context_to_row(ctx, broker, queue_id, queue_offset, store_time, born_host)


def rows_from_bodies(bodies: Iterable[TraceBody | tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """The reader seam: trace message bodies with provenance -> rows, malformed records as error rows.

    Each item is ``(broker, queue_id, queue_offset, store_time, body_bytes, compressed[, born_host])``.
    Never raises for bad data: each malformed record (or an uninflatable body) becomes one error row.
    Common record shapes take ``fast_record_row``; everything else the full decoder.
    """
    fast = fast_record_row
    for item in bodies:
        broker, queue_id, queue_offset, store_time, body = item[0], item[1], item[2], item[3], item[4]
        compressed = item[5] if len(item) > 5 else None
        born_host = item[6] if len(item) > 6 else None
        try:
            text = body_text(body, compressed)
        except TraceDecodeError as exc:
            yield error_row(exc.reason, broker, queue_id, queue_offset, store_time)
            continue
        pieces = text.split("\x02")
        last = pieces.pop()
        for rec in pieces:
            if not rec:
                continue
            try:
                yield fast(rec, broker, queue_id, queue_offset, store_time, born_host)
            except ValueError:
                row = _slow_record_row(rec, broker, queue_id, queue_offset, store_time, born_host)
                if row is not None:
                    yield row
        if last:
            yield error_row("unterminated", broker, queue_id, queue_offset, store_time)


def rows_from_bodies_slow(bodies: Iterable[TraceBody | tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """The reference implementation of ``rows_from_bodies`` through ``TraceContext`` objects (tests)."""
    for item in bodies:
        broker, queue_id, queue_offset, store_time, body = item[0], item[1], item[2], item[3], item[4]
        compressed = item[5] if len(item) > 5 else None
        born_host = item[6] if len(item) > 6 else None
        for ctx in iter_decode_body(body, compressed):
            if isinstance(ctx, TraceDecodeError):
                yield error_row(ctx.reason, broker, queue_id, queue_offset, store_time)
            else:
                yield context_to_row(ctx, broker, queue_id, queue_offset, store_time, born_host)
