"""A slave copies its master's metadata (RocketMQ ``SlaveSynchronize``), STORE.md §13.6.

Every ``slaveSyncInterval`` (RocketMQ: 10 s; the first run after 3 s, or after one interval when that is shorter)
the slave asks the master (``masterAddr`` from the name server's registration answer) for

=================================  ==================================  ==========================================
request                            body                                applied to
=================================  ==================================  ==========================================
GET_ALL_TOPIC_CONFIG (21)          TopicConfigSerializeWrapper         topics.json: replaced when the data version
                                                                       differs (the master's version is kept)
GET_ALL_CONSUMER_OFFSET (43)       ConsumerOffsetSerializeWrapper      consumerOffset.json: merged, per topic@group
GET_ALL_DELAY_OFFSET (45)          ``{"offsetTable": {level: off}}``   delayOffset.json: written as received
GET_ALL_SUBSCRIPTIONGROUP_CONFIG   SubscriptionGroupWrapper            subscriptionGroup.json: replaced when the
(201)                                                                  data version differs
=================================  ==================================  ==========================================

Each part fails alone: a refused or failed request is logged once and retried on the next run.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mq.common.fastjson import loads
from mq.daemon.broker.offsets import SEPARATOR
from mq.daemon.runtime import cancel_tasks
from mq.errors import MQError
from mq.protocol.bodies import ConsumerOffsetSerializeWrapper, DataVersion, SubscriptionGroupWrapper, \
    TopicConfigSerializeWrapper
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient
from mq.store.config_files import DelayOffsetFile

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

#: Delay of the first run (RocketMQ: 3 s).
FIRST_DELAY_MS = 3000
CALL_TIMEOUT = 3.0


class SlaveSynchronize:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.master_addr = ""
        self.client = RemotingClient(name="slave->master", connect_timeout=3.0)
        self._task: asyncio.Task | None = None
        self.runs = 0
        self._errors: dict[int, str] = {}

    def update_master_addr(self, addr: str) -> None:
        if addr and addr != self.master_addr:
            log.info("slave synchronization: master is %s", addr)
            self.master_addr = addr

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="slave-sync")

    async def stop(self) -> None:
        await cancel_tasks(self._task)
        self._task = None
        await self.client.close()

    async def _loop(self) -> None:
        interval = max(10, self.c.store_config.slave_sync_interval) / 1000.0
        await asyncio.sleep(min(FIRST_DELAY_MS / 1000.0, interval))
        while True:
            try:
                await self.sync_all()
            except Exception:
                log.exception("slave synchronization failed")
            await asyncio.sleep(interval)

    async def sync_all(self) -> None:
        if not self.master_addr:
            return
        await self.sync_topic_config()
        await self.sync_consumer_offsets()
        await self.sync_delay_offsets()
        await self.sync_subscription_groups()
        self.runs += 1

    async def _call(self, code: int) -> bytes | None:
        addr = self.master_addr
        try:
            resp = await self.client.invoke(addr, RemotingCommand.request(code, {}), CALL_TIMEOUT)
        except (MQError, OSError) as exc:
            self._error(code, f"request {code} to master {addr} failed: {exc}")
            return None
        if resp.code != ResponseCode.SUCCESS:
            self._error(code, f"master {addr} refused request {code}: code {resp.code} {resp.remark}")
            return None
        self._errors.pop(code, None)
        return bytes(resp.body or b"")

    def _error(self, code: int, text: str) -> None:
        if self._errors.get(code) != text:
            log.warning("slave synchronization: %s", text)
        self._errors[code] = text

    async def sync_topic_config(self) -> None:
        body = await self._call(RequestCode.GET_ALL_TOPIC_CONFIG)
        if not body:
            return
        wrapper = TopicConfigSerializeWrapper.from_json(body)
        tcm = self.c.topic_config
        if _same_version(tcm.data_version, wrapper.data_version):
            return
        table = {}
        for name, tc in wrapper.topic_config_table.items():
            if not tc.topic_name:
                tc.topic_name = name
            table[name] = tc
        tcm.replace_all(table, wrapper.data_version)
        log.info("slave synchronization: %d topics from master %s", len(table), self.master_addr)

    async def sync_consumer_offsets(self) -> None:
        body = await self._call(RequestCode.GET_ALL_CONSUMER_OFFSET)
        if not body:
            return
        wrapper = ConsumerOffsetSerializeWrapper.from_json(body)
        offsets = self.c.offsets
        for key, per in wrapper.offset_table.items():
            topic, sep, group = key.partition(SEPARATOR)
            if not sep:
                continue
            for qid, off in per.items():
                offsets.commit(self.master_addr, group, topic, int(qid), int(off))
        offsets.persist()

    async def sync_delay_offsets(self) -> None:
        body = await self._call(RequestCode.GET_ALL_DELAY_OFFSET)
        if not body:
            return
        table = (loads(body) or {}).get("offsetTable") or {}
        parsed = {int(k): int(v) for k, v in table.items()}
        DelayOffsetFile(Path(self.c.store_config.store_path_root_dir)).save(parsed)
        svc: Any = self.c.schedule_service
        if svc is not None and hasattr(svc, "offsets"):
            svc.offsets = {lv: off for lv, off in parsed.items() if 1 <= lv <= svc.max_level}

    async def sync_subscription_groups(self) -> None:
        body = await self._call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if not body:
            return
        wrapper = SubscriptionGroupWrapper.from_json(body)
        sgm = self.c.subscription_groups
        if _same_version(sgm.data_version, wrapper.data_version):
            return
        table = {}
        for name, cfg in wrapper.subscription_group_table.items():
            if not cfg.group_name:
                cfg.group_name = name
            table[name] = cfg
        sgm.replace_all(table, wrapper.data_version)
        log.info("slave synchronization: %d subscription groups from master %s", len(table), self.master_addr)


def _same_version(a: DataVersion, b: DataVersion) -> bool:
    return a.timestamp == b.timestamp and a.counter == b.counter
