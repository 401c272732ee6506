"""The master side of replication (RocketMQ ``HAService`` + ``HAConnection`` + ``GroupTransferService``),
STORE.md §13.4-13.5.

``HAService`` listens on ``haListenPort`` and keeps one ``HAConnection`` per slave. Each connection has

- a read side: offset reports (``protocol.OffsetReportDecoder``; only the newest counts). The first report is
  where the slave wants data from; every report is an ack that advances ``push2slave_max_offset`` (monotonic,
  the best ack of all slaves) and wakes the SYNC_MASTER waiters. A report beyond the master's max offset, or no
  bytes for ``haHousekeepingInterval``, closes the connection;
- a write side: once the slave has reported, transfer frames from its offset (from the start of the master's
  last segment when it reported 0), ``haTransferBatchSize`` bytes at most each, read with
  ``store.read_replica`` (which never crosses a segment end, so the BLANK tail travels as raw bytes). With
  nothing to send it waits up to 100 ms (woken early by SYNC_MASTER puts) and sends a heartbeat header after
  ``haSendHeartbeatInterval`` of silence.

``wait_replicated(end_offset, timeout)`` is SYNC_MASTER's wait (``CommitLog.submitReplicaRequest``): PUT_OK
once a slave acked ``end_offset``, FLUSH_SLAVE_TIMEOUT after ``timeout``, SLAVE_NOT_AVAILABLE at once when no
slave is connected or the best one is ``haSlaveFallbehindMax`` or more behind. Java polls every second; here
each ack resolves the waiters it covers, so a SYNC_MASTER send is answered one slave round trip after its put.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from typing import Any

from mq.config import StoreConfig
from mq.daemon.broker.ha.protocol import OffsetReportDecoder, encode_transfer_header
from mq.errors import MQError
from mq.store.status import PutMessageStatus

log = logging.getLogger(__name__)

#: How long the write side sleeps when there is nothing to send (RocketMQ: 100 ms).
IDLE_WAIT = 0.1
_READ_CHUNK = 64 * 1024


class HAConnection:
    """One slave's connection: the read side runs as a task, the write side as another."""

    def __init__(self, service: "HAService", reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.remote_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_offset = -1
        self._reported = asyncio.Event()
        self.wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self.closed = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read_loop(), name=f"ha-read-{self.remote_addr}"),
                       loop.create_task(self._write_loop(), name=f"ha-write-{self.remote_addr}")]

    async def _read_loop(self) -> None:
        svc = self.service
        decoder = OffsetReportDecoder()
        idle = svc.config.ha_housekeeping_interval / 1000.0
        try:
            while True:
                try:
                    data = await asyncio.wait_for(self.reader.read(_READ_CHUNK), idle)
                except asyncio.TimeoutError:
                    log.warning("HA connection %s: no offset report for %.1f s, closing", self.remote_addr, idle)
                    return
                if not data:
                    log.info("HA connection %s closed by the slave", self.remote_addr)
                    return
                offset = decoder.feed(data)
                if offset is None:
                    continue
                max_off = svc.store.get_max_phy_offset()
                if offset > max_off:
                    log.warning("HA connection %s: slave reports offset %d beyond the master's max %d, closing",
                                self.remote_addr, offset, max_off)
                    return
                self.slave_ack_offset = offset
                if self.slave_request_offset < 0:
                    self.slave_request_offset = offset
                    log.info("HA slave %s connected, requests data from offset %d", self.remote_addr, offset)
                    self._reported.set()
                svc.notify_ack(offset)
        except (MQError, OSError) as exc:
            log.warning("HA connection %s: read failed: %s", self.remote_addr, exc)
        finally:
            self._close()

    async def _write_loop(self) -> None:
        svc = self.service
        store = svc.store
        cfg = svc.config
        batch = max(1, cfg.ha_transfer_batch_size)
        heartbeat = cfg.ha_send_heartbeat_interval / 1000.0
        writer = self.writer
        try:
            await self._reported.wait()
            start = self.slave_request_offset
            if start == 0:
                max_off = store.get_max_phy_offset()
                start = max_off - max_off % cfg.mapped_file_size_commit_log
            self.next_transfer_offset = start
            log.info("HA connection %s: transfer starts at offset %d", self.remote_addr, start)
            last_write = 0.0
            outside_logged = False
            while True:
                data = store.read_replica(self.next_transfer_offset, batch)
                if data is None:
                    if not outside_logged:
                        log.warning("HA connection %s: offset %d is outside the master's commit log [%d, %d); "
                                    "waiting", self.remote_addr, self.next_transfer_offset,
                                    store.get_min_phy_offset(), store.get_max_phy_offset())
                        outside_logged = True
                    data = b""
                if data:
                    writer.write(encode_transfer_header(self.next_transfer_offset, len(data)))
                    writer.write(data)
                    self.next_transfer_offset += len(data)
                    await writer.drain()
                    last_write = time.monotonic()
                    continue
                now = time.monotonic()
                if now - last_write >= heartbeat:
                    writer.write(encode_transfer_header(self.next_transfer_offset, 0))
                    await writer.drain()
                    last_write = now
                self.wakeup.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), IDLE_WAIT)
        except (OSError, ConnectionError) as exc:
            log.warning("HA connection %s: write failed: %s", self.remote_addr, exc)
        except (MQError, ValueError) as exc:
            log.error("HA connection %s: cannot read the commit log at %d: %s", self.remote_addr,
                      self.next_transfer_offset, exc)
        finally:
            self._close()

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.writer.close()
        current = asyncio.current_task()
        for t in self._tasks:
            if t is not current:
                t.cancel()
        self.service._connection_closed(self)

    async def close(self) -> None:
        self._close()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t


class HAService:
    """The HA listener of a master and the SYNC_MASTER wait. ``start`` binds, ``stop`` closes everything."""

    def __init__(self, store: Any, config: StoreConfig, *, host: str = "0.0.0.0", port: int = 0) -> None:
        self.store = store
        self.config = config
        self.host = host
        self.requested_port = port
        self.connections: set[HAConnection] = set()
        #: the best offset any slave acked (RocketMQ push2SlaveMaxOffset)
        self.push2slave_max_offset = 0
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._seq = itertools.count()
        self._server: asyncio.AbstractServer | None = None
        self._port = 0

    @property
    def port(self) -> int:
        return self._port

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.requested_port)
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("HA service listening on %s:%d", self.host, self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.set_result(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
        self._waiters.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        self.connections.add(conn)
        log.info("HA connection from %s accepted (%d slave connections)", conn.remote_addr, len(self.connections))
        conn.start()

    def _connection_closed(self, conn: HAConnection) -> None:
        self.connections.discard(conn)

    # -- replication progress ----------------------------------------------------------------------------
    def notify_ack(self, offset: int) -> None:
        if offset <= self.push2slave_max_offset:
            return
        self.push2slave_max_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= offset:
            fut = heapq.heappop(waiters)[2]
            if not fut.done():
                fut.set_result(PutMessageStatus.PUT_OK)

    def is_slave_ok(self, master_put_where: int) -> bool:
        return bool(self.connections) and \
            master_put_where - self.push2slave_max_offset < self.config.ha_slave_fallbehind_max

    def wake_transfers(self) -> None:
        for conn in self.connections:
            conn.wakeup.set()

    async def wait_replicated(self, end_offset: int, timeout: float) -> PutMessageStatus:
        """SYNC_MASTER: wait until a slave acked ``end_offset`` (the end of the stored message)."""
        if not self.is_slave_ok(end_offset):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        if self.push2slave_max_offset >= end_offset:
            return PutMessageStatus.PUT_OK
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if len(self._waiters) >= 4096:  # drop expired waiters that no ack has covered yet
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)
        heapq.heappush(self._waiters, (end_offset, next(self._seq), fut))
        self.wake_transfers()
        handle = loop.call_later(timeout, _expire, fut)
        try:
            return await fut
        finally:
            handle.cancel()


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
