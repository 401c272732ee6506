"""Committed consumer offsets (RocketMQ ``ConsumerOffsetManager``), persisted to ``consumerOffset.json``.

The table maps ``topic@group`` to {queueId: next offset to consume}; the controller calls ``persist`` every
``flushConsumerOffsetInterval`` (5 s) and at shutdown, and only writes when something changed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mq.store.config_files import ConsumerOffsetFile, offset_key

log = logging.getLogger(__name__)

SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, store_root: Path) -> None:
        self.file = ConsumerOffsetFile(store_root)
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False

    def load(self) -> None:
        self._table = self.file.load()
        self._dirty = False

    def query(self, group: str, topic: str, queue_id: int) -> int:
        per = self._table.get(topic + SEPARATOR + group)
        if per is None:
            return -1
        return per.get(queue_id, -1)

    def commit(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
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

    def table(self) -> dict[str, dict[int, int]]:
        return {k: dict(v) for k, v in self._table.items()}

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
        except OSError:
            self._dirty = True
            log.exception("cannot write %s", self.file.path)
            return False
        return True


__all__ = ["ConsumerOffsetManager", "offset_key"]
