"""Receipt handles that are finished but not yet expired: acked, or replaced by a change of invisible time.

The revive log pairs acks with checkpoints, so nothing here is needed for correctness of a well-behaved client;
this table makes misuse visible and harmless: acking a handle that a change of invisible time replaced answers
INVALID (the message is still in flight under the new handle), and changing the invisible time of an acked or
replaced handle is refused (it would write a checkpoint for a message that is done, and bring it back). An entry
lives until its handle's own revive time, after which every use is EXPIRED anyway.

Bounded: at most ``capacity`` entries (the oldest are forgotten first; expired ones when looked up), each a 64-bit
hash of (real topic, queue, checkpoint start offset, pop time, group, offset) and its expiry. Not persisted:
after a restart a finished handle behaves as in RocketMQ (an ack of it changes nothing).
"""

from __future__ import annotations

ACKED = 0
REPLACED = 1


class FinishedHandles:
    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = max(0, capacity)
        #: key hash -> expiry ms * 2 + reason
        self._table: dict[int, int] = {}

    @staticmethod
    def key(topic: str, queue_id: int, ck_offset: int, pop_time: int, group: str, offset: int) -> int:
        return hash((topic, queue_id, ck_offset, pop_time, group, offset))

    def __len__(self) -> int:
        return len(self._table)

    def add(self, key: int, expiry: int, reason: int, now: int) -> None:
        if not self.capacity:
            return
        t = self._table
        t.pop(key, None)
        while len(t) >= self.capacity:  # the oldest first: O(1), and usually expired already
            del t[next(iter(t))]
        t[key] = expiry << 1 | reason

    def reason(self, key: int, now: int) -> int | None:
        """ACKED or REPLACED for a finished handle that has not expired; None otherwise."""
        v = self._table.get(key)
        if v is None:
            return None
        if v >> 1 <= now:
            del self._table[key]
            return None
        return v & 1
