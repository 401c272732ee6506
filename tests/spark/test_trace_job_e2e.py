"""End to end: synthetic bodies -> raw JSONL -> job.py (via spark_submit, its own JVM) -> report.json and
Parquet tables, checked against what the generator planted."""

from __future__ import annotations

import json

import pytest

from mq.trace.report import load_report, render_html
from mq.trace.spark_submit import SubmitOptions, run_job
from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate, write_raw_jsonl

pytestmark = pytest.mark.spark


def test_job_finds_what_the_generator_planted(tmp_path, spark) -> None:  # type: ignore[no-untyped-def]
    truth = GroundTruth()
    cfg = SyntheticConfig(messages=1200, seed=11, duration_ms=600_000, stuck_rate=0.01, unfinished_rate=0.008,
                          duplicate_rate=0.01, dlq_rate=0.004, skew_rate=0.006)  # fmt: skip
    write_raw_jsonl(generate(cfg, truth), tmp_path / "raw", bodies_per_file=400)
    assert truth.records > 3000
    progress = []
    until = truth.max_timestamp + 3_600_000
    out = run_job(
        ["--input-format", "raw", "--input", str(tmp_path / "raw"), "--since-ms", str(truth.min_timestamp),
         "--until-ms", str(until), "--grace-ms", "600000", "--bucket-ms", "60000", "--top-ids", "1000"],
        tmp_path / "out",
        options=SubmitOptions(master="local[1]", conf={"spark.driver.memory": "768m", "spark.ui.enabled": "false"}),
        on_progress=progress.append,
    )  # fmt: skip
    assert [p.stage for p in progress][:2] == ["session", "load"] and progress[-1].stage == "done"
    r = load_report(out)
    s = r["sections"]
    assert r["records"]["in_window"] == truth.records
    assert r["records"]["malformed_total"] == truth.malformed > 0
    assert {(x["msg_id"], x["group"]) for x in s["stuck"]["unconsumed"]} == truth.stuck and truth.stuck
    assert s["stuck"]["unconsumed_total"] == len(truth.stuck)
    assert {(x["msg_id"], x["group"]) for x in s["stuck"]["unfinished"]} == truth.unfinished and truth.unfinished
    assert {(x["msg_id"], x["group"]): x["successes"] for x in s["duplicates"]["rows"]} == truth.duplicated
    never = sum(x["never_consumed"] for x in s["completeness"]["rows"])
    assert never == len(truth.stuck) + len(truth.unfinished)
    assert sum(x["dead_lettered"] for x in s["completeness"]["rows"]) == len(truth.dead_lettered) > 0
    per_bucket = {(x["topic"], x["bucket"]): (x["published"], x["send_failed"]) for x in s["completeness"]["rows"]}
    assert sum(p for p, _ in per_bucket.values()) == truth.published  # repeated on each group's row
    assert sum(f for _, f in per_bucket.values()) == len(truth.send_failed)
    hist = {h["retry_times"]: h["pairs"] for h in s["retries"]["histogram"]}
    for k in (1, 2, 3):
        assert hist.get(k, 0) == sum(1 for v in truth.retried.values() if v == k)
    assert hist[cfg.max_reconsume_times] == len(truth.dead_lettered)
    assert s["health"]["negative_lag"] == len(truth.skewed) > 0
    # Parquet tables are readable and agree with the JSON.
    dups = spark.read.parquet(str(out / r["outputs"]["duplicates"]))
    assert dups.count() == len(truth.duplicated)
    assert "<svg" in render_html(r)
    json.dumps(r)
