"""One remoting connection: the ``asyncio.Protocol`` shared by the server and the client side.

The connection only moves bytes. Framing is ``mq.protocol.codec`` (``FrameDecoder`` / ``encode_into``)::

    +--------+----------------------------+-----------------+---------------+
    | length | serialize type | header len|     header      |     body      |
    | int32  | 1 byte         | 3 bytes   |  H bytes        |  B bytes      |
    +--------+----------------------------+-----------------+---------------+

Reading: every ``data_received`` feeds the decoder and handles *every* complete frame it returns.
Responses (flag bit 0) complete the future registered under their opaque; unknown opaques are logged at
debug level and dropped. Requests go to the dispatcher (``HandlerRegistry.dispatch``), which either answers
inline (plain function handlers) or queues the request to a bounded worker group (``async def`` handlers).

Writing: frames are appended to one output ``bytearray``. Inside ``data_received`` it is written once at the
end of the read, so all responses produced by one read leave in one ``transport.write``; outside a read the
write is deferred to the next loop iteration with ``call_soon``, so requests and responses produced in the
same iteration (pipelined invokes, worker completions) also coalesce.

Bounded memory and time (``ConnectionLimits``; a server connection also reports to its server's
``ServerBudget``, see ``budget.py``):

- *Pending* bytes are the unsent output (our buffer plus the transport's) plus the frames of requests that async
  handlers hold. Before each request is handed to a handler the connection checks them: at
  ``write_high_water``, or while the server-wide total is over ``max_total_output``, it keeps that request and
  the rest of the read in a backlog, stops reading, and hands them on when the output has drained
  (``resume_writing``), a handler finished, or the total dropped. A pipelined burst of pulls thus builds at most
  one answer beyond the mark, however many requests the read delivered. The time it has been stopped without its
  peer reading anything is ``stalled_since``; the server closes it after ``write_stall_timeout``.
- ``max_inflight`` requests queued to or running in async handlers: at that count the connection calls
  ``transport.pause_reading()``; it resumes at half of it.
- The transport's write buffer marks are ``write_high_water``/``write_low_water``: on ``pause_writing`` a
  *server* connection stops reading until ``resume_writing``. Callers of ``invoke`` wait for
  ``resume_writing`` before writing; a server-initiated request to a peer whose pending output is over the
  mark is refused (``ConnectionBusyError``; a oneway one is dropped). (A client connection keeps reading while
  its writes are blocked: reading responses is what lets the peer make progress, and pausing both ways could
  deadlock.)
- Time: ``last_active`` moves only when a whole frame was read or something was written, so a frame trickled a
  byte at a time does not keep an idle connection open; ``frame_started`` is when the unfinished frame now
  buffered began (the server closes the connection after ``frame_timeout``). The bytes of an unfinished frame
  count towards the server's ``max_total_partial``; the read that goes over it closes its connection.
- Malformed frames close the connection with one WARNING per kind per ``bad_request_log_interval``
  (``LogThrottle``), with a count of the ones held back.

Requests this side sends, their opaques (per connection, signed int32, wrapping from 2**31-1 to -2**31) and the
responses that complete them are ``invoke.py``'s ``Invoker``.

A connection whose first bytes are not a frame but an HTTP/2 preface (``PRI * HTTP/2.0``: a RocketMQ 5.x gRPC
client) or a TLS ClientHello is closed with one line naming the protocol and, where the dispatcher has one
(``foreign_protocol_hint``), the endpoint to use instead, rather than "frame length over the limit". The line
is throttled per kind (``LogThrottle``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from mq.common.log_throttle import LogThrottle
from mq.config import ConnectionLimits, FrameLimits
from mq.errors import ConnectionClosedError, RemoteProtocolError
from mq.protocol.codec import FrameDecoder, encode_into
from mq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE
from mq.protocol.command import RemotingCommand
from mq.remoting.flow import PAUSE_WRITE, FlowControl
from mq.remoting.invoke import Invoker

if TYPE_CHECKING:
    from mq.remoting.budget import ServerBudget

log = logging.getLogger(__name__)

_REQUEST_CODE_NOT_SUPPORTED = 3  # ResponseCode.REQUEST_CODE_NOT_SUPPORTED, answered when there is no dispatcher

#: Throttle of connections that were not given one (client connections).
_DEFAULT_THROTTLE = LogThrottle(log)

_foreign_log = LogThrottle(log, 60.0)


def foreign_protocol(data: bytes) -> str | None:
    """The protocol that opened a connection with ``data`` when it is not RocketMQ remoting, else None."""
    if data[:4] == b"PRI ":
        return "HTTP/2 (gRPC)"
    if len(data) >= 3 and data[0] == 0x16 and data[1] == 0x03 and data[2] <= 0x04:
        return "TLS"
    if data[:4] in (b"GET ", b"POST", b"HEAD", b"PUT "):
        return "HTTP/1"
    return None


class Dispatcher(Protocol):
    """What a connection hands requests to (``HandlerRegistry`` in ``server.py``)."""

    def dispatch(self, conn: "Connection", cmd: RemotingCommand) -> None: ...


def _nothing_buffered() -> int:
    return 0


def format_addr(peer: Any) -> str:
    """A socket address tuple (IPv4 or IPv6) as RocketMQ's ``ip:port`` text."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    if peer is None:
        return "unknown"
    return str(peer)


class Connection(FlowControl, Invoker, asyncio.Protocol):
    """A RocketMQ remoting connection (either side).

    Public attributes: ``remote_addr`` ("ip:port"), ``closed``, ``last_active`` (``time.monotonic`` seconds of
    the last whole frame read or the last write), ``frame_started`` (when the unfinished frame now buffered began,
    or None), ``stalled_since`` (when it stopped serving requests for its output without progress since, or
    None), ``attrs`` (free for the daemon's use: client id, group, ...).
    """

    def __init__(self, dispatcher: Dispatcher | None = None, *, frame_limits: FrameLimits | None = None,
                 connection_limits: ConnectionLimits | None = None, name: str = "conn",
                 pause_reading_on_write_block: bool = True,
                 on_open: Callable[["Connection"], None] | None = None,
                 on_close: Callable[["Connection"], None] | None = None,
                 budget: "ServerBudget | None" = None, throttle: LogThrottle | None = None) -> None:
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(frame_limits)
        self._climits = connection_limits or ConnectionLimits()
        self.name = name
        self._pause_on_write = pause_reading_on_write_block
        self._on_open = on_open
        self._on_close = on_close
        self._budget = budget
        self._throttle = throttle or _DEFAULT_THROTTLE
        self.transport: asyncio.Transport | None = None
        self.remote_addr = "unknown"
        self.local_addr = "unknown"
        self.closed = False
        self.close_reason: str | None = None
        self.last_active = time.monotonic()
        self.frame_started: float | None = None
        self.stalled_since: float | None = None
        self.attrs: dict[str, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opaque = -1
        self._pending: dict[int, tuple[asyncio.Future[RemotingCommand], asyncio.TimerHandle]] = {}
        self._wbuf = bytearray()
        self._in_read = False
        self._flush_scheduled = False
        self._inflight = 0
        self._inflight_bytes = 0
        self._paused = 0
        self._write_blocked = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        # Requests decoded but not yet handed to a handler (only while PAUSE_OUTPUT is set).
        self._backlog: deque[RemotingCommand] | None = None
        self._resume_scheduled = False
        # What this connection counts in its server's budget, and the output seen by the last stall check.
        self._counted_output = 0
        self._counted_partial = 0
        self._stall_mark = 0
        self._transport_buffered: Callable[[], int] = _nothing_buffered
        self._first_read = True

    # ------------------------------------------------------------------------------------------
    # asyncio.Protocol
    # ------------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._loop = asyncio.get_running_loop()
        self.remote_addr = format_addr(transport.get_extra_info("peername"))
        self.local_addr = format_addr(transport.get_extra_info("sockname"))
        self.last_active = time.monotonic()
        try:
            transport.set_write_buffer_limits(self._climits.write_high_water,  # type: ignore[attr-defined]
                                              self._climits.write_low_water)
        except (AttributeError, NotImplementedError):  # pragma: no cover - exotic transports
            pass
        try:
            transport.get_write_buffer_size()  # type: ignore[attr-defined]
            self._transport_buffered = transport.get_write_buffer_size  # type: ignore[attr-defined]
        except (AttributeError, NotImplementedError):  # a transport that keeps no buffer of its own
            self._transport_buffered = _nothing_buffered
        if self._on_open is not None:
            self._on_open(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        now = time.monotonic()
        decoder = self._decoder
        first, self._first_read = self._first_read, False
        try:
            cmds = decoder.feed(data)
        except RemoteProtocolError as exc:
            kind = foreign_protocol(data) if first else None
            if kind is None:
                self._throttle.warning(("malformed-frame", self.name), "%s: closing connection from %s: %s",
                                       self.name, self.remote_addr, exc)
            else:
                hint = getattr(self._dispatcher, "foreign_protocol_hint", None) or \
                    "RocketMQ 5.x gRPC clients connect to a broker's gRPC endpoint (grpcServerPort, default 8081)"
                _foreign_log.warning((self.name, kind), "%s: %s client at %s on the RocketMQ remoting port %s: %s",
                                     self.name, kind, self.remote_addr, self.local_addr, hint)
            self.close(f"malformed frame: {exc}")
            return
        buffered = decoder.buffered
        if buffered:
            if cmds or self.frame_started is None:  # a new frame began in this read
                self.frame_started = now
        else:
            self.frame_started = None
        budget = self._budget
        if budget is not None and buffered != self._counted_partial:
            delta = buffered - self._counted_partial
            self._counted_partial = buffered
            if not budget.add_partial(delta) and delta > 0:
                self._throttle.warning(("partial-total", self.name),
                                       "%s: closing connection from %s: unfinished frames of all connections "
                                       "hold %d bytes, over the limit of %d", self.name, self.remote_addr,
                                       budget.partial, budget.partial_limit)
                self.abort("unfinished frames over the server's limit")
                return
        if not cmds:
            return
        self.last_active = now
        self._in_read = True
        try:
            if self._backlog is not None:  # requests are waiting: these queue behind them
                self._hold(cmds, 0)
            else:
                self._handle(cmds)
        finally:
            self._in_read = False
        if self._wbuf:
            self._flush()
        elif budget is not None:
            self._account()

    def _handle(self, cmds: list[RemotingCommand]) -> None:
        pending = self._pending
        dispatcher = self._dispatcher
        budget = self._budget
        gated = budget is not None
        # The output check, inlined for the common case far below the mark (``_may_dispatch`` decides otherwise).
        high = self._climits.write_high_water
        tbuf = self._transport_buffered() if gated else 0
        for i, cmd in enumerate(cmds):
            if cmd.flag & FLAG_RESPONSE:
                self._complete(pending, cmd)
            elif self.closed:  # a handler closed the connection: drop the rest of the read
                break
            elif dispatcher is not None:
                if gated and (budget.over or self._write_blocked  # type: ignore[union-attr]
                              or len(self._wbuf) + tbuf + self._inflight_bytes >= high):
                    if not self._may_dispatch():
                        self._hold(cmds, i)
                        return
                    tbuf = self._transport_buffered()
                dispatcher.dispatch(self, cmd)
            else:
                self.reply(cmd, cmd.response(_REQUEST_CODE_NOT_SUPPORTED,
                                             f" request type {cmd.code} not supported"))

    def eof_received(self) -> bool | None:
        return None  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed and self.transport is None:
            return
        self.closed = True
        if self.close_reason is None:
            self.close_reason = f"lost: {exc}" if exc else "closed by peer"
        self.transport = None
        self._wbuf = bytearray()
        self._backlog = None
        budget = self._budget
        if budget is not None:
            budget.forget(self)
            if self._counted_output:
                budget.add_output(-self._counted_output)
                self._counted_output = 0
            if self._counted_partial:
                budget.add_partial(-self._counted_partial)
                self._counted_partial = 0
        if self._pending:
            pending, self._pending = self._pending, {}
            for opaque, (fut, timer) in pending.items():
                timer.cancel()
                if not fut.done():
                    fut.set_exception(ConnectionClosedError(
                        f"connection to {self.remote_addr} closed while waiting for the response "
                        f"to opaque {opaque} ({self.close_reason})", addr=self.remote_addr))
        self._wake_drain_waiters()
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                log.exception("%s: close callback failed for %s", self.name, self.remote_addr)

    def pause_writing(self) -> None:
        self._write_blocked = True
        if self._pause_on_write:
            self._pause(PAUSE_WRITE)

    def resume_writing(self) -> None:
        self._write_blocked = False
        if self._pause_on_write:
            self._resume(PAUSE_WRITE)
        self._wake_drain_waiters()
        if self._budget is not None:
            self.stalled_since = None if self._backlog is None else time.monotonic()
            self._account()
            if self._backlog is not None:
                self._schedule_resume()

    # ------------------------------------------------------------------------------------------
    # responses we send
    # ------------------------------------------------------------------------------------------
    def send_response(self, resp: RemotingCommand) -> bool:
        """Send a response built with ``request.response(...)`` (e.g. a long-poll answered later).

        Returns False (and sends nothing) if the connection is already closed.
        """
        if self.closed or self.transport is None:
            return False
        resp.flag |= FLAG_RESPONSE
        observer = getattr(self._dispatcher, "observer", None)  # HandlerRegistry.observer (metrics)
        if observer is not None:
            observer.sent_later(self, resp)
        self._write_cmd(resp)
        return True

    def reply(self, request: RemotingCommand, resp: RemotingCommand) -> bool:
        """Answer ``request``: copy its opaque and serialize type, set the response bit, write.

        Oneway requests are never answered. A response that cannot be encoded is replaced by a
        SYSTEM_ERROR response naming the problem.
        """
        if request.flag & FLAG_ONEWAY or self.closed or self.transport is None:
            return False
        resp.opaque = request.opaque
        resp.flag |= FLAG_RESPONSE
        resp.serialize_type = request.serialize_type
        try:
            self._write_cmd(resp)
        except Exception as exc:  # LocalProtocolError, or a body of a wrong type
            log.error("%s: cannot encode response to code %s for %s: %s", self.name, request.code,
                      self.remote_addr, exc)
            self._write_cmd(request.response(1, f"cannot encode response: {type(exc).__name__}: {exc}"))
        return True

    # ------------------------------------------------------------------------------------------
    # output buffer
    # ------------------------------------------------------------------------------------------
    def _write_cmd(self, cmd: RemotingCommand) -> None:
        encode_into(self._wbuf, cmd)
        if not self._in_read and not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        data = self._wbuf
        if not data:
            return
        transport = self.transport
        if transport is None or self.closed:
            return
        self._wbuf = bytearray()
        self.last_active = time.monotonic()
        transport.write(data)
        if self._budget is not None:
            self._account()

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # ------------------------------------------------------------------------------------------
    # closing
    # ------------------------------------------------------------------------------------------
    def close(self, reason: str = "closed locally") -> None:
        """Close after writing what is buffered. Pending requests fail when the transport reports it."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        transport = self.transport
        if transport is not None:
            if self._wbuf:
                data, self._wbuf = self._wbuf, bytearray()
                transport.write(data)
            transport.close()

    def abort(self, reason: str = "aborted") -> None:
        """Close at once, dropping unwritten output."""
        if self.close_reason is None or not self.closed:
            self.close_reason = reason
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Connection {self.name} {self.local_addr}->{self.remote_addr} {state}>"
