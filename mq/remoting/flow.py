"""Flow control of one remoting connection: when it is read, and when its requests are handed to handlers.

``Connection`` (``connection.py``) inherits this; the state lives there. Reading is paused for a set of
reasons (``PAUSE_*``) and resumes only when none is left:

- ``PAUSE_INFLIGHT``: ``max_inflight`` requests are queued to or running in async handlers (resumes at half);
- ``PAUSE_WRITE``: the transport's write buffer is over its high-water mark (server connections);
- ``PAUSE_OUTPUT``: the connection's *pending* bytes (unsent output, ours and the transport's, plus the frames of
  requests handlers hold) reached ``write_high_water``, or its server's total is over ``max_total_output``.
  Requests decoded meanwhile wait in ``_backlog`` and are handed on, one check at a time, by ``_try_resume``
  once the output drained, a handler finished or the server's total dropped. ``stalled_since`` is when the
  connection last stopped (or last saw its peer read while stopped): the server closes it after
  ``write_stall_timeout`` and picks the longest-stalled ones to close when its total is over the limit.

Only server connections (those given a ``ServerBudget``) stop handing requests on; a client connection must keep
reading, since reading responses is what lets its peer make progress.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mq.config import ConnectionLimits
from mq.protocol.codes import FLAG_RESPONSE
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from mq.remoting.budget import ServerBudget

log = logging.getLogger(__name__)

#: Reasons reading is paused (a bit set: reading resumes only when all are clear).
PAUSE_INFLIGHT = 1
PAUSE_WRITE = 2
PAUSE_OUTPUT = 4


class FlowControl:
    """The pausing and gating half of ``Connection``."""

    # State owned by Connection.__init__ (declared for readers and type checkers).
    transport: asyncio.Transport | None
    closed: bool
    name: str
    remote_addr: str
    stalled_since: float | None
    frame_started: float | None
    _loop: asyncio.AbstractEventLoop | None
    _climits: ConnectionLimits
    _budget: "ServerBudget | None"
    _dispatcher: Any
    _pending: dict
    _wbuf: bytearray
    _in_read: bool
    _inflight: int
    _inflight_bytes: int
    _paused: int
    _write_blocked: bool
    _backlog: deque[RemotingCommand] | None
    _resume_scheduled: bool
    _counted_output: int
    _stall_mark: int
    _transport_buffered: Callable[[], int]

    # -- what the dispatcher and the server read ---------------------------------------------------
    @property
    def inflight(self) -> int:
        """Requests of this connection queued to or running in async handlers."""
        return self._inflight

    @property
    def write_blocked(self) -> bool:
        """True between the transport's ``pause_writing`` and ``resume_writing``."""
        return self._write_blocked

    @property
    def reading_paused(self) -> bool:
        return bool(self._paused)

    @property
    def serving_paused(self) -> bool:
        """True while requests wait in the backlog for the output to drain."""
        return self._backlog is not None

    @property
    def pending_count(self) -> int:
        """Requests we sent that still wait for a response."""
        return len(self._pending)

    @property
    def pending_output(self) -> int:
        """Bytes written and not yet taken by the socket (our buffer plus the transport's)."""
        return len(self._wbuf) + (self._transport_buffered() if self.transport is not None else 0)

    @property
    def output_full(self) -> bool:
        """True when a server connection's unsent output is at its high-water mark: an answer that is not owed
        (a server-initiated request, a held pull woken up) should not be built for it now."""
        return self._budget is not None and self.pending_output >= self._climits.write_high_water

    # -- async handlers ------------------------------------------------------------------------------
    def request_started(self, nbytes: int = 0) -> None:
        """A request of ``nbytes`` (its frame) was queued to an async handler."""
        self._inflight += 1
        self._inflight_bytes += nbytes
        if self._inflight >= self._climits.max_inflight:
            self._pause(PAUSE_INFLIGHT)

    def request_done(self, nbytes: int = 0) -> None:
        self._inflight -= 1
        self._inflight_bytes -= nbytes
        if self._paused & PAUSE_INFLIGHT and self._inflight <= self._climits.max_inflight // 2:
            self._resume(PAUSE_INFLIGHT)
        if self._budget is not None and not self.closed:
            if nbytes:
                self._account()
            if self._backlog is not None:
                self._schedule_resume()

    # -- reading --------------------------------------------------------------------------------------
    def _pause(self, reason: int) -> None:
        was = self._paused
        self._paused |= reason
        if not was and self.transport is not None and not self.closed:
            log.debug("%s: pausing reads from %s (reason %s)", self.name, self.remote_addr, reason)
            self.transport.pause_reading()

    def _resume(self, reason: int) -> None:
        if not self._paused & reason:
            return
        self._paused &= ~reason
        if not self._paused and self.transport is not None and not self.closed:
            log.debug("%s: resuming reads from %s", self.name, self.remote_addr)
            if self.frame_started is not None:  # the unfinished frame could not arrive while we did not read
                self.frame_started = time.monotonic()
            self.transport.resume_reading()

    # -- handing requests on ----------------------------------------------------------------------------
    def _may_dispatch(self) -> bool:
        """May the next request be handed to a handler? (server connections)

        Every "no" has a wake-up: ``resume_writing`` when the transport is over its mark (the output is handed
        to it first, so a mark reached by unsent output always pauses it), ``request_done`` when handlers hold
        the bytes, ``budget_released`` when the server's total is over."""
        if self._budget.over or self._write_blocked:  # type: ignore[union-attr]
            return False
        high = self._climits.write_high_water
        if self.pending_output + self._inflight_bytes < high:
            return True
        if self._wbuf:
            self._flush()  # type: ignore[attr-defined]
            if self._write_blocked:
                return False
        return self._inflight_bytes == 0 or self.pending_output + self._inflight_bytes < high

    def _hold(self, cmds: list[RemotingCommand], start: int) -> None:
        """Keep ``cmds[start:]`` for later (responses among them complete now) and stop reading."""
        backlog = self._backlog
        if backlog is None:
            backlog = self._backlog = deque()
            self.stalled_since = time.monotonic()
            self._stall_mark = self.pending_output
        for cmd in cmds[start:]:
            if cmd.flag & FLAG_RESPONSE:
                self._complete(self._pending, cmd)  # type: ignore[attr-defined]
            else:
                backlog.append(cmd)
        self._pause(PAUSE_OUTPUT)
        budget = self._budget
        if budget is not None and budget.over:
            budget.wait(self)  # type: ignore[arg-type]

    def _schedule_resume(self) -> None:
        if not self._resume_scheduled and self._loop is not None:
            self._resume_scheduled = True
            self._loop.call_soon(self._try_resume)

    def budget_released(self) -> None:
        """The server's total dropped back under its limit."""
        if self._backlog is not None and not self.closed:
            self._schedule_resume()

    def _try_resume(self) -> None:
        """Hand on waiting requests while the bounds allow; resume reading once none is left."""
        self._resume_scheduled = False
        backlog = self._backlog
        if backlog is None or self.closed:
            return
        dispatcher = self._dispatcher
        self._in_read = True  # answers produced now leave in one write
        try:
            while backlog:
                if not self._may_dispatch():
                    break
                dispatcher.dispatch(self, backlog.popleft())
                if self.closed:
                    return
        finally:
            self._in_read = False
        if self._wbuf:
            self._flush()  # type: ignore[attr-defined]
        else:
            self._account()
        if backlog:
            budget = self._budget
            if budget is not None and budget.over:
                budget.wait(self)  # type: ignore[arg-type]
            return
        self._backlog = None
        self.stalled_since = None
        self._resume(PAUSE_OUTPUT)

    # -- the server's accounting ----------------------------------------------------------------------------
    def _account(self) -> None:
        """Report this connection's pending bytes to the server's total."""
        budget = self._budget
        if budget is None or self.closed:
            return
        now = self.pending_output + self._inflight_bytes
        delta = now - self._counted_output
        if delta:
            self._counted_output = now
            budget.add_output(delta)

    def check_progress(self, now: float) -> None:
        """The server's periodic scan: refresh the accounting (transport buffers drain without telling us),
        restart the stall clock if the peer read something, and hand on waiting requests if we can."""
        self._account()
        if self._backlog is None:
            return
        out = self.pending_output
        if out < self._stall_mark:
            self.stalled_since = now
        self._stall_mark = out
        self._schedule_resume()
