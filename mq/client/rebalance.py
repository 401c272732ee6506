"""Queue allocation strategies for clustering consumers (FEATURES.md §5.3).

Every strategy gets the **sorted** queue list and the **sorted** client-id list and returns the queues of
``current``; a client missing from the list gets nothing. ``allocate_averagely`` is the default
(``AllocateMessageQueueAveragely``): 8 queues over 3 clients -> [0,1,2], [3,4,5], [6,7].
"""

from __future__ import annotations

import hashlib
import logging
from bisect import bisect_left
from typing import Callable, Sequence

from mq.common.message import MessageQueue

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
