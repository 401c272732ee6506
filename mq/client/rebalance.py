"""Queue allocation strategies for clustering consumers (FEATURES.md §5.3), and where a push consumer starts
reading a queue it has just been given (``compute_pull_from_where``, RocketMQ ``RebalancePushImpl``).

Every strategy gets the **sorted** queue list and the **sorted** client-id list and returns the queues of
``current``; a client missing from the list gets nothing. ``allocate_averagely`` is the default
(``AllocateMessageQueueAveragely``): 8 queues over 3 clients -> [0,1,2], [3,4,5], [6,7].

``apply_offset_reset`` is how a push consumer obeys RESET_CONSUMER_CLIENT_OFFSET (220), which the broker pushes
to every online member of a group after ``mq resetOffsetByTime`` (Java ``MQClientInstance.resetOffset``):

1. pulling is suspended and the rebalance lock taken (no queue is added or removed meanwhile);
2. each owned queue of the topic that the table names is dropped and its cache cleared, its pull loop cancelled,
   and the new offset set in the offset store (also backwards), all without yielding: from here on an in-flight
   pull or listener call of that queue finds it dropped and is discarded, so the old offset is never recorded or
   committed again (Java sleeps 10 s here to let running batches end instead);
3. the new offsets are committed (UPDATE_CONSUMER_OFFSET, or the local file for BROADCASTING) and the queues
   forgotten as a rebalance forgets them (orderly: unlocked if no batch is running within ``consume_lock_wait``,
   else forgotten with the lock kept; the running batch's result is discarded and the queue's next consume run
   waits for it, so order holds);
4. pulling resumes and a rebalance runs at once: it takes the queues again and reads where to start from the
   offset store, i.e. the reset offsets.

Queues of the table that this client does not own are left alone (their owner gets its own push).
"""

from __future__ import annotations

import hashlib
import logging
import time
from bisect import bisect_left
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Sequence

from mq.client.offset_store import ReadOffsetType
from mq.common.message import MessageQueue
from mq.common.topic import is_retry_topic
from mq.errors import MQError

if TYPE_CHECKING:
    from mq.client.consumer import PushConsumer
    from mq.client.offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
    from mq.client.pull_api import PullAPI
    from mq.config import ConsumerConfig

log = logging.getLogger(__name__)

Strategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def _check(current: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    if not current or not mq_all or not cid_all:
        return False
    if current not in cid_all:
        log.info("client %s is not in the consumer list %s: allocating nothing", current, list(cid_all))
        return False
    return True


def allocate_averagely(group: str, current: str, mq_all: Sequence[MessageQueue],
                       cid_all: Sequence[str]) -> list[MessageQueue]:
    if not _check(current, mq_all, cid_all):
        return []
    n, m = len(mq_all), len(cid_all)
    idx = list(cid_all).index(current)
    mod = n % m
    if n <= m:
        avg = 1
    elif mod > 0 and idx < mod:
        avg = n // m + 1
    else:
        avg = n // m
    start = idx * avg if mod > 0 and idx < mod else idx * avg + mod
    count = min(avg, n - start)
    return [mq_all[(start + i) % n] for i in range(max(count, 0))]


def allocate_averagely_by_circle(group: str, current: str, mq_all: Sequence[MessageQueue],
                                 cid_all: Sequence[str]) -> list[MessageQueue]:
    if not _check(current, mq_all, cid_all):
        return []
    idx = list(cid_all).index(current)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == idx]


def _md5_hash(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def allocate_consistent_hash(group: str, current: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str], *,
                             virtual_nodes: int = 10) -> list[MessageQueue]:
    if not _check(current, mq_all, cid_all):
        return []
    ring = sorted((_md5_hash(f"{cid}-{i}"), cid) for cid in cid_all for i in range(virtual_nodes))
    keys = [k for k, _ in ring]
    out = []
    for mq in mq_all:
        pos = bisect_left(keys, _md5_hash(str(mq)))
        if ring[pos % len(ring)][1] == current:
            out.append(mq)
    return out


STRATEGIES: dict[str, Strategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}


async def compute_pull_from_where(offset_store: "RemoteBrokerOffsetStore | LocalFileOffsetStore", api: "PullAPI",
                                  config: "ConsumerConfig", mq: MessageQueue) -> int:
    """The group's committed offset of ``mq``; without one, ``consume_from_where``: FIRST -> 0, LAST -> the
    queue's max offset (a retry queue: 0), TIMESTAMP -> the offset at ``consume_timestamp`` (default 30 minutes
    ago)."""
    last = await offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
    if last >= 0:
        return last
    where = config.consume_from_where
    if where == "FIRST":
        return 0
    if is_retry_topic(mq.topic):
        return 0 if where == "LAST" else await api.max_offset(mq)
    if where == "LAST":
        return await api.max_offset(mq)
    ts = config.consume_timestamp
    when = (datetime.strptime(ts, "%Y%m%d%H%M%S").timestamp() if ts else time.time() - 1800) * 1000
    return await api.search_offset(mq, int(when))


async def apply_offset_reset(consumer: "PushConsumer", topic: str, offsets: dict[MessageQueue, int]
                             ) -> list[MessageQueue]:
    """Reset ``consumer``'s owned queues of ``topic`` to ``offsets`` (see the module docstring); return them."""
    c = consumer
    store = c.offset_store
    assert store is not None
    c.suspend()
    try:
        async with c._rebalance_lock:
            hit = sorted((mq for mq in c.process_queues if mq.topic == topic and mq in offsets))
            for mq in hit:  # no await in this loop
                pq = c.process_queues[mq]
                pq.dropped = True
                pq.clear()
                task = c._pull_tasks.pop(mq, None)
                if task is not None:
                    task.cancel()
                store.update(mq, offsets[mq])
            for mq in hit:
                try:
                    await store.persist(mq)
                except MQError as exc:
                    log.warning("%s: committing reset offset %d of %s failed: %s", c.group, offsets[mq], mq, exc)
            for mq in hit:
                pq = c.process_queues.get(mq)
                if pq is not None and not await c._remove_queue(mq, pq):
                    # Orderly, a batch still in the listener: forgotten anyway, as Java does. Its result is
                    # discarded (its cache was cleared) and the queue's next consume run waits for it.
                    log.info("%s: %s still consuming; its broker lock is kept for the new pull", c.group, mq)
                    c.process_queues.pop(mq, None)
            c.counters.offset_resets += 1
            log.info("%s: offsets of %s reset: %s", c.group, topic,
                     ", ".join(f"{mq.broker_name}/{mq.queue_id}={offsets[mq]}" for mq in hit) or "no queue owned")
    finally:
        c.resume()
    await c.rebalance()
    return hit
