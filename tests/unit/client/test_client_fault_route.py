"""Route cache (publish/subscribe queues, round robin) and MQFaultStrategy tables, isolation, fallback."""

from __future__ import annotations

from collections import Counter

import pytest

from mq.client.fault_strategy import LATENCY_MAX, NOT_AVAILABLE_DURATION, MQFaultStrategy
from mq.client.route_cache import QueueCounter, publish_info, subscribe_queues
from mq.common.message import MessageQueue
from mq.protocol.bodies import BrokerData, QueueData, TopicRouteData


def route(*brokers, perms=None, masters=None, order=None) -> TopicRouteData:
    r = TopicRouteData(order_topic_conf=order)
    for i, (name, n) in enumerate(brokers):
        perm = (perms or {}).get(name, 6)
        r.queue_datas.append(QueueData(broker_name=name, read_queue_nums=n, write_queue_nums=n, perm=perm))
        addrs = {0: f"10.0.0.{i}:10911"} if (masters is None or name in masters) else {1: f"10.0.0.{i}:10911"}
        r.broker_datas.append(BrokerData(cluster="c", broker_name=name, broker_addrs=addrs))
    return r


def test_publish_info_keeps_writable_master_queues_sorted_by_broker():
    info = publish_info("T", route(("b", 2), ("a", 3), ("c", 2), ("d", 1), perms={"c": 4}, masters={"a", "b", "c"}))
    assert [(q.broker_name, q.queue_id) for q in info.queues] == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    assert info.write_queue_nums("a") == 3 and info.write_queue_nums("zz") == -1


def test_order_topic_conf_and_subscribe_queues():
    info = publish_info("T", route(("a", 8), order="a:2;b:1"))
    assert info.order_topic and [(q.broker_name, q.queue_id) for q in info.queues] == [("a", 0), ("a", 1), ("b", 0)]
    subs = subscribe_queues("T", route(("b", 2), ("a", 1), ("w", 3), perms={"w": 2}))
    assert subs == [MessageQueue("T", "a", 0), MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]


def test_round_robin_and_skip_last_broker():
    info = publish_info("T", route(("a", 2), ("b", 2)))
    info.counter = QueueCounter(0)
    picked = [info.select_queue() for _ in range(8)]
    assert Counter(picked) == {q: 2 for q in info.queues}
    assert picked[:4] == info.queues
    for _ in range(10):
        assert info.select_queue("a").broker_name == "b"
    one = publish_info("T", route(("a", 2)))
    assert one.select_queue("a").broker_name == "a"  # nothing else to choose


def test_counter_wraps_non_negative():
    c = QueueCounter(0x7FFFFFFF)
    assert c.next() == 0x7FFFFFFF and c.next() == 0


@pytest.mark.parametrize("latency,duration", [(0, 0), (49, 0), (50, 0), (100, 0), (549, 0), (550, 30000),
                                              (999, 30000), (1000, 60000), (2000, 120000), (2999, 120000),
                                              (3000, 180000), (14999, 180000), (15000, 600000), (10**6, 600000)])
def test_not_available_duration_table(latency, duration):
    assert MQFaultStrategy.not_available_duration(latency) == duration
    assert len(LATENCY_MAX) == len(NOT_AVAILABLE_DURATION) == 7


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_isolation_avoids_broker_for_ten_minutes():
    clock = Clock()
    fs = MQFaultStrategy(True, clock)
    info = publish_info("T", route(("a", 2), ("b", 2)))
    fs.update_fault_item("a", 5, isolation=True)
    assert not fs.tolerance.is_available("a")
    assert all(fs.select_queue(info).broker_name == "b" for _ in range(20))
    clock.now += 600_000 - 1
    assert not fs.tolerance.is_available("a")
    clock.now += 1
    assert fs.tolerance.is_available("a")
    assert {fs.select_queue(info).broker_name for _ in range(8)} == {"a", "b"}


def test_slow_broker_latency_marks_it_unavailable_for_the_table_duration():
    clock = Clock()
    fs = MQFaultStrategy(True, clock)
    fs.update_fault_item("a", 1200, isolation=False)
    assert fs.tolerance.items["a"].start_timestamp == clock.now + 60000
    fs.update_fault_item("b", 80, isolation=False)
    assert fs.tolerance.is_available("b")


def test_disabled_strategy_records_nothing():
    fs = MQFaultStrategy(False, Clock())
    fs.update_fault_item("a", 99999, isolation=True)
    assert fs.tolerance.items == {}
    info = publish_info("T", route(("a", 1), ("b", 1)))
    assert fs.select_queue(info, "a").broker_name == "b"


def test_pick_one_at_least_when_every_broker_is_isolated():
    clock = Clock()
    fs = MQFaultStrategy(True, clock)
    info = publish_info("T", route(("a", 2), ("b", 4)))
    fs.update_fault_item("a", 10, isolation=True)   # 600 s, latency 10
    fs.update_fault_item("b", 20, isolation=True)   # 600 s, latency 20
    # better half of [a, b] sorted by latency is [a]: the queue is re-labelled onto broker a
    for _ in range(5):
        mq = fs.select_queue(info)
        assert mq.broker_name == "a" and 0 <= mq.queue_id < 2


def test_pick_one_at_least_removes_broker_without_write_queues():
    clock = Clock()
    fs = MQFaultStrategy(True, clock)
    info = publish_info("T", route(("a", 2)))
    fs.update_fault_item("a", 10, isolation=True)
    fs.update_fault_item("gone", 1, isolation=True)
    mq = fs.select_queue(info)  # "gone" is best but has no queues: removed, plain round robin
    assert mq.broker_name == "a" and "gone" not in fs.tolerance.items
