"""The remoting server: a TCP listener whose connections dispatch to a ``HandlerRegistry`` (``dispatch.py``),
and the server-wide bounds of ``ConnectionLimits``.

Every ``scan_period`` seconds the server walks its connections and closes the ones that broke a time bound:

- no whole frame read and nothing written for ``idle_timeout`` (a trickled frame does not count as traffic);
- an unfinished frame older than ``frame_timeout`` (while the connection was being read);
- stopped for its unsent output for ``write_stall_timeout`` while its peer read nothing of it.

The ``ServerBudget`` (``budget.py``) totals pending output and unfinished frames over all connections. When
the output total goes over ``max_total_output``, no connection hands requests on, and the longest-stalled
connections are closed (their unsent output dropped) until it is back under. ``offload(fn, *args)`` runs
CPU-heavy pure work (decoding a large request body) in the server's worker thread, so the event loop keeps
serving the other connections; ``offload_threshold`` is the body size above which handlers use it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from mq.common.log_throttle import LogThrottle
from mq.config import ConnectionLimits, FrameLimits, ProcessorLimits
from mq.protocol.command import RemotingCommand
from mq.remoting.budget import ServerBudget
from mq.remoting.connection import Connection
from mq.remoting.dispatch import (
    DEFER,
    OVERLOAD_REMARK,
    REJECT_PREFIX,
    TIMEOUT_CLEAN_PREFIX,
    Handler,
    HandlerRegistry,
    RejectRequest,
    RequestContext,
    SyncHandler,
    WorkerGroup,
    request_context,
)

__all__ = ["DEFER", "OFFLOAD_GROUP", "OVERLOAD_REMARK", "REJECT_PREFIX", "TIMEOUT_CLEAN_PREFIX", "Handler", "HandlerRegistry",
           "RejectRequest", "RemotingServer", "RequestContext", "SyncHandler", "WorkerGroup", "request_context"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The worker group of requests whose bodies are decoded off the event loop (``register_offloaded``).
OFFLOAD_GROUP = "offload"
#: one at a time (the worker thread is one too): a client's requests keep their order
OFFLOAD_LIMITS = ProcessorLimits(concurrency=1, queue_capacity=64)

CloseCallback = Callable[[Connection], None]


class RemotingServer:
    """A RocketMQ remoting server on ``host:port`` (port 0 picks a free one)."""

    def __init__(self, host: str, port: int, *, limits: FrameLimits | None = None, name: str = "server",
                 connection_limits: ConnectionLimits | None = None) -> None:
        self.host = host
        self.port = port
        self.name = name
        self.frame_limits = limits or FrameLimits()
        climits = self.connection_limits = connection_limits or ConnectionLimits()
        #: rate-limits every log record a peer can cause (bad frames, bad requests, closed connections)
        self.throttle = LogThrottle(logging.getLogger("mq.remoting"), interval=climits.bad_request_log_interval)
        self.registry = HandlerRegistry(name, self.throttle)
        self.registry.configure_group(OFFLOAD_GROUP, OFFLOAD_LIMITS)
        self.budget = ServerBudget(climits)
        self.budget.on_over = self._over_budget
        self._connections: set[Connection] = set()
        self._close_callbacks: list[CloseCallback] = []
        self._server: asyncio.AbstractServer | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._evict_scheduled = False
        self._executor: ThreadPoolExecutor | None = None

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
                          pause_reading_on_write_block=True, on_open=self._opened, on_close=self._closed,
                          budget=self.budget, throttle=self.throttle)

    # -- heavy work ---------------------------------------------------------------------------
    @property
    def offload_threshold(self) -> int:
        """Request bodies larger than this are decoded with ``offload``."""
        return self.connection_limits.offload_body_threshold

    def is_heavy(self, cmd: RemotingCommand) -> bool:
        """True when ``cmd``'s body is over ``offload_threshold``: decode it with ``offload``."""
        return cmd.body is not None and len(cmd.body) > self.connection_limits.offload_body_threshold

    def register_offloaded(self, code: int, handler: Handler, inline: SyncHandler) -> None:
        """Register a request whose body may be heavy: ``inline`` handles it on the spot and returns ``DEFER``
        for a heavy one (``is_heavy``), which ``handler`` (async) then handles in ``OFFLOAD_GROUP``, decoding with
        ``offload``. A client's requests keep their order; other clients' small ones are not held up."""
        self.registry.register(code, handler, group=OFFLOAD_GROUP, inline=inline, order="connection")

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` (pure work: it must not touch state the event loop uses) in the server's worker
        thread and return its result. One thread: heavy requests take turns, and the loop keeps the other core."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-decode")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

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
        if self.scan_period > 0:
            self._scan_task = loop.create_task(self._scan_loop(self.scan_period))
        log.info("%s: listening on %s:%s", self.name, bound[0], self.port)
        return bound[0], self.port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def scan_period(self) -> float:
        """Seconds between two scans of the connections: an eighth of the shortest timer, within 0.05..1 s (0:
        no timer is set)."""
        lim = self.connection_limits
        timers = [t for t in (lim.idle_timeout, lim.frame_timeout, lim.write_stall_timeout) if t > 0]
        return min(max(min(timers) / 8, 0.05), 1.0) if timers else 0.0

    async def _scan_loop(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                self.scan()
            except Exception:  # pragma: no cover - a bug here must not stop the bounds
                log.exception("%s: connection scan failed", self.name)

    def scan(self, now: float | None = None) -> int:
        """Close the connections that broke a time bound (see the module docstring); return how many."""
        now = time.monotonic() if now is None else now
        lim = self.connection_limits
        closed = 0
        for conn in list(self._connections):
            if conn.closed:
                continue
            conn.check_progress(now)
            reason = None
            if lim.frame_timeout > 0 and conn.frame_started is not None and not conn.reading_paused \
                    and now - conn.frame_started > lim.frame_timeout:
                reason = f"a frame unfinished after {now - conn.frame_started:.0f} s"
            elif lim.write_stall_timeout > 0 and conn.stalled_since is not None and conn.pending_output > 0 \
                    and now - conn.stalled_since > lim.write_stall_timeout:
                reason = f"{conn.pending_output} bytes unread for {now - conn.stalled_since:.0f} s"
            elif lim.idle_timeout > 0 and conn.inflight == 0 and not conn.serving_paused \
                    and now - conn.last_active > lim.idle_timeout:
                reason = f"idle for {now - conn.last_active:.0f} s"
            if reason is not None:
                self.throttle.info(("closed", self.name, reason.split()[0]), "%s: closing connection from %s: %s",
                                   self.name, conn.remote_addr, reason)
                conn.abort(reason)
                closed += 1
        return closed

    def close_idle(self, idle: float, now: float | None = None) -> int:
        """Close connections with no whole frame read and nothing written for ``idle`` seconds and no request in
        progress."""
        now = time.monotonic() if now is None else now
        n = 0
        for conn in list(self._connections):
            if not conn.closed and conn.inflight == 0 and now - conn.last_active > idle:
                log.info("%s: closing idle connection from %s (%.0f s without traffic)", self.name,
                         conn.remote_addr, now - conn.last_active)
                conn.close(f"idle for {now - conn.last_active:.0f} s")
                n += 1
        return n

    def _over_budget(self) -> None:
        if not self._evict_scheduled:
            self._evict_scheduled = True
            asyncio.get_running_loop().call_soon(self._evict)

    def _evict(self) -> None:
        """The output total is over the limit: close the longest-stalled connections until it is back under."""
        self._evict_scheduled = False
        budget = self.budget
        if not budget.over:
            return
        for conn in list(self._connections):
            conn.check_progress(time.monotonic())  # exact figures before choosing
        excess = budget.output - budget.output_resume
        for conn in budget.victims(self._connections, excess):
            self.throttle.warning(("evicted", self.name), "%s: closing connection from %s: it holds %d unread "
                                  "bytes and all connections hold %d, over the limit of %d", self.name,
                                  conn.remote_addr, conn.pending_output, budget.output, budget.output_limit)
            conn.abort("output over the server's total limit")

    async def stop(self, grace: float = 1.0) -> None:
        """Close the listener and every connection, cancel the workers."""
        if self._scan_task is not None:
            self._scan_task.cancel()
            self._scan_task = None
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
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        await asyncio.sleep(0)

    async def __aenter__(self) -> "RemotingServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
