"""The push consumer's per-queue cache of pulled, not yet consumed messages (RocketMQ ``ProcessQueue``).

Messages are kept by queue offset in arrival order (pulls of one queue are sequential, so that is ascending
order). ``remove`` returns the offset to commit: the lowest offset still cached, or ``max + 1`` when the cache
is empty, so an offset never passes a message that has not been consumed. The counters drive flow control.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from mq.common.message import MessageExt


class ProcessQueue:
    __slots__ = ("msgs", "msg_count", "msg_size", "queue_offset_max", "dropped", "last_pull", "last_consume")

    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.last_pull = time.time()
        self.last_consume = time.time()

    def put(self, msgs: Iterable[MessageExt]) -> None:
        self.last_pull = time.time()
        for m in msgs:
            off = m.queue_offset
            if off in self.msgs:
                continue
            self.msgs[off] = m
            self.msg_count += 1
            self.msg_size += len(m.body)
            if off > self.queue_offset_max:
                self.queue_offset_max = off

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

    def info(self) -> dict[str, Any]:
        """Java ``ProcessQueueInfo`` fields that matter here."""
        return {"cachedMsgCount": self.msg_count, "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
                "cachedMsgMinOffset": next(iter(self.msgs)) if self.msgs else 0,
                "cachedMsgMaxOffset": next(reversed(self.msgs)) if self.msgs else 0,
                "droped": self.dropped, "lastPullTimestamp": int(self.last_pull * 1000),
                "lastConsumeTimestamp": int(self.last_consume * 1000)}
