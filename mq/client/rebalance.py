"""Queue allocation strategies for clustering consumers (FEATURES.md §5.3), and where a push consumer starts
reading a queue it has just been given (``compute_pull_from_where``, RocketMQ ``RebalancePushImpl``).

Every strategy gets the **sorted** queue list and the **sorted** client-id list and returns the queues of
``current``; a client missing from the list gets nothing. ``allocate_averagely`` is the default
(``AllocateMessageQueueAveragely``): 8 queues over 3 clients -> [0,1,2], [3,4,5], [6,7].
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

if TYPE_CHECKING:
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
