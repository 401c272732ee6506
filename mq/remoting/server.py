"""The remoting server: a TCP listener, a request-code -> handler registry, and bounded worker groups.

Handlers come in two forms (the same for the client's broker-initiated requests):

- ``def h(conn, cmd) -> RemotingCommand | None`` runs inline in ``data_received``: no task, no queue.
  Use it for fast paths (heartbeats, route lookups, sends that only append to the commit log).
- ``async def h(conn, cmd) -> RemotingCommand | None`` runs in its group's worker pool: at most
  ``ProcessorLimits.concurrency`` at once, at most ``queue_capacity`` waiting. A full queue answers
  SYSTEM_BUSY ``[OVERLOAD]system busy, start flow control for a while``. The pool is a handful of
  long-lived worker tasks draining a deque, not a task per message.

Returning ``None`` means "no answer now": the handler keeps the request and later calls
``conn.send_response(cmd.response(...))`` (long polling), or the request needs no answer.
``raise RejectRequest(text)`` answers SYSTEM_BUSY ``[REJECTREQUEST]<text>``; any other exception answers
SYSTEM_ERROR with ``"<ExceptionType>: <message>"`` and logs the traceback. Oneway requests (flag bit 1) are
never answered, whatever happens. Unknown codes (no handler, no default handler) answer
REQUEST_CODE_NOT_SUPPORTED with remark ``" request type <code> not supported"``.

Request age ("[TIMEOUT_CLEAN_QUEUE]"): every request gets its arrival time (``time.monotonic()`` at the read
that delivered it). Inside a handler, ``request_context()`` returns a ``RequestContext`` with ``arrived``,
``started`` and ``queue_wait`` (seconds spent queued before an async handler started; 0 for inline ones), so a
processor can refuse work that waited too long. ``RemotingServer.clean_expired_requests(group, max_wait)``
answers every queued request older than ``max_wait`` with SYSTEM_BUSY ``[TIMEOUT_CLEAN_QUEUE]...`` the way
RocketMQ's broker-fast-failure scan does.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Union

from mq.config import ConnectionLimits, FrameLimits, ProcessorLimits
from mq.protocol.codes import FLAG_ONEWAY, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting.connection import Connection

log = logging.getLogger(__name__)

SyncHandler = Callable[[Connection, RemotingCommand], Union[RemotingCommand, None]]
AsyncHandler = Callable[[Connection, RemotingCommand], Awaitable[Union[RemotingCommand, None]]]
Handler = Union[SyncHandler, AsyncHandler]

OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"
#: Returned by an ``inline`` handler that cannot finish synchronously: the request goes to its group instead.
DEFER = object()
REJECT_PREFIX = "[REJECTREQUEST]"
TIMEOUT_CLEAN_PREFIX = "[TIMEOUT_CLEAN_QUEUE]"


class RejectRequest(Exception):
    """Raised by a handler to refuse a request: answered SYSTEM_BUSY ``[REJECTREQUEST]<remark>``."""

    def __init__(self, remark: str = "system busy, start flow control for a while") -> None:
        super().__init__(remark)
        self.remark = remark


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Timing of the request a handler is running for (``time.monotonic`` seconds)."""

    arrived: float
    started: float

    @property
    def queue_wait(self) -> float:
        """Seconds between the read that delivered the request and the start of its handler."""
        return self.started - self.arrived

    def age(self) -> float:
        """Seconds since the request arrived."""
        return time.monotonic() - self.arrived


_CONTEXT: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar("mq_request_context",
                                                                                  default=None)


def request_context() -> RequestContext | None:
    """The ``RequestContext`` of the request the calling handler runs for (None outside handlers)."""
    return _CONTEXT.get()


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None))


def _error_response(cmd: RemotingCommand, exc: BaseException, where: str) -> RemotingCommand:
    if isinstance(exc, RejectRequest):
        return cmd.response(ResponseCode.SYSTEM_BUSY, REJECT_PREFIX + exc.remark)
    log.error("%s: handler for request code %s failed", where, cmd.code, exc_info=exc)
    text = str(exc)
    return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {text}" if text
                        else type(exc).__name__)


class WorkerGroup:
    """A bounded pool for async handlers: ``concurrency`` workers, ``queue_capacity`` waiting requests."""

    def __init__(self, name: str, limits: ProcessorLimits, owner: str = "server") -> None:
        if limits.concurrency < 1 or limits.queue_capacity < 0:
            raise ValueError(f"group {name}: concurrency must be >= 1 and queue_capacity >= 0, got {limits}")
        self.name = name
        self.limits = limits
        self._owner = owner
        self._queue: deque[tuple[AsyncHandler, Connection, RemotingCommand, float]] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        # Workers that will still look at the queue. Kept apart from len(_workers): a finished task
        # stays in _workers until its done-callback runs, and must not count as a taker of new work.
        self._active = 0

    @property
    def running(self) -> int:
        return self._active

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, handler: AsyncHandler, conn: Connection, cmd: RemotingCommand, arrived: float) -> bool:
        """Queue a request; False if the group is saturated (the caller answers SYSTEM_BUSY)."""
        item = (handler, conn, cmd, arrived)
        if self._active < self.limits.concurrency:
            conn.request_started()
            self._active += 1
            task = asyncio.get_running_loop().create_task(self._worker(item))
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)
            return True
        if len(self._queue) >= self.limits.queue_capacity:
            return False
        conn.request_started()
        self._queue.append(item)
        return True

    async def _worker(self, item: tuple[AsyncHandler, Connection, RemotingCommand, float]) -> None:
        queue = self._queue
        try:
            while True:
                handler, conn, cmd, arrived = item
                try:
                    await self._run(handler, conn, cmd, arrived)
                finally:
                    conn.request_done()
                if not queue:
                    return
                item = queue.popleft()
        finally:
            self._active -= 1

    async def _run(self, handler: AsyncHandler, conn: Connection, cmd: RemotingCommand, arrived: float) -> None:
        _CONTEXT.set(RequestContext(arrived, time.monotonic()))
        try:
            resp = await handler(conn, cmd)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            resp = _error_response(cmd, exc, self._owner)
        if resp is not None:
            if not isinstance(resp, RemotingCommand):
                resp = _error_response(cmd, TypeError(f"handler returned {type(resp).__name__}, "
                                                      "not a RemotingCommand"), self._owner)
            conn.reply(cmd, resp)

    def clean_expired(self, max_wait: float, now: float | None = None) -> int:
        """Answer queued requests older than ``max_wait`` seconds with SYSTEM_BUSY; return how many."""
        now = time.monotonic() if now is None else now
        size = len(self._queue)
        kept: deque[tuple[AsyncHandler, Connection, RemotingCommand, float]] = deque()
        dropped = 0
        for item in self._queue:
            _h, conn, cmd, arrived = item
            if now - arrived > max_wait:
                dropped += 1
                conn.request_done()
                conn.reply(cmd, cmd.response(
                    ResponseCode.SYSTEM_BUSY,
                    f"{TIMEOUT_CLEAN_PREFIX}broker busy, start flow control for a while, period in queue: "
                    f"{(now - arrived) * 1000:.0f}ms, size of queue: {size}"))
            else:
                kept.append(item)
        if dropped:
            self._queue.clear()
            self._queue.extend(kept)
        return dropped

    async def shutdown(self) -> None:
        """Drop the queue, cancel the workers and wait for them; the group can be used again after."""
        for _h, conn, _cmd, _a in self._queue:
            conn.request_done()
        self._queue.clear()
        tasks = list(self._workers)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._active = 0  # workers cancelled before their first step never ran their cleanup


class HandlerRegistry:
    """Request code -> handler, plus worker groups. The dispatcher of server and client connections."""

    def __init__(self, name: str = "server") -> None:
        self.name = name
        self._table: dict[int, tuple[Handler, WorkerGroup | None]] = {}
        self._inline: dict[int, SyncHandler] = {}
        self._default: tuple[Handler, WorkerGroup | None] | None = None
        self._groups: dict[str, WorkerGroup] = {}
        #: runs before any handler (the broker's ACL): a response returned here is sent instead
        self.request_filter: Callable[[Connection, RemotingCommand], RemotingCommand | None] | None = None
        #: what a connection that opens with another protocol (gRPC, TLS) is told to use instead (logged)
        self.foreign_protocol_hint: str | None = None

    def configure_group(self, name: str, limits: ProcessorLimits) -> None:
        """Set a group's limits (before requests flow; an existing group keeps its running workers)."""
        group = self._groups.get(name)
        if group is None:
            self._groups[name] = WorkerGroup(name, limits, self.name)
        else:
            if limits.concurrency < 1 or limits.queue_capacity < 0:
                raise ValueError(f"group {name}: invalid limits {limits}")
            group.limits = limits

    def group(self, name: str) -> WorkerGroup:
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = WorkerGroup(name, ProcessorLimits(), self.name)
        return group

    @property
    def groups(self) -> dict[str, WorkerGroup]:
        return dict(self._groups)

    def _entry(self, handler: Handler, group: str) -> tuple[Handler, WorkerGroup | None]:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {handler!r}")
        return (handler, self.group(group) if _is_async(handler) else None)

    def register(self, code: int, handler: Handler, *, group: str = "default",
                 inline: SyncHandler | None = None) -> None:
        """Register ``handler`` for ``code``. For an async handler, ``inline`` is an optional synchronous
        fast path: while the group has nothing running or queued it handles the request on the spot (no
        task, the answer goes out with the same write); it returns ``DEFER`` to hand the request to the
        group instead. Running inline only on an idle group keeps the group's order."""
        self._table[int(code)] = self._entry(handler, group)
        if inline is not None:
            self._inline[int(code)] = inline
        else:
            self._inline.pop(int(code), None)

    def register_default(self, handler: Handler, *, group: str = "default") -> None:
        self._default = self._entry(handler, group)

    def dispatch(self, conn: Connection, cmd: RemotingCommand) -> None:
        if self.request_filter is not None:
            refusal = self.request_filter(conn, cmd)
            if refusal is not None:
                if not cmd.flag & FLAG_ONEWAY:
                    conn.reply(cmd, refusal)
                return
        entry = self._table.get(cmd.code) or self._default
        if entry is None:
            if not cmd.flag & FLAG_ONEWAY:
                conn.reply(cmd, cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                             f" request type {cmd.code} not supported"))
            return
        handler, group = entry
        if group is not None:
            fast = self._inline.get(cmd.code) if not group._active and not group._queue else None
            if fast is None or not self._run_sync(fast, conn, cmd):
                if not group.submit(handler, conn, cmd, conn.last_active):  # type: ignore[arg-type]
                    if not cmd.flag & FLAG_ONEWAY:
                        conn.reply(cmd, cmd.response(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK))
            return
        self._run_sync(handler, conn, cmd)  # type: ignore[arg-type]

    def _run_sync(self, handler: SyncHandler, conn: Connection, cmd: RemotingCommand) -> bool:
        """Run a plain handler and send its answer; False if it returned ``DEFER``."""
        now = conn.last_active  # the time of the read that delivered cmd
        ctx = _CONTEXT.get()
        if ctx is None or ctx.started != now or ctx.arrived != now:
            _CONTEXT.set(RequestContext(now, now))
        try:
            resp = handler(conn, cmd)
        except Exception as exc:
            resp = _error_response(cmd, exc, self.name)
        if resp is DEFER:
            return False
        if resp is not None and not cmd.flag & FLAG_ONEWAY:
            if not isinstance(resp, RemotingCommand):
                if inspect.isawaitable(resp):
                    resp.close()  # type: ignore[union-attr]
                resp = _error_response(cmd, TypeError(f"handler returned {type(resp).__name__}, "
                                                      "not a RemotingCommand"), self.name)
            conn.reply(cmd, resp)
        return True

    async def shutdown(self) -> None:
        """Cancel every group's workers and drop their queues."""
        for g in list(self._groups.values()):
            await g.shutdown()


CloseCallback = Callable[[Connection], None]


class RemotingServer:
    """A RocketMQ remoting server on ``host:port`` (port 0 picks a free one)."""

    def __init__(self, host: str, port: int, *, limits: FrameLimits | None = None, name: str = "server",
                 connection_limits: ConnectionLimits | None = None) -> None:
        self.host = host
        self.port = port
        self.name = name
        self.frame_limits = limits or FrameLimits()
        self.connection_limits = connection_limits or ConnectionLimits()
        self.registry = HandlerRegistry(name)
        self._connections: set[Connection] = set()
        self._close_callbacks: list[CloseCallback] = []
        self._server: asyncio.AbstractServer | None = None
        self._idle_task: asyncio.Task[None] | None = None

    # -- registration -----------------------------------------------------------------------
    def register(self, code: int, handler: Handler, *, group: str = "default",
                 inline: SyncHandler | None = None) -> None:
        self.registry.register(code, handler, group=group, inline=inline)

    def register_default(self, handler: Handler, *, group: str = "default") -> None:
        self.registry.register_default(handler, group=group)

    def configure_group(self, name: str, limits: ProcessorLimits) -> None:
        self.registry.configure_group(name, limits)

    def on_connection_closed(self, callback: CloseCallback) -> None:
        """Call ``callback(conn)`` whenever a connection of this server closes (either side closed it)."""
        self._close_callbacks.append(callback)

    def clean_expired_requests(self, group: str, max_wait: float) -> int:
        """Answer SYSTEM_BUSY ``[TIMEOUT_CLEAN_QUEUE]`` to requests queued in ``group`` for over ``max_wait`` s."""
        return self.registry.group(group).clean_expired(max_wait)

    # -- connections ------------------------------------------------------------------------
    @property
    def connections(self) -> list[Connection]:
        return [c for c in self._connections if not c.closed]

    def make_connection(self) -> Connection:
        """A new server-side protocol instance (the listener's factory; also used by ``testing``)."""
        return Connection(self.registry, frame_limits=self.frame_limits,
                          connection_limits=self.connection_limits, name=self.name,
                          pause_reading_on_write_block=True, on_open=self._opened, on_close=self._closed)

    def _opened(self, conn: Connection) -> None:
        self._connections.add(conn)
        log.debug("%s: connection from %s", self.name, conn.remote_addr)

    def _closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        log.debug("%s: connection from %s closed (%s)", self.name, conn.remote_addr, conn.close_reason)
        for cb in list(self._close_callbacks):
            try:
                cb(conn)
            except Exception:
                log.exception("%s: connection-closed callback %r failed", self.name, cb)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self.make_connection, self.host, self.port, reuse_address=True,
                                                backlog=1024)
        sock = self._server.sockets[0]
        bound = sock.getsockname()
        self.port = bound[1]
        idle = self.connection_limits.idle_timeout
        if idle > 0:
            self._idle_task = loop.create_task(self._idle_scan(idle))
        log.info("%s: listening on %s:%s", self.name, bound[0], self.port)
        return bound[0], self.port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def _idle_scan(self, idle: float) -> None:
        period = min(max(idle / 4, 0.05), 10.0)
        while True:
            await asyncio.sleep(period)
            self.close_idle(idle)

    def close_idle(self, idle: float, now: float | None = None) -> int:
        """Close connections with no read or write for ``idle`` seconds and no request in progress."""
        now = time.monotonic() if now is None else now
        n = 0
        for conn in list(self._connections):
            if not conn.closed and conn.inflight == 0 and now - conn.last_active > idle:
                log.info("%s: closing idle connection from %s (%.0f s without traffic)", self.name,
                         conn.remote_addr, now - conn.last_active)
                conn.close(f"idle for {now - conn.last_active:.0f} s")
                n += 1
        return n

    async def stop(self, grace: float = 1.0) -> None:
        """Close the listener and every connection, cancel the workers."""
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close("server stopping")
        await self.registry.shutdown()
        deadline = time.monotonic() + grace
        while self._connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self._connections):
            conn.abort("server stopping")
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), grace)
            except asyncio.TimeoutError:  # pragma: no cover - depends on the loop
                pass
            self._server = None
        await asyncio.sleep(0)

    async def __aenter__(self) -> "RemotingServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
