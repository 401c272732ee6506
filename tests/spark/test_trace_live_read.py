"""read_live on Spark: a chunk whose broker is unreachable comes back as a marker row, which the job
turns into a named missing range (never dropped silently)."""

from __future__ import annotations


import pytest

from mq.trace.analytics import readers as R
from mq.trace.live_reader import Chunk, ReadPlan
from tests.ports import free_port

pytestmark = pytest.mark.spark


def _dead_addr() -> str:
    return f"127.0.0.1:{free_port()}"


def test_unreachable_chunk_is_a_named_missing_range(spark) -> None:  # type: ignore[no-untyped-def]
    addr = _dead_addr()
    plan = ReadPlan("RMQ_SYS_TRACE_TOPIC", chunks=[Chunk("broker-x", addr, "RMQ_SYS_TRACE_TOPIC", 3, 100, 250)])
    df = R.read_live(spark, plan)
    assert df.where("error IS NULL").count() == 0
    missing = R.missing_of(df)
    assert [(m.broker, m.addr, m.queue_id, m.start, m.end) for m in missing] == [("broker-x", addr, 3, 100, 250)]
    assert missing[0].reason.startswith("broker unavailable")


def test_empty_plan_reads_an_empty_frame(spark) -> None:  # type: ignore[no-untyped-def]
    assert R.read_live(spark, ReadPlan("T")).count() == 0


def test_a_window_without_traces_gives_an_empty_report(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """In-process (the session's Spark): records exist, but none in the window -> empty report, no tables."""
    from mq.trace.analytics import job
    from mq.trace.analytics.analysis import analyze
    from mq.trace.analytics.stage_progress import Progress
    from mq.trace.report import summary_lines
    from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate, write_raw_jsonl

    truth = GroundTruth()
    write_raw_jsonl(generate(SyntheticConfig(messages=50, seed=4), truth), tmp_path / "raw")
    args = job.parse_args(["--input-format", "raw", "--input", str(tmp_path / "raw"), "--since-ms", "1000",
                           "--until-ms", "2000", "--out", str(tmp_path / "out")])
    r = analyze(spark, args, Progress())
    assert r["empty"] is True and r["records"]["in_window"] == 0 and r["outputs"] == {}
    assert r["sections"]["stuck"]["unconsumed"] == [] and r["sections"]["health"]["messages"] == 0
    assert summary_lines(r)[-1].startswith("no trace records in this window")
