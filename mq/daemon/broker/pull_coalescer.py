"""Pulls that would find only a few messages wait a moment for more (``pullCoalesceMicros``).

A push consumer keeps one PULL in flight per queue and sends the next one as soon as an answer arrives. While it
keeps up with the producers, each pull finds the one or two messages stored since the last, and the broker and
the client pay a whole request for each of them. RocketMQ's broker makes new messages visible to pulls in
batches (its reput thread sleeps 1 ms whenever it has caught up with the commit log). This broker dispatches
each message as it is put; instead, a pull that carries the SUSPEND flag and would find fewer than
``pullCoalesceMessages`` messages (or fewer than it asks for) is parked here for up to ``pullCoalesceMicros``.
When the window ends, every pull parked in it runs as if it had just arrived, on one timer: those that find
messages are answered with what was stored meanwhile, and those that still find none are held for long
polling as usual. The answers of one window leave in one write per connection.

A parked pull has no timer of its own. The window is a sub-millisecond timer (``mq.remoting.fine_timer``);
pulls parked while it is armed join it, so none waits longer than the window. At most ``limit`` pulls are
parked at once; beyond it a pull runs at once. A parked pull of a connection that has closed is dropped when
its window ends.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from mq.remoting.fine_timer import FineTimer

log = logging.getLogger(__name__)

#: runs one parked pull: (connection, request, decoded header)
RunParked = Callable[[Any, Any, Any], None]


class PullCoalescer:
    def __init__(self, run: RunParked, limit: int) -> None:
        self._run = run
        self.limit = limit
        self._parked: list[tuple[Any, Any, Any]] = []
        self._timer: FineTimer | None = None
        self._closed = False

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    def park(self, conn: Any, cmd: Any, header: Any, wait_us: int) -> bool:
        """Park a pull for at most ``wait_us`` microseconds (on the loop's thread); False when it must run now:
        the coalescer is closed or full."""
        if self._closed or len(self._parked) >= self.limit:
            return False
        timer = self._timer
        if timer is None:
            timer = self._timer = FineTimer(asyncio.get_running_loop(), self._flush)
        self._parked.append((conn, cmd, header))
        timer.arm(wait_us / 1e6)  # no-op while the window is open
        return True

    def _flush(self) -> None:
        parked, self._parked = self._parked, []
        run = self._run
        for conn, cmd, header in parked:
            if getattr(conn, "closed", False):
                continue
            try:
                run(conn, cmd, header)
            except Exception:
                log.exception("a parked pull of %s queue %d failed", header.topic, header.queue_id)

    def close(self) -> None:
        """Drop the parked pulls unanswered (the broker is stopping) and release the timer."""
        self._closed = True
        self._parked = []
        if self._timer is not None:
            self._timer.close()
            self._timer = None
