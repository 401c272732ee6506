"""Topic routes turned into what the producer and consumer use (RocketMQ ``TopicPublishInfo``,
``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``topicRouteData2TopicSubscribeInfo``).

- publish: for an ordered topic (``orderTopicConf`` "brokerA:4;brokerB:4") exactly the listed queues; otherwise, per
  QueueData sorted by broker name, ``writeQueueNums`` queues of brokers that have a master (id 0) and WRITE perm.
- subscribe: ``readQueueNums`` queues of every broker with READ perm.

Queue selection is round robin from one counter per topic (Java's thread-local ``sendWhichQueue`` started at a
random value); ``select_queue(last_broker)`` skips the previous attempt's broker when it can.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mq.common.message import MessageQueue
from mq.protocol.bodies import TopicRouteData

PERM_INHERIT = 0x1
PERM_WRITE = 0x2
PERM_READ = 0x4
MASTER_ID = 0


class QueueCounter:
    """``ThreadLocalIndex``: a counter starting at a random value, masked to stay non-negative."""

    __slots__ = ("value",)

    def __init__(self, start: int | None = None) -> None:
        self.value = random.randrange(1 << 16) if start is None else start

    def next(self) -> int:
        v = self.value
        self.value = (v + 1) & 0x7FFFFFFF
        return v


@dataclass(slots=True)
class TopicPublishInfo:
    order_topic: bool = False
    queues: list[MessageQueue] = field(default_factory=list)
    route: TopicRouteData | None = None
    counter: QueueCounter = field(default_factory=QueueCounter)

    @property
    def ok(self) -> bool:
        return bool(self.queues)

    def select_queue(self, last_broker: str | None = None) -> MessageQueue:
        """Round robin; with ``last_broker``, the next queue on another broker if there is one."""
        n = len(self.queues)
        if last_broker is not None:
            for _ in range(n):
                mq = self.queues[self.counter.next() % n]
                if mq.broker_name != last_broker:
                    return mq
        return self.queues[self.counter.next() % n]

    def write_queue_nums(self, broker_name: str) -> int:
        if self.route is None:
            return -1
        for qd in self.route.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1

    def brokers(self) -> list[str]:
        return sorted({q.broker_name for q in self.queues})


def publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    info = TopicPublishInfo(route=route)
    if route.order_topic_conf:
        info.order_topic = True
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.strip().isdigit():
                info.queues.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
        return info
    masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            info.queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return info


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    out = [MessageQueue(topic, qd.broker_name, i)
           for qd in route.queue_datas if qd.perm & PERM_READ for i in range(qd.read_queue_nums)]
    out.sort()
    return out


def broker_addr_table(route: TopicRouteData) -> dict[str, dict[int, str]]:
    return {bd.broker_name: dict(bd.broker_addrs) for bd in route.broker_datas}
