"""The name server process: a RemotingServer wired to the route table, plus the broker expiry scan."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from pathlib import Path

from mq.config import NamesrvConfig
from mq.daemon.namesrv.kv_config import KVConfig
from mq.daemon.namesrv.processors import NamesrvProcessors
from mq.daemon.namesrv.route_table import RouteTable
from mq.daemon.runtime import DaemonError, cancel_tasks, describe_bind_error, mq_home
from mq.remoting import RemotingServer

log = logging.getLogger(__name__)


class NamesrvServer:
    def __init__(self, config: NamesrvConfig) -> None:
        if not config.kv_config_path:  # resolved once, so GET_NAMESRV_CONFIG shows the file actually used
            config = dataclasses.replace(config, kv_config_path=str(mq_home() / "namesrv" / "kvConfig.json"))
        self.config = config
        self.table = RouteTable()
        self.kv = KVConfig(Path(config.kv_config_path))
        self.server = RemotingServer(config.host, config.listen_port, limits=config.frame_limits, name="namesrv",
                                     connection_limits=config.connection_limits)
        self.processors = NamesrvProcessors(config, self.table, self.kv, server=self.server)
        for code, handler in self.processors.handlers().items():
            self.server.register(code, handler)
        for code, (heavy, inline) in self.processors.offloaded().items():
            self.server.register_offloaded(code, heavy, inline)
        self.server.on_connection_closed(self._connection_closed)
        self._scan_task: asyncio.Task | None = None
        #: the Prometheus endpoint (mq.daemon.metrics) when metricsExporterType is PROM; built in start()
        self.metrics = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    async def start(self) -> None:
        from mq.daemon.metrics.service import namesrv_metrics

        self.kv.load()
        self.metrics = namesrv_metrics(self)
        try:
            await self.server.start()
        except OSError as exc:
            raise DaemonError(describe_bind_error(exc, self.config.host, self.config.listen_port)) from None
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except BaseException:
                await self.server.stop()
                raise
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop())
        log.info("name server listening on %s", self.address)

    async def stop(self) -> None:
        await cancel_tasks(self._scan_task)
        self._scan_task = None
        if self.metrics is not None:
            await self.metrics.stop()
        await self.server.stop()
        log.info("name server %s stopped", self.address)

    def _connection_closed(self, conn: object) -> None:
        for addr in self.table.on_channel_closed(conn):
            log.info("broker %s removed: its connection closed", addr)

    def scan_not_active_brokers(self) -> list[str]:
        now = int(time.time() * 1000)
        channels = {addr: self.table.live_channel(addr) for addr in self.table.broker_live_table}
        dead = self.table.expire(now, self.config.broker_channel_expired_time_ms)
        for addr in dead:
            log.warning("broker %s expired: not heard from for %d ms", addr,
                        self.config.broker_channel_expired_time_ms)
            conn = channels.get(addr)
            if conn is not None and hasattr(conn, "close"):
                conn.close()
        return dead

    async def _scan_loop(self) -> None:
        interval = max(0.05, self.config.scan_not_active_broker_interval_ms / 1000)
        while True:
            await asyncio.sleep(interval)
            try:
                self.scan_not_active_brokers()
            except Exception:  # keep scanning; one bad pass must not stop expiry
                log.exception("broker expiry scan failed")
