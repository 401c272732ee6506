"""Held pop requests (RocketMQ 5 ``PopLongPollingService``): a pop that found nothing waits up to its pollTime.

A held pop is keyed by the topics it reads: its topic and the group's pop retry topic. It is woken

- when a message is dispatched to one of them (the store's ``on_dispatch`` callback, posted to the event loop
  by the broker's ``LoopPoster``; a queue-specific pop wakes only for its queue),
- when a FIFO queue of its group is unblocked (an ack or a change of invisible time: ``wake``),
- or when its time is up.

Woken, it runs its ``retry`` callback once (which pops again and answers, or holds it again while time is left).
At most ``max_total`` requests are held, and ``max_per_key`` per (topic, group); beyond that ``hold`` returns
False and the caller answers POLLING_FULL. Held requests of a closed connection are dropped unanswered.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

log = logging.getLogger(__name__)


class HeldPop:
    __slots__ = ("topic", "group", "queue_id", "retry", "timer", "conn", "keys", "done")

    def __init__(self, topic: str, group: str, queue_id: int, retry: Callable[[bool], None], conn: Any,
                 keys: tuple[str, ...]) -> None:
        self.topic = topic
        self.group = group
        self.queue_id = queue_id
        #: retry(timed_out): pop again; called exactly once
        self.retry = retry
        self.timer: asyncio.TimerHandle | None = None
        self.conn = conn
        self.keys = keys
        self.done = False


class PopPollingService:
    def __init__(self, loop: asyncio.AbstractEventLoop, poster: Any, max_total: int = 100_000,
                 max_per_key: int = 1024) -> None:
        self._loop = loop
        self._poster = poster
        self.max_total = max_total
        self.max_per_key = max_per_key
        #: topic (or pop retry topic) -> held requests reading it
        self._by_topic: dict[str, list[HeldPop]] = {}
        self._per_key: dict[tuple[str, str], int] = {}
        self._count = 0

    @property
    def held_count(self) -> int:
        return self._count

    def held_topics(self) -> dict[str, list[HeldPop]]:
        """The live table ``on_dispatch`` checks (read-only for callers)."""
        return self._by_topic

    def hold(self, topic: str, group: str, queue_id: int, retry_topics: tuple[str, ...], timeout_s: float,
             retry: Callable[[bool], None], conn: Any = None) -> bool:
        """Hold a pop; False when full (the caller answers POLLING_FULL) or its connection is closed."""
        key = (topic, group)
        if self._count >= self.max_total or self._per_key.get(key, 0) >= self.max_per_key:
            return False
        if conn is not None and getattr(conn, "closed", False):
            return False
        keys = (topic, *retry_topics)
        req = HeldPop(topic, group, queue_id, retry, conn, keys)
        for k in keys:
            self._by_topic.setdefault(k, []).append(req)
        self._per_key[key] = self._per_key.get(key, 0) + 1
        self._count += 1
        req.timer = self._loop.call_later(max(0.0, timeout_s), self._finish, req, True)
        return True

    # -- wake-ups ----------------------------------------------------------------------------------------
    def on_dispatch(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        """Store callback (any thread): a message reached ``topic``; wake the pops reading it."""
        if topic in self._by_topic:
            self._poster.post(self._notify, topic, queue_id)

    def _notify(self, topic: str, queue_id: int) -> None:
        reqs = self._by_topic.get(topic)
        if not reqs:
            return
        for req in list(reqs):
            if req.topic != topic or req.queue_id < 0 or req.queue_id == queue_id:
                self._finish(req, False)

    def wake(self, topic: str, group: str, queue_id: int = -1) -> None:
        """Wake the pops of ``group`` on ``topic`` (a FIFO queue was unblocked); on the event loop."""
        for req in list(self._by_topic.get(topic) or ()):
            if req.group == group and req.topic == topic and (queue_id < 0 or req.queue_id in (-1, queue_id)):
                self._finish(req, False)

    def _finish(self, req: HeldPop, timed_out: bool) -> None:
        if req.done:
            return
        self._remove(req)
        if req.conn is not None and getattr(req.conn, "closed", False):
            return
        try:
            req.retry(timed_out)
        except Exception:
            log.exception("re-running a held pop of %s/%s failed", req.topic, req.group)

    def _remove(self, req: HeldPop) -> None:
        req.done = True
        if req.timer is not None:
            req.timer.cancel()
        for k in req.keys:
            lst = self._by_topic.get(k)
            if lst is not None:
                try:
                    lst.remove(req)
                except ValueError:
                    pass
                if not lst:
                    del self._by_topic[k]
        key = (req.topic, req.group)
        n = self._per_key.get(key, 1) - 1
        if n > 0:
            self._per_key[key] = n
        else:
            self._per_key.pop(key, None)
        self._count -= 1

    # -- cleanup -----------------------------------------------------------------------------------------
    def drop_connection(self, conn: Any) -> int:
        dropped = {id(r): r for lst in self._by_topic.values() for r in lst if r.conn is conn}
        for req in dropped.values():
            self._remove(req)
        return len(dropped)

    def drop_all(self) -> None:
        """Answer every held pop now (as timed out): the broker is stopping."""
        for req in list({id(r): r for lst in self._by_topic.values() for r in lst}.values()):
            self._finish(req, True)
