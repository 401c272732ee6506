"""Consumer group configs (RocketMQ ``SubscriptionGroupManager``), persisted to ``subscriptionGroup.json``.

subscriptionGroup.json::

    {"dataVersion":{"counter":N,"timestamp":ms},
     "subscriptionGroupTable":{"G":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,
        "consumeFromMinEnable":true,"groupName":"G","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,
        "retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}

Built-in groups (as RocketMQ creates them) exist from the start; groups seen in heartbeats are created when
``autoCreateSubscriptionGroup`` is on.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from mq.common.topic import validate_group
from mq.config import BrokerConfig
from mq.errors import InvalidTopicError
from mq.protocol.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper
from mq.store.config_files import SUBSCRIPTION_GROUP_FILE, JsonConfigFile, config_path

log = logging.getLogger(__name__)

#: MixAll's built-in groups.
BUILTIN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER",
                  "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
                  "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS")


def _valid_group(group: str) -> bool:
    """A group name the broker keeps (its ``%RETRY%`` topic may still be too long to be a topic)."""
    try:
        validate_group(group)
    except InvalidTopicError:
        return False
    return True


def _now_ms() -> int:
    return int(time.time() * 1000)


class SubscriptionGroupManager:
    def __init__(self, config: BrokerConfig, store_root: Path) -> None:
        self.config = config
        self.file = JsonConfigFile(config_path(store_root, SUBSCRIPTION_GROUP_FILE))
        self._table: dict[str, SubscriptionGroupConfig] = {}
        self._data_version = DataVersion(timestamp=_now_ms(), counter=0)

    def load(self) -> None:
        self._table = {g: SubscriptionGroupConfig(group_name=g) for g in BUILTIN_GROUPS}
        obj = self.file.load()
        if obj:
            try:
                wrapper = SubscriptionGroupWrapper.from_json_value(obj)
            except Exception as exc:
                log.error("subscription group file %s is unreadable (%s); starting without it", self.file.path,
                          exc)
            else:
                for name, cfg in wrapper.subscription_group_table.items():
                    if not cfg.group_name:
                        cfg.group_name = name
                    if not _valid_group(name) or cfg.group_name != name:
                        log.warning("subscription group file %s: skipping group %r, which is not a valid group "
                                    "name", self.file.path, name)
                        continue
                    self._table[name] = cfg
                dv = wrapper.data_version
                self._data_version = DataVersion(timestamp=dv.timestamp or _now_ms(), counter=dv.counter)

    def persist(self) -> None:
        self.file.save(SubscriptionGroupWrapper(subscription_group_table=dict(self._table),
                                                data_version=self._data_version).to_json_value())

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        cfg = self._table.get(group)
        if cfg is None and self.config.auto_create_subscription_group and _valid_group(group):
            cfg = SubscriptionGroupConfig(group_name=group)
            log.info("auto-created subscription group %s", group)
            self.put(cfg)
        return cfg

    def put(self, cfg: SubscriptionGroupConfig) -> None:
        self._table[cfg.group_name] = cfg
        self._changed()

    def delete(self, group: str) -> bool:
        if self._table.pop(group, None) is None:
            return False
        self._changed()
        return True

    def replace_all(self, table: dict[str, SubscriptionGroupConfig], data_version: DataVersion) -> None:
        """Take the master's whole table and data version (a slave's synchronization), then persist."""
        self._table = dict(table)
        self._data_version = DataVersion(timestamp=data_version.timestamp, counter=data_version.counter)
        self.persist()

    def all(self) -> dict[str, SubscriptionGroupConfig]:
        return dict(self._table)

    @property
    def data_version(self) -> DataVersion:
        return self._data_version

    def wrapper(self) -> SubscriptionGroupWrapper:
        return SubscriptionGroupWrapper(subscription_group_table=dict(self._table), data_version=self._data_version)

    def _changed(self) -> None:
        self._data_version = DataVersion(timestamp=_now_ms(), counter=self._data_version.counter + 1)
        try:
            self.persist()
        except OSError:
            log.exception("cannot write %s", self.file.path)
