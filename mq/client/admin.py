"""Admin calls to name servers and brokers (what mqadmin does), asyncio-native.

``MQAdmin`` tries the configured name servers in order and moves on to the next one only when a server
cannot be reached; every non-success answer becomes a typed ``BrokerError``.
"""

from __future__ import annotations

import logging
from typing import Sequence

from mq.client.admin_messages import MessageQueries
from mq.client.admin_queues import QueueAdministration
from mq.client.admin_stats import StatsQueries
from mq.client.undecodable import LogReporter, UndecodableReporter
from mq.errors import BrokerError, ConnectError, RemotingError, TopicNotExistError
from mq.protocol import headers as h
from mq.protocol.bodies import ClusterInfo, KVTable, TopicList, TopicRouteData
from mq.protocol.acl import SessionCredentials
from mq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient

log = logging.getLogger(__name__)


class MQAdmin(MessageQueries, StatsQueries, QueueAdministration):
    """``on_undecodable`` takes each stored record a message query steps over because it cannot be decoded
    (default: a throttled WARNING log)."""

    def __init__(self, namesrv_addrs: Sequence[str], *, timeout: float = 5.0,
                 client: RemotingClient | None = None, credentials: SessionCredentials | None = None,
                 on_undecodable: UndecodableReporter | None = None) -> None:
        if not namesrv_addrs:
            raise ConnectError("no name server address given (set -n/--namesrv or $NAMESRV_ADDR)")
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout
        self._own_client = client is None
        self.client = client or RemotingClient(name="admin")
        if credentials is not None:
            self.client.credentials = credentials
        self.on_undecodable: UndecodableReporter = on_undecodable or LogReporter(log)

    async def close(self) -> None:
        if self._own_client:
            await self.client.close()

    async def __aenter__(self) -> "MQAdmin":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------------------------------------
    # plumbing
    # ---------------------------------------------------------------------------------------------
    async def call_namesrv(self, cmd: RemotingCommand, *, ok: Sequence[int] = (ResponseCode.SUCCESS,)
                           ) -> RemotingCommand:
        """Send ``cmd`` to the first reachable name server; non-success codes raise BrokerError."""
        errors: list[str] = []
        for addr in self.namesrv_addrs:
            try:
                resp = await self.client.invoke(addr, cmd, timeout=self.timeout)
            except RemotingError as exc:
                reason = str(exc).split(": ", 1)[-1]
                errors.append(f"{addr}: {reason}")
                log.debug("name server %s failed: %s", addr, exc)
                continue
            if resp.code not in ok:
                raise BrokerError.from_response(resp.code, resp.remark, addr)
            return resp
        if len(errors) == 1:
            raise ConnectError(f"cannot reach name server {errors[0]}", addr=self.namesrv_addrs[0])
        raise ConnectError("cannot reach any name server: " + "; ".join(errors))

    async def call_broker(self, addr: str, cmd: RemotingCommand, *, ok: Sequence[int] = (ResponseCode.SUCCESS,),
                          timeout: float | None = None) -> RemotingCommand:
        try:
            resp = await self.client.invoke(addr, cmd, timeout=timeout or self.timeout)
        except ConnectError as exc:
            reason = str(exc).split(": ", 1)[-1]
            raise ConnectError(f"cannot reach broker {addr}: {reason}", addr=addr) from None
        if resp.code not in ok:
            raise BrokerError.from_response(resp.code, resp.remark, addr)
        return resp

    # ---------------------------------------------------------------------------------------------
    # name server
    # ---------------------------------------------------------------------------------------------
    async def topic_route(self, topic: str) -> TopicRouteData:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                      h.GetRouteInfoRequestHeader(topic=topic).to_ext())
        try:
            resp = await self.call_namesrv(cmd)
        except TopicNotExistError as exc:
            raise TopicNotExistError(exc.code, f"no route for topic {topic!r}", exc.addr) from None
        return TopicRouteData.from_json(resp.body or b"{}")

    async def cluster_info(self) -> ClusterInfo:
        resp = await self.call_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        return ClusterInfo.from_json(resp.body or b"{}")

    async def topic_list(self) -> list[str]:
        resp = await self.call_namesrv(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        return list(TopicList.from_json(resp.body or b"{}").topic_list or [])

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        cmd = RemotingCommand.request(RequestCode.GET_TOPICS_BY_CLUSTER,
                                      h.GetTopicsByClusterRequestHeader(cluster=cluster).to_ext())
        resp = await self.call_namesrv(cmd)
        return list(TopicList.from_json(resp.body or b"{}").topic_list or [])

    async def put_kv(self, namespace: str, key: str, value: str) -> None:
        await self.call_namesrv(RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext()))

    async def get_kv(self, namespace: str, key: str) -> str | None:
        resp = await self.call_namesrv(RemotingCommand.request(
            RequestCode.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace=namespace, key=key).to_ext()),
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return h.GetKVConfigResponseHeader.from_ext(resp.ext_fields).value

    async def kv_namespace(self, namespace: str) -> dict[str, str]:
        resp = await self.call_namesrv(RemotingCommand.request(
            RequestCode.GET_KVLIST_BY_NAMESPACE, h.GetKVListByNamespaceRequestHeader(namespace=namespace).to_ext()),
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code == ResponseCode.QUERY_NOT_FOUND or not resp.body:
            return {}
        return dict(KVTable.from_json(resp.body).table or {})

    async def delete_kv(self, namespace: str, key: str) -> None:
        await self.call_namesrv(RemotingCommand.request(
            RequestCode.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(namespace=namespace, key=key).to_ext()))

    async def wipe_write_perm(self, broker_name: str) -> int:
        resp = await self.call_namesrv(RemotingCommand.request(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, h.WipeWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext()))
        return h.WipeWritePermOfBrokerResponseHeader.from_ext(resp.ext_fields).wipe_topic_count

    async def add_write_perm(self, broker_name: str) -> int:
        resp = await self.call_namesrv(RemotingCommand.request(
            RequestCode.ADD_WRITE_PERM_OF_BROKER, h.AddWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext()))
        return h.AddWritePermOfBrokerResponseHeader.from_ext(resp.ext_fields).add_topic_count

    async def get_namesrv_config(self, addr: str) -> dict[str, str]:
        """GET_NAMESRV_CONFIG of one name server: its Java-properties text as a dict."""
        try:
            resp = await self.client.invoke(addr, RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG),
                                            timeout=self.timeout)
        except ConnectError as exc:
            raise ConnectError(f"cannot reach name server {addr}: {str(exc).split(': ', 1)[-1]}", addr=addr) from None
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError.from_response(resp.code, resp.remark, addr)
        out: dict[str, str] = {}
        for line in bytes(resp.body or b"").decode("utf-8", "replace").splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "!")) and "=" in line:
                key, value = line.split("=", 1)
                out[key.strip()] = value.strip()
        return out

    async def update_namesrv_config(self, addr: str, props: dict[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG of one name server (body: key=value lines)."""
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
        try:
            resp = await self.client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG,
                                                                          body=body), timeout=self.timeout)
        except ConnectError as exc:
            raise ConnectError(f"cannot reach name server {addr}: {str(exc).split(': ', 1)[-1]}", addr=addr) from None
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError.from_response(resp.code, resp.remark, addr)

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None = None) -> None:
        await self.call_namesrv(RemotingCommand.request(
            RequestCode.DELETE_TOPIC_IN_NAMESRV,
            h.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext()))

    # ---------------------------------------------------------------------------------------------
    # broker admin: mqadmin's examine*/create*/delete* calls (PROTOCOL.md §4.5). Imports are local so
    # this block can be appended to the class without touching the module header.
    # ---------------------------------------------------------------------------------------------
    @staticmethod
    def _cluster_broker_names(info: ClusterInfo, cluster: str | None) -> set[str]:
        """Broker names of one cluster (unknown -> BrokerError naming the known ones) or of every cluster."""
        if cluster is None:
            return set(info.broker_addr_table)
        if cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"cluster {cluster!r} is not known to the name "
                              f"server (known: {known})")
        return set(info.cluster_addr_table[cluster])

    async def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master (brokerId 0) address, for one cluster (unknown -> BrokerError) or all."""
        info = await self.cluster_info()
        out = {}
        for name in sorted(self._cluster_broker_names(info, cluster)):
            bd = info.broker_addr_table.get(name)
            if bd is not None and 0 in bd.broker_addrs:
                out[name] = bd.broker_addrs[0]
        return out

    async def topic_master_addrs(self, topic: str) -> dict[str, str]:
        """Broker name -> master address of every broker in ``topic``'s route."""
        route = await self.topic_route(topic)
        return {bd.broker_name: bd.broker_addrs[0] for bd in sorted(route.broker_datas, key=lambda b: b.broker_name)
                if 0 in bd.broker_addrs}

    async def _broker(self, addr: str, code: int, header: object | None = None, body: bytes | None = None, *,
                      ok: Sequence[int] = (ResponseCode.SUCCESS,), timeout: float | None = None) -> RemotingCommand:
        ext = header.to_ext() if header is not None else None  # type: ignore[attr-defined]
        return await self.call_broker(addr, RemotingCommand.request(code, ext, body), ok=ok, timeout=timeout)

    async def create_and_update_topic_config(self, addr: str, tc, attributes: str | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC (17) with a ``bodies.TopicConfig``; ``attributes``: RocketMQ 5 attribute
        changes (``+message.type=FIFO``)."""
        hd = h.CreateTopicRequestHeader(topic=tc.topic_name, default_topic="TBW102", read_queue_nums=tc.read_queue_nums,
                                        write_queue_nums=tc.write_queue_nums, perm=tc.perm,
                                        topic_filter_type=tc.topic_filter_type, topic_sys_flag=tc.topic_sys_flag,
                                        order=tc.order, attributes=attributes or None)
        await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, hd)

    async def create_or_update_order_conf(self, topic: str, conf: str, is_cluster: bool) -> str:
        """ORDER_TOPIC_CONFIG kv of ``topic``: replace it (cluster) or merge ``name:queues`` entries (broker)."""
        if not is_cluster:
            old = await self.get_kv("ORDER_TOPIC_CONFIG", topic)
            merged: dict[str, str] = {}
            for part in (old or "").split(";") + conf.split(";"):
                if ":" in part:
                    name, _, n = part.partition(":")
                    merged[name.strip()] = n.strip()
            conf = ";".join(f"{k}:{v}" for k, v in merged.items())
        await self.put_kv("ORDER_TOPIC_CONFIG", topic, conf)
        return conf

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        await self._broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER, h.DeleteTopicRequestHeader(topic=topic))

    async def delete_topic_in_all_namesrv(self, topic: str, cluster: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_NAMESRV (216) to every name server; returns the failures as text."""
        failures = []
        cmd_ext = h.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext()
        for addr in self.namesrv_addrs:
            try:
                resp = await self.client.invoke(addr, RemotingCommand.request(
                    RequestCode.DELETE_TOPIC_IN_NAMESRV, dict(cmd_ext)), timeout=self.timeout)
            except RemotingError as exc:
                failures.append(f"{addr}: {exc}")
                continue
            if resp.code != ResponseCode.SUCCESS:
                failures.append(str(BrokerError.from_response(resp.code, resp.remark, addr)))
        return failures

    async def get_all_topic_config(self, addr: str):
        from mq.protocol.bodies import TopicConfigSerializeWrapper

        resp = await self._broker(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return TopicConfigSerializeWrapper.from_json(resp.body or b"{}")

    async def examine_topic_stats(self, addr: str, topic: str):
        from mq.protocol.bodies import TopicStatsTable

        resp = await self._broker(addr, RequestCode.GET_TOPIC_STATS_INFO, h.GetTopicStatsInfoRequestHeader(topic=topic))
        return TopicStatsTable.from_json(resp.body or b"{}")

    async def examine_topic_stats_all(self, topic: str):
        """TopicStatsTable of ``topic`` merged over the masters of its route."""
        from mq.protocol.bodies import TopicStatsTable

        merged = TopicStatsTable()
        for addr in (await self.topic_master_addrs(topic)).values():
            merged.offset_table.update((await self.examine_topic_stats(addr, topic)).offset_table)
        return merged

    async def create_and_update_subscription_group_config(self, addr: str, cfg) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) with a ``bodies.SubscriptionGroupConfig``."""
        await self._broker(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=cfg.to_json())

    async def get_all_subscription_group(self, addr: str):
        from mq.protocol.bodies import SubscriptionGroupWrapper

        resp = await self._broker(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return SubscriptionGroupWrapper.from_json(resp.body or b"{}")

    async def delete_subscription_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        await self._broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                           h.DeleteSubscriptionGroupRequestHeader(group_name=group, remove_offset=remove_offset))

    async def examine_consume_stats(self, addr: str, group: str, topic: str | None = None):
        from mq.protocol.bodies import ConsumeStats

        resp = await self._broker(addr, RequestCode.GET_CONSUME_STATS,
                                  h.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic))
        return ConsumeStats.from_json(resp.body or b"{}")

    async def examine_consume_stats_all(self, group: str, topic: str | None = None):
        """ConsumeStats of ``group`` merged over every master (of ``topic``'s route when given); TPS summed."""
        from mq.protocol.bodies import ConsumeStats

        addrs = await (self.topic_master_addrs(topic) if topic else self.master_addrs())
        merged = ConsumeStats()
        for addr in addrs.values():
            stats = await self.examine_consume_stats(addr, group, topic)
            merged.offset_table.update(stats.offset_table)
            merged.consume_tps += stats.consume_tps
        return merged

    async def examine_consumer_connection_info(self, addr: str, group: str):
        from mq.protocol.bodies import ConsumerConnection

        resp = await self._broker(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                  h.GetConsumerConnectionListRequestHeader(consumer_group=group))
        return ConsumerConnection.from_json(resp.body or b"{}")

    async def examine_consumer_connection_all(self, group: str):
        """ConsumerConnection of ``group`` merged over every master; none online -> ConsumerNotOnlineError."""
        from mq.errors import ConsumerNotOnlineError
        from mq.protocol.bodies import ConsumerConnection

        merged: ConsumerConnection | None = None
        seen: set[str] = set()
        for addr in (await self.master_addrs()).values():
            try:
                cc = await self.examine_consumer_connection_info(addr, group)
            except ConsumerNotOnlineError:
                continue
            if merged is None:
                merged = ConsumerConnection(subscription_table=dict(cc.subscription_table),
                                            consume_type=cc.consume_type, message_model=cc.message_model,
                                            consume_from_where=cc.consume_from_where)
            for c in cc.connection_set:
                if c.client_id not in seen:
                    seen.add(c.client_id)
                    merged.connection_set.append(c)
        if merged is None:
            raise ConsumerNotOnlineError(ResponseCode.CONSUMER_NOT_ONLINE,
                                         f"consumer group {group!r} is not online on any broker")
        return merged

    async def examine_producer_connection_info(self, addr: str, group: str):
        from mq.protocol.bodies import ProducerConnection

        resp = await self._broker(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                  h.GetProducerConnectionListRequestHeader(producer_group=group))
        return ProducerConnection.from_json(resp.body or b"{}")

    async def fetch_broker_runtime_stats(self, addr: str) -> dict[str, str]:
        resp = await self._broker(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(KVTable.from_json(resp.body or b"{}").table)

    async def get_broker_config(self, addr: str) -> dict[str, str]:
        resp = await self._broker(addr, RequestCode.GET_BROKER_CONFIG)
        out = {}
        for line in bytes(resp.body or b"").decode("utf-8", "replace").splitlines():
            if "=" in line:
                k, _, v = line.partition("=")
                out[k.strip()] = v.strip()
        return out

    async def update_broker_config(self, addr: str, props: dict[str, str]) -> None:
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
        await self._broker(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)

    async def query_topic_consume_by_who(self, addr: str, topic: str) -> set[str]:
        from mq.protocol.bodies import GroupList

        resp = await self._broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                  h.QueryTopicConsumeByWhoRequestHeader(topic=topic))
        return set(GroupList.from_json(resp.body or b"{}").group_list)

    async def query_consume_time_span(self, addr: str, topic: str, group: str) -> list[dict]:
        from mq.common.fastjson import loads

        resp = await self._broker(addr, RequestCode.QUERY_CONSUME_TIME_SPAN,
                                  h.QueryConsumeTimeSpanRequestHeader(topic=topic, group=group))
        return list(loads(resp.body or b"{}").get("consumeTimeSpanSet") or [])

    async def reset_offset_by_timestamp(self, addr: str, topic: str, group: str, timestamp: int,
                                        force: bool = True, cpp: bool = False) -> dict:
        """INVOKE_BROKER_TO_RESET_OFFSET (222): MessageQueue -> new offset on that broker.

        ``cpp``: the request says language CPP, so the broker pushes RESET_CONSUMER_CLIENT_OFFSET to the group's
        clients in the list form the C++ client decodes (mqadmin ``resetOffsetByTime -c``)."""
        from mq.protocol.bodies import ResetOffsetBody

        hd = h.ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=force)
        req = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, hd.to_ext())
        if cpp:
            req.language = LanguageCode.CPP
        resp = await self.call_broker(addr, req)
        return dict(ResetOffsetBody.from_json(resp.body).offset_table) if resp.body else {}

    async def query_correction_offset(self, addr: str, topic: str, compare_group: str,
                                      filter_groups: Sequence[str] = ()) -> dict[int, int]:
        """QUERY_CORRECTION_OFFSET (308): per queue, the smallest offset any group but ``filter_groups`` committed
        on ``topic`` at ``addr``; 2**63-1 where that is beyond ``compare_group``'s own offset."""
        from mq.common.fastjson import loads

        resp = await self._broker(addr, RequestCode.QUERY_CORRECTION_OFFSET, h.QueryCorrectionOffsetHeader(
            compare_group=compare_group, topic=topic, filter_groups=",".join(filter_groups) or None))
        table = loads(resp.body).get("correctionOffsets") or {} if resp.body else {}
        return {int(k): int(v) for k, v in table.items()}

    async def resume_check_half_message(self, msg_id: str) -> str:
        """RESUME_CHECK_HALF_MESSAGE (323) to the broker that stores ``msg_id`` (an offsetMsgId of a half message
        or of its copy in TRANS_CHECK_MAX_TIME_TOPIC): its transaction checks start again. Returns the broker
        address; ``BrokerError`` with the broker's reason when it refuses."""
        from mq.common.msg_id import decode_offset_msg_id

        (ip, port), _offset = decode_offset_msg_id(msg_id)
        addr = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        await self._broker(addr, RequestCode.RESUME_CHECK_HALF_MESSAGE,
                           h.ResumeCheckHalfMessageRequestHeader(msg_id=msg_id))
        return addr

    async def get_consumer_running_info(self, addr: str, group: str, client_id: str, jstack: bool = False):
        """GET_CONSUMER_RUNNING_INFO (307) relayed by the broker; the client's JSON, parsed (object keys kept)."""
        from mq.common.fastjson import loads

        resp = await self._broker(addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                  h.GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id,
                                                                        jstack_enable=jstack), timeout=15.0)
        return loads(resp.body) if resp.body else {}

    async def consume_message_directly(self, addr: str, group: str, client_id: str, msg_id: str):
        from mq.protocol.bodies import ConsumeMessageDirectlyResult

        resp = await self._broker(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                                  h.ConsumeMessageDirectlyResultRequestHeader(consumer_group=group,
                                                                              client_id=client_id, msg_id=msg_id),
                                  timeout=15.0)
        return ConsumeMessageDirectlyResult.from_json(resp.body or b"{}")

    async def get_system_topic_list_from_broker(self, addr: str) -> set[str]:
        resp = await self._broker(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        return set(TopicList.from_json(resp.body or b"{}").topic_list)

    async def get_all_consumer_offset(self, addr: str) -> dict[str, dict[int, int]]:
        from mq.protocol.bodies import ConsumerOffsetSerializeWrapper

        resp = await self._broker(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        return dict(ConsumerOffsetSerializeWrapper.from_json(resp.body or b"{}").offset_table)

    async def get_all_delay_offset(self, addr: str) -> dict[int, int]:
        from mq.common.fastjson import loads

        resp = await self._broker(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        table = loads(resp.body or b"{}").get("offsetTable") or {}
        return {int(k): int(v) for k, v in table.items()}

    # -- messages: query_message, view_message, pull_message_at, ... are in mq.client.admin_messages ------
    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MAX_OFFSET (30): the logical offset one past the last message of a queue on ``addr``."""
        resp = await self._broker(addr, RequestCode.GET_MAX_OFFSET,
                                  h.GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id))
        return h.GetMaxOffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MIN_OFFSET (31): the logical offset of the first message still stored in a queue on ``addr``."""
        resp = await self._broker(addr, RequestCode.GET_MIN_OFFSET,
                                  h.GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id))
        return h.GetMinOffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def reset_offset_by_time_old(self, addr: str, topic: str, group: str, timestamp: int,
                                       force: bool = True) -> dict:
        """mqadmin's fallback when a broker answers CONSUMER_NOT_ONLINE to 222 (a Java broker and an offline
        group): per queue of the group's ConsumeStats, search the offset by time (-1: the max offset) and commit
        it with UPDATE_CONSUMER_OFFSET (only backwards unless ``force``). Returns MessageQueue -> new offset."""
        stats = await self.examine_consume_stats(addr, group, topic)
        out = {}
        for mq, ow in sorted(stats.offset_table.items()):
            if timestamp == -1:
                target = ow.broker_offset
            else:
                resp = await self._broker(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, h.SearchOffsetRequestHeader(
                    topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp))
                target = h.SearchOffsetResponseHeader.from_ext(resp.ext_fields).offset
            if target < 0 or not (force or target < ow.consumer_offset):
                out[mq] = ow.consumer_offset
                continue
            await self._broker(addr, RequestCode.UPDATE_CONSUMER_OFFSET, h.UpdateConsumerOffsetRequestHeader(
                consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=target))
            out[mq] = target
        return out

    # -- broker statistics (mq.client.admin_stats) and queue administration (mq.client.admin_queues) ------

    # -- plain ACL (what mqadmin's updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr and
    # clusterAclConfigVersion send) ----------------------------------------------------------------------
    async def update_acl_account(self, addr: str, header: "h.CreateAccessConfigRequestHeader") -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG (50)."""
        await self._broker(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header)

    async def delete_acl_account(self, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG (51)."""
        await self._broker(addr, RequestCode.DELETE_ACL_CONFIG, h.DeleteAccessConfigRequestHeader(access_key))

    async def update_global_white_addrs(self, addr: str, patterns: str, acl_file: str | None = None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``patterns`` comma-separated."""
        await self._broker(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                           h.UpdateGlobalWhiteAddrsConfigRequestHeader(patterns, acl_file))

    async def acl_config_version(self, addr: str) -> "h.GetBrokerAclConfigResponseHeader":
        """GET_BROKER_CLUSTER_ACL_INFO (52)."""
        resp = await self._broker(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        return h.GetBrokerAclConfigResponseHeader.from_ext(resp.ext_fields)
