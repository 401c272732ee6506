"""The Spark SQL record decoder (``sql_decode``) against the Python reference decoder
(``schema.rows_from_bodies_slow``, i.e. ``encoder.decode_record`` + ``context_to_row``): same rows, same
order, same malformed reasons, for synthetic bodies, hand-built edge cases and thousands of random records."""

from __future__ import annotations

import random
import zlib

import pytest

from mq.trace.analytics.schema import COLUMNS, rows_from_bodies_slow
from mq.trace.analytics.sql_decode import body_rows, body_schema, decode_bodies, marker_body_row
from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate

pytestmark = pytest.mark.spark

S, T = "\x01", "\x02"


def _sql_rows(spark, bodies):  # type: ignore[no-untyped-def]
    df = decode_bodies(spark.createDataFrame(list(body_rows(bodies)), body_schema()))
    assert tuple(df.columns) == COLUMNS
    return [tuple(r) for r in df.collect()]


_LONG = 2**63


def _reference(bodies):  # type: ignore[no-untyped-def]
    """The Python decoder's rows. Its store time (timeStamp + costTime / 2) can pass the long range, which
    no Spark long column can hold: SQL gives NULL there, so the reference does too."""
    return [tuple(None if isinstance(v, int) and not -_LONG <= v < _LONG else v for v in row)
            for row in rows_from_bodies_slow(bodies)]


def _body(i: int, text: str, compress: bool = False, born: str | None = "10.9.0.1") -> tuple:  # type: ignore[type-arg]
    raw = text.encode("utf-8")
    return ("broker-a", i % 4, 1000 + i, 1_700_000_000_000 + i, zlib.compress(raw) if compress else raw, compress,
            born)  # fmt: skip


def _rec(*fields: str) -> str:
    return S.join(fields) + T


PUB = ["Pub", "1700000000000", "DefaultRegion", "PG", "TopicA", "MID1", "TagA", "k1 k2", "10.0.0.1:10911", "120",
       "7", "0", "OFFSET1", "true"]  # fmt: skip
SUB_BEFORE = ["SubBefore", "1700000000100", "null", "CG", "REQ1", "MID1", "0", "k1"]
SUB_AFTER = ["SubAfter", "REQ1", "MID1", "15", "true", "null", "0", "1700000000200", "CG"]
END_TX = ["EndTransaction", "1700000000050", "r", "PG", "TopicA", "MID2", "null", "null", "10.0.0.1:10911", "2",
          "TX1", "COMMIT_MESSAGE", "false"]  # fmt: skip

EDGE_TEXTS = [
    _rec(*PUB) + _rec(*SUB_BEFORE) + _rec(*SUB_AFTER) + _rec(*END_TX),
    _rec(*PUB[:12]) + _rec(*PUB[:13]) + _rec(*PUB, "10.1.0.7") + _rec(*PUB[:11]),  # 12/13/15 fields; too few
    _rec(*PUB[:9], "x", *PUB[10:11], "9", *PUB[12:]),  # bad body length beats a bad msg type -> bad_number
    _rec(*PUB[:11], "4", *PUB[12:]) + _rec(*PUB[:1], "zz", *PUB[2:11], "4", *PUB[12:]),  # bad_enum first
    _rec(*PUB[:10], "-5", *PUB[11:]) + _rec(*PUB[:10], "+3", *PUB[11:]),  # floor(-5 / 2) store time; '+'
    _rec(*PUB[:9], " 5", *PUB[10:]) + _rec(*PUB[:9], "5.0", *PUB[10:]) + _rec(*PUB[:9], "2147483648", *PUB[10:]),
    _rec(*PUB[:1], "9223372036854775807", *PUB[2:]) + _rec(*PUB[:1], "9223372036854775808", *PUB[2:]),
    _rec(*PUB[:13], "TRUE") + _rec(*PUB[:13], "yes") + _rec(*PUB[:6], "null", "null", *PUB[8:]),
    _rec(*SUB_BEFORE[:7]) + _rec(*SUB_BEFORE, "extra") + _rec(*SUB_BEFORE[:6], "r", SUB_BEFORE[7]),
    "".join(_rec(*SUB_AFTER[:k]) for k in range(5, 11)) + _rec(*SUB_AFTER[:8], ""),  # 5..10 fields, empty group
    _rec(*SUB_AFTER[:6], "x", *SUB_AFTER[7:]) + _rec(*SUB_AFTER[:3], "1e3", *SUB_AFTER[4:]),
    _rec(*END_TX[:12]) + _rec(*END_TX[:11], "COMMIT") + _rec(*END_TX[:9], "9", *END_TX[10:]),
    _rec(*END_TX[:9], "q", *END_TX[10:11], "NOPE", END_TX[12]),  # state is checked before the type
    _rec(*END_TX[:1], "-", *END_TX[2:]) + _rec(*END_TX[:10], "null", *END_TX[11:]),
    _rec("Foo", "1") + T + T + _rec("") + _rec(*PUB) + S.join(SUB_BEFORE),  # unknown, empty pieces, unterminated
    "",
    "just text without a terminator",
    _rec(*PUB[:5], "ünï\u00e7ødé \U0001f600", *PUB[6:]) + _rec(*SUB_AFTER[:4], "True", *SUB_AFTER[5:]),
]


def test_edge_cases_decode_like_the_python_decoder(spark) -> None:  # type: ignore[no-untyped-def]
    bodies = [_body(i, t, compress=i % 3 == 0) for i, t in enumerate(EDGE_TEXTS)]
    bodies.append(("broker-b", 1, 5, 6, b"\x78\x9cnot zlib at all", None, "10.0.0.3"))  # bad_zlib
    bodies.append(_body(99, _rec(*SUB_BEFORE), born=None))
    got, want = _sql_rows(spark, bodies), _reference(bodies)
    assert got == want
    assert want[16][COLUMNS.index("store_time")] is None  # 9223372036854775807 + 7 // 2 overflows
    errors = {r[-1] for r in want}
    assert {"too_few_fields", "bad_number", "bad_enum", "unknown_type", "unterminated", "bad_zlib", None} <= errors


def test_random_records_decode_like_the_python_decoder(spark) -> None:  # type: ignore[no-untyped-def]
    rnd = random.Random(20240611)
    alphabet = ["", "null", "0", "7", "-3", "+2", "12345678901234567890", "2147483647", "-2147483649", "true",
                "TRUE", "false", "x", "1_0", "\u0663", "Pub", " 5", "4", "3", "COMMIT_MESSAGE", "UNKNOW", "a\x01b",
                "1.5", "2.", ".5", "\t7", "7 ", "-", "+", "+-1", "0x1A", "00012", "1e3", "-0"]
    types = ["Pub", "SubBefore", "SubAfter", "EndTransaction", "Other", ""]
    texts = []
    for _ in range(400):
        recs = []
        for _ in range(rnd.randint(0, 8)):
            recs.append(S.join([rnd.choice(types), *(rnd.choice(alphabet) for _ in range(rnd.randint(0, 16)))]))
        text = "".join(r + T for r in recs)
        if rnd.random() < 0.1:
            text += S.join(["SubAfter", "x"])  # an unterminated tail
        texts.append(text)
    bodies = [_body(i, t, compress=rnd.random() < 0.3) for i, t in enumerate(texts)]
    got, want = _sql_rows(spark, bodies), _reference(bodies)
    assert len(want) > 1000
    assert got == want


def test_synthetic_bodies_decode_like_the_python_decoder(spark) -> None:  # type: ignore[no-untyped-def]
    truth = GroundTruth()
    bodies = list(generate(SyntheticConfig(messages=600, seed=5, malformed_rate=0.02), truth))
    got, want = _sql_rows(spark, bodies), _reference(bodies)
    assert got == want and len(got) == truth.records + truth.malformed and truth.malformed > 0


def test_marker_body_row_is_one_error_row(spark) -> None:  # type: ignore[no-untyped-def]
    df = decode_bodies(spark.createDataFrame([marker_body_row("unavailable:{}")], body_schema()))
    assert [tuple(r) for r in df.collect()] == [(None,) * (len(COLUMNS) - 1) + ("unavailable:{}",)]
