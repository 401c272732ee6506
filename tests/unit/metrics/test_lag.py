"""Consumer lag, in-flight and ready messages and their latencies, after known sends, pulls and acks."""

from __future__ import annotations

from mq.daemon.metrics.families import Families
from mq.daemon.metrics.lag import ConsumerLagCalculator, collect_lag

from .helpers import FamiliesCollector, expose
from .stub import add_topic, make_broker, subscribe

T0 = 1_700_000_000_000


def rows(b) -> dict[tuple[str, str], tuple[int, int, int, int, int]]:
    return {(r.group, r.topic): (r.lag, r.inflight, r.ready, r.lag_since, r.ready_since)
            for r in ConsumerLagCalculator(b).calculate()}


def pull(b, group: str, topic: str, queue_id: int, offset: int, n: int) -> None:
    """A pull from ``offset`` that found ``n`` messages (of 100 bytes)."""
    b.stats.on_group_get(topic, group, n, 100 * n, queue_id, offset + n)


def ack(b, group: str, topic: str, queue_id: int, offset: int) -> None:
    b.offsets.commit("10.0.0.1:1", group, topic, queue_id, offset)


def test_sends_pulls_and_acks_move_lag_inflight_and_ready(tmp_path):
    b = make_broker(tmp_path)
    add_topic(b, "Orders", queues=2)
    conn = object()
    subscribe(b, "CG", conn, "Orders", "%RETRY%CG")
    b.store.send("Orders", 0, T0, 6)
    b.store.send("Orders", 0, T0 + 1000, 4)      # offsets 6..9 stored one second later
    b.store.send("Orders", 1, T0 + 500, 3)
    # online, nothing committed yet: RocketMQ counts nothing owed (the consumer starts where it likes)
    assert rows(b) == {("CG", "Orders"): (0, 0, 0, 0, 0)}
    ack(b, "CG", "Orders", 0, 0)
    ack(b, "CG", "Orders", 1, 0)
    assert rows(b) == {("CG", "Orders"): (13, 0, 13, T0, T0)}
    pull(b, "CG", "Orders", 0, 0, 6)             # 6 pulled from queue 0, none acked
    assert rows(b) == {("CG", "Orders"): (13, 6, 7, T0, T0 + 500)}
    ack(b, "CG", "Orders", 0, 4)                 # 4 of them acked
    assert rows(b) == {("CG", "Orders"): (9, 2, 7, T0, T0 + 500)}
    pull(b, "CG", "Orders", 1, 0, 3)
    ack(b, "CG", "Orders", 1, 3)                 # queue 1 done
    assert rows(b) == {("CG", "Orders"): (6, 2, 4, T0, T0 + 1000)}
    pull(b, "CG", "Orders", 0, 6, 4)
    ack(b, "CG", "Orders", 0, 10)
    assert rows(b) == {("CG", "Orders"): (0, 0, 0, 0, 0)}


def test_a_stopped_group_keeps_its_lag_and_new_sends_add_to_it(tmp_path):
    b = make_broker(tmp_path)
    add_topic(b, "Orders", queues=1)
    conn = object()
    subscribe(b, "CG", conn, "Orders")
    b.subscription_groups.find_or_create("CG")   # as a pull auto-creates it
    b.store.send("Orders", 0, T0, 5)
    pull(b, "CG", "Orders", 0, 0, 5)
    ack(b, "CG", "Orders", 0, 5)
    b.consumers.connection_closed(conn)          # the consumer stops
    b.store.send("Orders", 0, T0 + 10, 7)
    assert rows(b) == {("CG", "Orders"): (7, 0, 7, T0 + 10, T0 + 10)}


def test_which_pairs_are_reported(tmp_path):
    b = make_broker(tmp_path)
    for t in ("Orders", "NoPerm", "%DLQ%CG"):
        add_topic(b, t, queues=1, perm=0 if t == "NoPerm" else 6)
    b.subscription_groups.find_or_create("CG")
    for topic in ("Orders", "NoPerm", "%RETRY%CG", "Gone", "%DLQ%CG"):
        b.store.send(topic, 0, T0, 2)
        ack(b, "CG", topic, 0, 0)
    ack(b, "Stranger", "Orders", 0, 0)           # neither a known group nor online
    assert set(rows(b)) == {("CG", "Orders"), ("CG", "%DLQ%CG")}


def test_pop_inflight_adds_to_lag_and_inflight(tmp_path):
    b = make_broker(tmp_path)
    add_topic(b, "Orders", queues=2)
    b.subscription_groups.find_or_create("CG")
    b.store.send("Orders", 0, T0, 3)
    ack(b, "CG", "Orders", 0, 3)
    calc = ConsumerLagCalculator(b)
    calc.pop_inflight = lambda group, topic, qid: 2 if qid == 0 else 0
    (row,) = calc.calculate()
    assert (row.lag, row.inflight, row.ready) == (2, 2, 0)


def test_the_five_gauges_and_their_labels(tmp_path):
    b = make_broker(tmp_path)
    add_topic(b, "Orders", queues=1)
    b.subscription_groups.find_or_create("CG")
    b.subscription_groups.find_or_create("CID_RMQ_SYS_X")
    b.store.send("Orders", 0, T0, 5)
    b.store.send("Orders", 0, T0 + 2000, 5)
    ack(b, "CG", "Orders", 0, 0)
    ack(b, "CID_RMQ_SYS_X", "Orders", 0, 10)
    pull(b, "CG", "Orders", 0, 0, 5)
    calc = ConsumerLagCalculator(b)
    lag_rows = calc.calculate()
    fams = Families([("cluster", "C"), ("node_type", "broker"), ("node_id", "b")])
    out = expose(FamiliesCollector(lambda f: collect_lag(lag_rows, f, lambda t: False, now_ms=T0 + 5000), fams))
    labels = dict(topic="Orders", consumer_group="CG", is_retry="false", is_system="false", cluster="C",
                  node_type="broker", node_id="b")
    assert out.value("rocketmq_consumer_lag_messages", **labels) == 10
    assert out.value("rocketmq_consumer_inflight_messages", **labels) == 5
    assert out.value("rocketmq_consumer_ready_messages", **labels) == 5
    assert out.value("rocketmq_consumer_lag_latency_milliseconds", **labels) == 5000
    assert out.value("rocketmq_consumer_queueing_latency_milliseconds", **labels) == 3000
    assert out.value("rocketmq_consumer_lag_messages", consumer_group="CID_RMQ_SYS_X", is_system="true") == 0
    assert out.value("rocketmq_consumer_lag_latency_milliseconds", consumer_group="CID_RMQ_SYS_X") == 0


def test_store_times_are_reused_until_the_offsets_or_the_queue_change(tmp_path):
    b = make_broker(tmp_path)
    add_topic(b, "Orders", queues=1)
    b.subscription_groups.find_or_create("CG")
    b.store.send("Orders", 0, T0, 3)
    b.store.send("Orders", 0, T0 + 100, 3)
    ack(b, "CG", "Orders", 0, 1)
    calc = ConsumerLagCalculator(b)
    cq = b.store.find("Orders", 0)
    assert [(r.lag, r.lag_since) for r in calc.calculate()] == [(5, T0)]
    reads = cq.reads
    assert [(r.lag, r.lag_since) for r in calc.calculate()] == [(5, T0)]
    assert cq.reads == reads  # nothing moved: no store read
    ack(b, "CG", "Orders", 0, 4)
    assert [(r.lag, r.lag_since) for r in calc.calculate()] == [(2, T0 + 100)]
    assert cq.reads == reads + 1
    # the topic is deleted and made again: offsets start over, with other messages
    del b.store.queues[("Orders", 0)]
    b.store.max[("Orders", 0)] = 0
    b.store.send("Orders", 0, T0 + 9000, 6)
    assert [(r.lag, r.lag_since) for r in calc.calculate()] == [(2, T0 + 9000)]
