"""rows_from_bodies (the reader seam) and the synthetic generator's planted truth, checked in pure Python."""

from __future__ import annotations

import base64
import json
import zlib
from collections import Counter, defaultdict

from mq.trace.analytics.schema import COLUMNS, TraceBody, error_row, rows_from_bodies
from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate, write_raw_jsonl

S, T = "\x01", "\x02"
PUB = S.join(["Pub", "1000", "DefaultRegion", "PG", "TopicA", "M1", "null", "k1", "10.0.0.1:10911", "64", "9", "0",
              "OFF1", "true"]) + T  # fmt: skip
SUB_AFTER = S.join(["SubAfter", "R1", "M1", "5", "false", "k1", "4", "1300", "CG"]) + T


def _row(row: tuple) -> dict:
    return dict(zip(COLUMNS, row))


def test_rows_from_bodies_fills_type_specific_columns_and_provenance() -> None:
    body = zlib.compress((PUB + SUB_AFTER + "Nope" + S + "1" + T).encode())
    rows = [_row(r) for r in rows_from_bodies([("broker-a", 2, 77, 5000, body, True, "10.2.0.9")])]
    pub, after, bad = rows
    assert pub["trace_type"] == "Pub" and pub["topic"] == "TopicA" and pub["tags"] is None and pub["keys"] == "k1"
    assert pub["store_time"] == 1000 + 9 // 2 and pub["cost_time"] == 9 and pub["retry_times"] is None
    assert pub["client_host"] == "10.2.0.9"  # no field 14: the trace message's born host
    assert after["topic"] is None and after["success"] is False and after["context_code"] == 4
    assert after["timestamp"] == 1300 and after["group"] == "CG" and after["region_id"] is None
    assert (after["broker"], after["queue_id"], after["queue_offset"], after["trace_store_time"]) == ("broker-a", 2, 77, 5000)
    assert bad == _row(error_row("unknown_type", "broker-a", 2, 77, 5000))
    assert bad["trace_type"] is None and bad["error"] == "unknown_type"


def test_rows_from_bodies_never_raises_on_bad_bodies() -> None:
    rows = list(rows_from_bodies([TraceBody("b", 0, 1, 2, b"\x78\x9cjunk", None)]))
    assert [_row(r)["error"] for r in rows] == ["bad_zlib"]


def _replay(bodies: list[TraceBody]) -> dict:
    """Recompute the anomalies from the decoded rows with plain Python (independent of Spark)."""
    rows = [_row(r) for r in rows_from_bodies(bodies)]
    before = defaultdict(list)
    after = defaultdict(list)
    for r in rows:
        if r["trace_type"] == "SubBefore":
            before[(r["msg_id"], r["group"])].append(r)
        elif r["trace_type"] == "SubAfter":
            after[(r["msg_id"], r["group"])].append(r)
    afters_by_req = {(r["request_id"], r["msg_id"]) for v in after.values() for r in v}
    return {
        "errors": sum(1 for r in rows if r["error"]),
        "dups": {k for k, v in after.items() if sum(1 for r in v if r["success"]) > 1},
        "unfinished": {k for k, v in before.items() if any((r["request_id"], k[0]) not in afters_by_req for r in v)},
        "max_retry": {k: max(r["retry_times"] for r in v) for k, v in before.items()},
        "types": Counter(r["trace_type"] for r in rows if not r["error"]),
    }


def test_generator_plants_exactly_what_its_truth_says(tmp_path) -> None:
    truth = GroundTruth()
    cfg = SyntheticConfig(messages=1500, seed=3, duration_ms=60_000, duplicate_rate=0.02, stuck_rate=0.02, unfinished_rate=0.02)
    bodies = list(generate(cfg, truth))
    seen = _replay(bodies)
    assert seen["errors"] == truth.malformed > 0
    assert sum(seen["types"].values()) == truth.records
    assert seen["types"]["Pub"] == truth.published == 1500
    assert seen["dups"] == set(truth.duplicated) and len(truth.duplicated) > 5
    assert seen["unfinished"] == truth.unfinished and truth.unfinished
    for pair, retries in truth.retried.items():
        assert seen["max_retry"][pair] == retries
    for pair in truth.dead_lettered:
        assert seen["max_retry"][pair] == cfg.max_reconsume_times
    assert not (truth.stuck & set(seen["max_retry"]))  # stuck pairs have no SubBefore at all
    assert truth.compressed_bodies > 0
    # Same seed, same bytes; and the JSONL writer keeps every body.
    again = list(generate(cfg))
    assert [b.body for b in again] == [b.body for b in bodies]
    n = write_raw_jsonl(bodies, tmp_path / "raw", bodies_per_file=100)
    lines = [json.loads(x) for f in sorted((tmp_path / "raw").glob("*.jsonl")) for x in f.read_text().splitlines()]
    assert n == len(lines) == len(bodies)
    assert base64.b64decode(lines[0]["body"]) == bodies[0].body and lines[0]["compressed"] == bodies[0].compressed
