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

import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

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


# The decoding is written as Spark SQL text, one string per column: built with the Column API, each of its
# ~2,000 operations is a call from Python into the JVM (and another when Python frees the Column), about
# 5,000 round trips that took seconds on a busy 2-core machine before Spark had run anything. The text is
# parsed in the JVM in one call per projection.


def _is_int(c: str, kind: str) -> str:
    """``[+-]?[0-9]+`` within the range of ``kind`` (int/bigint), as ``Integer.parseInt`` / ``Long.parseLong``
    (NULL counts as not a number). ``try_cast`` also takes surrounding whitespace and a fraction ("1.5"):
    checking the first and last characters and the absence of a dot rules those out, and is several times
    cheaper than a regular expression per field."""
    first, last = f"substring({c}, 1, 1)", f"substring({c}, -1, 1)"
    digit_or_sign = f"({first} BETWEEN '0' AND '9' OR {first} = '+' OR {first} = '-')"
    valid = (f"try_cast({c} AS {kind}) IS NOT NULL AND {digit_or_sign} AND {last} BETWEEN '0' AND '9' "
             f"AND NOT contains({c}, '.')")  # fmt: skip
    return f"coalesce({valid}, false)"


def _opt(c: str) -> str:
    """The text ``null`` (Java's rendering of a null string) -> NULL."""
    return f"CASE WHEN {c} != 'null' THEN {c} END"


#: The spellings of "true" in any letter case: ``Boolean.parseBoolean`` and the Python decoder's
#: ``text.lower() == "true"`` (no other character lower-cases to one of these letters). A list, not
#: ``lower()``: Spark 4 lower-cases through ICU, whose start-up alone cost about a second.
_TRUE = ", ".join(f"'{''.join(p)}'" for p in itertools.product(*((ch, ch.upper()) for ch in "true")))


def _bool(c: str) -> str:
    return f"({c} IN ({_TRUE}))"


def _first(*cases: tuple[str, str]) -> str:
    """The reason of the first case whose condition holds, else NULL."""
    return "CASE " + " ".join(f"WHEN {cond} THEN '{reason}'" for cond, reason in cases) + " END"


def decode_bodies(bodies: DataFrame) -> DataFrame:
    """Body rows -> record rows in ``schema.COLUMNS`` order (malformed records as error rows)."""
    exploded = bodies.selectExpr(
        "broker", "queue_id", "queue_offset", "trace_store_time", "born_host", "error",
        "explode_outer(split(text, '\\u0002', -1)) AS rec",
    )  # fmt: skip
    # A body error is one record; an empty piece is skipped (``text`` holds no final terminator).
    kept = exploded.where("error IS NOT NULL OR rec != ''")
    f = "split(rec, '\\u0001', -1)"
    fields = kept.selectExpr(
        "broker", "queue_id", "queue_offset", "trace_store_time", "born_host", "error AS body_error",
        f"size({f}) AS n", *[f"get({f}, {i}) AS f{i}" for i in range(15)],
    )  # fmt: skip
    return _records(fields)


def _records(d: DataFrame) -> DataFrame:
    n, t = "n", "f0"
    c = {i: f"f{i}" for i in range(15)}
    pub, sb, sa, tx = f"{t} = 'Pub'", f"{t} = 'SubBefore'", f"{t} = 'SubAfter'", f"{t} = 'EndTransaction'"
    msg_type_pub, msg_type_tx = f"try_cast({c[11]} AS int)", f"try_cast({c[9]} AS int)"
    pub_err = _first(
        (f"{n} < 12", "too_few_fields"), (f"NOT {_is_int(c[9], 'int')}", "bad_number"),
        (f"NOT {_is_int(c[11], 'int')}", "bad_number"),
        (f"NOT ({msg_type_pub} BETWEEN 0 AND {_MSG_TYPES - 1})", "bad_enum"),
        (f"NOT {_is_int(c[1], 'bigint')}", "bad_number"), (f"NOT {_is_int(c[10], 'int')}", "bad_number"),
    )  # fmt: skip
    sb_err = _first((f"{n} < 8", "too_few_fields"), (f"NOT {_is_int(c[6], 'int')}", "bad_number"),
                    (f"NOT {_is_int(c[1], 'bigint')}", "bad_number"))  # fmt: skip
    sa_err = _first(
        (f"{n} < 6", "too_few_fields"), (f"{n} >= 7 AND NOT {_is_int(c[6], 'int')}", "bad_number"),
        (f"{n} >= 9 AND NOT {_is_int(c[7], 'bigint')}", "bad_number"), (f"NOT {_is_int(c[3], 'int')}", "bad_number"),
    )  # fmt: skip
    states = ", ".join(f"'{st}'" for st in _TX_STATES)
    tx_err = _first(
        (f"{n} < 13", "too_few_fields"), (f"NOT ({c[11]} IN ({states}))", "bad_enum"),
        (f"NOT {_is_int(c[9], 'int')}", "bad_number"),
        (f"NOT ({msg_type_tx} BETWEEN 0 AND {_MSG_TYPES - 1})", "bad_enum"),
        (f"NOT {_is_int(c[1], 'bigint')}", "bad_number"),
    )  # fmt: skip
    record_err = (f"CASE WHEN {pub} THEN {pub_err} WHEN {sb} THEN {sb_err} WHEN {sa} THEN {sa_err} "
                  f"WHEN {tx} THEN {tx_err} ELSE 'unknown_type' END")  # fmt: skip
    d = d.selectExpr("*", f"coalesce(body_error, {record_err}) AS error")

    def on(cond: str, value: str) -> str:
        """``value`` for a well-formed record of the types in ``cond``, else NULL."""
        return f"CASE WHEN error IS NULL AND ({cond}) THEN {value} END"

    has_topic = f"{pub} OR {tx}"
    ts = f"CASE WHEN {sa} THEN CASE WHEN {n} >= 9 THEN try_cast({c[7]} AS bigint) END ELSE try_cast({c[1]} AS bigint) END"
    cost = f"CASE WHEN {pub} THEN try_cast({c[10]} AS int) WHEN {sa} THEN try_cast({c[3]} AS int) END"
    pub_success = f"CASE WHEN {n} = 12 THEN true WHEN {n} = 13 THEN {_bool(c[12])} ELSE {_bool(c[13])} END"
    cols = {
        "trace_type": on("true", t),
        "timestamp": on("true", ts),
        "region_id": on(f"NOT ({sa})", _opt(c[2])),
        "region_name": "CAST(NULL AS string)",
        "group": on("true", f"CASE WHEN {sa} THEN CASE WHEN {n} >= 9 AND {c[8]} != '' THEN {c[8]} END ELSE {c[3]} END"),
        "topic": on(has_topic, c[4]),
        "msg_id": on("true", f"CASE WHEN {sa} THEN {c[2]} ELSE {c[5]} END"),
        "tags": on(has_topic, _opt(c[6])),
        "keys": on("true", _opt(f"(CASE WHEN {sa} THEN {c[5]} ELSE {c[7]} END)")),
        "store_host": on(has_topic, c[8]),
        "client_host": on("true", f"CASE WHEN {pub} AND {n} >= 15 THEN {c[14]} ELSE born_host END"),
        "body_length": on(pub, f"try_cast({c[9]} AS int)"),
        "cost_time": on(f"{pub} OR {sa}", cost),
        "msg_type": on(has_topic, f"CASE WHEN {pub} THEN {msg_type_pub} ELSE {msg_type_tx} END"),
        "offset_msg_id": on(pub, f"CASE WHEN {n} >= 14 THEN {c[12]} ELSE '' END"),
        "success": on(f"{pub} OR {sa}", f"CASE WHEN {pub} THEN {pub_success} ELSE {_bool(c[4])} END"),
        "retry_times": on(sb, f"try_cast({c[6]} AS int)"),
        "request_id": on(f"{sb} OR {sa}", f"CASE WHEN {sb} THEN {c[4]} ELSE {c[1]} END"),
        "context_code": on(sa, f"CASE WHEN {n} >= 7 THEN try_cast({c[6]} AS int) ELSE 0 END"),
        # timeStamp + costTime / 2 with Python's floor division; NULL rather than a long overflow.
        "store_time": on(pub, f"try_add({ts}, CAST(floor(({cost}) / 2) AS bigint))"),
        "transaction_id": on(tx, _opt(c[10])),
        "transaction_state": on(tx, c[11]),
        "from_check": on(tx, _bool(c[12])),
    }
    types = dict(_SQL_TYPES)
    return d.selectExpr(*[f"CAST(({cols.get(name, f'`{name}`')}) AS {types[name]}) AS `{name}`" for name in COLUMNS])


def _sql_types() -> tuple[tuple[str, str], ...]:
    from mq.trace.analytics.schema import FIELDS

    names = {"string": "string", "long": "bigint", "int": "int", "boolean": "boolean"}
    return tuple((name, names[t]) for name, t in FIELDS)


_SQL_TYPES = _sql_types()
