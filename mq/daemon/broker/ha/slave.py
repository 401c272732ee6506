"""The slave side of replication (RocketMQ ``HAService.HAClient``), STORE.md §13.3.

One task keeps one connection to the master's HA address:

1. connect; report the local commit log max offset **at once**. (RocketMQ's first report waits for
   ``haSendHeartbeatInterval``, 5 s, after connecting, so its first transfer starts 5 s late; we see no reason
   to copy that delay.)
2. read transfer frames (``protocol.TransferDecoder``). A frame that does not continue the stream (the local
   max offset plus any bytes held back; an empty store starts at any segment boundary) closes the connection;
   otherwise its bytes go through ``replica.ChunkAssembler`` (RocketMQ's master cuts records anywhere: a cut
   record is held back until it is whole) to ``store.append_replica``, which dispatches them like local puts
   (consume queues, index). After the frames of one read are appended the new max offset is reported (the ack
   SYNC_MASTER waits for).
3. report the max offset again after ``haSendHeartbeatInterval`` without writing (heartbeat).
4. close when nothing arrived from the master for ``haHousekeepingInterval`` (the master sends a heartbeat every
   ``haSendHeartbeatInterval``; RocketMQ measures the time since the slave's own last write, which never trips
   while heartbeats go out), or on any read, parse, append or write error. A closed session is logged once and
   reconnected at once (at most once a second); a refused connect is retried after 5 s.

The master address is ``haMasterAddress`` when configured, else what the name server answered to the last
registration (``update_master_address``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from mq.config import StoreConfig
from mq.daemon.broker.ha.protocol import TransferDecoder, encode_offset_report
from mq.daemon.runtime import cancel_tasks
from mq.errors import MQError
from mq.store.replica import ChunkAssembler

log = logging.getLogger(__name__)

#: Pause after a failed connect (RocketMQ: 5 s).
CONNECT_RETRY = 5.0
#: Least time between two connection attempts after a session ended.
RECONNECT_MIN_INTERVAL = 1.0
CONNECT_TIMEOUT = 3.0
_READ_CHUNK = 256 * 1024


class SessionClosed(Exception):
    """The current session must end (mismatch, housekeeping); the reason is the message."""


class HAClient:
    def __init__(self, store: Any, config: StoreConfig, master_address: str = "") -> None:
        self.store = store
        self.config = config
        self._master_address = master_address
        self._address_changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.connected = False
        self.sessions = 0
        #: the last offset reported to the master
        self.reported_offset = -1
        self._last_problem = ""

    @property
    def master_address(self) -> str:
        return self._master_address

    def update_master_address(self, address: str) -> None:
        if address == self._master_address:
            return
        log.info("HA master address changed from %r to %r", self._master_address, address)
        self._master_address = address
        self._address_changed.set()
        if self._writer is not None:  # the next session goes to the new master
            self._writer.close()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        await cancel_tasks(self._task)
        self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def _problem(self, level: int, text: str, *args: object) -> None:
        """Log a connection problem once until a session succeeds again."""
        msg = text % args
        if msg != self._last_problem:
            log.log(level, "%s", msg)
            self._last_problem = msg

    async def _run(self) -> None:
        last_attempt = 0.0
        while True:
            addr = self._master_address
            if not addr:
                self._address_changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._address_changed.wait(), 1.0)
                continue
            wait = last_attempt + RECONNECT_MIN_INTERVAL - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            last_attempt = time.monotonic()
            host, _, port = addr.rpartition(":")
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), CONNECT_TIMEOUT)
            except (OSError, ValueError, asyncio.TimeoutError) as exc:
                self._problem(logging.WARNING, "HA client: cannot connect to master %s: %s; retrying in %.0f s",
                              addr, exc or type(exc).__name__, CONNECT_RETRY)
                self._address_changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._address_changed.wait(), CONNECT_RETRY)
                continue
            self._writer = writer
            self.connected = True
            self.sessions += 1
            try:
                await self._session(addr, reader, writer)
            except SessionClosed as exc:
                self._problem(logging.WARNING, "HA client: connection to master %s closed: %s", addr, exc)
            except (MQError, ValueError, OSError, ConnectionError) as exc:
                self._problem(logging.WARNING, "HA client: connection to master %s failed: %s: %s", addr,
                              type(exc).__name__, exc)
            finally:
                self.connected = False
                self._writer = None
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def _session(self, addr: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self.store
        cfg = self.config
        heartbeat = cfg.ha_send_heartbeat_interval / 1000.0
        housekeeping = cfg.ha_housekeeping_interval / 1000.0
        decoder = TransferDecoder(max(cfg.ha_transfer_batch_size, cfg.mapped_file_size_commit_log) + 1)
        assembler = ChunkAssembler(cfg.mapped_file_size_commit_log)
        offset = store.get_max_phy_offset()
        self._report(writer, offset)
        await writer.drain()
        log.info("HA client: connected to master %s, reported offset %d", addr, offset)
        self._last_problem = ""
        last_write = last_read = time.monotonic()
        while True:
            now = time.monotonic()
            timeout = min(heartbeat - (now - last_write), housekeeping - (now - last_read))
            data = b""
            if timeout > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    data = await asyncio.wait_for(reader.read(_READ_CHUNK), timeout)
                    if not data:
                        raise SessionClosed("closed by the master")
            now = time.monotonic()
            if data:
                last_read = now
                appended = False
                for frame in decoder.feed(data):
                    local = store.get_max_phy_offset()
                    try:
                        chunks = assembler.feed(frame.phy_offset, frame.body, local, empty=local == 0)
                    except ValueError as exc:
                        raise SessionClosed(str(exc)) from None
                    for at, chunk in chunks:
                        store.append_replica(at, chunk)
                        appended = True
                if appended:
                    self._report(writer, store.get_max_phy_offset())
                    await writer.drain()
                    last_write = now
            elif now - last_read >= housekeeping:
                raise SessionClosed(f"nothing from the master for {housekeeping:.1f} s")
            if now - last_write >= heartbeat:
                self._report(writer, store.get_max_phy_offset())
                await writer.drain()
                last_write = now

    def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(encode_offset_report(offset))
        self.reported_offset = offset
