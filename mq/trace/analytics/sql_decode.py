"""Trace record decoding in Spark SQL: one row per trace message body in, one row per record out.

The readers hand Spark one row per trace *message* (about a hundred records each), its body already
inflated and decoded to text on the Python side (zlib and UTF-8 with U+FFFD replacement, exactly as
``encoder.body_text``). Splitting the text into records and fields, parsing numbers and building the flat
record row of ``schema.FIELDS`` happen here, in the JVM, so millions of records never cross from Python
into Spark one by one.

Body rows (``BODY_FIELDS``)::

    +------------------+--------+---------------------------------------------------------------+
    | column           | type   | content                                                       |
    +------------------+--------+---------------------------------------------------------------+
    | broker           | string | provenance, copied to every record of the body                |
    | queue_id         | int    |                                                               |
    | queue_offset     | long   |                                                               |
    | trace_store_time | long   |                                                               |
    | born_host        | string | client_host of records that do not carry one                  |
    | text             | string | the body text before its last terminator; NULL with ``error`` |
    | error            | string | ``bad_zlib``; ``unterminated`` (text after the last           |
    |                  |        | terminator, one row of its own); a missing-range marker       |
    +------------------+--------+---------------------------------------------------------------+

The rules are those of ``mq.trace.encoder.decode_record`` / ``schema.context_to_row`` (TRACE.md §3), and
the tests hold the two to the same output: records end with ``\\x02`` (a final piece without it is
``unterminated``), empty pieces are skipped, fields split on ``\\x01`` keeping empty ones; Pub takes 12,
13, 14 or 15+ fields, SubAfter 6, 7-8 or 9+, SubBefore 8+, EndTransaction 13+ (``too_few_fields``);
numbers are ``[+-]?[0-9]+`` within int/long range (``bad_number``); message type ordinals 0-3 and the three
transaction state names (``bad_enum``); any other type is ``unknown_type``. When a record has several
faults the reason is the one the Python decoder meets first. A malformed record becomes a row with only
its provenance and ``error``; nothing here raises for bad data (ANSI-safe: ``get``/``try_cast``, never
``[]`` or ``cast``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mq.trace.analytics.schema import COLUMNS, TraceBody
from mq.trace.encoder import TraceDecodeError, body_text

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.types import StructType

#: (column, Spark SQL type name) of a body row, in order.
BODY_FIELDS: tuple[tuple[str, str], ...] = (
    ("broker", "string"),
    ("queue_id", "int"),
    ("queue_offset", "long"),
    ("trace_store_time", "long"),
    ("born_host", "string"),
    ("text", "string"),
    ("error", "string"),
)
_TX_STATES = ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW")
_MSG_TYPES = 4  # MessageType ordinals 0..3


def body_schema() -> "StructType":
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    types = {"string": StringType(), "long": LongType(), "int": IntegerType()}
    return StructType([StructField(name, types[t], True) for name, t in BODY_FIELDS])


def body_rows(bodies: Iterable[TraceBody | tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """Trace bodies ``(broker, queue_id, queue_offset, store_time, body, compressed[, born_host])`` -> body
    rows: the inflated text up to its last record terminator, then, if text follows that terminator, a
    row with ``error='unterminated'``; ``error='bad_zlib'`` for a body that cannot be inflated. (Cutting
    the tail here keeps the SQL side from sizing every body once per record.)"""
    for item in bodies:
        compressed = item[5] if len(item) > 5 else None
        born_host = item[6] if len(item) > 6 else None
        head = (item[0], item[1], item[2], item[3], born_host)
        try:
            text = body_text(item[4], compressed)
        except TraceDecodeError as exc:
            yield (*head, None, exc.reason)
            continue
        end = text.rfind("\x02")
        yield (*head, text[:end] if end >= 0 else "", None)
        if end + 1 < len(text):
            yield (*head, None, "unterminated")


def marker_body_row(error: str) -> tuple[Any, ...]:
    """A body row that decodes to exactly one row carrying ``error`` (e.g. a missing-range marker)."""
    return (None,) * (len(BODY_FIELDS) - 1) + (error,)


# ---------------------------------------------------------------------------------------- decoding


def _is_int(c: Column, kind: str) -> Column:
    """``[+-]?[0-9]+`` within the range of ``kind`` (int/bigint), as ``Integer.parseInt`` / ``Long.parseLong``
    (NULL counts as not a number). ``try_cast`` also takes surrounding whitespace and a fraction ("1.5"):
    checking the first and last characters and the absence of a dot rules those out, and is several times
    cheaper than a regular expression per field."""
    first, last = F.substring(c, 1, 1), F.substring(c, -1, 1)
    digit_or_sign = first.between("0", "9") | (first == "+") | (first == "-")
    valid = c.try_cast(kind).isNotNull() & digit_or_sign & last.between("0", "9") & ~c.contains(".")
    return F.coalesce(valid, F.lit(False))


def _opt(c: Column) -> Column:
    """The text ``null`` (Java's rendering of a null string) -> NULL."""
    return F.when(c != "null", c)


def _bool(c: Column) -> Column:
    return F.lower(c) == "true"


def _first(*cases: tuple[Column, str]) -> Column:
    """The reason of the first case whose condition holds, else NULL."""
    out = F.when(cases[0][0], F.lit(cases[0][1]))
    for cond, reason in cases[1:]:
        out = out.when(cond, F.lit(reason))
    return out


def decode_bodies(bodies: DataFrame) -> DataFrame:
    """Body rows -> record rows in ``schema.COLUMNS`` order (malformed records as error rows)."""
    exploded = bodies.select(
        "broker", "queue_id", "queue_offset", "trace_store_time", "born_host", "error",
        F.explode_outer(F.split("text", "\x02", -1)).alias("rec"),
    )  # fmt: skip
    # A body error is one record; an empty piece is skipped (``text`` holds no final terminator).
    kept = exploded.where(F.col("error").isNotNull() | (F.col("rec") != ""))
    f = F.split("rec", "\x01", -1)
    fields = kept.select(
        "broker", "queue_id", "queue_offset", "trace_store_time", "born_host", F.col("error").alias("body_error"),
        F.size(f).alias("n"), *[F.get(f, i).alias(f"f{i}") for i in range(15)],
    )  # fmt: skip
    return _records(fields)


def _records(d: DataFrame) -> DataFrame:
    n, t = F.col("n"), F.col("f0")
    c = {i: F.col(f"f{i}") for i in range(15)}
    pub, sb, sa, tx = t == "Pub", t == "SubBefore", t == "SubAfter", t == "EndTransaction"
    msg_type_pub, msg_type_tx = c[11].try_cast("int"), c[9].try_cast("int")
    pub_err = _first(
        (n < 12, "too_few_fields"), (~_is_int(c[9], "int"), "bad_number"), (~_is_int(c[11], "int"), "bad_number"),
        (~msg_type_pub.between(0, _MSG_TYPES - 1), "bad_enum"), (~_is_int(c[1], "bigint"), "bad_number"),
        (~_is_int(c[10], "int"), "bad_number"),
    )  # fmt: skip
    sb_err = _first((n < 8, "too_few_fields"), (~_is_int(c[6], "int"), "bad_number"),
                    (~_is_int(c[1], "bigint"), "bad_number"))  # fmt: skip
    sa_err = _first(
        (n < 6, "too_few_fields"), ((n >= 7) & ~_is_int(c[6], "int"), "bad_number"),
        ((n >= 9) & ~_is_int(c[7], "bigint"), "bad_number"), (~_is_int(c[3], "int"), "bad_number"),
    )  # fmt: skip
    tx_err = _first(
        (n < 13, "too_few_fields"), (~c[11].isin(*_TX_STATES), "bad_enum"), (~_is_int(c[9], "int"), "bad_number"),
        (~msg_type_tx.between(0, _MSG_TYPES - 1), "bad_enum"), (~_is_int(c[1], "bigint"), "bad_number"),
    )  # fmt: skip
    record_err = (F.when(pub, pub_err).when(sb, sb_err).when(sa, sa_err).when(tx, tx_err)
                  .otherwise(F.lit("unknown_type")))  # fmt: skip
    err = F.coalesce(F.col("body_error"), record_err)
    d = d.withColumn("error", err)
    ok = F.col("error").isNull()

    def on(cond: Column, value: Column | None) -> Column:
        """``value`` for a well-formed record of the types in ``cond``, else NULL."""
        return F.when(ok & cond, value) if value is not None else F.lit(None)

    has_topic = pub | tx
    ts = F.when(sa, F.when(n >= 9, c[7].try_cast("bigint"))).otherwise(c[1].try_cast("bigint"))
    cost = F.when(pub, c[10].try_cast("int")).when(sa, c[3].try_cast("int"))
    pub_success = F.when(n == 12, F.lit(True)).when(n == 13, _bool(c[12])).otherwise(_bool(c[13]))
    cols = {
        "trace_type": on(F.lit(True), t),
        "timestamp": on(F.lit(True), ts),
        "region_id": on(~sa, _opt(c[2])),
        "region_name": F.lit(None).cast("string"),
        "group": on(F.lit(True), F.when(sa, F.when((n >= 9) & (c[8] != ""), c[8])).otherwise(c[3])),
        "topic": on(has_topic, c[4]),
        "msg_id": on(F.lit(True), F.when(sa, c[2]).otherwise(c[5])),
        "tags": on(has_topic, _opt(c[6])),
        "keys": on(F.lit(True), _opt(F.when(sa, c[5]).otherwise(c[7]))),
        "store_host": on(has_topic, c[8]),
        "client_host": on(F.lit(True), F.when(pub & (n >= 15), c[14]).otherwise(F.col("born_host"))),
        "body_length": on(pub, c[9].try_cast("int")),
        "cost_time": on(pub | sa, cost),
        "msg_type": on(has_topic, F.when(pub, msg_type_pub).otherwise(msg_type_tx)),
        "offset_msg_id": on(pub, F.when(n >= 14, c[12]).otherwise(F.lit(""))),
        "success": on(pub | sa, F.when(pub, pub_success).otherwise(_bool(c[4]))),
        "retry_times": on(sb, c[6].try_cast("int")),
        "request_id": on(sb | sa, F.when(sb, c[4]).otherwise(c[1])),
        "context_code": on(sa, F.when(n >= 7, c[6].try_cast("int")).otherwise(F.lit(0))),
        # timeStamp + costTime / 2 with Python's floor division; NULL rather than a long overflow.
        "store_time": on(pub, F.try_add(ts, F.floor(cost / F.lit(2)).cast("bigint"))),
        "transaction_id": on(tx, _opt(c[10])),
        "transaction_state": on(tx, c[11]),
        "from_check": on(tx, _bool(c[12])),
    }
    types = dict(_SQL_TYPES)
    return d.select(
        *[(cols[name] if name in cols else F.col(name)).cast(types[name]).alias(name) for name in COLUMNS]
    )


def _sql_types() -> tuple[tuple[str, str], ...]:
    from mq.trace.analytics.schema import FIELDS

    names = {"string": "string", "long": "bigint", "int": "int", "boolean": "boolean"}
    return tuple((name, names[t]) for name, t in FIELDS)


_SQL_TYPES = _sql_types()
