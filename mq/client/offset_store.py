"""Consumer offset stores (RocketMQ ``RemoteBrokerOffsetStore`` / ``LocalFileOffsetStore``).

An offset is the **next** queue offset to consume. Both keep a table in memory that the push consumer updates
after each consumed batch (``increase_only``: never moves back, except on an explicit reset).

- ``RemoteBrokerOffsetStore`` (CLUSTERING): ``read(FROM_STORE)`` is QUERY_CONSUMER_OFFSET (-1 when the broker has
  none); ``persist_all`` sends UPDATE_CONSUMER_OFFSET for every queue (the consumer calls it every 5 s and at
  shutdown).
- ``LocalFileOffsetStore`` (BROADCASTING): ``<dir>/<clientId>/<group>/offsets.json`` in Java's
  ``OffsetSerializeWrapper`` form ``{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:offset}}``, written
  to a temporary file then renamed (the previous version kept as ``offsets.json.bak``). ``read(FROM_STORE)``
  re-reads the file for that one queue (the others keep their newer in-memory offsets; a queue the file does
  not hold yet answers its in-memory offset, or -1).

``clone_table(topic)`` is Java's ``cloneOffsetTable``: the in-memory offsets of one topic (every topic when
empty), which GET_CONSUMER_STATUS_FROM_CLIENT answers with.
"""

from __future__ import annotations

import enum
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from mq.common.message import MessageQueue
from mq.errors import MQError
from mq.protocol import bodies

if TYPE_CHECKING:
    from mq.client.pull_api import PullAPI

log = logging.getLogger(__name__)


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class _MemoryTable:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    def clone_table(self, topic: str = "") -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.table.items() if not topic or mq.topic == topic}


class RemoteBrokerOffsetStore(_MemoryTable):
    def __init__(self, api: "PullAPI", group: str) -> None:
        super().__init__()
        self.api = api
        self.group = group

    def load(self) -> None:
        """Nothing to load: the broker keeps the offsets."""

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is not ReadOffsetType.READ_FROM_STORE:
            off = self.table.get(mq)
            if off is not None or how is ReadOffsetType.READ_FROM_MEMORY:
                return -1 if off is None else off
        off = await self.api.query_consumer_offset(self.group, mq)
        if off >= 0:
            self.update(mq, off)
        return off

    async def persist(self, mq: MessageQueue) -> None:
        off = self.table.get(mq)
        if off is not None:
            await self.api.update_consumer_offset(self.group, mq, off)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> int:
        """Persist the offsets of ``mqs``; return how many were written. Failures are logged, not raised."""
        done = 0
        for mq in list(mqs):
            off = self.table.get(mq)
            if off is None:
                continue
            try:
                await self.api.update_consumer_offset(self.group, mq, off)
                done += 1
            except MQError as exc:
                log.warning("persisting offset %d of %s for %s failed: %s", off, mq, self.group, exc)
        return done


class LocalFileOffsetStore(_MemoryTable):
    def __init__(self, base_dir: str | os.PathLike[str], client_id: str, group: str) -> None:
        super().__init__()
        self.path = Path(base_dir) / client_id / group / "offsets.json"

    def load(self) -> None:
        self.table.update(self._read_file())

    def _read_file(self) -> dict[MessageQueue, int]:
        for candidate in (self.path, self.path.with_name("offsets.json.bak")):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            try:
                wrapper = bodies.ResetOffsetBody.from_json(data)
            except MQError as exc:
                log.warning("%s is unreadable (%s); trying the backup", candidate, exc)
                continue
            return {MessageQueue(mq.topic, mq.broker_name, mq.queue_id): int(off)
                    for mq, off in wrapper.offset_table.items()}
        return {}

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is ReadOffsetType.READ_FROM_STORE:
            off = self._read_file().get(mq)
            if off is None:  # never saved: what this process has, if anything
                return self.table.get(mq, -1)
            self.update(mq, off)
            return off
        return self.table.get(mq, -1)

    async def persist(self, mq: MessageQueue) -> None:
        self.save()

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> int:
        self.save()
        return len(self.table)

    def save(self) -> None:
        table = {bodies.MessageQueue(mq.topic, mq.broker_name, mq.queue_id): off for mq, off in self.table.items()}
        data = bodies.ResetOffsetBody(offset_table=table).to_json()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name("offsets.json.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name("offsets.json.bak"))
        os.replace(tmp, self.path)
