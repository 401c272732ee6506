"""Broker fast failure (RocketMQ ``BrokerFastFailure``), FEATURES.md §7.

Sends run in the remoting server's ``send`` worker group: a bounded queue (``sendThreadPoolQueueCapacity``;
beyond it the server answers SYSTEM_BUSY ``[OVERLOAD]``). Every ``fast_failure_scan_interval_ms`` this service
answers SYSTEM_BUSY ``[TIMEOUT_CLEAN_QUEUE]...`` to sends that waited in that queue longer than
``waitTimeMillsInSendQueue`` (200 ms), and the send processor itself refuses a request that waited too long or
arrives while the store's put lock has been held longer than ``osPageCacheBusyTimeOutMills``
(``[REJECTREQUEST]``). A put refused by the store as OS_PAGECACHE_BUSY is answered SYSTEM_ERROR
``[PC_SYNCHRONIZED]`` by the send processor (as Java does, so producers retry it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from mq.daemon.runtime import cancel_tasks

log = logging.getLogger(__name__)

SEND_GROUP = "send"
QUERY_GROUP = "query"
#: admin requests (``processors/admin*.py``)
ADMIN_GROUP = "admin"
#: heartbeats that wait for a new retry topic's registration (``processors/client.py``)
HEARTBEAT_GROUP = "heartbeat"
QUERY_MAX_WAIT_S = 20.0


def os_page_cache_busy(store: Any) -> bool:
    """True while some put has held the store's put lock for more than ``osPageCacheBusyTimeOutMills``.

    Reads ``MessageStore._begin_in_lock`` (the store offers no public accessor for it)."""
    begin = getattr(store, "_begin_in_lock", 0.0)
    if not begin:
        return False
    diff_ms = (time.monotonic() - begin) * 1000
    return store.config.os_page_cache_busy_timeout_mills < diff_ms < 10_000_000


class FastFailure:
    def __init__(self, server: Any, *, send_wait_ms: int, interval_ms: int) -> None:
        self.server = server
        self.send_wait_s = send_wait_ms / 1000.0
        self.interval_s = max(0.001, interval_ms / 1000.0)
        self._task: asyncio.Task | None = None
        self.cleaned = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        await cancel_tasks(self._task)
        self._task = None

    def scan_once(self) -> int:
        n = self.server.clean_expired_requests(SEND_GROUP, self.send_wait_s)
        n += self.server.clean_expired_requests(QUERY_GROUP, QUERY_MAX_WAIT_S)
        if n:
            self.cleaned += n
            log.warning("fast failure: answered SYSTEM_BUSY to %d requests that waited too long", n)
        return n

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.scan_once()
            except Exception:
                log.exception("fast failure scan failed")
