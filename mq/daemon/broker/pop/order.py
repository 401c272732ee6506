"""FIFO pop state (RocketMQ 5 ``ConsumerOrderInfoManager``): which offsets of a queue a FIFO group has in flight.

A FIFO pop reads a queue from the group's offset and records the batch here instead of writing a checkpoint;
the queue is *blocked* (further pops skip it) until every message of the batch is acked or its invisible time
has passed, and then the next pop reads again from the first un-acked offset, so the same messages come back
in order with their delivery count raised. A retried receive carrying the batch's ``attemptId`` is not blocked
and gets the same messages. Acks commit the group's offset up to the first un-acked message.

Per (topic, group, queue) an ``OrderInfo``: pop time, invisible time, the batch's offsets, per-offset next
visible time (change invisible time) and delivery counts (deliveries before the current one), acked bits,
attempt id. It is persisted to ``<store>/config/consumerOrderInfo.json`` at the revive checkpoint and rebuilt
after a crash by replaying the revive log's FIFO records on top of it (``apply``: every change is idempotent
and ordered by pop time, so replaying records the file already holds changes nothing). Entries untouched for
``CLEAN_AFTER_MS`` are dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mq.daemon.broker.pop import records as R
from mq.store.config_files import JsonConfigFile, config_path

log = logging.getLogger(__name__)

ORDER_INFO_FILE = "consumerOrderInfo.json"
#: Entries of a queue not popped or acked for this long are forgotten (RocketMQ: 3 days).
CLEAN_AFTER_MS = 3 * 86_400_000
#: commit_and_next: the offset is not part of the batch
ILLEGAL = -1
#: commit_and_next: the handle is from an older pop of the queue; nothing to commit
STALE = -2


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int
    offsets: list[int]
    attempt_id: str | None = None
    counts: dict[int, int] = field(default_factory=dict)
    next_visible: dict[int, int] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    last_touch: int = 0
    #: offsets acked out of order in earlier batches, above the group's offset: never delivered again
    done: set[int] = field(default_factory=set)

    def blocked(self, attempt_id: str | None, now: int) -> bool:
        if not self.offsets:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        default = self.pop_time + self.invisible_time
        for off in self.offsets:
            if off not in self.acked and now < self.next_visible.get(off, default):
                return True
        return False

    def free_at(self) -> int | None:
        """When the queue unblocks (the latest un-acked visible time); None when not blocked by anything."""
        default = self.pop_time + self.invisible_time
        times = [self.next_visible.get(o, default) for o in self.offsets if o not in self.acked]
        return max(times) if times else None

    def next_offset(self) -> int:
        for off in self.offsets:
            if off not in self.acked:
                return off
        return self.offsets[-1] + 1

    def to_json(self) -> dict:
        return {"popTime": self.pop_time, "i": self.invisible_time, "o": self.offsets, "a": self.attempt_id,
                "oc": {str(k): v for k, v in self.counts.items()},
                "ot": {str(k): v for k, v in self.next_visible.items()},
                "ack": sorted(self.acked), "l": self.last_touch, "done": sorted(self.done)}

    @classmethod
    def from_json(cls, d: dict) -> "OrderInfo":
        return cls(int(d["popTime"]), int(d.get("i") or 0), [int(x) for x in d.get("o") or []],
                   None if d.get("a") is None else str(d["a"]),
                   {int(k): int(v) for k, v in (d.get("oc") or {}).items()},
                   {int(k): int(v) for k, v in (d.get("ot") or {}).items()},
                   {int(x) for x in d.get("ack") or []}, int(d.get("l") or 0),
                   {int(x) for x in d.get("done") or []})


Key = tuple[str, str, int]  # topic, group, queue id


class OrderInfoManager:
    def __init__(self, store_root: Path | None) -> None:
        self.file = JsonConfigFile(config_path(store_root, ORDER_INFO_FILE)) if store_root is not None else None
        self.table: dict[Key, OrderInfo] = {}

    # -- queries ---------------------------------------------------------------------------------------------
    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get((topic, group, queue_id))

    def blocked(self, attempt_id: str | None, topic: str, group: str, queue_id: int, now: int) -> bool:
        info = self.table.get((topic, group, queue_id))
        return info is not None and info.blocked(attempt_id, now)

    def acked(self, topic: str, group: str, queue_id: int) -> set[int]:
        """Offsets of the queue acked above the group's offset (in the current batch or out of order before)."""
        info = self.table.get((topic, group, queue_id))
        return info.acked | info.done if info is not None else set()

    def next_unblock(self, topic: str, group: str, queue_id: int, now: int) -> int | None:
        """The earliest time a blocked queue of ``group`` on ``topic`` (``queue_id``, or any: -1) frees itself."""
        times = [t for (tp, g, q), i in self.table.items() if tp == topic and g == group and queue_id in (-1, q)
                 and i.blocked(None, now) for t in (i.free_at(),) if t is not None]
        return min(times) if times else None

    def in_flight(self, topic: str, group: str) -> int:
        """Un-acked offsets of FIFO batches of ``group`` on ``topic`` (any queue)."""
        return sum(len([o for o in i.offsets if o not in i.acked])
                   for (t, g, _q), i in self.table.items() if t == topic and g == group)

    # -- changes (also the replay of the revive log's FIFO records) ---------------------------------------------
    def preview_counts(self, attempt_id: str | None, topic: str, group: str, queue_id: int,
                       offsets: list[int]) -> dict[int, int]:
        """Each offset's count of earlier deliveries if ``offsets`` were popped now (nothing changes): one more
        than before for an offset of the previous batch, unless the attempt id is the previous batch's."""
        old = self.table.get((topic, group, queue_id))
        if old is None:
            return {o: 0 for o in offsets}
        if old.attempt_id is not None and old.attempt_id == attempt_id:
            return {o: old.counts.get(o, 0) for o in offsets}
        before = set(old.offsets)
        return {o: old.counts.get(o, 0) + 1 if o in before else 0 for o in offsets}

    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, offsets: list[int], now: int, floor: int = -1) -> dict[int, int]:
        """Record a FIFO pop of ``offsets`` after which the group's offset is ``floor``; returns each offset's
        count of earlier deliveries."""
        counts = self.preview_counts(attempt_id, topic, group, queue_id, offsets)
        old = self.table.get((topic, group, queue_id))
        done: set[int] = set()
        if old is not None:  # acked earlier, not in this batch, and still at or above the group's offset
            lo = offsets[0] if offsets else floor
            done = {o for o in old.done | old.acked if o >= lo} - set(offsets)
        self.table[(topic, group, queue_id)] = OrderInfo(pop_time, invisible_time, list(offsets), attempt_id,
                                                         {o: n for o, n in counts.items() if n}, {}, set(), now,
                                                         done)
        return counts

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                        now: int) -> int:
        """Mark ``offset`` of the pop at ``pop_time`` acked; the group's next offset (``ILLEGAL``/``STALE``)."""
        info = self.table.get((topic, group, queue_id))
        if info is None:
            return offset + 1
        if info.pop_time != pop_time:
            return STALE
        if offset not in info.offsets:
            return ILLEGAL
        info.acked.add(offset)
        info.last_touch = now
        return info.next_offset()

    def change_visible(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                       next_visible: int, now: int) -> bool:
        info = self.table.get((topic, group, queue_id))
        if info is None or info.pop_time != pop_time or offset not in info.offsets or offset in info.acked:
            return False
        info.next_visible[offset] = next_visible
        info.last_touch = now
        return True

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        self.table.pop((topic, group, queue_id), None)

    def apply(self, rec: R.OrderRecord, now: int) -> int | None:
        """Replay one FIFO record (in log order); returns the group's committed offset it implies, if any."""
        key = (rec.topic, rec.group, rec.queue_id)
        info = self.table.get(key)
        if rec.kind == R.ORDER_POP:
            if info is not None and info.pop_time >= rec.pop_time:
                return None  # already holds this pop or a later one
            self.update(rec.attempt_id, rec.topic, rec.group, rec.queue_id, rec.pop_time, rec.invisible_time,
                        rec.offsets, now, rec.start_offset)
            return rec.start_offset if rec.start_offset >= 0 else None
        if rec.kind == R.ORDER_ACK:
            nxt = self.commit_and_next(rec.topic, rec.group, rec.queue_id, rec.offsets[0], rec.pop_time, now)
            return nxt if nxt >= 0 else None
        if rec.kind == R.ORDER_CHANGE:
            self.change_visible(rec.topic, rec.group, rec.queue_id, rec.offsets[0], rec.pop_time, rec.next_visible,
                                now)
        return None

    # -- persistence -----------------------------------------------------------------------------------------
    def load(self) -> None:
        if self.file is None:
            return
        obj: Any = self.file.load()
        self.table = {}
        if not isinstance(obj, dict):
            return
        for tg, per in (obj.get("table") or {}).items():
            topic, _, group = str(tg).partition("@")
            if not isinstance(per, dict):
                continue
            for qid, d in per.items():
                try:
                    self.table[(topic, group, int(qid))] = OrderInfo.from_json(d)
                except (KeyError, TypeError, ValueError) as exc:
                    log.warning("order info of %s queue %s is unreadable (%s); dropped", tg, qid, exc)

    def persist(self, now: int) -> None:
        if self.file is None:
            return
        for key in [k for k, i in self.table.items() if now - i.last_touch > CLEAN_AFTER_MS]:
            del self.table[key]
        out: dict[str, dict[str, dict]] = {}
        for (topic, group, qid), info in self.table.items():
            out.setdefault(f"{topic}@{group}", {})[str(qid)] = info.to_json()
        self.file.save({"table": out})
