"""Producer fault avoidance: RocketMQ ``MQFaultStrategy`` + ``LatencyFaultToleranceImpl`` (FEATURES.md §6.2).

After each send attempt the broker's latency maps to a "not available" duration:

    +-------------------------+----+-----+-------+-------+--------+--------+--------+
    | latency >= (ms)         | 50 | 100 |   550 |  1000 |   2000 |   3000 |  15000 |
    | not available for (ms)  |  0 |   0 | 30000 | 60000 | 120000 | 180000 | 600000 |
    +-------------------------+----+-----+-------+-------+--------+--------+--------+

An exception is "isolation": computed as a 30 s latency, i.e. 10 minutes out. Everything is inactive unless
``send_latency_fault_enable``; then queue selection prefers available brokers and falls back to
``pick_one_at_least`` (round robin over the better half of the fault table). The clock is injectable (ms).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from mq.client.route_cache import QueueCounter, TopicPublishInfo
from mq.common.message import MessageQueue

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY = 30000


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency: int
    start_timestamp: int

    def available(self, now: int) -> bool:
        return now - self.start_timestamp >= 0


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}
        self._which = QueueCounter()

    def update(self, name: str, current_latency: int, not_available_duration: int) -> None:
        start = self.clock() + not_available_duration
        item = self.items.get(name)
        if item is None:
            self.items[name] = FaultItem(name, current_latency, start)
        else:
            item.current_latency = current_latency
            item.start_timestamp = start

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.available(self.clock())

    def remove(self, name: str) -> None:
        self.items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """Sort (available first, lower latency, earlier start) and take round robin from the better half."""
        if not self.items:
            return None
        now = self.clock()
        ordered = sorted(self.items.values(),
                         key=lambda i: (not i.available(now), i.current_latency, i.start_timestamp))
        half = len(ordered) // 2
        if half <= 0:
            return ordered[0].name
        return ordered[self._which.next() % half].name


class MQFaultStrategy:
    def __init__(self, enabled: bool = False, clock: Callable[[], int] = now_ms) -> None:
        self.enabled = enabled
        self.tolerance = LatencyFaultTolerance(clock)

    @staticmethod
    def not_available_duration(latency: int) -> int:
        for i in range(len(LATENCY_MAX) - 1, -1, -1):
            if latency >= LATENCY_MAX[i]:
                return NOT_AVAILABLE_DURATION[i]
        return 0

    def update_fault_item(self, broker_name: str, latency: int, isolation: bool) -> None:
        if self.enabled:
            duration = self.not_available_duration(ISOLATION_LATENCY if isolation else latency)
            self.tolerance.update(broker_name, latency, duration)

    def select_queue(self, info: TopicPublishInfo, last_broker: str | None = None) -> MessageQueue:
        if not self.enabled:
            return info.select_queue(last_broker)
        n = len(info.queues)
        index = info.counter.next()
        for _ in range(n):
            mq = info.queues[index % n]
            index = (index + 1) & 0x7FFFFFFF
            if self.tolerance.is_available(mq.broker_name):
                return mq
        not_best = self.tolerance.pick_one_at_least()
        if not_best is not None:
            nums = info.write_queue_nums(not_best)
            if nums > 0:
                return MessageQueue(info.queues[0].topic, not_best, info.counter.next() % nums)
            self.tolerance.remove(not_best)
        return info.select_queue()
