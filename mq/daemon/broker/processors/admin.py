"""Admin request processors: what ``mqadmin`` asks a broker (PROTOCOL.md §4.5, §6.2, §6.5, §6.9, §6.12).

``register(controller)`` puts one handler per admin request code on ``controller.server`` (worker group
``admin``). Cheap lookups are plain functions answered inline; those that persist files, re-register with
the name servers or relay a call to a client are ``async``.

Bodies are written the way a Java 4.9 broker writes them (fastjson: sorted keys, MessageQueue object keys,
unquoted integer keys in GET_ALL_CONSUMER_OFFSET / GET_ALL_DELAY_OFFSET), so Java ``mqadmin`` reads them.

INVOKE_BROKER_TO_RESET_OFFSET (222), our choice: the new offset of each queue is computed as Java does
(``timestamp == -1``: max offset; else search by store time; not ``isForce``: never move forward). If the
group has online members, RESET_CONSUMER_CLIENT_OFFSET (220) is pushed to each of them (ResetOffsetBody, or the
C++ list form when the admin's request language is CPP). Whether or not it is online, the offsets are also
committed in the broker's offset table, so an offline group resumes from them (Java answers
CONSUMER_NOT_ONLINE there and mqadmin falls back to committing offsets itself: the result is the same) and
clients that ignore 220 (Node.js) pick them up at their next restart.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from mq.common import topic as T
from mq.common.fastjson import dumps
from mq.common.msg_id import decode_offset_msg_id
from mq.common.attributes import alter as alter_attributes
from mq.common.attributes import parse_to_map as parse_attributes
from mq.errors import InvalidTopicError, RemotingTimeoutError, TopicAttributeError
from mq.protocol import headers as h
from mq.protocol.bodies import (ConsumerConnection, ConsumerOffsetSerializeWrapper, ConsumeStats, Connection,
                                DataVersion, GroupList, KVTable, MessageQueue, OffsetWrapper,
                                ProducerConnection, ResetOffsetBody, SubscriptionGroupConfig, TopicConfig,
                                TopicList, TopicOffset, TopicStatsTable, retry_policy_problem)
from mq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.store.config_files import DelayOffsetFile

if TYPE_CHECKING:  # pragma: no cover
    from mq.daemon.broker.controller import BrokerController
    from mq.remoting import Connection as RemotingConnection

log = logging.getLogger(__name__)

GROUP = "admin"
#: BrokerConfig fields an UPDATE_BROKER_CONFIG may change at run time (read by the broker at each use).
RUNTIME_UPDATABLE = frozenset({
    "broker_permission", "auto_create_topic_enable", "auto_create_subscription_group", "default_topic_queue_nums",
    "reject_transaction_message", "notify_consumer_ids_changed_enable", "long_polling_enable",
    "short_polling_time_mills", "broker_suspend_max_time_millis", "wait_time_mills_in_send_queue",
    "broker_fast_failure_enable", "trace_on", "region_id", "register_name_server_period",
    "channel_expired_timeout", "flush_consumer_offset_interval",
})
#: MessageStoreConfig keys UPDATE_BROKER_CONFIG may change: the ones the store reads on every use (retention and
#: disk limits in the cleaner, pull transfer limits, put-path timeouts).
STORE_RUNTIME_UPDATABLE = frozenset({
    "file_reserved_time", "delete_when", "disk_max_used_space_ratio", "disk_space_warning_level_ratio",
    "clean_file_forcibly_enable", "max_transfer_bytes_on_message_in_memory", "max_transfer_count_on_message_in_memory",
    "max_transfer_bytes_on_message_in_disk", "max_transfer_count_on_message_in_disk", "max_msgs_num_batch",
    "os_page_cache_busy_timeout_mills", "sync_flush_timeout",
})
#: Java broker keys of features this broker does not have, reported off: mqadmin exportConfigs reads them and
#: fails when a key is missing.
ABSENT_FEATURE_LINES = "filterServerNums=0\nuseTLS=false\n"
RELAY_TIMEOUT = 10.0
SUCCESS = ResponseCode.SUCCESS
SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def config_lines(*configs: Any) -> str:
    """``key=value`` lines (RocketMQ names) of the scalar fields of frozen config dataclasses."""
    lines = []
    for cfg in configs:
        for f in dataclasses.fields(cfg):
            v = getattr(cfg, f.name)
            if isinstance(v, bool):
                lines.append(f"{camel(f.name)}={'true' if v else 'false'}")
            elif isinstance(v, (int, float, str)):
                lines.append(f"{camel(f.name)}={v}")
    return "\n".join(lines) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties`` text (what mqadmin updateBrokerConfig sends): ``key=value`` lines, ``#`` comments."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ValueError(f"not a key=value line: {line[:60]!r}")
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out


def coerce_updates(config: Any, props: dict[str, str], store_config: Any = None) -> dict[str, Any]:
    """Map RocketMQ key names onto updatable fields of ``config`` (BrokerConfig) with their types; ValueError names
    the key. With ``store_config`` (StoreConfig), its updatable keys are accepted too, under a ``"store"`` entry
    of the result holding their own dict: ``{"broker_permission": 4, "store": {"file_reserved_time": 48}}``."""
    targets = [(config, RUNTIME_UPDATABLE)] + ([(store_config, STORE_RUNTIME_UPDATABLE)] if store_config else [])
    names = [{alias: f.name for f in dataclasses.fields(cfg) for alias in (f.name, camel(f.name))}
             for cfg, _ in targets]
    out: dict[str, Any] = {}
    store_out: dict[str, Any] = {}
    for key, value in props.items():
        for (cfg, updatable), by_key in zip(targets, names):
            name = by_key.get(key)
            if name is not None:
                break
        else:
            raise ValueError(f"unknown broker config key {key!r}")
        if name not in updatable:
            keys = sorted(camel(n) for _, u in targets for n in u)
            raise ValueError(f"{key} cannot be changed at run time (restart the broker with it in its config); "
                             f"run-time keys: {', '.join(keys)}")
        current = getattr(cfg, name)
        try:
            if isinstance(current, bool):
                low = value.lower()
                if low not in ("true", "false"):
                    raise ValueError
                typed: Any = low == "true"
            elif isinstance(current, int):
                typed = int(value)
            else:
                typed = type(current)(value)
        except ValueError:
            raise ValueError(f"{key}: bad value {value!r} (expected {type(current).__name__})") from None
        (out if cfg is config else store_out)[name] = typed
    if store_out:
        out["store"] = store_out
    return out


class AdminProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.config_version = DataVersion(timestamp=int(time.time() * 1000), counter=0)

    # -- helpers -------------------------------------------------------------------------------------------
    @property
    def store(self) -> Any:
        return self.c.store

    def _store_ts(self, topic: str, queue_id: int, offset: int) -> int:
        ts = self.store.get_message_store_timestamp(topic, queue_id, offset)
        return ts if ts > 0 else 0

    @staticmethod
    def _error(cmd: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return cmd.response(code, remark)

    # -- topics --------------------------------------------------------------------------------------------
    async def update_and_create_topic(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.CreateTopicRequestHeader.from_ext(cmd.ext_fields)
        try:
            T.validate_topic(hd.topic)
        except InvalidTopicError as exc:
            return self._error(cmd, SYSTEM_ERROR, str(exc))
        if hd.topic == self.c.config.broker_cluster_name or self.c.topic_config.is_system_topic(hd.topic):
            return self._error(cmd, SYSTEM_ERROR, f"The topic[{hd.topic}] is conflict with system topic.")
        if hd.read_queue_nums < 0 or hd.write_queue_nums < 0 or not 0 <= hd.perm <= 15:
            return self._error(cmd, SYSTEM_ERROR, "readQueueNums/writeQueueNums must be >= 0 and perm in 0..15")
        if hd.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            return self._error(cmd, SYSTEM_ERROR, f"bad topicFilterType {hd.topic_filter_type!r}")
        old = self.c.topic_config.get(hd.topic)
        try:  # RocketMQ 5 attributes (+message.type=FIFO): applied to the topic's current ones
            attrs = alter_attributes(old.attributes if old else None, parse_attributes(hd.attributes), old is None)
        except TopicAttributeError as exc:
            return self._error(cmd, SYSTEM_ERROR, str(exc))
        tc = TopicConfig(topic_name=hd.topic, read_queue_nums=hd.read_queue_nums,
                         write_queue_nums=hd.write_queue_nums, perm=hd.perm,
                         topic_filter_type=hd.topic_filter_type, topic_sys_flag=hd.topic_sys_flag or 0,
                         order=hd.order, attributes=attrs or None)
        self.c.topic_config.put(tc)
        log.info("topic %s created/updated by %s: r=%d w=%d perm=%d", hd.topic, conn.remote_addr,
                 tc.read_queue_nums, tc.write_queue_nums, tc.perm)
        await self.c.registrar.register_pending()  # this topic only, to the name servers before the answer
        return cmd.response(SUCCESS)

    async def delete_topic(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.DeleteTopicRequestHeader.from_ext(cmd.ext_fields)
        if hd.topic == self.c.config.broker_cluster_name or self.c.topic_config.is_system_topic(hd.topic):
            return self._error(cmd, SYSTEM_ERROR, f"The topic[{hd.topic}] is conflict with system topic.")
        existed = self.c.topic_config.delete(hd.topic)
        self.store.delete_topic(hd.topic)
        self.c.offsets.remove_topic(hd.topic)
        self.c.stats.remove_topic(hd.topic)
        log.info("topic %s deleted by %s (existed: %s)", hd.topic, conn.remote_addr, existed)
        return cmd.response(SUCCESS)

    def get_all_topic_config(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        wrapper = self.c.topic_config.wrapper()
        if not wrapper.topic_config_table:
            return self._error(cmd, SYSTEM_ERROR, "No topic in this broker")
        return cmd.response(SUCCESS, body=wrapper.to_json())

    def get_system_topic_list(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(SUCCESS, body=TopicList(topic_list=set(self.c.topic_config.system_topics())).to_json())

    def get_topic_stats_info(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetTopicStatsInfoRequestHeader.from_ext(cmd.ext_fields)
        tc = self.c.topic_config.get(hd.topic)
        if tc is None:
            return self._error(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{hd.topic}] not exist")
        table = {}
        for qid in range(tc.write_queue_nums):
            lo = max(self.store.get_min_offset(hd.topic, qid), 0)
            hi = max(self.store.get_max_offset(hd.topic, qid), 0)
            ts = self._store_ts(hd.topic, qid, hi - 1) if hi > 0 else 0
            table[MessageQueue(hd.topic, self.c.broker_name, qid)] = TopicOffset(lo, hi, ts)
        return cmd.response(SUCCESS, body=TopicStatsTable(table).to_json())

    def query_topic_consume_by_who(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.QueryTopicConsumeByWhoRequestHeader.from_ext(cmd.ext_fields)
        groups = set(self.c.consumers.groups_subscribing(hd.topic)) | self.c.offsets.groups_of_topic(hd.topic)
        return cmd.response(SUCCESS, body=GroupList(group_list=groups).to_json())

    # -- subscription groups -------------------------------------------------------------------------------
    def update_subscription_group(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        if not cmd.body:
            return self._error(cmd, SYSTEM_ERROR, "no SubscriptionGroupConfig in the request body")
        cfg = SubscriptionGroupConfig.from_json(cmd.body)
        try:
            T.validate_group(cfg.group_name)
        except InvalidTopicError as exc:
            return self._error(cmd, SYSTEM_ERROR, str(exc))
        bad = retry_policy_problem(cfg.group_retry_policy)
        if bad:
            return self._error(cmd, SYSTEM_ERROR, f"groupRetryPolicy: {bad}")
        self.c.subscription_groups.put(cfg)
        log.info("subscription group %s created/updated by %s", cfg.group_name, conn.remote_addr)
        return cmd.response(SUCCESS)

    def get_all_subscription_groups(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(SUCCESS, body=self.c.subscription_groups.wrapper().to_json())

    def delete_subscription_group(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.DeleteSubscriptionGroupRequestHeader.from_ext(cmd.ext_fields)
        self.c.subscription_groups.delete(hd.group_name)
        if hd.remove_offset:
            self.c.offsets.remove_group(hd.group_name)
        log.info("subscription group %s deleted by %s (offsets removed: %s)", hd.group_name, conn.remote_addr,
                 hd.remove_offset)
        return cmd.response(SUCCESS)

    # -- consumers and producers ---------------------------------------------------------------------------
    def get_consume_stats(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetConsumeStatsRequestHeader.from_ext(cmd.ext_fields)
        group = hd.consumer_group
        topics = {hd.topic} if hd.topic else self.c.offsets.topics_of_group(group)
        info = self.c.consumers.get(group)
        inflight = self.c.pop_service.inflight_of(group)
        table = {}
        for topic in sorted(topics):
            tc = self.c.topic_config.get(topic)
            if tc is None:
                continue
            if info is not None and info.subscriptions and topic not in info.subscriptions:
                continue  # online, and not subscribed to this topic any more (Java skips it too)
            for qid in range(tc.read_queue_nums):
                broker_off = max(self.store.get_max_offset(topic, qid), 0)
                consumer_off = max(self.c.offsets.query(group, topic, qid), 0)
                last = self._store_ts(topic, qid, consumer_off - 1) if consumer_off > 0 else 0
                n = inflight.get((topic, qid))
                table[MessageQueue(topic, self.c.broker_name, qid)] = OffsetWrapper(
                    broker_off, consumer_off, last, consumer_off + n if n else None)
        return cmd.response(SUCCESS, body=ConsumeStats(table, self._consume_tps(group, topics)).to_json())

    def _consume_tps(self, group: str, topics: set[str]) -> float:
        fn = getattr(self.c.stats, "consume_tps", None)
        if fn is None:
            return 0.0
        return float(sum(fn(group, t) for t in topics))

    def get_consumer_connection_list(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetConsumerConnectionListRequestHeader.from_ext(cmd.ext_fields)
        info = self.c.consumers.get(hd.consumer_group)
        if info is None or not info.channels:
            return self._error(cmd, ResponseCode.CONSUMER_NOT_ONLINE,
                               f"the consumer group[{hd.consumer_group}] not online")
        body = ConsumerConnection(
            connection_set=[Connection(ch.client_id, ch.addr, ch.language, ch.version)
                            for ch in info.channels.values()],
            subscription_table=dict(info.subscriptions), consume_type=info.consume_type,
            message_model=info.message_model, consume_from_where=info.consume_from_where)
        return cmd.response(SUCCESS, body=body.to_json())

    def get_producer_connection_list(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetProducerConnectionListRequestHeader.from_ext(cmd.ext_fields)
        channels = self.c.producers.channels(hd.producer_group)
        if not channels:
            return self._error(cmd, SYSTEM_ERROR, f"the producer group[{hd.producer_group}] not exist")
        body = ProducerConnection([Connection(ch.client_id, ch.addr, ch.language, ch.version)
                                   for ch in channels.values()])
        return cmd.response(SUCCESS, body=body.to_json())

    def query_consume_time_span(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.QueryConsumeTimeSpanRequestHeader.from_ext(cmd.ext_fields)
        tc = self.c.topic_config.get(hd.topic)
        if tc is None:
            return self._error(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{hd.topic}] not exist")
        now = int(time.time() * 1000)
        spans = []
        for qid in range(tc.write_queue_nums):
            max_off = max(self.store.get_max_offset(hd.topic, qid), 0)
            min_ts = max(self.store.get_earliest_message_time(hd.topic, qid), 0)
            max_ts = self._store_ts(hd.topic, qid, max_off - 1) if max_off > 0 else 0
            consumer_off = self.c.offsets.query(hd.group, hd.topic, qid)
            consume_ts = self._store_ts(hd.topic, qid, consumer_off - 1) if consumer_off > 0 else min_ts
            delay = 0
            if 0 <= consumer_off < max_off:
                nxt = self._store_ts(hd.topic, qid, consumer_off)
                delay = max(now - nxt, 0) if nxt else 0
            spans.append({"consumeTimeStamp": consume_ts, "delayTime": delay, "maxTimeStamp": max_ts,
                          "messageQueue": MessageQueue(hd.topic, self.c.broker_name, qid).to_json_value(),
                          "minTimeStamp": min_ts})
        return cmd.response(SUCCESS, body=dumps({"consumeTimeSpanSet": spans}))

    # -- offsets -------------------------------------------------------------------------------------------
    def get_all_consumer_offset(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        body = ConsumerOffsetSerializeWrapper(self.c.offsets.table()).to_json(standard=False)
        return cmd.response(SUCCESS, body=body)

    def get_all_delay_offset(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        table = DelayOffsetFile(self.store.root).load()
        return cmd.response(SUCCESS, body=dumps({"offsetTable": dict(sorted(table.items()))}, fastjson_int_keys=True))

    def query_correction_offset(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        """QUERY_CORRECTION_OFFSET (308): QueryCorrectionOffsetBody {correctionOffsets: {queueId: offset}}."""
        hd = h.QueryCorrectionOffsetHeader.from_ext(cmd.ext_fields)
        filters = {g.strip() for g in (hd.filter_groups or "").split(",") if g.strip()}
        table = self.c.offsets.correction_offsets(hd.topic, filters, hd.compare_group,
                                                  lambda qid: self.store.get_min_offset(hd.topic, qid))
        return cmd.response(SUCCESS, body=dumps({"correctionOffsets": dict(sorted(table.items()))},
                                                fastjson_int_keys=True))

    def reset_offsets_table(self, topic: str, group: str, timestamp: int, force: bool
                            ) -> dict[MessageQueue, int] | str:
        """The new offset of each queue (Java ``Broker2Client.resetOffset``), or an error text."""
        tc = self.c.topic_config.get(topic)
        if tc is None:
            return f"[reset-offset] topic[{topic}] not exist"
        if group not in self.c.offsets.groups_of_topic(topic) and self.c.consumers.get(group) is None:
            return f"THe consumer group <{group}> not exist"
        table = {}
        for qid in range(tc.write_queue_nums):
            current = max(self.c.offsets.query(group, topic, qid), 0)
            if timestamp == -1:
                target = max(self.store.get_max_offset(topic, qid), 0)
            else:
                target = max(self.store.search_offset_by_timestamp(topic, qid, timestamp), 0)
            table[MessageQueue(topic, self.c.broker_name, qid)] = target if force or target < current else current
        return table

    async def invoke_reset_offset(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.ResetOffsetRequestHeader.from_ext(cmd.ext_fields)
        table = self.reset_offsets_table(hd.topic, hd.group, hd.timestamp, hd.is_force)
        if isinstance(table, str):
            return self._error(cmd, SYSTEM_ERROR, table)
        for mq, off in table.items():
            self.c.offsets.commit(conn.remote_addr, hd.group, hd.topic, mq.queue_id, off)
        info = self.c.consumers.get(hd.group)
        if info is not None and info.channels:
            if cmd.language == LanguageCode.CPP:
                body = dumps({"offsetTable": [{"brokerName": mq.broker_name, "offset": off, "queueId": mq.queue_id,
                                                "topic": mq.topic} for mq, off in sorted(table.items())]})
            else:
                body = ResetOffsetBody(table).to_json()
            ext = h.ResetOffsetRequestHeader(hd.topic, hd.group, hd.timestamp, hd.is_force).to_ext()
            for ch in list(info.channels.values()):
                push = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body,
                                               oneway=True)
                try:
                    self.c.notify_client_oneway(ch.conn, push)
                except Exception as exc:  # a closing channel must not fail the others
                    log.warning("reset offset: cannot notify %s (%s): %s", ch.client_id, ch.addr, exc)
            log.info("reset offset of %s on %s to %s: pushed to %d client(s)", hd.group, hd.topic, hd.timestamp,
                     len(info.channels))
        else:
            log.info("reset offset of %s on %s to %s: group offline, offsets committed", hd.group, hd.topic,
                     hd.timestamp)
        return cmd.response(SUCCESS, body=ResetOffsetBody(table).to_json())

    # -- relays to clients ---------------------------------------------------------------------------------
    async def _relay(self, cmd: RemotingCommand, group: str, client_id: str | None, body: bytes | None
                     ) -> RemotingCommand:
        ch = self.c.consumers.find_channel(group, client_id or "")
        if ch is None:
            return self._error(cmd, SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        req = RemotingCommand.request(cmd.code, dict(cmd.ext_fields), body)
        try:
            resp = await self.c.call_client(ch.conn, req, timeout=RELAY_TIMEOUT)
        except RemotingTimeoutError as exc:
            return self._error(cmd, ResponseCode.CONSUME_MSG_TIMEOUT,
                               f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except Exception as exc:
            return self._error(cmd, SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return cmd.response(resp.code, resp.remark, dict(resp.ext_fields), resp.body)

    async def get_consumer_running_info(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetConsumerRunningInfoRequestHeader.from_ext(cmd.ext_fields)
        return await self._relay(cmd, hd.consumer_group, hd.client_id, cmd.body)

    async def consume_message_directly(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.ConsumeMessageDirectlyResultRequestHeader.from_ext(cmd.ext_fields)
        cmd.ext_fields["brokerName"] = self.c.broker_name
        try:
            _, offset = decode_offset_msg_id(hd.msg_id or "")
        except ValueError as exc:
            return self._error(cmd, SYSTEM_ERROR, f"bad msgId: {exc}")
        raw = self.store.select_one_message_by_offset(offset)
        if raw is None:
            return self._error(cmd, SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return await self._relay(cmd, hd.consumer_group, hd.client_id, bytes(raw))

    # -- broker --------------------------------------------------------------------------------------------
    def get_broker_runtime_info(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        table = {k: str(v) for k, v in self.c.stats.runtime_info().items()}
        return cmd.response(SUCCESS, body=KVTable(table).to_json())

    def get_broker_config(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        text = config_lines(self.c.config, self.store.config) + ABSENT_FEATURE_LINES
        ext = {"version": self.config_version.to_json().decode()}
        return cmd.response(SUCCESS, ext_fields=ext, body=text.encode())

    async def update_broker_config(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        try:
            props = parse_properties(bytes(cmd.body or b"").decode("utf-8"))
            updates = coerce_updates(self.c.config, props, self.store.config)
        except (UnicodeDecodeError, ValueError) as exc:
            return self._error(cmd, SYSTEM_ERROR, f"update broker config: {exc}")
        if not updates:
            return self._error(cmd, SYSTEM_ERROR, "update broker config: no key=value in the request body")
        log.info("broker config updated by %s: %s", conn.remote_addr, updates)
        store_updates = updates.pop("store", None)
        if store_updates:
            self.c.replace_store_config(**store_updates)
        if updates:
            self.c.replace_config(**updates)
        self.config_version = DataVersion(int(time.time() * 1000), self.config_version.counter + 1)
        if "broker_permission" in updates:
            await self.c.register_all(force=True)
        return cmd.response(SUCCESS)


def register(controller: "BrokerController") -> None:
    """Register the admin handlers on ``controller.server``."""
    p = AdminProcessor(controller)
    table = {
        RequestCode.UPDATE_AND_CREATE_TOPIC: p.update_and_create_topic,
        RequestCode.DELETE_TOPIC_IN_BROKER: p.delete_topic,
        RequestCode.GET_ALL_TOPIC_CONFIG: p.get_all_topic_config,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: p.get_system_topic_list,
        RequestCode.GET_TOPIC_STATS_INFO: p.get_topic_stats_info,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: p.query_topic_consume_by_who,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: p.update_subscription_group,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: p.get_all_subscription_groups,
        RequestCode.DELETE_SUBSCRIPTIONGROUP: p.delete_subscription_group,
        RequestCode.GET_CONSUME_STATS: p.get_consume_stats,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: p.get_consumer_connection_list,
        RequestCode.GET_PRODUCER_CONNECTION_LIST: p.get_producer_connection_list,
        RequestCode.QUERY_CONSUME_TIME_SPAN: p.query_consume_time_span,
        RequestCode.GET_ALL_CONSUMER_OFFSET: p.get_all_consumer_offset,
        RequestCode.GET_ALL_DELAY_OFFSET: p.get_all_delay_offset,
        RequestCode.QUERY_CORRECTION_OFFSET: p.query_correction_offset,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: p.invoke_reset_offset,
        RequestCode.GET_CONSUMER_RUNNING_INFO: p.get_consumer_running_info,
        RequestCode.CONSUME_MESSAGE_DIRECTLY: p.consume_message_directly,
        RequestCode.GET_BROKER_RUNTIME_INFO: p.get_broker_runtime_info,
        RequestCode.GET_BROKER_CONFIG: p.get_broker_config,
        RequestCode.UPDATE_BROKER_CONFIG: p.update_broker_config,
    }
    for code, handler in table.items():
        controller.server.register(code, handler, group=GROUP)


__all__ = ["AdminProcessor", "RUNTIME_UPDATABLE", "STORE_RUNTIME_UPDATABLE", "coerce_updates", "config_lines",
           "parse_properties", "register"]
