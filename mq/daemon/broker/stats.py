"""Broker statistics: the GET_BROKER_RUNTIME_INFO table (PROTOCOL.md §6.9) and Java's per-key stats items
(``BrokerStatsManager``) that VIEW_BROKER_STATS_DATA, GET_BROKER_CONSUME_STATS and GET_CONSUME_STATS read.

Message totals of the runtime table: "today morning" / "yesterday morning" snapshots are taken when the local
date changes (checked by ``tick`` and on each call).

Stats items, keyed as Java keys them::

    +-----------------+------------------+-------------------------------+-----------------------------+
    | stats name      | stats key        | value added per request       | times added per request     |
    +-----------------+------------------+-------------------------------+-----------------------------+
    | TOPIC_PUT_NUMS  | topic            | messages stored (batch: n)    | 1                           |
    | TOPIC_PUT_SIZE  | topic            | bytes written to the log      | 1                           |
    | GROUP_GET_NUMS  | topic@group      | messages found by a PULL      | 1                           |
    | GROUP_GET_SIZE  | topic@group      | bytes of those messages       | 1                           |
    | BROKER_PUT_NUMS | cluster name     | messages stored               | 0                           |
    | BROKER_GET_NUMS | cluster name     | messages found                | 0                           |
    +-----------------+------------------+-------------------------------+-----------------------------+

The hot paths (``on_topic_put`` from the send processor, ``on_group_get`` from the pull processor, both on the
event-loop thread) only add to the slotted counters of the key's ``StatsItem`` (created on first use); ``on_put``
/ ``on_get`` (send-back, end of transaction) count broker totals only. A topic's item (``TopicPutItem``) also
counts each send's average record size into RocketMQ 5's ``rocketmq_message_size`` buckets (``SIZE_BOUNDS``), and
a group's item (``GroupGetItem``) remembers, per queue, the offset its last pull reached (RocketMQ 5's pull
offset): the Prometheus metrics (``mq.daemon.metrics``) read both, with the counters, when scraped. Sampling is done by ``tick`` (the
broker's offset-persistence timer calls it every few seconds; the stats requests call it too) and follows
Java's ``StatsItem`` windows:

    +--------+------------------+-----------------+-------------------------------------------------+
    | window | sampled every    | snapshots kept  | first sample of an item also adds                |
    +--------+------------------+-----------------+-------------------------------------------------+
    | minute | 10 s             | 7  (60 s)       | (now - 10 s, 0, 0)                               |
    | hour   | 10 min           | 7  (60 min)     | (now - 10 min, 0, 0)                             |
    | day    | 1 h              | 25 (24 h)       | (now - 1 h, 0, 0)                                |
    +--------+------------------+-----------------+-------------------------------------------------+

and a window's figures are ``sum = last.value - first.value``, ``tps = sum * 1000 / (last.ts - first.ts)``,
``avgpt = sum / (last.times - first.times)`` (0 when there are no times), all 0 before the first sample.
The clock (epoch ms) is injectable for tests.
"""

from __future__ import annotations

import datetime as dt
import time
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from mq.protocol.codes import MQ_VERSION

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

VERSION_DESC = "V4_9_7"

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, BROKER_PUT_NUMS, BROKER_GET_NUMS)


@dataclass(frozen=True, slots=True)
class Window:
    name: str
    period_ms: int
    keep: int


MINUTE = Window("minute", 10_000, 7)
HOUR = Window("hour", 600_000, 7)
DAY = Window("day", 3_600_000, 25)
WINDOWS = (MINUTE, HOUR, DAY)

# snapshot tuple: (timestamp ms, times, nums, size)
_TS, _TIMES, _NUMS, _SIZE = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


class StatsItem:
    """Counters of one key (``times``, ``nums``, ``size``) and their snapshots in the three windows."""

    __slots__ = ("key", "times", "nums", "size", "minute", "hour", "day")

    def __init__(self, key: str) -> None:
        self.key = key
        self.times = 0
        self.nums = 0
        self.size = 0
        self.minute: deque[tuple[int, int, int, int]] = deque(maxlen=MINUTE.keep)
        self.hour: deque[tuple[int, int, int, int]] = deque(maxlen=HOUR.keep)
        self.day: deque[tuple[int, int, int, int]] = deque(maxlen=DAY.keep)

    def sample(self, window: Window, now_ms: int) -> None:
        snaps = getattr(self, window.name)
        if not snaps:
            snaps.append((now_ms - window.period_ms, 0, 0, 0))
        snaps.append((now_ms, self.times, self.nums, self.size))

    def snapshot(self, window: Window, size: bool = False) -> StatsSnapshot:
        """Java ``computeStatsData`` over one window, of ``nums`` (or of ``size``)."""
        snaps = getattr(self, window.name)
        if not snaps:
            return StatsSnapshot()
        first, last = snaps[0], snaps[-1]
        idx = _SIZE if size else _NUMS
        total = last[idx] - first[idx]
        span = last[_TS] - first[_TS]
        times = last[_TIMES] - first[_TIMES]
        return StatsSnapshot(total, total * 1000.0 / span if span > 0 else 0.0,
                             total / times if times > 0 else 0.0, times)


#: Upper bounds (bytes, inclusive) of RocketMQ 5's message size buckets: 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB;
#: a last bucket takes the larger ones.
SIZE_BOUNDS = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)


def size_bucket(size: int) -> int:
    """The index of ``size``'s bucket in ``TopicPutItem.size_hist``."""
    return bisect_left(SIZE_BOUNDS, size)


class TopicPutItem(StatsItem):
    """A topic's put counters, plus the sizes of its sends: ``size_hist[i]`` counts sends whose average record
    (bytes written / messages) fits ``SIZE_BOUNDS[i]`` (the last slot: larger), ``size_sum`` adds those averages."""

    __slots__ = ("size_hist", "size_sum")

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.size_hist = [0] * (len(SIZE_BOUNDS) + 1)
        self.size_sum = 0


class GroupGetItem(StatsItem):
    """A topic@group's get counters, plus ``pulled``: queue id -> the offset the group's last pull that found
    messages reached (its next begin offset)."""

    __slots__ = ("pulled",)

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.pulled: dict[int, int] = {}


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _tps(window: dict[str, float], key: str) -> float:
    return float(window.get(key, 0.0))


class BrokerStats:
    def __init__(self, controller: "BrokerController", *, clock: Callable[[], int] = _wall_ms) -> None:
        self.c = controller
        self.clock = clock
        self.boot_ms = clock()
        self.msg_put_total = 0
        self.msg_get_total = 0
        self._day = dt.date.fromtimestamp(self.boot_ms / 1000)
        self._put_today_morning = 0
        self._put_yesterday_morning = 0
        self._get_today_morning = 0
        self._get_yesterday_morning = 0
        #: topic -> TopicPutItem (TOPIC_PUT_NUMS / TOPIC_PUT_SIZE)
        self.topic_put: dict[str, TopicPutItem] = {}
        #: topic -> group -> GroupGetItem (GROUP_GET_NUMS / GROUP_GET_SIZE, key "topic@group")
        self.group_get: dict[str, dict[str, GroupGetItem]] = {}
        #: BROKER_PUT_NUMS / BROKER_GET_NUMS (value only), created with the first message
        self.broker_put: StatsItem | None = None
        self.broker_get: StatsItem | None = None
        # Java schedules every window at a fixed rate from start-up, the first run at once.
        self._next = {w.name: self.boot_ms for w in WINDOWS}

    # -- hot paths (one call per stored PUT / found PULL) --------------------------------------------------
    def on_topic_put(self, topic: str, n: int, size: int) -> None:
        """A SEND stored ``n`` messages (``size`` bytes) in ``topic``."""
        self.msg_put_total += n
        it = self.topic_put.get(topic)
        if it is None:
            it = self.topic_put[topic] = TopicPutItem(topic)
        it.times += 1
        it.nums += n
        it.size += size
        avg = size // n if n > 1 else size
        it.size_hist[bisect_left(SIZE_BOUNDS, avg)] += 1
        it.size_sum += avg

    def on_group_get(self, topic: str, group: str, n: int, size: int, queue_id: int = -1,
                     next_offset: int = -1) -> None:
        """A PULL of ``group`` found ``n`` messages (``size`` bytes) in ``topic``; with ``queue_id``, the pull
        reached ``next_offset`` in that queue."""
        self.msg_get_total += n
        groups = self.group_get.get(topic)
        it = groups.get(group) if groups is not None else None
        if it is None:
            it = self._new_get(topic, group)
        it.times += 1
        it.nums += n
        it.size += size
        if queue_id >= 0:
            it.pulled[queue_id] = next_offset

    def on_put(self, n: int) -> None:
        """Messages stored by other paths (send-back, end of transaction): broker totals only."""
        self.msg_put_total += n

    def on_get(self, n: int) -> None:
        self.msg_get_total += n

    def _new_get(self, topic: str, group: str) -> GroupGetItem:
        it = GroupGetItem(f"{topic}@{group}")
        self.group_get.setdefault(topic, {})[group] = it
        return it

    # -- sampling ------------------------------------------------------------------------------------------
    def tick(self, now_ms: int | None = None) -> None:
        """Take the window samples that are due, and the morning snapshots when the date changed."""
        now = self.clock() if now_ms is None else now_ms
        today = dt.date.fromtimestamp(now / 1000)
        if today != self._day:
            self._day = today
            self._put_yesterday_morning, self._put_today_morning = self._put_today_morning, self.msg_put_total
            self._get_yesterday_morning, self._get_today_morning = self._get_today_morning, self.msg_get_total
        for w in WINDOWS:
            due = self._next[w.name]
            if now >= due:
                self.sample(w, now)
                nxt = due + w.period_ms
                self._next[w.name] = nxt if nxt > now else now + w.period_ms
            elif due - now > w.period_ms:  # the wall clock went back: sample again one period from now
                self._next[w.name] = now + w.period_ms

    def sample(self, window: Window, now_ms: int) -> None:
        """Sample every item in ``window`` at ``now_ms`` (Java ``StatsItemSet.samplingIn*``)."""
        if self.broker_put is None and self.msg_put_total:
            self.broker_put = StatsItem(self.c.config.broker_cluster_name)
        if self.broker_get is None and self.msg_get_total:
            self.broker_get = StatsItem(self.c.config.broker_cluster_name)
        for it, total in ((self.broker_put, self.msg_put_total), (self.broker_get, self.msg_get_total)):
            if it is not None:
                it.nums = total
                it.sample(window, now_ms)
        for it in list(self.topic_put.values()):
            it.sample(window, now_ms)
        for groups in list(self.group_get.values()):
            for it in list(groups.values()):
                it.sample(window, now_ms)

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic's put and get items (Java ``BrokerStatsManager.onTopicDeleted``)."""
        self.topic_put.pop(topic, None)
        self.group_get.pop(topic, None)

    # -- reading -------------------------------------------------------------------------------------------
    def stats_item(self, name: str, key: str) -> StatsItem | None:
        """The item of (stats name, stats key) if it exists (Java ``BrokerStatsManager.getStatsItem``)."""
        if name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            return self.topic_put.get(key)
        if name in (GROUP_GET_NUMS, GROUP_GET_SIZE):
            topic, sep, group = key.partition("@")
            groups = self.group_get.get(topic) if sep else None
            return groups.get(group) if groups is not None else None
        if name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
            it = self.broker_put if name == BROKER_PUT_NUMS else self.broker_get
            return it if it is not None and key == it.key else None
        return None

    def view(self, name: str, key: str) -> dict[str, StatsSnapshot] | None:
        """Minute / hour / day figures of one stats item; None when it does not exist."""
        it = self.stats_item(name, key)
        if it is None:
            return None
        size = name in (TOPIC_PUT_SIZE, GROUP_GET_SIZE)
        return {w.name: it.snapshot(w, size) for w in WINDOWS}

    def consume_tps(self, group: str, topic: str) -> float:
        """Java ``tpsGroupGetNums``: GROUP_GET_NUMS of topic@group over the last minute."""
        groups = self.group_get.get(topic)
        it = groups.get(group) if groups is not None else None
        return it.snapshot(MINUTE).tps if it is not None else 0.0

    def runtime_info(self) -> dict[str, str]:
        self.tick()
        c = self.c
        store = c.store
        info = store.runtime_info() if store is not None else {}
        w10, w60, w600 = (info.get("tps_10s") or {}), (info.get("tps_60s") or {}), (info.get("tps_600s") or {})
        groups = c.server.registry.groups
        send = groups.get("send")
        query = groups.get("query")
        earliest = -1
        if store is not None:
            try:
                earliest = c.earliest_message_time()
            except Exception:  # a damaged or rolling file must not break the stats call
                earliest = -1
        now = int(time.time() * 1000)
        out = {
            "brokerVersion": str(MQ_VERSION),
            "brokerVersionDesc": VERSION_DESC,
            "bootTimestamp": str(self.boot_ms),
            "runtime": f"[ {(now - self.boot_ms) // 86_400_000} days, "
                       f"{(now - self.boot_ms) // 3_600_000 % 24} hours, "
                       f"{(now - self.boot_ms) // 60_000 % 60} minutes, {(now - self.boot_ms) // 1000 % 60} seconds ]",
            "msgPutTotalYesterdayMorning": str(self._put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self._put_today_morning),
            "msgPutTotalTodayNow": str(self.msg_put_total),
            "msgGetTotalYesterdayMorning": str(self._get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self._get_today_morning),
            "msgGetTotalTodayNow": str(self.msg_get_total),
            "putTps": f"{_tps(w10, 'put'):.4f} {_tps(w60, 'put'):.4f} {_tps(w600, 'put'):.4f}",
            "getFoundTps": f"{_tps(w10, 'get_found'):.4f} {_tps(w60, 'get_found'):.4f} "
                           f"{_tps(w600, 'get_found'):.4f}",
            "getTransferedTps": f"{_tps(w10, 'get_transferred'):.4f} {_tps(w60, 'get_transferred'):.4f} "
                                f"{_tps(w600, 'get_transferred'):.4f}",
            "getMissTps": "0.0000 0.0000 0.0000",
            "getTotalTps": f"{_tps(w10, 'get_found'):.4f} {_tps(w60, 'get_found'):.4f} "
                           f"{_tps(w600, 'get_found'):.4f}",
            "putMessageTimesTotal": str(info.get("put_count", 0)),
            "putMessageSizeTotal": str(info.get("put_bytes", 0)),
            "sendThreadPoolQueueSize": str(send.queued if send else 0),
            "sendThreadPoolQueueCapacity": str(c.config.send_thread_pool_queue_capacity),
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": str(query.queued if query else 0),
            "queryThreadPoolQueueCapacity": str(c.config.query_thread_pool_queue_capacity),
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": "100000",
            "dispatchBehindBytes": str(info.get("dispatch_behind_bytes", 0)),
            "pageCacheLockTimeMills": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "earliestMessageTimeStamp": str(earliest),
            "startAcceptSendRequestTimeStamp": "0",
            "commitLogDiskRatio": f"{float(info.get('disk_ratio', 0.0) or 0.0):.4f}",
            "consumeQueueDiskRatio": f"{float(info.get('disk_ratio', 0.0) or 0.0):.4f}",
            "commitLogMinOffset": str(info.get("commit_log_min_offset", 0)),
            "commitLogMaxOffset": str(info.get("commit_log_max_offset", 0)),
            "remainHowManyDataToFlush": str(max(0, int(info.get("commit_log_max_offset", 0))
                                                - int(info.get("commit_log_flushed_offset", 0)))),
            "commitLogDirCapacity": f"Total : {c.disk_total_text()}",
            "heldPullRequests": str(c.hold_service.held_count if c.hold_service else 0),
        }
        return out
