"""What all connections of one server hold together, against ``ConnectionLimits`` (the server-wide bounds).

Two totals, each the sum of what every server ``Connection`` reports as it changes:

- *pending output*: unsent answers (the connection's buffer plus the transport's) plus the frames of requests
  that handlers still hold. While it is at or above ``max_total_output`` no connection hands a request to a
  handler; the connections that stopped for it wait in ``gated`` and are woken when the total drops to three
  quarters of the limit. ``victims`` names the connections to close to get back under it: the ones whose peer
  has read nothing of their output for the longest.
- *partial frames*: bytes of frames not yet complete. ``add_partial`` says whether the total is still within
  ``max_total_partial``; the connection whose read went over it is closed (the newest offender).

The totals are plain integers updated on the event loop; a connection reports deltas (``add_output``,
``add_partial``) and subtracts what it counted when it closes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from mq.config import ConnectionLimits

if TYPE_CHECKING:
    from mq.remoting.connection import Connection


class ServerBudget:
    """Server-wide totals of pending output and of partial frames."""

    __slots__ = ("output_limit", "output_resume", "partial_limit", "output", "partial", "over", "_gated",
                 "on_over")

    def __init__(self, limits: ConnectionLimits) -> None:
        self.output_limit = limits.max_total_output
        self.output_resume = limits.max_total_output - limits.max_total_output // 4
        self.partial_limit = limits.max_total_partial
        self.output = 0
        self.partial = 0
        #: True from the moment the output total reaches the limit until it drops to ``output_resume``
        self.over = False
        self._gated: set[Connection] = set()
        #: called (once per crossing) when the output total goes over the limit: the server evicts
        self.on_over: Callable[[], None] | None = None

    def add_output(self, delta: int) -> None:
        total = self.output = self.output + delta
        if self.over:
            if total <= self.output_resume:
                self.over = False
                self._wake()
        elif total >= self.output_limit:
            self.over = True
            if self.on_over is not None:
                self.on_over()

    def add_partial(self, delta: int) -> bool:
        """Count ``delta`` bytes of partial frames; False when the total is now over its limit."""
        self.partial += delta
        return self.partial <= self.partial_limit

    def wait(self, conn: "Connection") -> None:
        """``conn`` stopped because the total is over the limit: wake it when the total drops."""
        self._gated.add(conn)

    def forget(self, conn: "Connection") -> None:
        self._gated.discard(conn)

    def _wake(self) -> None:
        gated, self._gated = self._gated, set()
        for conn in gated:
            conn.budget_released()

    @staticmethod
    def victims(conns: Iterable["Connection"], excess: int) -> list["Connection"]:
        """Stalled connections to close to free ``excess`` bytes: the longest-stalled first."""
        stalled = sorted((c for c in conns if c.stalled_since is not None and c.pending_output > 0),
                         key=lambda c: c.stalled_since)  # type: ignore[arg-type, return-value]
        out = []
        for conn in stalled:
            if excess <= 0:
                break
            out.append(conn)
            excess -= conn.pending_output
        return out
