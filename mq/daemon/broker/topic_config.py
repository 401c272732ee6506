"""The broker's topic table (RocketMQ ``TopicConfigManager``), persisted to ``<store>/config/topics.json``.

Start-up topics (FEATURES.md §1.2) are created in memory on every start (they are not required in the file);
changes bump the ``DataVersion`` and rewrite the file atomically. ``on_change`` is called after each change
so the controller can re-register with the name servers at once.

topics.json (TopicConfigSerializeWrapper)::

    {"dataVersion":{"counter":N,"timestamp":ms},
     "topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",
                              "topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from mq.common import topic as T
from mq.common.log_throttle import LogThrottle
from mq.config import BrokerConfig
from mq.errors import MQError
from mq.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from mq.store.config_files import TOPICS_FILE, JsonConfigFile, config_path

log = logging.getLogger(__name__)

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 0x8, 0x4, 0x2, 0x1


class TopicConfigNotSaved(MQError):
    """topics.json could not be written (a full disk): the topic was not made or changed."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


class TopicConfigManager:
    def __init__(self, config: BrokerConfig, store_root: Path,
                 on_change: Callable[[TopicConfig | None], None] | None = None) -> None:
        self.config = config
        self.file = JsonConfigFile(config_path(store_root, TOPICS_FILE))
        self._table: dict[str, TopicConfig] = {}
        self._data_version = DataVersion(timestamp=_now_ms(), counter=0)
        self._system: set[str] = set()
        self.on_change = on_change
        self._throttle = LogThrottle(log, config.delivery_error_log_interval_ms / 1000.0)

    # -- loading -----------------------------------------------------------------------------------------
    def load(self) -> None:
        """Create the start-up topics, then overlay what topics.json holds."""
        cfg = self.config
        self._table.clear()
        self._system = set(T.SYSTEM_TOPICS)

        def builtin(name: str, queues: int, perm: int) -> None:
            self._table[name] = TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues,
                                            perm=perm)
            self._system.add(name)

        builtin(T.SELF_TEST_TOPIC, 1, 6)
        if cfg.auto_create_topic_enable:
            builtin(T.AUTO_CREATE_TOPIC_KEY_TOPIC, cfg.default_topic_queue_nums, 7)
        builtin(T.BENCHMARK_TOPIC, 1024, 6)
        builtin(cfg.broker_cluster_name, 16, PERM_INHERIT | (6 if cfg.cluster_topic_enable else 0))
        builtin(cfg.broker_name, 1, PERM_INHERIT | (6 if cfg.broker_topic_enable else 0))
        builtin(T.OFFSET_MOVED_EVENT, 1, 6)
        builtin(T.SCHEDULE_TOPIC, 18, 6)
        if cfg.trace_topic_enable:
            builtin(cfg.msg_trace_topic_name, 1, 6)
        builtin(T.reply_topic(cfg.broker_cluster_name), 1, 6)
        obj = self.file.load()
        if obj:
            try:
                wrapper = TopicConfigSerializeWrapper.from_json_value(obj)
            except Exception as exc:  # a damaged file: keep the built-ins, say so loudly
                log.error("topics file %s is unreadable (%s); starting with the built-in topics only",
                          self.file.path, exc)
            else:
                for name, tc in wrapper.topic_config_table.items():
                    if not tc.topic_name:
                        tc.topic_name = name
                    if name == T.AUTO_CREATE_TOPIC_KEY_TOPIC and not cfg.auto_create_topic_enable:
                        continue
                    if not T.is_valid_topic(name) or tc.topic_name != name:
                        log.warning("topics file %s: skipping topic %r, which is not a valid topic name (or not "
                                    "the name of its own entry, %r)", self.file.path, name, tc.topic_name)
                        continue
                    self._table[name] = tc
                dv = wrapper.data_version
                self._data_version = DataVersion(timestamp=dv.timestamp or _now_ms(), counter=dv.counter)
        if T.AUTO_CREATE_TOPIC_KEY_TOPIC in self._table and not cfg.auto_create_topic_enable:
            del self._table[T.AUTO_CREATE_TOPIC_KEY_TOPIC]
        log.info("topic config: %d topics (data version %d)", len(self._table), self._data_version.counter)

    def persist(self) -> None:
        self.file.save(self.wrapper().to_json_value())

    # -- contract ----------------------------------------------------------------------------------------
    def get(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def put(self, tc: TopicConfig) -> None:
        """Create or update a topic, bump the data version, persist, notify. ``InvalidTopicError`` for a name
        that is not a valid topic (every way a topic is made ends here or in ``create_*``);
        ``TopicConfigNotSaved`` when topics.json cannot be written (a full disk): nothing changes then, so no
        message is acknowledged into a topic that a crash would forget."""
        T.validate_topic(tc.topic_name)
        name = tc.topic_name
        old, old_version = self._table.get(name), self._data_version
        self._table[name] = tc
        self._data_version = DataVersion(timestamp=_now_ms(), counter=old_version.counter + 1)
        try:
            self.persist()
        except OSError as exc:
            if old is None:
                del self._table[name]
            else:
                self._table[name] = old
            self._data_version = old_version
            self._throttle.error("persist", "cannot write %s (%s); topic %s not %s", self.file.path,
                                 exc.strerror or exc, name, "created" if old is None else "updated")
            why = exc.strerror or exc
            raise TopicConfigNotSaved(f"topic {name} cannot be saved ({self.file.path.name}: {why})") from exc
        self._notify(tc)

    def delete(self, topic: str) -> bool:
        if self._table.pop(topic, None) is None:
            return False
        self._data_version = DataVersion(timestamp=_now_ms(), counter=self._data_version.counter + 1)
        try:
            self.persist()
        except OSError:
            log.exception("cannot write %s", self.file.path)
        self._notify(None)
        return True

    def replace_all(self, table: dict[str, TopicConfig], data_version: DataVersion) -> None:
        """Take the master's whole table and data version (a slave's synchronization), then persist."""
        self._table.clear()
        for name, tc in table.items():
            if T.is_valid_topic(name) and tc.topic_name == name:
                self._table[name] = tc
            else:
                log.warning("topic %r from the master is not a valid topic name; skipped", name)
        self._data_version = DataVersion(timestamp=data_version.timestamp, counter=data_version.counter)
        self.persist()

    def all(self) -> dict[str, TopicConfig]:
        return dict(self._table)

    @property
    def data_version(self) -> DataVersion:
        return self._data_version

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(topic_config_table=dict(self._table), data_version=self._data_version)

    def system_topics(self) -> set[str]:
        return set(self._system)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self._system or T.is_system_topic(topic)

    # -- creation on demand ------------------------------------------------------------------------------
    def create_in_send(self, topic: str, default_topic: str, queue_nums: int,
                       topic_sys_flag: int = 0) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: inherit from ``default_topic`` when it has the INHERIT bit;
        None when it may not be made. ``TopicConfigNotSaved`` when it cannot be saved (``put``): RocketMQ
        acknowledges the message anyway, and a crash then forgets the topic."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        if not T.is_valid_topic(topic):
            return None
        template = self._table.get(default_topic)
        if template is None:
            return None
        perm = template.perm
        if default_topic == T.AUTO_CREATE_TOPIC_KEY_TOPIC and not self.config.auto_create_topic_enable:
            perm = 6
        if not perm & PERM_INHERIT:
            log.warning("send to unknown topic %s: default topic %s cannot be inherited (perm %d)", topic,
                        default_topic, perm)
            return None
        n = max(1, min(queue_nums if queue_nums > 0 else template.write_queue_nums, template.write_queue_nums))
        tc = TopicConfig(topic_name=topic, read_queue_nums=n, write_queue_nums=n, perm=perm & ~PERM_INHERIT,
                         topic_filter_type=template.topic_filter_type, topic_sys_flag=topic_sys_flag)
        self.put(tc)
        log.info("auto-created topic %s from %s: %d queues, perm %d", topic, default_topic, n, tc.perm)
        return tc

    def create_system(self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0) -> TopicConfig:
        """Create (if missing) a retry / DLQ / transaction topic; returns the existing config otherwise.
        ``InvalidTopicError`` for a name that cannot be a topic (a retry topic of a group name longer than
        120 characters, say); ``TopicConfigNotSaved`` when it cannot be saved (``put``)."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        T.validate_topic(topic)
        tc = TopicConfig(topic_name=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=perm,
                         topic_sys_flag=topic_sys_flag)
        self.put(tc)
        log.info("created topic %s: %d queues, perm %d", topic, queue_nums, perm)
        return tc

    def _notify(self, tc: TopicConfig | None) -> None:
        if self.on_change is not None:
            try:
                self.on_change(tc)
            except Exception:
                log.exception("topic change callback failed")
