"""Request dispatch: a request-code -> handler registry and bounded worker groups (server and client side).

Handlers come in two forms (the same for the client's broker-initiated requests):

- ``def h(conn, cmd) -> RemotingCommand | None`` runs inline in ``data_received``: no task, no queue.
  Use it for fast paths (heartbeats, route lookups, sends that only append to the commit log).
- ``async def h(conn, cmd) -> RemotingCommand | None`` runs in its group's worker pool: at most
  ``ProcessorLimits.concurrency`` at once, at most ``queue_capacity`` waiting. A full queue answers
  SYSTEM_BUSY ``[OVERLOAD]system busy, start flow control for a while``. The pool is a handful of
  long-lived worker tasks draining a deque, not a task per message. A queued request counts its frame towards
  its connection's pending bytes (``Connection.request_started``) until its handler is done.

Returning ``None`` means "no answer now": the handler keeps the request and later calls
``conn.send_response(cmd.response(...))`` (long polling), or the request needs no answer.
``raise RejectRequest(text)`` answers SYSTEM_BUSY ``[REJECTREQUEST]<text>``; any other exception answers
SYSTEM_ERROR with ``"<ExceptionType>: <message>"``. A ``RemoteProtocolError`` (the peer's request does not
parse: a header field, a body) is the peer's fault: it is logged as a WARNING, once per kind (request code and
error type) per ``LogThrottle`` interval with a count, its traceback only with debug logging; any other exception
is a bug here and is logged as an ERROR with its traceback, also once per kind per interval. Oneway requests
(flag bit 1) are never answered, whatever happens. Unknown codes (no handler, no default handler) answer
REQUEST_CODE_NOT_SUPPORTED with remark ``" request type <code> not supported"``.

Request age ("[TIMEOUT_CLEAN_QUEUE]"): every request gets its arrival time (``time.monotonic()`` at the read
that delivered it). Inside a handler, ``request_context()`` returns a ``RequestContext`` with ``arrived``,
``started`` and ``queue_wait`` (seconds spent queued before an async handler started; 0 for inline ones), so a
processor can refuse work that waited too long. ``WorkerGroup.clean_expired(max_wait)`` answers every queued
request older than ``max_wait`` with SYSTEM_BUSY ``[TIMEOUT_CLEAN_QUEUE]...`` the way RocketMQ's
broker-fast-failure scan does.

Observing (metrics): ``HandlerRegistry.observer``, when set, is told of every request the server answers, with
the time of the read that delivered it: ``answered(request, response, arrived)`` for an answer produced by a
handler, a refusal or the queue clean-up, ``deferred(conn, request, arrived)`` when a handler kept a request to
answer later through ``Connection.send_response``, which then calls ``sent_later(conn, response)``. Unset (the
default) it costs one attribute test per request.
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
from typing import Protocol, Union

from mq.common.log_throttle import LogThrottle
from mq.config import ProcessorLimits
from mq.errors import RemoteProtocolError
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


class RequestObserver(Protocol):
    """What ``HandlerRegistry.observer`` is told (see the module docstring); called on the loop thread."""

    def answered(self, request: RemotingCommand, response: RemotingCommand, arrived: float) -> None: ...

    def deferred(self, conn: Connection, request: RemotingCommand, arrived: float) -> None: ...

    def sent_later(self, conn: Connection, response: RemotingCommand) -> None: ...


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


#: Throttle of registries that were not given one.
_DEFAULT_THROTTLE = LogThrottle(log)


def _error_response(cmd: RemotingCommand, exc: BaseException, where: str,
                    throttle: LogThrottle = _DEFAULT_THROTTLE, peer: str = "?") -> RemotingCommand:
    if isinstance(exc, RejectRequest):
        return cmd.response(ResponseCode.SYSTEM_BUSY, REJECT_PREFIX + exc.remark)
    text = str(exc)
    if isinstance(exc, RemoteProtocolError):  # the peer's request does not parse: its fault, not ours
        throttle.warning(("bad-request", where, cmd.code, type(exc).__name__),
                         "%s: bad request code %s from %s: %s", where, cmd.code, peer, text,
                         exc_info=exc if throttle.logger.isEnabledFor(logging.DEBUG) else None)
    else:
        throttle.error(("handler-failed", where, cmd.code, type(exc).__name__),
                       "%s: handler for request code %s from %s failed", where, cmd.code, peer, exc_info=exc)
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return cmd.response(ResponseCode.SYSTEM_ERROR, text)


class WorkerGroup:
    """A bounded pool for async handlers: ``concurrency`` workers, ``queue_capacity`` waiting requests."""

    def __init__(self, name: str, limits: ProcessorLimits, owner: str = "server") -> None:
        if limits.concurrency < 1 or limits.queue_capacity < 0:
            raise ValueError(f"group {name}: concurrency must be >= 1 and queue_capacity >= 0, got {limits}")
        self.name = name
        self.limits = limits
        self._owner = owner
        self.throttle = _DEFAULT_THROTTLE
        self._queue: deque[tuple[AsyncHandler, Connection, RemotingCommand, float]] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        #: requests of each connection queued or running here (for per-connection ordering)
        self._by_conn: dict[Connection, int] = {}
        # Workers that will still look at the queue. Kept apart from len(_workers): a finished task
        # stays in _workers until its done-callback runs, and must not count as a taker of new work.
        self._active = 0
        #: the registry's ``observer`` (set through it)
        self.observer: RequestObserver | None = None

    @property
    def running(self) -> int:
        return self._active

    @property
    def queued(self) -> int:
        return len(self._queue)

    def holds(self, conn: Connection) -> bool:
        """True while a request of ``conn`` is queued or running in this group."""
        return conn in self._by_conn

    def _taken(self, conn: Connection) -> None:
        self._by_conn[conn] = self._by_conn.get(conn, 0) + 1

    def _released(self, conn: Connection, cmd: RemotingCommand) -> None:
        n = self._by_conn.get(conn, 0) - 1
        if n > 0:
            self._by_conn[conn] = n
        else:
            self._by_conn.pop(conn, None)
        conn.request_done(cmd.wire_size)

    def submit(self, handler: AsyncHandler, conn: Connection, cmd: RemotingCommand, arrived: float) -> bool:
        """Queue a request; False if the group is saturated (the caller answers SYSTEM_BUSY)."""
        item = (handler, conn, cmd, arrived)
        if self._active < self.limits.concurrency:
            conn.request_started(cmd.wire_size)
            self._taken(conn)
            self._active += 1
            task = asyncio.get_running_loop().create_task(self._worker(item))
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)
            return True
        if len(self._queue) >= self.limits.queue_capacity:
            return False
        conn.request_started(cmd.wire_size)
        self._taken(conn)
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
                    self._released(conn, cmd)
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
            resp = _error_response(cmd, exc, self._owner, self.throttle, conn.remote_addr)
        if resp is not None:
            if not isinstance(resp, RemotingCommand):
                resp = _error_response(cmd, TypeError(f"handler returned {type(resp).__name__}, "
                                                      "not a RemotingCommand"), self._owner, self.throttle)
            if self.observer is not None:
                self.observer.answered(cmd, resp, arrived)
            conn.reply(cmd, resp)
        elif self.observer is not None and not cmd.flag & FLAG_ONEWAY:
            self.observer.deferred(conn, cmd, arrived)

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
                self._released(conn, cmd)
                resp = cmd.response(
                    ResponseCode.SYSTEM_BUSY,
                    f"{TIMEOUT_CLEAN_PREFIX}broker busy, start flow control for a while, period in queue: "
                    f"{(now - arrived) * 1000:.0f}ms, size of queue: {size}")
                if self.observer is not None:
                    self.observer.answered(cmd, resp, arrived)
                conn.reply(cmd, resp)
            else:
                kept.append(item)
        if dropped:
            self._queue.clear()
            self._queue.extend(kept)
        return dropped

    async def shutdown(self) -> None:
        """Drop the queue, cancel the workers and wait for them; the group can be used again after."""
        for _h, conn, cmd, _a in self._queue:
            self._released(conn, cmd)
        self._queue.clear()
        tasks = list(self._workers)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._active = 0  # workers cancelled before their first step never ran their cleanup


class HandlerRegistry:
    """Request code -> handler, plus worker groups. The dispatcher of server and client connections."""

    def __init__(self, name: str = "server", throttle: LogThrottle | None = None) -> None:
        self.name = name
        #: rate-limits the logging of failed requests (``_error_response``)
        self.throttle = throttle or _DEFAULT_THROTTLE
        self._table: dict[int, tuple[Handler, WorkerGroup | None]] = {}
        self._inline: dict[int, SyncHandler] = {}
        #: codes whose inline fast path waits only for the same connection's queued requests
        self._per_connection: set[int] = set()
        self._default: tuple[Handler, WorkerGroup | None] | None = None
        self._groups: dict[str, WorkerGroup] = {}
        #: runs before any handler (the broker's ACL): a response returned here is sent instead
        self.request_filter: Callable[[Connection, RemotingCommand], RemotingCommand | None] | None = None
        #: what a connection that opens with another protocol (gRPC, TLS) is told to use instead (logged)
        self.foreign_protocol_hint: str | None = None
        self._observer: RequestObserver | None = None

    @property
    def observer(self) -> RequestObserver | None:
        """Told of every answer (metrics); see the module docstring."""
        return self._observer

    @observer.setter
    def observer(self, observer: RequestObserver | None) -> None:
        self._observer = observer
        for g in self._groups.values():
            g.observer = observer

    def configure_group(self, name: str, limits: ProcessorLimits) -> None:
        """Set a group's limits (before requests flow; an existing group keeps its running workers)."""
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = WorkerGroup(name, limits, self.name)
            group.throttle = self.throttle
            group.observer = self._observer
        else:
            if limits.concurrency < 1 or limits.queue_capacity < 0:
                raise ValueError(f"group {name}: invalid limits {limits}")
            group.limits = limits

    def group(self, name: str) -> WorkerGroup:
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = WorkerGroup(name, ProcessorLimits(), self.name)
            group.throttle = self.throttle
            group.observer = self._observer
        return group

    @property
    def groups(self) -> dict[str, WorkerGroup]:
        return dict(self._groups)

    def _entry(self, handler: Handler, group: str) -> tuple[Handler, WorkerGroup | None]:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {handler!r}")
        return (handler, self.group(group) if _is_async(handler) else None)

    def register(self, code: int, handler: Handler, *, group: str = "default",
                 inline: SyncHandler | None = None, order: str = "group") -> None:
        """Register ``handler`` for ``code``. For an async handler, ``inline`` is an optional synchronous
        fast path: while the group has nothing running or queued it handles the request on the spot (no
        task, the answer goes out with the same write); it returns ``DEFER`` to hand the request to the
        group instead. Running inline only on an idle group keeps the group's order. With
        ``order="connection"`` the fast path waits only for requests of the same connection: a slow request of
        one client (a large body decoded off the loop) does not hold up the small ones of the others, and each
        client's own requests keep their order."""
        if order not in ("group", "connection"):
            raise ValueError(f"order must be 'group' or 'connection', not {order!r}")
        self._table[int(code)] = self._entry(handler, group)
        if inline is not None:
            self._inline[int(code)] = inline
        else:
            self._inline.pop(int(code), None)
        if order == "connection":
            self._per_connection.add(int(code))
        else:
            self._per_connection.discard(int(code))

    def register_default(self, handler: Handler, *, group: str = "default") -> None:
        self._default = self._entry(handler, group)

    def dispatch(self, conn: Connection, cmd: RemotingCommand) -> None:
        if self.request_filter is not None:
            refusal = self.request_filter(conn, cmd)
            if refusal is not None:
                self._refuse(conn, cmd, refusal)
                return
        entry = self._table.get(cmd.code) or self._default
        if entry is None:
            self._refuse(conn, cmd, cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                 f" request type {cmd.code} not supported"))
            return
        handler, group = entry
        if group is not None:
            fast = self._inline.get(cmd.code)
            if fast is not None and (group.holds(conn) if cmd.code in self._per_connection
                                     else group._active or group._queue):
                fast = None
            if fast is None or not self._run_sync(fast, conn, cmd):
                if not group.submit(handler, conn, cmd, conn.last_active):  # type: ignore[arg-type]
                    self._refuse(conn, cmd, cmd.response(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK))
            return
        self._run_sync(handler, conn, cmd)  # type: ignore[arg-type]

    def _refuse(self, conn: Connection, cmd: RemotingCommand, resp: RemotingCommand) -> None:
        if self._observer is not None:
            self._observer.answered(cmd, resp, conn.last_active)
        if not cmd.flag & FLAG_ONEWAY:
            conn.reply(cmd, resp)

    def _run_sync(self, handler: SyncHandler, conn: Connection, cmd: RemotingCommand) -> bool:
        """Run a plain handler and send its answer; False if it returned ``DEFER``."""
        now = conn.last_active  # the time of the read that delivered cmd
        ctx = _CONTEXT.get()
        if ctx is None or ctx.started != now or ctx.arrived != now:
            _CONTEXT.set(RequestContext(now, now))
        try:
            resp = handler(conn, cmd)
        except Exception as exc:
            resp = _error_response(cmd, exc, self.name, self.throttle, conn.remote_addr)
        if resp is DEFER:
            return False
        observer = self._observer
        if resp is not None and not cmd.flag & FLAG_ONEWAY:
            if not isinstance(resp, RemotingCommand):
                if inspect.isawaitable(resp):
                    resp.close()  # type: ignore[union-attr]
                resp = _error_response(cmd, TypeError(f"handler returned {type(resp).__name__}, "
                                                      "not a RemotingCommand"), self.name, self.throttle)
            if observer is not None:
                observer.answered(cmd, resp, now)
            conn.reply(cmd, resp)
        elif observer is not None:
            if resp is None:
                if not cmd.flag & FLAG_ONEWAY:
                    observer.deferred(conn, cmd, now)
            elif resp.__class__ is RemotingCommand:  # a oneway request's result, not sent
                observer.answered(cmd, resp, now)
        return True

    async def shutdown(self) -> None:
        """Cancel every group's workers and drop their queues."""
        for g in list(self._groups.values()):
            await g.shutdown()


