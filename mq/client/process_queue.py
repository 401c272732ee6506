"""The push consumer's per-queue cache of pulled, not yet consumed messages (RocketMQ ``ProcessQueue``).

Messages are kept by queue offset in ascending order (pulls of one queue are sequential, so arrival order is
offset order; messages put back after a suspend are merged in order). The counters drive flow control.

Concurrent consumption: ``remove`` returns the offset to commit: the lowest offset still cached, or ``max + 1``
when the cache is empty, so an offset never passes a message that has not been consumed.

Orderly consumption (``ConsumeMessageOrderlyService``):

- ``put`` answers whether a consume run must be started (the queue was not already being consumed);
- ``take_messages(n)`` moves the ``n`` lowest offsets to the *consuming* map (they still count as cached);
- ``commit()`` forgets the consuming map and returns its highest offset + 1 (-1 if it was empty);
- ``make_messages_consume_again(msgs)`` / ``rollback()`` move consuming messages back to the cache, in order;
- ``locked`` / ``last_lock_time``: the broker lock as the client last saw it; ``lock_expired(max_live)`` is
  true once it has not been renewed for ``max_live`` seconds; ``lock_lost``: the broker refused a renewal
  (another client took the queue), so the cache is stale until the next pull re-reads the committed offset;
- ``consume_lock``: held while a batch is in the listener and committed, so a rebalance that drops the queue
  can wait for that batch before it persists the offset and unlocks the queue.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterable

from mq.common.message import MessageExt


class ProcessQueue:
    __slots__ = ("msgs", "msg_count", "msg_size", "queue_offset_max", "dropped", "last_pull", "last_consume",
                 "consuming_msgs", "consuming", "locked", "last_lock_time", "lock_lost", "try_unlock_times",
                 "consume_lock")

    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.last_pull = time.time()
        self.last_consume = time.time()
        self.consuming_msgs: dict[int, MessageExt] = {}
        self.consuming = False
        self.locked = False
        self.last_lock_time = time.monotonic()
        self.lock_lost = False
        self.try_unlock_times = 0
        self.consume_lock = asyncio.Lock()

    def put(self, msgs: Iterable[MessageExt]) -> bool:
        """Cache ``msgs``; return True when an orderly consume run must be dispatched for them."""
        self.last_pull = time.time()
        for m in msgs:
            off = m.queue_offset
            if off in self.msgs or off in self.consuming_msgs:
                continue
            self.msgs[off] = m
            self.msg_count += 1
            self.msg_size += len(m.body)
            if off > self.queue_offset_max:
                self.queue_offset_max = off
        if self.msgs and not self.consuming:
            self.consuming = True
            return True
        return False

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed ``msgs``; return the offset to commit (-1 if the cache was already empty)."""
        self.last_consume = time.time()
        if not self.msgs:
            return -1
        result = self.queue_offset_max + 1
        for m in msgs:
            if self.msgs.pop(m.queue_offset, None) is not None:
                self.msg_count -= 1
                self.msg_size -= len(m.body)
        if self.msgs:
            result = next(iter(self.msgs))
        return result

    def max_span(self) -> int:
        if len(self.msgs) < 2:
            return 0
        return next(reversed(self.msgs)) - next(iter(self.msgs))

    def has_temp_message(self) -> bool:
        return bool(self.msgs)

    def clear(self) -> None:
        """Forget everything cached or being consumed (the queue is re-read from a recomputed offset)."""
        self.msgs.clear()
        self.consuming_msgs.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1

    # -- orderly ----------------------------------------------------------------------------------------
    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` lowest-offset messages to the consuming map and return them. An empty
        answer ends the consume run (``consuming`` becomes False, so the next ``put`` dispatches again)."""
        self.last_consume = time.time()
        taken: list[MessageExt] = []
        while self.msgs and len(taken) < batch_size:
            off = next(iter(self.msgs))
            m = self.msgs.pop(off)
            self.consuming_msgs[off] = m
            taken.append(m)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """The consuming batch was consumed: forget it; return the offset to commit (-1 if none)."""
        if not self.consuming_msgs:
            return -1
        offset = max(self.consuming_msgs) + 1
        self.msg_count -= len(self.consuming_msgs)
        self.msg_size -= sum(len(m.body) for m in self.consuming_msgs.values())
        self.consuming_msgs.clear()
        return offset

    def make_messages_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put ``msgs`` of the consuming batch back so that they come first again."""
        back = {}
        for m in msgs:
            if self.consuming_msgs.pop(m.queue_offset, None) is not None:
                back[m.queue_offset] = m
        self._merge(back)

    def rollback(self) -> None:
        """Put the whole consuming batch back (ROLLBACK)."""
        back = dict(self.consuming_msgs)
        self.consuming_msgs.clear()
        self._merge(back)

    def _merge(self, back: dict[int, MessageExt]) -> None:
        if back:
            merged = {**self.msgs, **back}
            self.msgs = dict(sorted(merged.items()))

    def lock_expired(self, max_live: float, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - self.last_lock_time > max_live

    def mark_locked(self, now: float | None = None) -> None:
        self.locked = True
        self.last_lock_time = time.monotonic() if now is None else now

    def info(self) -> dict[str, Any]:
        """Java ``ProcessQueueInfo`` fields that matter here."""
        lock_age = time.monotonic() - self.last_lock_time
        return {"cachedMsgCount": self.msg_count, "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
                "cachedMsgMinOffset": next(iter(self.msgs)) if self.msgs else 0,
                "cachedMsgMaxOffset": next(reversed(self.msgs)) if self.msgs else 0,
                "tryUnlockTimes": self.try_unlock_times, "locked": self.locked,
                "lastLockTimestamp": int((time.time() - lock_age) * 1000),
                "droped": self.dropped, "lastPullTimestamp": int(self.last_pull * 1000),
                "lastConsumeTimestamp": int(self.last_consume * 1000)}
