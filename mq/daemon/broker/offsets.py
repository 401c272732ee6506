"""Committed consumer offsets (RocketMQ ``ConsumerOffsetManager``), persisted to ``consumerOffset.json``.

The table maps ``topic@group`` to {queueId: next offset to consume}; the controller calls ``persist`` every
``flushConsumerOffsetInterval`` (5 s) and at shutdown, and only writes when something changed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mq.common import topic as T
from mq.common.log_throttle import DEFAULT_INTERVAL, LogThrottle
from mq.store.config_files import ConsumerOffsetFile, offset_key

log = logging.getLogger(__name__)

SEPARATOR = "@"
LONG_MAX = 2**63 - 1
QUEUE_ID_MAX = 2**31 - 1


class ConsumerOffsetManager:
    def __init__(self, store_root: Path, log_interval: float = DEFAULT_INTERVAL) -> None:
        self.file = ConsumerOffsetFile(store_root)
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self._throttle = LogThrottle(log, log_interval)

    def load(self) -> None:
        """Read consumerOffset.json, keeping only entries a broker can have written: ``topic@group`` keys of a
        valid topic, queue ids in [0, 2^31), offsets >= 0 (a Java broker cannot read others)."""
        table: dict[str, dict[int, int]] = {}
        for key, per in self.file.load().items():
            topic, sep, group = key.partition(SEPARATOR)
            if not sep or not T.is_valid_topic(topic) or not group:
                log.warning("%s: skipping offsets of %r, not topic@group", self.file.path, key[:300])
                continue
            good = {q: o for q, o in per.items() if 0 <= q <= QUEUE_ID_MAX and 0 <= o <= LONG_MAX}
            if len(good) != len(per):
                log.warning("%s: skipping %d offset(s) of %s with a queue id or offset out of range",
                            self.file.path, len(per) - len(good), key)
            table[key] = good
        self._table = table
        self._dirty = False

    def query(self, group: str, topic: str, queue_id: int) -> int:
        per = self._table.get(topic + SEPARATOR + group)
        if per is None:
            return -1
        return per.get(queue_id, -1)

    def commit(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Record ``offset`` as the next to consume; False (nothing recorded, a warning now and then) for a
        queue id outside [0, 2^31) or an offset outside [0, 2^63) (consumerOffset.json must stay readable by a
        Java broker) or an invalid topic name."""
        if not 0 <= queue_id <= QUEUE_ID_MAX or not 0 <= offset <= LONG_MAX or not T.is_valid_topic(topic):
            self._throttle.warning("bad-commit", "offset commit from %s refused: %s@%s queue %s offset %s",
                                   client_host, str(topic)[:200], str(group)[:200], queue_id, offset)
            return False
        key = topic + SEPARATOR + group
        per = self._table.get(key)
        if per is None:
            per = self._table[key] = {}
        old = per.get(queue_id)
        if old is not None and offset < old:
            log.debug("offset of %s queue %d moved back from %d to %d by %s", key, queue_id, old, offset,
                      client_host)
        if old != offset:
            per[queue_id] = offset
            self._dirty = True
        return True

    def table(self) -> dict[str, dict[int, int]]:
        return {k: dict(v) for k, v in self._table.items()}

    def pairs(self) -> list[tuple[str, str]]:
        """(topic, group) of every key with committed offsets (a snapshot: safe from another thread)."""
        return [(t, g) for t, _, g in (key.partition(SEPARATOR) for key in list(self._table))]

    def queue_offsets(self, group: str, topic: str) -> dict[int, int]:
        """queue id -> committed offset of ``group`` in ``topic`` (a copy)."""
        per = self._table.get(topic + SEPARATOR + group)
        return dict(per) if per is not None else {}

    def correction_offsets(self, topic: str, filter_groups: set[str], compare_group: str,
                           queue_min_offset) -> dict[int, int]:
        """RocketMQ ``queryMinOffsetInAllGroup`` + QUERY_CORRECTION_OFFSET: per queue of ``topic``, the smallest
        offset committed by any group outside ``filter_groups`` (offsets below ``queue_min_offset(queue_id)``, the
        queue's first kept message, are ignored); a queue where that minimum is beyond ``compare_group``'s own
        offset gets Long.MAX_VALUE. Java removes the filtered groups' offsets from its table while it looks (the
        key set is a live view); nothing is removed here."""
        mins: dict[int, int] = {}
        for key, per in self._table.items():
            t, _, g = key.partition(SEPARATOR)
            if t != topic or g in filter_groups:
                continue
            for qid, off in per.items():
                if off >= queue_min_offset(qid):
                    old = mins.get(qid)
                    mins[qid] = off if old is None else min(old, off)
        for qid, off in (self._table.get(topic + SEPARATOR + compare_group) or {}).items():
            m = mins.get(qid)
            if m is not None and m > off:
                mins[qid] = LONG_MAX
        return mins

    def groups_of_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self._table:
            t, _, g = key.partition(SEPARATOR)
            if t == topic:
                out.add(g)
        return out

    def topics_of_group(self, group: str) -> set[str]:
        out = set()
        for key in self._table:
            t, _, g = key.partition(SEPARATOR)
            if g == group:
                out.add(t)
        return out

    def remove_group(self, group: str) -> None:
        for key in [k for k in self._table if k.partition(SEPARATOR)[2] == group]:
            del self._table[key]
            self._dirty = True

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self._table if k.partition(SEPARATOR)[0] == topic]:
            del self._table[key]
            self._dirty = True

    def persist(self, force: bool = False) -> bool:
        """Write the table if it changed since the last write (or ``force``); True if written."""
        if not self._dirty and not force:
            return False
        self._dirty = False
        try:
            self.file.save(self._table)
        except OSError as exc:  # a full disk: retried at the next period; said once per interval
            self._dirty = True
            self._throttle.error("persist", "cannot write %s: %s", self.file.path, exc.strerror or exc)
            return False
        return True


__all__ = ["ConsumerOffsetManager", "offset_key"]
