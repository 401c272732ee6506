"""`mq trace analyze` / `mq trace export` end to end against real daemons: synthetic trace messages sent
into a broker's RMQ_SYS_TRACE_TOPIC (SEND_MESSAGE_V2, keys = trans keys), the CLI run as a process
(spark-submit, local[1]), its --json report checked against what the generator planted. The incremental
export and the archive analysis are in test_trace_cluster_mode.py (one flow shared with the standalone cluster)."""

from __future__ import annotations

import pytest

from mq.trace.live_reader import MissingRange, plan_read, read_chunk
from mq.trace.synthetic import GroundTruth

from .conftest import SPARK, TRACE_TOPIC, feed, now_ms, report_of, window_cfg


@pytest.mark.spark
@pytest.mark.slow
def test_live_analyze_counts_latencies_stuck_ids_and_names_the_down_broker(run, broker_factory, mq_cli) -> None:
    a = broker_factory(trace_topic_enable=True)
    b = broker_factory(trace_topic_enable=True, broker_name="broker-b")
    truth = GroundTruth()
    cfg = window_cfg(600, 5, now_ms() - 45 * 60_000, failing_groups=("CG_audit",),
                     stalled_groups=(("CG_archive", 0.5),))
    feed(run, a, cfg, truth)
    feed(run, b, window_cfg(20, 9, now_ms() - 30 * 60_000), GroundTruth())
    run(b.server.stop())  # broker-b hangs: still in the route (its name server channel is open), unreachable

    r = report_of(*mq_cli("trace", "analyze", "--since", "1h", "--json", "--top-ids", "1000", *SPARK))

    assert r["records"]["in_window"] == truth.records
    assert r["records"]["malformed_total"] == truth.malformed > 0
    assert sum(r["records"]["by_type"].values()) == truth.records
    # broker-b is named as missing data, with its queue.
    assert [(m["broker"], m["queue_id"]) for m in r["missing"]] == [("broker-b", 0)]
    assert "unavailable" in r["missing"][0]["reason"]
    assert r["input"]["queues"][0]["broker"] == "broker-a" and r["input"]["messages"] == truth.bodies
    s = r["sections"]
    stuck = {(x["msg_id"], x["group"]) for x in s["stuck"]["unconsumed"]}
    assert stuck == truth.stuck and s["stuck"]["unconsumed_total"] == len(truth.stuck)
    stalled = {p for p in truth.stuck if p[1] == "CG_archive"}
    assert len(stalled) > 20  # the group that stopped consuming half-way
    assert {(x["msg_id"], x["group"]) for x in s["stuck"]["unfinished"]} == truth.unfinished
    # The failing consumer: every first attempt fails, the retry succeeds.
    cost = {x["group"]: x for x in s["consume_cost"]["by_group"]}
    assert cost["CG_audit"]["failure_rate"] == pytest.approx(0.5)
    assert cost["CG_billing"]["failure_rate"] < 0.1
    hist = {h["retry_times"]: h["pairs"] for h in s["retries"]["histogram"]}
    assert hist[1] == sum(1 for v in truth.retried.values() if v == 1)
    # Plausible latencies: send cost is lognormal(1.3, 0.6) ms, consumers start 2-80 ms after the store.
    for t in s["send_latency"]["by_topic"]:
        assert 1 <= t["cost_p50"] <= t["cost_p99"] <= t["cost_max"] < 200
    lag = {x["group"]: x for x in s["delivery_lag"]["by_group"]}
    assert 0 <= lag["CG_billing"]["lag_p50"] <= 200 and lag["CG_billing"]["lag_p99"] < 20_000
    assert lag["CG_timer"]["lag_p50"] >= 10_000  # delayed topic: 10 s
    assert s["health"]["negative_lag"] == len(truth.skewed)


def test_a_broker_dying_mid_read_becomes_missing_ranges(run, namesrv, trace_broker) -> None:
    truth = GroundTruth()
    feed(run, trace_broker, window_cfg(200, 3, now_ms() - 20 * 60_000), truth)

    async def plan_and_read():  # type: ignore[no-untyped-def]
        import asyncio

        plan = await asyncio.to_thread(plan_read, [namesrv.address], TRACE_TOPIC, now_ms() - 3_600_000, None,
                                       chunk_messages=100)
        first = await asyncio.to_thread(lambda: list(read_chunk(plan.chunks[0])))
        await trace_broker.server.stop()
        rest = await asyncio.to_thread(lambda: [x for c in plan.chunks[1:] for x in read_chunk(c, timeout=2.0)])
        return plan, first, rest

    plan, first, rest = run(plan_and_read(), 60)
    assert plan.messages == truth.bodies and len(plan.chunks) == -(-truth.bodies // 100) >= 2
    assert len(first) == 100 and not any(isinstance(x, MissingRange) for x in first)
    assert [x[2] for x in first] == list(range(100))
    missing = [x for x in rest if isinstance(x, MissingRange)]
    assert [(m.queue_id, m.start, m.end) for m in missing] == [(0, c.start, c.end) for c in plan.chunks[1:]]
    assert all("broker unavailable" in m.reason for m in missing)
