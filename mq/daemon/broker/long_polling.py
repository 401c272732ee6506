"""Held pull requests (RocketMQ ``PullRequestHoldService`` + ``NotifyMessageArrivingListener``), PROTOCOL.md §7.

A pull that finds nothing and carries the SUSPEND flag is held under ``(topic, queueId)`` until either

- a message is dispatched to that queue whose tags code matches the request's filter (the store's
  ``on_dispatch`` callback; it may run on the store's flush thread, so it is handed to the event loop through
  ``LoopPoster``, which wakes the loop once per burst, not once per message), or
- its hold time ends (a timer per held request).

Either way the pull is executed again with suspension disabled and answered with ``conn.send_response``.
Held requests of a closed connection are dropped. At most ``max_held`` requests are held; ``hold`` returns
False beyond that and the caller answers PULL_NOT_FOUND at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from typing import Any, Callable

log = logging.getLogger(__name__)


class LoopPoster:
    """Run callbacks on an event loop from any thread, coalescing bursts into one loop wake-up."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[tuple[Callable[..., Any], tuple]] = deque()
        self._scheduled = False
        self._loop_thread = threading.get_ident()

    def set_loop_thread(self) -> None:
        self._loop_thread = threading.get_ident()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        self._items.append((fn, args))
        if not self._scheduled:
            self._scheduled = True
            if threading.get_ident() == self._loop_thread:
                self._loop.call_soon(self._drain)
            else:
                try:
                    self._loop.call_soon_threadsafe(self._drain)
                except RuntimeError:  # loop closed during shutdown
                    pass

    def call_later(self, delay: float, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the loop ``delay`` seconds from now, from any thread (the store's ``IndexScheduler``).
        Nothing runs once the loop is closed (the store's shutdown indexes what is left)."""
        try:
            if self.on_owner_thread():
                self._loop.call_later(delay, fn)
            else:
                self._loop.call_soon_threadsafe(self._loop.call_later, delay, fn)
        except RuntimeError:  # loop closed during shutdown
            pass

    def on_owner_thread(self) -> bool:
        """True on the loop's thread."""
        return threading.get_ident() == self._loop_thread

    def _drain(self) -> None:
        self._scheduled = False
        items = self._items
        while items:
            fn, args = items.popleft()
            try:
                fn(*args)
            except Exception:
                log.exception("posted callback %r failed", fn)


class HeldPull:
    __slots__ = ("conn", "cmd", "header", "matches", "timer", "key")

    def __init__(self, conn: Any, cmd: Any, header: Any, matches: Callable[[int], bool] | None,
                 key: tuple[str, int]) -> None:
        self.conn = conn
        self.cmd = cmd
        self.header = header
        self.matches = matches
        self.timer: asyncio.TimerHandle | None = None
        self.key = key


class PullHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop, poster: LoopPoster,
                 reexecute: Callable[[HeldPull], None], max_held: int = 10_000) -> None:
        self._loop = loop
        self._poster = poster
        self._reexecute = reexecute
        self.max_held = max_held
        #: topic -> queueId -> held requests
        self._held: dict[str, dict[int, list[HeldPull]]] = {}
        self._count = 0

    @property
    def held_count(self) -> int:
        return self._count

    def held_topics(self) -> dict[str, dict[int, list[HeldPull]]]:
        """The live table of held pulls by topic (read-only for callers: a dispatch to a topic not in it
        wakes nothing)."""
        return self._held

    def hold(self, conn: Any, cmd: Any, header: Any, matches: Callable[[int], bool] | None,
             timeout_s: float) -> bool:
        if self._count >= self.max_held or getattr(conn, "closed", False):
            return False
        topic, qid = header.topic, header.queue_id
        req = HeldPull(conn, cmd, header, matches, (topic, qid))
        self._held.setdefault(topic, {}).setdefault(qid, []).append(req)
        self._count += 1
        req.timer = self._loop.call_later(max(0.0, timeout_s), self._expire, req)
        return True

    # -- wake-ups ----------------------------------------------------------------------------------------
    def on_dispatch(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        """Store callback (any thread): a message was dispatched; wake matching held pulls of that queue."""
        per = self._held.get(topic)
        if per is None or queue_id not in per:
            return
        self._poster.post(self._notify, topic, queue_id, max_offset, tags_code)

    def _notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        per = self._held.get(topic)
        reqs = per.get(queue_id) if per is not None else None
        if not reqs:
            return
        keep = []
        wake = []
        for req in reqs:
            if max_offset > req.header.queue_offset and (req.matches is None or req.matches(tags_code)):
                wake.append(req)
            else:
                keep.append(req)
        if not wake:
            return
        self._replace(topic, queue_id, keep)
        for req in wake:
            self._finish(req)

    def _expire(self, req: HeldPull) -> None:
        topic, qid = req.key
        per = self._held.get(topic)
        reqs = per.get(qid) if per is not None else None
        if not reqs or req not in reqs:
            return
        reqs.remove(req)
        self._count -= 1
        if not reqs:
            self._replace(topic, qid, [])
        self._run(req)

    def _replace(self, topic: str, qid: int, keep: list[HeldPull]) -> None:
        per = self._held.get(topic)
        if per is None:
            return
        old = per.get(qid) or []
        self._count -= len(old) - len(keep)
        if keep:
            per[qid] = keep
        else:
            per.pop(qid, None)
            if not per:
                self._held.pop(topic, None)

    def _finish(self, req: HeldPull) -> None:
        if req.timer is not None:
            req.timer.cancel()
        self._run(req)

    def _run(self, req: HeldPull) -> None:
        if getattr(req.conn, "closed", False):
            return
        try:
            self._reexecute(req)
        except Exception:
            log.exception("re-executing a held pull of %s queue %d failed", req.header.topic,
                          req.header.queue_id)

    # -- cleanup -----------------------------------------------------------------------------------------
    def drop_connection(self, conn: Any) -> int:
        dropped = 0
        for topic, per in list(self._held.items()):
            for qid, reqs in list(per.items()):
                keep = [r for r in reqs if r.conn is not conn]
                if len(keep) != len(reqs):
                    for r in reqs:
                        if r.conn is conn and r.timer is not None:
                            r.timer.cancel()
                    dropped += len(reqs) - len(keep)
                    self._replace(topic, qid, keep)
        return dropped

    def drop_all(self) -> None:
        for per in self._held.values():
            for reqs in per.values():
                for r in reqs:
                    if r.timer is not None:
                        r.timer.cancel()
        self._held.clear()
        self._count = 0
