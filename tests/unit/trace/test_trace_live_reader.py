"""live_reader pieces without sockets: chunking, missing-range markers, and the fast row decoder (which
must agree with the full decoder on every input)."""

from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from mq.trace.analytics.schema import COLUMNS, rows_from_bodies, rows_from_bodies_slow
from mq.trace.live_reader import (
    MISSING_PREFIX,
    MissingRange,
    cursor_key,
    missing_marker_row,
    parse_missing,
    split_range,
)
from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate

S, T = "\x01", "\x02"


def test_split_range_covers_the_range_exactly_in_bounded_chunks() -> None:
    chunks = split_range("b", "1.2.3.4:10911", "TT", 3, 10, 2510, 1000)
    assert [(c.start, c.end) for c in chunks] == [(10, 1010), (1010, 2010), (2010, 2510)]
    assert {(c.broker, c.addr, c.topic, c.queue_id) for c in chunks} == {("b", "1.2.3.4:10911", "TT", 3)}
    assert split_range("b", "a", "TT", 0, 5, 5, 100) == []


def test_missing_marker_round_trips_and_only_sets_error() -> None:
    m = MissingRange("broker-b", "127.0.0.1:1", 2, 40, None, "broker unavailable: refused")
    row = missing_marker_row(m, len(COLUMNS))
    assert len(row) == len(COLUMNS) and all(v is None for v in row[:-1])
    assert row[-1].startswith(MISSING_PREFIX) and parse_missing(row[-1]) == m
    assert cursor_key("broker-a", "RMQ_SYS_TRACE_TOPIC", 0) == "broker-a/RMQ_SYS_TRACE_TOPIC/0"


def test_fast_rows_equal_the_reference_decoder_on_synthetic_bodies() -> None:
    truth = GroundTruth()
    bodies = list(generate(SyntheticConfig(messages=1500, seed=3, malformed_rate=0.01), truth))
    fast, slow = list(rows_from_bodies(bodies)), list(rows_from_bodies_slow(bodies))
    assert fast == slow and len(fast) == truth.records + truth.malformed


_field = st.sampled_from(["", "null", "0", "7", "-3", "12345678901234567890", "true", "TRUE", "x", "1_0", "٣",
                          "Pub", "SubAfter", " 5", "4"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Pub", "SubBefore", "SubAfter", "EndTransaction", "Other"]),
                          st.lists(_field, min_size=0, max_size=16)), max_size=6), st.booleans())
def test_fast_rows_equal_the_reference_decoder_on_arbitrary_records(records, compress) -> None:  # type: ignore[no-untyped-def]
    text = "".join(S.join([t, *fields]) + T for t, fields in records)
    body = zlib.compress(text.encode()) if compress else text.encode()
    item = [("b", 1, 2, 3, body, compress, "10.0.0.1")]
    assert list(rows_from_bodies(item)) == list(rows_from_bodies_slow(item))


class _QueueChannel:
    """Stands for a broker's PULL_MESSAGE: answers the slices of queue offsets [offset, offset + max)."""

    def __init__(self, slices: list[bytes]) -> None:
        self.slices = slices
        self.asked: list[tuple[int, int]] = []

    def call(self, cmd):  # type: ignore[no-untyped-def]
        offset, n = int(cmd.ext_fields["queueOffset"]), int(cmd.ext_fields["maxMsgNums"])
        self.asked.append((offset, n))
        end = min(offset + n, len(self.slices))
        return cmd.response(0, ext_fields={"nextBeginOffset": str(end), "minOffset": "0",
                                           "maxOffset": str(len(self.slices))},
                            body=b"".join(self.slices[offset:end]))


def test_pull_bodies_narrows_a_broken_record_down_to_itself() -> None:
    """A record whose framing is broken costs that record only (named as a missing range of one offset),
    not the rest of the answer it came in."""
    from mq.common.message import MessageExt
    from mq.common.record import encode_record
    from mq.trace.live_reader import Chunk, pull_bodies

    slices = [encode_record(MessageExt(topic="RMQ_SYS_TRACE_TOPIC", body=b"t%d" % i, queue_id=0, queue_offset=i,
                                       born_host=("10.0.0.1", 1), store_host=("10.0.0.2", 10911)))
              for i in range(10)]
    slices[4] = slices[4][:4] + b"\x00\x00\x00\x00" + slices[4][8:]  # its magic is gone
    ch = _QueueChannel(slices)
    missing: list[MissingRange] = []
    got = list(pull_bodies(ch, Chunk("b", "addr", "RMQ_SYS_TRACE_TOPIC", 0, 0, 10), missing))  # type: ignore[arg-type]
    assert [g[2] for g in got] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert [(m.start, m.end) for m in missing] == [(4, 5)] and "undecodable record" in missing[0].reason
    assert ch.asked == [(0, 10), (4, 6), (4, 1), (5, 5)]
