"""Metric names: RocketMQ 5's instruments rendered as its Prometheus endpoint (opentelemetry-java 1.29) names
them, which is what the published dashboards query."""

from __future__ import annotations

import pytest

from mq.daemon.metrics import names as N

#: spec -> the name a RocketMQ 5.3 broker's /metrics shows for that instrument
RENDERED = {
    N.MESSAGES_IN: "rocketmq_messages_in_total",
    N.MESSAGES_OUT: "rocketmq_messages_out_total",
    N.THROUGHPUT_IN: "rocketmq_throughput_in_total",
    N.THROUGHPUT_OUT: "rocketmq_throughput_out_total",
    N.MESSAGE_SIZE: "rocketmq_message_size",
    N.RPC_LATENCY: "rocketmq_rpc_latency_milliseconds",
    N.CONSUMER_LAG_MESSAGES: "rocketmq_consumer_lag_messages",
    N.CONSUMER_LAG_LATENCY: "rocketmq_consumer_lag_latency_milliseconds",
    N.CONSUMER_INFLIGHT_MESSAGES: "rocketmq_consumer_inflight_messages",
    N.CONSUMER_QUEUEING_LATENCY: "rocketmq_consumer_queueing_latency_milliseconds",
    N.CONSUMER_READY_MESSAGES: "rocketmq_consumer_ready_messages",
    N.PRODUCER_CONNECTIONS: "rocketmq_producer_connections",
    N.CONSUMER_CONNECTIONS: "rocketmq_consumer_connections",
    N.STORAGE_SIZE: "rocketmq_storage_size_bytes",
    N.STORAGE_FLUSH_BEHIND: "rocketmq_storage_flush_behind_bytes",
    N.STORAGE_DISPATCH_BEHIND: "rocketmq_storage_dispatch_behind_bytes",
    N.STORAGE_MESSAGE_RESERVE_TIME: "rocketmq_storage_message_reserve_time_milliseconds",
    N.TOPIC_NUMBER: "rocketmq_topic_number",
    N.CONSUMER_GROUP_NUMBER: "rocketmq_consumer_group_number",
    N.PROCESSOR_WATERMARK: "rocketmq_processor_watermark",
    N.BROKER_PERMISSION: "rocketmq_broker_permission",
    N.TIMER_ENQUEUE_LAG: "rocketmq_timer_enqueue_lag",
    N.BUSY_REFUSALS: "mq_broker_busy_refusals_total",
    N.ACL_REFUSALS: "mq_acl_refusals_total",
}


@pytest.mark.parametrize("spec", list(RENDERED), ids=lambda s: s.raw)
def test_each_instrument_renders_as_rocketmq_5_exposes_it(spec):
    assert spec.name == RENDERED[spec]


def test_the_exporter_rule_units_and_total():
    assert N.rendered_name("x_latency", N.HISTOGRAM, "ms") == "x_latency_milliseconds"
    assert N.rendered_name("x_size", N.GAUGE, "By") == "x_size_bytes"
    assert N.rendered_name("x_behind_bytes", N.GAUGE, "bytes") == "x_behind_bytes"  # already named
    assert N.rendered_name("x_ratio", N.GAUGE, "1") == "x_ratio"
    assert N.rendered_name("x_count", N.COUNTER) == "x_count_total"
    assert N.rendered_name("x_total_things", N.COUNTER) == "x_total_things"  # contains "total"
    assert N.rendered_name("x_wait", N.GAUGE, "furlongs") == "x_wait_furlongs"


def test_every_name_is_unique_and_prometheus_valid():
    import re

    specs = [v for v in vars(N).values() if isinstance(v, N.Spec)]
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", n) for n in names)
    assert all(n.startswith(("rocketmq_", "mq_")) for n in names)


def test_bucket_bounds_are_written_as_java_doubles():
    assert [N.bucket_bound(b) for b in N.RPC_LATENCY_BOUNDS_MS] == [
        "1.0", "3.0", "5.0", "7.0", "10.0", "100.0", "1000.0", "2000.0", "3000.0"]
    assert N.bucket_bound(4 * 1024 * 1024) == "4194304.0"
    assert N.bucket_bound(float("inf")) == "+Inf"
    assert N.bucket_bound(0.5) == "0.5"


def test_code_names_are_rocketmq_constants_in_lower_case():
    assert N.request_code_name(310) == "send_message_v2"
    assert N.request_code_name(11) == "pull_message"
    assert N.response_code_name(0) == "success"
    assert N.response_code_name(2) == "system_busy"
    assert N.request_code_name(987654) == "987654"
    assert N.response_code_name(-7) == "-7"


def test_metrics_label_pairs_and_refusals():
    assert N.parse_metrics_label("") == []
    assert N.parse_metrics_label("env:prod, region : eu-1,") == [("env", "prod"), ("region", "eu-1")]
    for bad in ("env", "env:a:b", ":x", "1x:y", "__x:y", "topic:T", "cluster:c", "a:1,a:2"):
        with pytest.raises(ValueError, match="metricsLabel"):
            N.parse_metrics_label(bad)
