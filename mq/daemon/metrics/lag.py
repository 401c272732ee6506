"""Consumer lag, in-flight and ready messages (RocketMQ 5's ``ConsumerLagCalculator``), computed when scraped.

Which (group, topic) pairs: every online consumer group's subscribed topics, and every (group, topic) with
committed offsets (so a stopped group keeps its lag), for groups in the subscription-group table or online;
``%RETRY%`` topics are left out (as RocketMQ does), so are topics without a config or with neither read nor
write permission. Per queue ``0..writeQueueNums-1``::

    max        the queue's max offset (next offset to be written)
    committed  the group's committed offset (none yet: max, i.e. nothing owed, as RocketMQ)
    pulled     the offset the group's last pull that found messages reached (BrokerStats, RocketMQ's pull
               offset), never below committed

    lag      = max - committed            latency: now - store time of the message at committed
    inflight = pulled - committed         (pulled, not yet acknowledged)
    ready    = max - pulled               latency: now - store time of the message at pulled

so lag = inflight + ready. The latencies are the oldest such message's age over the pair's queues, 0 when there
is none. Only queues that owe messages are read for a store time (one consume-queue unit and one commit-log
timestamp each), and a store time read by the previous pass for the same queue and offset is reused. Each
topic's queues and max offsets are read once per pass, however many groups consume it, and a pair whose queues,
max offsets, committed and pulled offsets and popped counts are those of the previous pass keeps its row.

Pop consumption adds messages popped and not yet acknowledged: ``pop_inflight`` (the broker's collector sets it
from the pop service's counts) is asked per (group, topic, queue id) and its count is added to in-flight and
lag, as RocketMQ's calculator adds its PopInflightMessageCounter.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from mq.common import topic as T
from mq.daemon.broker.topic_config import PERM_READ, PERM_WRITE
from mq.daemon.metrics import names as N
from mq.daemon.metrics.families import Families

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

#: RocketMQ's system consumer groups start with this (MixAll.CID_RMQ_SYS_PREFIX), compared in lower case.
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"


def is_system_group(group: str) -> bool:
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)


@dataclass(slots=True)
class GroupLag:
    group: str
    topic: str
    lag: int = 0
    #: store time (epoch ms) of the oldest message not yet acknowledged; 0: none
    lag_since: int = 0
    inflight: int = 0
    ready: int = 0
    #: store time (epoch ms) of the oldest message not yet pulled; 0: none
    ready_since: int = 0


class ConsumerLagCalculator:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        #: (group, topic, queue id) -> messages popped and not yet acknowledged (BrokerCollector sets it)
        self.pop_inflight: Callable[[str, str, int], int] | None = None
        # (consume queue, offset) -> store time of the message there: a message's store time never changes, and
        # a queue deleted and made again is another object. Kept for the entries the last pass used.
        self._times: dict[tuple[Any, int], int] = {}
        self._used: dict[tuple[Any, int], int] = {}
        # (group, topic) -> (what the row was computed from, the row, the store times it read): a row is
        # computed again only when its queues (objects and max offsets), committed or pulled offsets, or popped
        # counts moved. Kept for the pairs of the last pass; a kept row keeps the store times it read.
        self._rows: dict[tuple[str, str], tuple[Any, GroupLag, list[tuple[Any, int]]]] = {}
        self._rows_used: dict[tuple[str, str], tuple[Any, GroupLag, list[tuple[Any, int]]]] = {}

    def pairs(self) -> list[tuple[str, str]]:
        """The (group, topic) pairs to report, sorted."""
        c = self.c
        known = c.subscription_groups.all()
        out: set[tuple[str, str]] = set()
        consumers = c.consumers
        for group in consumers.groups():
            info = consumers.get(group)
            if info is not None:
                out.update((group, topic) for topic in list(info.subscriptions))
        online = {g for g, _ in out}
        out.update((group, topic) for topic, group in c.offsets.pairs() if group in known or group in online)
        return sorted((g, t) for g, t in out if not T.is_retry_topic(t))

    def calculate(self) -> list[GroupLag]:
        c = self.c
        store = c.store
        if store is None:
            return []
        broker_perm = c.config.broker_permission
        rows = []
        self._used = {}
        self._rows_used = {}
        # topic -> [(consume queue or None, max offset) per queue id]: read once per pass, whatever the groups
        tops: dict[str, list[tuple[Any, int]]] = {}
        find = store.cq_table.find
        for group, topic in self.pairs():
            tc = c.topic_config.get(topic)
            if tc is None or not (tc.perm & broker_perm & (PERM_READ | PERM_WRITE)):
                continue
            try:
                queues = tops.get(topic)
                if queues is None or len(queues) != tc.write_queue_nums:
                    queues = tops[topic] = []
                    for qid in range(tc.write_queue_nums):
                        cq = find(topic, qid, create=False)
                        queues.append((cq, max(cq.max_offset, 0) if cq is not None else 0))
                rows.append(self._pair(group, topic, queues))
            except (OSError, ValueError, KeyError, RuntimeError) as exc:  # a segment deleted under us
                log.debug("lag of %s on %s not computed: %s", group, topic, exc)
        self._times = self._used
        self._rows = self._rows_used
        return rows

    def _store_time(self, cq: Any, offset: int, read: list[tuple[Any, int]]) -> int:
        """Store time (epoch ms) of the message at ``offset`` of ``cq``; 0 when there is none. Its key is added to
        ``read``."""
        key = (cq, offset)
        read.append(key)
        ts = self._used.get(key)
        if ts is not None:
            return ts
        ts = self._times.get(key)
        if ts is None:
            unit = cq.get_unit(offset) if offset >= cq.min_offset else None
            ts = (self.c.store.commit_log.store_timestamp_of(unit[0], unit[1]) or 0) if unit else 0
        self._used[key] = ts
        return ts

    def _pair(self, group: str, topic: str, queues: list[tuple[Any, int]]) -> GroupLag:
        """The row of ``group`` on ``topic``, whose queues (consume queue, max offset) are given by queue id: the
        previous pass's row when the queues, the committed and pulled offsets and the popped counts are the same."""
        c = self.c
        committed_by_queue = c.offsets.queue_offsets(group, topic)
        groups = c.stats.group_get.get(topic)
        item = groups.get(group) if groups is not None else None
        pulled_by_queue = dict(item.pulled) if item is not None else {}
        pop = self.pop_inflight
        popped_by_queue = tuple(pop(group, topic, qid) for qid in range(len(queues))) if pop is not None else ()
        signature = (queues, committed_by_queue, pulled_by_queue, popped_by_queue)
        old = self._rows.get((group, topic))
        if old is not None and old[0] == signature:
            self._rows_used[(group, topic)] = old
            used, times = self._used, self._times
            for key in old[2]:
                if key in times:
                    used[key] = times[key]
            return old[1]
        read: list[tuple[Any, int]] = []
        row = self._compute(group, topic, queues, committed_by_queue, pulled_by_queue, popped_by_queue, read)
        self._rows_used[(group, topic)] = (signature, row, read)
        return row

    def _compute(self, group: str, topic: str, queues: list[tuple[Any, int]], committed_by_queue: dict[int, int],
                 pulled_by_queue: dict[int, int], popped_by_queue: tuple[int, ...],
                 read: list[tuple[Any, int]]) -> GroupLag:
        row = GroupLag(group, topic)
        lag_since = ready_since = 0
        for qid, (cq, top) in enumerate(queues):
            committed = committed_by_queue.get(qid, -1)
            if committed < 0:
                committed = top
            popped = popped_by_queue[qid] if popped_by_queue else 0
            if committed >= top and not popped:
                continue  # nothing owed
            pulled = max(pulled_by_queue.get(qid, committed), committed)
            lag = max(0, top - committed) + popped
            if lag <= 0:
                continue
            row.lag += lag
            row.inflight += max(0, pulled - committed) + popped
            ready = max(0, top - pulled)
            row.ready += ready
            if cq is None:
                continue
            ts = self._store_time(cq, committed, read) if committed < top else 0
            if ts > 0 and (lag_since == 0 or ts < lag_since):
                lag_since = ts
            if ready:
                ts = self._store_time(cq, pulled, read)
                if ts > 0 and (ready_since == 0 or ts < ready_since):
                    ready_since = ts
        row.lag_since, row.ready_since = lag_since, ready_since
        return row


def collect_lag(rows: list[GroupLag], families: Families, is_system_topic: Callable[[str], bool],
                now_ms: int | None = None) -> Iterator[Any]:
    """The five lag gauges of ``rows`` (labels topic, consumer_group, is_retry, is_system)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    labels = (N.TOPIC, N.CONSUMER_GROUP, N.IS_RETRY, N.IS_SYSTEM)
    lag = families.family(N.CONSUMER_LAG_MESSAGES, labels)
    lag_latency = families.family(N.CONSUMER_LAG_LATENCY, labels)
    inflight = families.family(N.CONSUMER_INFLIGHT_MESSAGES, labels)
    queueing = families.family(N.CONSUMER_QUEUEING_LATENCY, labels)
    ready = families.family(N.CONSUMER_READY_MESSAGES, labels)
    for r in rows:
        values = (r.topic, r.group, "false",
                  "true" if is_system_topic(r.topic) or is_system_group(r.group) else "false")
        lag.add(values, r.lag)
        lag_latency.add(values, max(0, now - r.lag_since) if r.lag_since else 0)
        inflight.add(values, r.inflight)
        queueing.add(values, max(0, now - r.ready_since) if r.ready_since else 0)
        ready.add(values, r.ready)
    yield from (lag, lag_latency, inflight, queueing, ready)
