"""Client management and offsets: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32), CHECK_CLIENT_CONFIG (46). PROTOCOL.md §4.1.5-4.1.7,
FEATURES.md §5.2, §5.7, §9.1.

All inline (they touch in-memory tables or read mapped memory), except a HEART_BEAT whose body is over the
server's offload threshold: it is decoded, and its subscriptions normalized, in the server's worker thread, and
registered one consumer group at a time with the event loop free in between.

QUERY_CONSUMER_OFFSET without a committed offset answers 0 when the queue's min offset is <= 0 and its first
entry is not "on disk" (missing, or its commit-log position is within ``accessMessageInMemoryMaxRatio`` of
RAM from the log's end) -- why a new group on a young broker starts at the beginning -- else QUERY_NOT_FOUND.

CHECK_CLIENT_CONFIG (a consumer checks its subscription before starting; body ``{"clientId", "group",
"subscriptionData": {...}}``): TAG (or no type) -> SUCCESS; another type with ``enablePropertyFilter`` off ->
SYSTEM_ERROR "The broker does not support consumer to filter message by <type>"; a selector that does not
compile -> SUBSCRIPTION_PARSE_FAILED with the compiler's message; else SUCCESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from mq.common import topic as T
from mq.common.fastjson import loads as fastjson_loads
from mq.common.sql_filter import Sql92SyntaxError
from mq.daemon.broker.acl_resources import heartbeat_resources
from mq.daemon.broker.client_manager import ClientChannelInfo, PreparedSubscriptions, prepare_subscriptions
from mq.daemon.broker.property_filter import SQL92
from mq.daemon.broker.topic_config import TopicConfigNotSaved
from mq.protocol import headers as H
from mq.protocol.bodies import ConsumerData, GetConsumerListByGroupResponseBody, HeartbeatData
from mq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import DEFER
from mq.remoting.gc_pause import gc_pause

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)
RC = ResponseCode


def _total_ram() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def _language(code: int) -> LanguageCode:
    try:
        return LanguageCode(code)
    except ValueError:
        return LanguageCode.OTHER


class ClientProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.mem_limit = _total_ram() * controller.store_config.access_message_in_memory_max_ratio // 100

    def register(self, server: Any) -> None:
        R = RequestCode
        server.register_offloaded(R.HEART_BEAT, self.heartbeat_heavy, self.heartbeat)
        server.register_offloaded(R.CHECK_CLIENT_CONFIG, self.check_client_config_heavy, self.check_client_config)
        for code, fn in ((R.UNREGISTER_CLIENT, self.unregister),
                         (R.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list),
                         (R.QUERY_CONSUMER_OFFSET, self.query_offset), (R.UPDATE_CONSUMER_OFFSET, self.update_offset),
                         (R.GET_MAX_OFFSET, self.max_offset), (R.GET_MIN_OFFSET, self.min_offset),
                         (R.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset),
                         (R.GET_EARLIEST_MSG_STORETIME, self.earliest_time)):
            server.register(code, fn)

    # -- membership --------------------------------------------------------------------------------------
    def heartbeat(self, conn: Any, cmd: RemotingCommand) -> Any:
        if self.c.server.is_heavy(cmd):
            return DEFER
        hb = HeartbeatData.from_json(cmd.body)
        now = int(time.time() * 1000)
        for cd in hb.consumer_data_set:
            self._consumer(conn, cmd, hb.client_id, cd, now)
        for pd in hb.producer_data_set:
            self._producer(conn, cmd, hb.client_id, pd.group_name, now)
        return cmd.response(RC.SUCCESS)

    async def heartbeat_heavy(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        with gc_pause:
            hb, prepared = await self.c.server.offload(_decode_heartbeat, cmd.body, self.c.consumers)
            acl = self.c.acl
            if acl is not None:  # the ACL filter checked the account and signature; the resources are checked here
                reason = acl.check(conn.remote_addr, cmd, need=heartbeat_resources(hb))
                if reason is not None:
                    return cmd.response(RC.SYSTEM_ERROR, acl.refusal_remark(reason))
            now = int(time.time() * 1000)
            for cd, pre in zip(hb.consumer_data_set, prepared):
                if conn.closed:
                    break
                self._consumer(conn, cmd, hb.client_id, cd, now, pre)
                await asyncio.sleep(0)
            for i, pd in enumerate(hb.producer_data_set):
                if conn.closed:
                    break
                self._producer(conn, cmd, hb.client_id, pd.group_name, now)
                if i % 256 == 255:
                    await asyncio.sleep(0)
            del hb, prepared
        return cmd.response(RC.SUCCESS)

    def _consumer(self, conn: Any, cmd: RemotingCommand, client_id: str, cd: ConsumerData, now: int,
                  prepared: PreparedSubscriptions | None = None) -> None:
        c = self.c
        group = cd.group_name
        if not group:
            return
        sgc = c.subscription_groups.find_or_create(group)
        notify = c.config.notify_consumer_ids_changed_enable
        if sgc is not None:
            notify = notify and sgc.notify_consumer_ids_changed_enable
            if sgc.retry_queue_nums > 0 and T.is_valid_topic(T.retry_topic(group)):
                with contextlib.suppress(TopicConfigNotSaved):  # made by the next heartbeat, or send-back
                    c.topic_config.create_system(T.retry_topic(group), sgc.retry_queue_nums, 6)
        ch = ClientChannelInfo(conn, client_id, _language(cmd.language), cmd.version, now, conn.remote_addr)
        c.consumers.register(group, ch, cd.consume_type, cd.message_model, cd.consume_from_where,
                             cd.subscription_data_set, notify=notify, prepared=prepared)

    def _producer(self, conn: Any, cmd: RemotingCommand, client_id: str, group: str, now: int) -> None:
        if group:
            self.c.producers.register(group, ClientChannelInfo(conn, client_id, _language(cmd.language),
                                                               cmd.version, now, conn.remote_addr))

    def check_client_config(self, conn: Any, cmd: RemotingCommand) -> Any:
        """Java ``ClientManageProcessor.checkClientConfig``."""
        if self.c.server.is_heavy(cmd):
            return DEFER
        try:
            body = fastjson_loads(cmd.body) if cmd.body else None
        except Exception as exc:  # Java: RemotingCommandException -> SYSTEM_ERROR
            return cmd.response(RC.SYSTEM_ERROR, f"bad CheckClientRequestBody: {exc}")
        return self._check_client_config(cmd, body)

    async def check_client_config_heavy(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        with gc_pause:
            try:
                body = await self.c.server.offload(fastjson_loads, cmd.body)
            except Exception as exc:
                return cmd.response(RC.SYSTEM_ERROR, f"bad CheckClientRequestBody: {exc}")
            return self._check_client_config(cmd, body)

    def _check_client_config(self, cmd: RemotingCommand, body: Any) -> RemotingCommand:
        sd = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(sd, dict):
            return cmd.response(RC.SUCCESS)
        etype = sd.get("expressionType")
        if etype is None or etype == "" or etype == "TAG":
            return cmd.response(RC.SUCCESS)
        etype = str(etype)
        if not self.c.config.enable_property_filter:
            return cmd.response(RC.SYSTEM_ERROR, "The broker does not support consumer to filter message by "
                                + etype)
        if etype != SQL92:
            return cmd.response(RC.SUBSCRIPTION_PARSE_FAILED, f"unsupported expression type {etype}")
        expression = sd.get("subString")
        try:
            self.c.consumers.filter_cache.compile(str(sd.get("topic") or ""), "" if expression is None
                                                  else str(expression))
        except Sql92SyntaxError as exc:
            log.warning("Client %s@%s filter message, but failed to compile expression! sub=%r, error=%s",
                        body.get("clientId"), body.get("group"), expression, exc)
            return cmd.response(RC.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return cmd.response(RC.SUCCESS)

    def unregister(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        c = self.c
        h = H.UnregisterClientRequestHeader.from_ext(cmd.ext_fields)
        if h.producer_group:
            c.producers.unregister(h.producer_group, conn)
        if h.consumer_group:
            sgc = c.subscription_groups.get(h.consumer_group)
            notify = c.config.notify_consumer_ids_changed_enable and (
                sgc is None or sgc.notify_consumer_ids_changed_enable)
            c.consumers.unregister(h.consumer_group, conn, notify=notify)
        return cmd.response(RC.SUCCESS)

    def consumer_list(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.GetConsumerListByGroupRequestHeader.from_ext(cmd.ext_fields)
        info = self.c.consumers.get(h.consumer_group)
        if info is None or not info.channels:
            log.warning("GET_CONSUMER_LIST_BY_GROUP from %s: no consumer in group %s", conn.remote_addr,
                        h.consumer_group)
            return cmd.response(RC.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
        body = GetConsumerListByGroupResponseBody(consumer_id_list=info.client_ids()).to_json()
        return cmd.response(RC.SUCCESS, body=body)

    # -- offsets -----------------------------------------------------------------------------------------
    def query_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        off = self.c.offsets.query(h.consumer_group, h.topic, h.queue_id)
        if off < 0:
            store = self.c.store
            min_off = store.get_min_offset(h.topic, h.queue_id)
            if min_off <= 0 and not self._first_entry_on_disk(h.topic, h.queue_id):
                off = 0
            else:
                return cmd.response(RC.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer "
                                    "boot first")
        return cmd.response(RC.SUCCESS, ext_fields=H.QueryConsumerOffsetResponseHeader(off).to_ext())

    def _first_entry_on_disk(self, topic: str, queue_id: int) -> bool:
        store = self.c.store
        cq = store.cq_table.find(topic, queue_id, create=False)
        unit = cq.get_unit(0) if cq is not None else None
        if not unit:
            return False
        return store.get_max_phy_offset() - unit[0] > self.mem_limit

    def update_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.UpdateConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        self.c.offsets.commit(conn.remote_addr, h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return cmd.response(RC.SUCCESS)

    def max_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.GetMaxOffsetRequestHeader.from_ext(cmd.ext_fields)
        off = self.c.store.get_max_offset(h.topic, h.queue_id)
        return cmd.response(RC.SUCCESS, ext_fields=H.GetMaxOffsetResponseHeader(off).to_ext())

    def min_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.GetMinOffsetRequestHeader.from_ext(cmd.ext_fields)
        off = max(0, self.c.store.get_min_offset(h.topic, h.queue_id))
        return cmd.response(RC.SUCCESS, ext_fields=H.GetMinOffsetResponseHeader(off).to_ext())

    def search_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.SearchOffsetRequestHeader.from_ext(cmd.ext_fields)
        off = self.c.store.search_offset_by_timestamp(h.topic, h.queue_id, h.timestamp)
        return cmd.response(RC.SUCCESS, ext_fields=H.SearchOffsetResponseHeader(off).to_ext())

    def earliest_time(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.GetEarliestMsgStoretimeRequestHeader.from_ext(cmd.ext_fields)
        ts = self.c.store.get_earliest_message_time(h.topic, h.queue_id)
        return cmd.response(RC.SUCCESS, ext_fields=H.GetEarliestMsgStoretimeResponseHeader(ts).to_ext())


def _decode_heartbeat(body: bytes, consumers: Any) -> tuple[HeartbeatData, list[PreparedSubscriptions]]:
    """The pure part of a large heartbeat, run in the server's worker thread: decode it, and prepare each
    group's subscriptions against what the group has now (only read: the group's tables are replaced, never
    changed in place, so a snapshot stays consistent; ``register`` checks it is still current)."""
    hb = HeartbeatData.from_json(body)
    prepared = []
    for cd in hb.consumer_data_set:
        info = consumers.get(cd.group_name)
        base, filters = (info.subscriptions, info.filters) if info is not None else ({}, {})
        prepared.append(prepare_subscriptions(cd.subscription_data_set, base, filters))
    return hb, prepared
