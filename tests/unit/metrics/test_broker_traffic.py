"""The broker collector's counters after a known sequence of sends and pulls (BrokerStats, as the send and
pull processors bump it), its client gauges, and its ACL refusals."""

from __future__ import annotations

from types import SimpleNamespace

from mq.common import topic as T
from mq.daemon.broker.acl import refusal_kind
from mq.daemon.metrics.broker import BrokerCollector
from mq.daemon.metrics.rpc import RpcMetrics
from mq.protocol.bodies import ConsumeType
from mq.protocol.codes import LanguageCode

from .helpers import expose
from .stub import add_topic, channel, make_broker, subscribe


class Part:
    def __init__(self, fn) -> None:
        self.fn = fn

    def collect(self):
        return list(self.fn())


def collector(b) -> BrokerCollector:
    return BrokerCollector(b, RpcMetrics())


def test_messages_bytes_and_sizes_in_by_topic_and_type(tmp_path):
    b = make_broker(tmp_path, broker_cluster_name="Prod", broker_name="broker-b", metrics_label="env:test")
    add_topic(b, "Orders")
    add_topic(b, "Fifo", order=True)
    s = b.stats
    for _ in range(9):
        s.on_topic_put("Orders", 1, 200)                 # 9 sends of one 200-byte record
    s.on_topic_put("Orders", 1, 5000)                    # one 5000-byte record
    s.on_topic_put("Orders", 4, 4 * 300)                 # a batch of 4: one observation of 300
    s.on_topic_put("Fifo", 1, 100)
    s.on_topic_put(T.SCHEDULE_TOPIC, 2, 400)             # delay-level messages
    s.on_topic_put("rmq_sys_wheel_timer", 1, 300)        # an arbitrary-delay message
    s.on_topic_put(T.TRANS_HALF_TOPIC, 1, 250)           # a half message
    s.on_topic_put("%DLQ%CG", 1, 100)                    # left out, as RocketMQ does
    s.on_topic_put("%RETRY%CG", 1, 100)
    out = expose(Part(collector(b)._traffic))
    common = dict(cluster="Prod", node_type="broker", node_id="broker-b", env="test")
    orders = dict(topic="Orders", message_type="normal", is_system="false", **common)
    assert out.value("rocketmq_messages_in_total", **orders) == 14
    assert out.value("rocketmq_throughput_in_total", **orders) == 9 * 200 + 5000 + 1200
    buckets = {x.labels["le"]: x.value for x in out.find("rocketmq_message_size_bucket", **orders)}
    assert buckets == {"1024.0": 10, "4096.0": 10, "524288.0": 11, "1048576.0": 11, "2097152.0": 11,
                       "4194304.0": 11, "+Inf": 11}
    assert out.value("rocketmq_message_size_count", **orders) == 11
    assert out.value("rocketmq_message_size_sum", **orders) == 9 * 200 + 5000 + 300
    assert out.value("rocketmq_messages_in_total", topic="Fifo", message_type="fifo") == 1
    assert out.value("rocketmq_messages_in_total", topic=T.SCHEDULE_TOPIC, message_type="delay",
                     is_system="true") == 2
    assert out.value("rocketmq_messages_in_total", topic="rmq_sys_wheel_timer", message_type="delay",
                     is_system="true") == 1
    assert out.value("rocketmq_messages_in_total", topic=T.TRANS_HALF_TOPIC, message_type="transaction",
                     is_system="true") == 1
    assert not out.has("rocketmq_messages_in_total", topic="%DLQ%CG")
    assert not out.has("rocketmq_messages_in_total", topic="%RETRY%CG")


def test_messages_and_bytes_out_by_topic_and_group(tmp_path):
    b = make_broker(tmp_path)
    s = b.stats
    s.on_group_get("Orders", "CG", 32, 32_000, 0, 32)
    s.on_group_get("Orders", "CG", 3, 3_000, 1, 3)
    s.on_group_get("Orders", "CID_RMQ_SYS_TRANS", 1, 10, 0, 1)
    s.on_group_get("%RETRY%CG", "CG", 2, 200, 0, 2)
    out = expose(Part(collector(b)._traffic))
    assert out.value("rocketmq_messages_out_total", topic="Orders", consumer_group="CG", is_system="false") == 35
    assert out.value("rocketmq_throughput_out_total", topic="Orders", consumer_group="CG") == 35_000
    assert out.value("rocketmq_messages_out_total", consumer_group="CID_RMQ_SYS_TRANS", is_system="true") == 1
    assert not out.has("rocketmq_messages_out_total", topic="%RETRY%CG")


def test_producer_and_consumer_connections(tmp_path):
    b = make_broker(tmp_path)
    p1, p2, p3, c1, c2 = (object() for _ in range(5))
    b.producers.register("PG", channel(p1, "p1"))
    b.producers.register("PG", channel(p2, "p2"))
    b.producers.register("Other", channel(p3, "p3", LanguageCode.CPP, 395))
    subscribe(b, "CG", c1, "Orders")
    subscribe(b, "CG", c2, "Orders")
    subscribe(b, "PullG", object(), "Orders", consume_type=ConsumeType.CONSUME_ACTIVELY)
    out = expose(Part(collector(b)._connections))
    assert out.value("rocketmq_producer_connections", language="java", version="v4_9_4",
                     protocol_type="remoting") == 2
    assert out.value("rocketmq_producer_connections", language="cpp", version="v4_9_1") == 1
    assert out.value("rocketmq_consumer_connections", consumer_group="CG", consume_mode="push",
                     language="java", version="v4_9_4", is_system="false", protocol_type="remoting") == 2
    assert out.value("rocketmq_consumer_connections", consumer_group="PullG", consume_mode="pull") == 1
    b.consumers.connection_closed(c1)
    out = expose(Part(collector(b)._connections))
    assert out.value("rocketmq_consumer_connections", consumer_group="CG") == 1


def test_acl_refusals_by_kind(tmp_path):
    b = make_broker(tmp_path)
    reasons = ["No accessKey is configured", "No acl config for AK", "No acl config for AK2",
               "Check signature failed for accessKey=AK", "Need admin permission for request code=17, but x",
               "No default permission for topic:T", "cannot read the request to check its permissions: x"]
    acl = SimpleNamespace(refusals={})
    for r in reasons:
        kind = refusal_kind(r)
        acl.refusals[kind] = acl.refusals.get(kind, 0) + 1
    b.acl = acl
    out = expose(Part(collector(b)._refusals))
    assert {x.labels["reason"]: x.value for x in out.find("mq_acl_refusals_total")} == {
        "no_access_key": 1, "unknown_access_key": 2, "bad_signature": 1, "admin_required": 1,
        "no_permission": 1, "unreadable_request": 1}
