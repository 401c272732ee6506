"""The broker's JSON config files under ``<root>/config`` (STORE.md §14), read and written as RocketMQ does.

==========================  ========================================================================
file                        top-level shape
==========================  ========================================================================
topics.json                 {"dataVersion":{"counter":N,"timestamp":ms},"topicConfigTable":{"T":{..}}}
consumerOffset.json         {"offsetTable":{"<topic>@<group>":{<queueId>:<offset>,...}}}
delayOffset.json            {"offsetTable":{<delayLevel>:<offset>,...}}
subscriptionGroup.json      {"dataVersion":{..},"subscriptionGroupTable":{"G":{..}}}
==========================  ========================================================================

Reading is tolerant: Java's fastjson writes integer map keys unquoted (``{0:12}``), which
``mq.common.fastjson.loads`` accepts; keys come back as ``int`` or ``str`` and the typed readers below turn
them into ints. If the file is missing, empty or unreadable, its ``.bak`` is read instead (as Java's
``ConfigManager.load`` does).

Writing is standard JSON (quoted keys; fastjson reads them into its Integer/Long maps) and atomic:

    1. write ``<file>.tmp`` and fsync it;
    2. if ``<file>`` is readable, hard-link it to ``<file>.bak`` (through ``.bak.tmp`` and a rename) so the
       previous version is kept, and a corrupt current file never overwrites a good backup;
    3. rename ``.tmp`` over ``<file>`` and fsync the directory.

A crash at any point leaves either the old or the new file in place, and ``.bak`` readable.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mq.errors import MQError

log = logging.getLogger(__name__)

CONFIG_DIR_NAME = "config"
TOPICS_FILE = "topics.json"
CONSUMER_OFFSET_FILE = "consumerOffset.json"
DELAY_OFFSET_FILE = "delayOffset.json"
SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
TOPIC_GROUP_SEPARATOR = "@"


def _loads(data: bytes) -> Any:
    # Imported lazily so a store without mq.common.fastjson still reads strict JSON (and quoted keys).
    try:
        from mq.common.fastjson import loads
    except ImportError:  # pragma: no cover - fastjson is part of mq.common
        return json.loads(data)
    return loads(data)


def config_path(root: Path, name: str) -> Path:
    """``<root>/config/<name>``."""
    return Path(root) / CONFIG_DIR_NAME / name


# ---------------------------------------------------------------------------------------------------------
# the generic file
# ---------------------------------------------------------------------------------------------------------
class JsonConfigFile:
    """One JSON document on disk with a ``.bak`` companion."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.bak_path = self.path.with_name(self.path.name + ".bak")
        self.tmp_path = self.path.with_name(self.path.name + ".tmp")

    def _read(self, path: Path) -> dict | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if not data.strip():
            return None
        try:
            value = _loads(data)
        except (MQError, ValueError) as exc:
            log.warning("config file %s is unreadable: %s", path, exc)
            return None
        if not isinstance(value, dict):
            log.warning("config file %s does not hold a JSON object", path)
            return None
        return value

    def load(self) -> dict | None:
        """The document, from the main file or else the ``.bak``; None if neither is usable."""
        value = self._read(self.path)
        if value is not None:
            return value
        value = self._read(self.bak_path)
        if value is not None:
            log.warning("config file %s missing or unreadable; loaded %s", self.path, self.bak_path)
        return value

    def save(self, obj: Mapping[str, Any]) -> None:
        """Write ``obj`` atomically, keeping the previous readable version as ``.bak``."""
        data = json.dumps(obj, indent="\t", ensure_ascii=False).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if self._read(self.path) is not None:
            bak_tmp = self.bak_path.with_name(self.bak_path.name + ".tmp")
            try:
                bak_tmp.unlink()
            except FileNotFoundError:
                pass
            os.link(self.path, bak_tmp)
            os.replace(bak_tmp, self.bak_path)
        os.replace(self.tmp_path, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _int_keys(table: Any, what: str) -> dict[int, int]:
    out: dict[int, int] = {}
    if not isinstance(table, dict):
        return out
    for k, v in table.items():
        try:
            out[int(k)] = int(v)
        except (TypeError, ValueError):
            log.warning("skipping bad %s entry %r: %r", what, k, v)
    return out


# ---------------------------------------------------------------------------------------------------------
# dataVersion
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DataVersion:
    """RocketMQ ``DataVersion``: a counter bumped on every change, and the time of the change."""

    counter: int = 0
    timestamp: int = 0

    def next(self, now_ms: int | None = None) -> "DataVersion":
        return DataVersion(self.counter + 1, int(time.time() * 1000) if now_ms is None else now_ms)

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Any) -> "DataVersion":
        if not isinstance(obj, dict):
            return cls()
        return cls(int(obj.get("counter", 0) or 0), int(obj.get("timestamp", 0) or 0))


# ---------------------------------------------------------------------------------------------------------
# topics.json
# ---------------------------------------------------------------------------------------------------------
PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 0x8, 0x4, 0x2, 0x1


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One entry of ``topicConfigTable`` with Java's defaults."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], name: str = "") -> "TopicConfig":
        d = cls(name)
        return cls(topic_name=str(obj.get("topicName") or name),
                   read_queue_nums=int(obj.get("readQueueNums", d.read_queue_nums)),
                   write_queue_nums=int(obj.get("writeQueueNums", d.write_queue_nums)),
                   perm=int(obj.get("perm", d.perm)),
                   topic_filter_type=str(obj.get("topicFilterType", d.topic_filter_type)),
                   topic_sys_flag=int(obj.get("topicSysFlag", d.topic_sys_flag)),
                   order=bool(obj.get("order", d.order)))


@dataclass(frozen=True, slots=True)
class TopicConfigTable:
    data_version: DataVersion = DataVersion()
    topics: dict[str, TopicConfig] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_json(),
                "topicConfigTable": {name: t.to_json() for name, t in self.topics.items()}}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "TopicConfigTable":
        topics: dict[str, TopicConfig] = {}
        table = obj.get("topicConfigTable")
        for name, entry in (table.items() if isinstance(table, dict) else ()):
            try:
                topics[str(name)] = TopicConfig.from_json(entry, str(name))
            except (AttributeError, TypeError, ValueError) as exc:
                log.warning("skipping bad entry %r: %s", name, exc)
        return cls(DataVersion.from_json(obj.get("dataVersion")), topics)


class TopicConfigFile:
    """``<root>/config/topics.json``."""

    def __init__(self, root: Path) -> None:
        self.file = JsonConfigFile(config_path(root, TOPICS_FILE))

    @property
    def path(self) -> Path:
        return self.file.path

    def load(self) -> TopicConfigTable:
        obj = self.file.load()
        return TopicConfigTable() if obj is None else TopicConfigTable.from_json(obj)

    def save(self, table: TopicConfigTable) -> None:
        self.file.save(table.to_json())


# ---------------------------------------------------------------------------------------------------------
# consumerOffset.json
# ---------------------------------------------------------------------------------------------------------
def offset_key(topic: str, group: str) -> str:
    """The ``topic@group`` key of ``offsetTable``."""
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_offset_key(key: str) -> tuple[str, str]:
    """``topic@group`` -> (topic, group). Topics cannot contain '@', so the first '@' separates them."""
    topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
    if not sep:
        raise ValueError(f"offset table key {key!r} is not topic@group")
    return topic, group


class ConsumerOffsetFile:
    """``<root>/config/consumerOffset.json``: ``topic@group`` -> {queueId: next offset to consume}."""

    def __init__(self, root: Path) -> None:
        self.file = JsonConfigFile(config_path(root, CONSUMER_OFFSET_FILE))

    @property
    def path(self) -> Path:
        return self.file.path

    def load(self) -> dict[str, dict[int, int]]:
        obj = self.file.load()
        table = obj.get("offsetTable") if obj else None
        if not isinstance(table, dict):
            return {}
        return {str(k): _int_keys(v, f"offset of {k}") for k, v in table.items()}

    def save(self, table: Mapping[str, Mapping[int, int]]) -> None:
        self.file.save({"offsetTable": {str(k): {str(q): int(o) for q, o in sorted(v.items())}
                                        for k, v in table.items()}})


# ---------------------------------------------------------------------------------------------------------
# delayOffset.json
# ---------------------------------------------------------------------------------------------------------
class DelayOffsetFile:
    """``<root>/config/delayOffset.json``: delay level (1-based) -> next offset in its schedule queue."""

    def __init__(self, root: Path) -> None:
        self.file = JsonConfigFile(config_path(root, DELAY_OFFSET_FILE))

    @property
    def path(self) -> Path:
        return self.file.path

    def load(self) -> dict[int, int]:
        obj = self.file.load()
        return _int_keys(obj.get("offsetTable") if obj else None, "delay offset")

    def save(self, table: Mapping[int, int]) -> None:
        self.file.save({"offsetTable": {str(level): int(o) for level, o in sorted(table.items())}})


# ---------------------------------------------------------------------------------------------------------
# subscriptionGroup.json
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """One entry of ``subscriptionGroupTable`` with Java's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"brokerId": self.broker_id, "consumeBroadcastEnable": self.consume_broadcast_enable,
                "consumeEnable": self.consume_enable, "consumeFromMinEnable": self.consume_from_min_enable,
                "groupName": self.group_name,
                "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
                "retryMaxTimes": self.retry_max_times, "retryQueueNums": self.retry_queue_nums,
                "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], name: str = "") -> "SubscriptionGroupConfig":
        d = cls(name)
        return cls(group_name=str(obj.get("groupName") or name),
                   consume_enable=bool(obj.get("consumeEnable", d.consume_enable)),
                   consume_from_min_enable=bool(obj.get("consumeFromMinEnable", d.consume_from_min_enable)),
                   consume_broadcast_enable=bool(obj.get("consumeBroadcastEnable", d.consume_broadcast_enable)),
                   retry_queue_nums=int(obj.get("retryQueueNums", d.retry_queue_nums)),
                   retry_max_times=int(obj.get("retryMaxTimes", d.retry_max_times)),
                   broker_id=int(obj.get("brokerId", d.broker_id)),
                   which_broker_when_consume_slowly=int(obj.get("whichBrokerWhenConsumeSlowly",
                                                                d.which_broker_when_consume_slowly)),
                   notify_consumer_ids_changed_enable=bool(obj.get("notifyConsumerIdsChangedEnable",
                                                                   d.notify_consumer_ids_changed_enable)))


@dataclass(frozen=True, slots=True)
class SubscriptionGroupTable:
    data_version: DataVersion = DataVersion()
    groups: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_json(),
                "subscriptionGroupTable": {name: g.to_json() for name, g in self.groups.items()}}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "SubscriptionGroupTable":
        groups: dict[str, SubscriptionGroupConfig] = {}
        table = obj.get("subscriptionGroupTable")
        for name, entry in (table.items() if isinstance(table, dict) else ()):
            try:
                groups[str(name)] = SubscriptionGroupConfig.from_json(entry, str(name))
            except (AttributeError, TypeError, ValueError) as exc:
                log.warning("skipping bad entry %r: %s", name, exc)
        return cls(DataVersion.from_json(obj.get("dataVersion")), groups)


class SubscriptionGroupFile:
    """``<root>/config/subscriptionGroup.json``."""

    def __init__(self, root: Path) -> None:
        self.file = JsonConfigFile(config_path(root, SUBSCRIPTION_GROUP_FILE))

    @property
    def path(self) -> Path:
        return self.file.path

    def load(self) -> SubscriptionGroupTable:
        obj = self.file.load()
        return SubscriptionGroupTable() if obj is None else SubscriptionGroupTable.from_json(obj)

    def save(self, table: SubscriptionGroupTable) -> None:
        self.file.save(table.to_json())
