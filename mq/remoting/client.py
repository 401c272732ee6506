"""The remoting client: one connection per ``host:port``, created on first use and re-created after a drop.

Concurrent first uses of an address share one connect attempt. When a connection drops, every request
pending on it fails with ``ConnectionClosedError`` and the next call connects again. A refused connection
raises ``ConnectError("cannot connect to <addr>: connection refused")``; no response in time raises
``RemotingTimeoutError``. Broker-initiated requests (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED,
GET_CONSUMER_RUNNING_INFO, ...) go to handlers registered with ``register``, in the same two forms as the
server's (plain function inline, ``async def`` in a bounded worker group).

Requests from many coroutines in one loop iteration leave in one write (see ``connection.py``), so
pipelining is the cheap way to send: ``asyncio.gather`` of many ``invoke`` calls, or ``invoke_async``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import time
from collections.abc import Awaitable, Callable

from mq.config import ConnectionLimits, FrameLimits, ProcessorLimits
from mq.errors import ConnectError, RemotingError, RemotingTimeoutError
from mq.protocol.acl import SessionCredentials, sign_request
from mq.protocol.command import RemotingCommand
from mq.remoting.connection import Connection
from mq.remoting.dispatch import Handler, HandlerRegistry, SyncHandler

log = logging.getLogger(__name__)

#: ``connector(addr, protocol_factory) -> connected protocol``; the default opens a TCP connection.
Connector = Callable[[str, Callable[[], Connection]], Awaitable[Connection]]
ResponseCallback = Callable[["asyncio.Future[RemotingCommand]"], None]

_ERRNO_RE = re.compile(r"\[Errno (\d+)\]")


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port); ConnectError if malformed."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConnectError(f"cannot connect to {addr}: not a host:port address", addr=addr)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _refused(exc: OSError) -> bool:
    if isinstance(exc, ConnectionRefusedError) or exc.errno == errno.ECONNREFUSED:
        return True
    # create_connection over several resolved addresses raises one OSError naming each failure.
    codes = _ERRNO_RE.findall(str(exc))
    return bool(codes) and all(int(c) == errno.ECONNREFUSED for c in codes)


async def tcp_connector(addr: str, factory: Callable[[], Connection]) -> Connection:
    host, port = split_addr(addr)
    loop = asyncio.get_running_loop()
    _transport, protocol = await loop.create_connection(factory, host, port)
    return protocol


class RemotingClient:
    """Connections to many servers, keyed by ``"host:port"``."""

    def __init__(self, *, limits: FrameLimits | None = None, connect_timeout: float = 3.0, name: str = "client",
                 connection_limits: ConnectionLimits | None = None, connector: Connector | None = None) -> None:
        self.name = name
        self.frame_limits = limits or FrameLimits()
        # Client connections are never closed for idleness here; the client library owns that policy.
        self.connection_limits = connection_limits or ConnectionLimits()
        self.connect_timeout = connect_timeout
        self.registry = HandlerRegistry(name)
        self._connector: Connector = connector or tcp_connector
        self._conns: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Task[Connection]] = {}
        self._close_callbacks: list[Callable[[str, Connection], None]] = []
        self._closed = False
        #: when set, every request is signed with them (RocketMQ's AclClientRPCHook)
        self.credentials: SessionCredentials | None = None

    # -- handlers for broker-initiated requests ---------------------------------------------
    def register(self, code: int, handler: Handler, *, group: str = "default",
                 inline: SyncHandler | None = None) -> None:
        self.registry.register(code, handler, group=group, inline=inline)

    def register_default(self, handler: Handler, *, group: str = "default") -> None:
        self.registry.register_default(handler, group=group)

    def configure_group(self, name: str, limits: ProcessorLimits) -> None:
        self.registry.configure_group(name, limits)

    def on_connection_closed(self, callback: Callable[[str, Connection], None]) -> None:
        """Call ``callback(addr, conn)`` when a connection of this client closes."""
        self._close_callbacks.append(callback)

    # -- connections ------------------------------------------------------------------------
    @property
    def connections(self) -> dict[str, Connection]:
        return {a: c for a, c in self._conns.items() if not c.closed}

    async def connection(self, addr: str) -> Connection:
        """The open connection to ``addr``, connecting (once, shared by concurrent callers) if needed."""
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise RemotingError(f"{self.name} is closed", addr=addr)
        task = self._connecting.get(addr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = task
            task.add_done_callback(lambda t, a=addr: self._connect_done(a, t))
        return await asyncio.shield(task)

    def _connect_done(self, addr: str, task: asyncio.Task[Connection]) -> None:
        if self._connecting.get(addr) is task:
            del self._connecting[addr]
        if not task.cancelled():
            task.exception()  # mark retrieved: every waiter got it through the shield

    def _make_protocol(self, addr: str) -> Connection:
        return Connection(self.registry, frame_limits=self.frame_limits, connection_limits=self.connection_limits,
                          name=self.name, pause_reading_on_write_block=False,
                          on_close=lambda c, a=addr: self._lost(a, c))

    async def _connect(self, addr: str) -> Connection:
        started = time.monotonic()
        try:
            conn = await asyncio.wait_for(self._connector(addr, lambda: self._make_protocol(addr)),
                                          self.connect_timeout)
        except asyncio.TimeoutError:
            raise ConnectError(f"cannot connect to {addr}: timed out after {self.connect_timeout * 1000:.0f} ms",
                               addr=addr) from None
        except OSError as exc:
            if _refused(exc):
                raise ConnectError(f"cannot connect to {addr}: connection refused", addr=addr) from None
            raise ConnectError(f"cannot connect to {addr}: {exc.strerror or exc}", addr=addr) from None
        if self._closed:
            conn.close("client closed")
            raise RemotingError(f"{self.name} is closed", addr=addr)
        self._conns[addr] = conn
        log.debug("%s: connected to %s in %.1f ms", self.name, addr, (time.monotonic() - started) * 1000)
        return conn

    def _lost(self, addr: str, conn: Connection) -> None:
        if self._conns.get(addr) is conn:
            del self._conns[addr]
        log.debug("%s: connection to %s closed (%s)", self.name, addr, conn.close_reason)
        for cb in list(self._close_callbacks):
            try:
                cb(addr, conn)
            except Exception:
                log.exception("%s: connection-closed callback %r failed", self.name, cb)

    def close_connection(self, addr: str) -> None:
        """Close the connection to ``addr`` (its pending requests fail with ConnectionClosedError)."""
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close("closed by client")

    # -- requests ---------------------------------------------------------------------------
    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a two-way request to ``addr``; the timeout covers connecting too."""
        if self.credentials is not None:
            sign_request(cmd, self.credentials)
        conn = self._conns.get(addr)
        if conn is None or conn.closed:
            started = time.monotonic()
            conn = await self.connection(addr)
            timeout -= time.monotonic() - started
            if timeout <= 0:
                raise RemotingTimeoutError(f"connecting to {addr} used up the timeout (request code {cmd.code})",
                                           addr=addr)
        if conn.write_blocked:
            await conn.drain()
        # Inlined Connection.invoke: one coroutine frame less on the hottest path.
        fut = conn.invoke_future(cmd, timeout)
        try:
            return await fut
        finally:
            conn.abandon(fut, cmd.opaque)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send a oneway request to ``addr`` (returns once it is queued for writing)."""
        if self.credentials is not None:
            sign_request(cmd, self.credentials)
        conn = self._conns.get(addr)
        if conn is None or conn.closed:
            conn = await self.connection(addr)
        await conn.drain()
        conn.invoke_oneway(cmd)

    def invoke_async(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0,
                     callback: ResponseCallback | None = None) -> "asyncio.Future[RemotingCommand]":
        """Send a two-way request; return the future of its response (``callback(future)`` when done).

        When the connection is open this is a plain future with no task behind it.
        """
        conn = self._conns.get(addr)
        fut: asyncio.Future[RemotingCommand]
        if conn is not None and not conn.closed and not conn.write_blocked:
            if self.credentials is not None:
                sign_request(cmd, self.credentials)
            try:
                fut = conn.invoke_future(cmd, timeout)
            except Exception as exc:
                fut = asyncio.get_running_loop().create_future()
                fut.set_exception(exc)
        else:
            fut = asyncio.get_running_loop().create_task(self.invoke(addr, cmd, timeout))
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    async def close(self) -> None:
        """Close every connection, stop connecting, cancel handler workers."""
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        for conn in list(self._conns.values()):
            conn.close("client closed")
        self._conns.clear()
        await self.registry.shutdown()
        await asyncio.sleep(0)

    async def __aenter__(self) -> "RemotingClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
