"""The console's connections to the cluster: one ``MQAdmin`` for every admin call, and a producer and a pull
consumer started on first use (test messages and dead-letter resends; reads by time range). All live on the
server's event loop and are closed when it stops."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from mq.client.admin import MQAdmin
from mq.config import ClientConfig, DashboardConfig, ProducerConfig
from mq.protocol.acl import SessionCredentials

log = logging.getLogger(__name__)

#: Group names the console's own clients use (they show up in the cluster under these).
PRODUCER_GROUP = "MQ_DASHBOARD_PRODUCER"
PULL_GROUP = "TOOLS_CONSUMER"


class Backend:
    def __init__(self, config: DashboardConfig, namesrv_addrs: list[str]) -> None:
        self.config = config
        self.namesrv_addrs = namesrv_addrs
        creds = SessionCredentials(config.access_key, config.secret_key) if config.access_key else None
        self.admin = MQAdmin(namesrv_addrs, timeout=config.admin_timeout, credentials=creds)
        self._producer: Any = None
        self._pull: Any = None
        self._lock = asyncio.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}
        self._cache_locks: dict[str, asyncio.Lock] = {}

    async def cached(self, key: str, fetch: Callable[[], Awaitable[Any]], ttl: float) -> Any:
        """``await fetch()``, reused for ``ttl`` seconds (lists of a large cluster are read once per refresh,
        however many pages and filters ask); concurrent callers of one key share one fetch."""
        lock = self._cache_locks.setdefault(key, asyncio.Lock())
        async with lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > time.monotonic():
                return hit[1]
            value = await fetch()
            self._cache[key] = (time.monotonic() + ttl, value)
            return value

    def invalidate(self) -> None:
        """Forget every cached list (after an action changed the cluster)."""
        self._cache.clear()

    def client_config(self, instance: str) -> ClientConfig:
        cfg = self.config
        creds = {"access_key": cfg.access_key, "secret_key": cfg.secret_key} if cfg.access_key else {}
        return ClientConfig(namesrv_addr=";".join(self.namesrv_addrs), instance_name=instance,
                            call_timeout=cfg.admin_timeout, **creds)

    async def producer(self) -> Any:
        """The console's producer (started on first use)."""
        from mq.client.producer import Producer

        async with self._lock:
            if self._producer is None:
                p = Producer(ProducerConfig(group=PRODUCER_GROUP, send_msg_timeout=self.config.admin_timeout),
                             self.client_config("mq-dashboard"))
                await p.start()
                self._producer = p
            return self._producer

    async def pull_consumer(self) -> Any:
        """The console's pull consumer (never commits an offset; started on first use)."""
        from mq.client.pull_api import PullConsumer

        async with self._lock:
            if self._pull is None:
                self._pull = await PullConsumer(PULL_GROUP, self.client_config("mq-dashboard-pull")).start()
            return self._pull

    async def close(self) -> None:
        for name, closer in (("producer", self._producer and self._producer.shutdown),
                             ("pull consumer", self._pull and self._pull.shutdown), ("admin", self.admin.close)):
            if closer:
                try:
                    await closer()
                except Exception as exc:  # closing must go on with the rest
                    log.warning("closing the console's %s failed: %s", name, exc)
        self._producer = self._pull = None
