"""Request processors of the name server (RocketMQ's DefaultRequestProcessor), PROTOCOL.md §4.2–§4.3.

The route table lives on the event loop and only the loop changes it, so concurrent registrations cannot
interleave. Routes are cached encoded, per topic and JSON form, until the route table or the KV config changes.

Nothing slow runs on the loop, where it would hold up every other request (mqadmin, clients' route lookups):

- A REGISTER_BROKER whose body is over the server's offload threshold (a broker with tens of thousands of topics,
  or a hostile client) has its body checked and decoded in the server's worker thread (``offloaded``); the table
  is then updated in one step on the loop. A broker re-registers its whole topic table every 30 s; decoding
  50,000 topics into objects took 1.4-2.1 s, so unless the table's data version changed (RocketMQ then ignores
  the topics too) only the data version is read.
- PUT_KV_CONFIG and DELETE_KV_CONFIG change the table at once and write ``kvConfig.json`` (with its fsync, which a
  disk busy with a broker's writes can hold for seconds) in a worker thread, one write at a time, each of the
  latest table; the answer follows the write.
- Every other request is a lookup answered from memory; the KV answers are bounded by the KV table's limits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import zlib
from typing import Any, Callable

from mq.common.fastjson import loads as fastjson_loads
from mq.config import NamesrvConfig
from mq.daemon.namesrv.kv_config import KVConfig
from mq.daemon.namesrv.route_table import ORDER_TOPIC_CONFIG_NAMESPACE, RouteTable, queue_datas_of
from mq.errors import KVConfigFullError, RemoteProtocolError
from mq.protocol import headers as h
from mq.protocol.bodies import (DataVersion, KVTable, RegisterBrokerBody, TopicConfigSerializeWrapper, TopicList,
                                standard_json_for)
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.remarks import suggest_todo
from mq.remoting import DEFER
from mq.remoting.gc_pause import gc_pause

log = logging.getLogger(__name__)

Handler = Callable[[object, RemotingCommand], RemotingCommand | None]


def _now_ms() -> int:
    return int(time.time() * 1000)


class NamesrvProcessors:
    """Binds the route table and KV config to request codes."""

    def __init__(self, config: NamesrvConfig, table: RouteTable, kv: KVConfig,
                 clock: Callable[[], int] = _now_ms, server: Any = None) -> None:
        #: the RemotingServer (``is_heavy``, ``offload``); None runs every handler inline
        self.server = server
        self.config = config
        self.table = table
        self.kv = kv
        self.clock = clock
        self._route_cache: dict[tuple[str, bool], bytes] = {}
        self._cache_version = (-1, -1)
        self._kv_version = 0
        self._kv_write = asyncio.Lock()
        #: NettyServerConfig keys of the server these handlers serve (set by NamesrvServer)
        self.remoting_keys: Callable[[], dict[str, str]] = dict

    def handlers(self) -> dict[int, Handler]:
        R = RequestCode
        return {
            R.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            R.REGISTER_BROKER: self.register_broker,
            R.UNREGISTER_BROKER: self.unregister_broker,
            R.QUERY_DATA_VERSION: self.query_data_version,
            R.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            R.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            R.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
            R.GET_UNIT_TOPIC_LIST: self.unit_topics,
            R.GET_HAS_UNIT_SUB_TOPIC_LIST: self.unit_sub_topics,
            R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.unit_sub_ununit_topics,
            R.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            R.PUT_KV_CONFIG: self.put_kv,
            R.GET_KV_CONFIG: self.get_kv,
            R.DELETE_KV_CONFIG: self.delete_kv,
            R.GET_KVLIST_BY_NAMESPACE: self.kv_namespace,
            R.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            R.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            R.GET_NAMESRV_CONFIG: self.get_config,
            R.UPDATE_NAMESRV_CONFIG: self.update_config,
        }

    def offloaded(self) -> dict[int, tuple[Callable, Handler]]:
        """Codes whose large bodies are decoded off the loop: code -> (async handler, inline handler)."""
        return {RequestCode.REGISTER_BROKER: (self.register_broker_heavy, self.register_broker)}

    # ---------------------------------------------------------------------------------------------
    # routes
    # ---------------------------------------------------------------------------------------------
    def get_route(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetRouteInfoRequestHeader.from_ext(cmd.ext_fields)
        standard = standard_json_for(cmd.version, bool(hdr.accept_standard_json_only))
        version = (self.table.version, self._kv_version)
        if version != self._cache_version:
            self._route_cache.clear()
            self._cache_version = version
        key = (hdr.topic, standard)
        body = self._route_cache.get(key)
        if body is None:
            route = self.table.pickup_route(hdr.topic)
            if route is None:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"No topic route info in name server for the topic: {hdr.topic}"
                                    f"{suggest_todo()}")
            if self.config.order_message_enable:
                route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, hdr.topic)
            body = route.to_json(standard=standard)
            if len(self._route_cache) > 65536:
                self._route_cache.clear()
            self._route_cache[key] = body
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def register_broker(self, conn: object, cmd: RemotingCommand) -> Any:
        if self.server is not None and self.server.is_heavy(cmd):
            return DEFER
        return self._registered(conn, cmd, _decode_registration(cmd, self._known_version(cmd)))

    async def register_broker_heavy(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        with gc_pause:
            known = self._known_version(cmd)
            decoded = await self.server.offload(_decode_registration, cmd, known, True)
            if not isinstance(decoded, RemotingCommand) and decoded[3] and self._known_version(cmd) != known:
                # the table changed while the body was read: read the topics after all
                decoded = await self.server.offload(_decode_registration, cmd, None, True)
            return self._registered(conn, cmd, decoded)

    def _registered(self, conn: object, cmd: RemotingCommand, decoded: Any) -> RemotingCommand:
        if isinstance(decoded, RemotingCommand):  # refused while decoding
            peer = getattr(conn, "remote_addr", conn)
            if self.server is not None:
                self.server.throttle.warning(("register-refused", decoded.remark),
                                             "register broker from %s refused: %s", peer, decoded.remark)
            else:
                log.warning("register broker from %s refused: %s", peer, decoded.remark)
            return decoded
        hdr, wrapper, filters, _skipped, queue_datas = decoded
        result = self.table.register_broker(
            cluster=hdr.cluster_name, broker_addr=hdr.broker_addr, broker_name=hdr.broker_name,
            broker_id=hdr.broker_id, ha_server_addr=hdr.ha_server_addr, wrapper=wrapper, filter_servers=filters,
            channel=conn, now_ms=self.clock(), grpc_port=hdr.grpc_server_port, queue_datas=queue_datas)
        resp_hdr = h.RegisterBrokerResponseHeader(ha_server_addr=result.ha_server_addr or None,
                                                  master_addr=result.master_addr or None)
        order = self.kv.namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=resp_hdr.to_ext(),
                            body=KVTable(table=order).to_json() if order else None)

    def _known_version(self, cmd: RemotingCommand) -> DataVersion | None:
        """The data version the table holds for the master ``cmd`` registers, when it is already registered at
        the same address; None otherwise (its topics must then be read)."""
        ext = cmd.ext_fields or {}
        broker_name, broker_addr = ext.get("brokerName"), ext.get("brokerAddr")
        if ext.get("brokerId") != "0" or not broker_name or not broker_addr:
            return None
        bd = self.table.broker_addr_table.get(broker_name)
        live = self.table.broker_live_table.get(broker_addr)
        if bd is None or bd.broker_addrs.get(0) != broker_addr or live is None:
            return None
        return live.data_version

    def unregister_broker(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.UnregisterBrokerRequestHeader.from_ext(cmd.ext_fields)
        self.table.unregister_broker(cluster=hdr.cluster_name, broker_addr=hdr.broker_addr,
                                     broker_name=hdr.broker_name, broker_id=hdr.broker_id)
        log.info("broker %s (%s, id %s) unregistered", hdr.broker_name, hdr.broker_addr, hdr.broker_id)
        return cmd.response(ResponseCode.SUCCESS)

    def query_data_version(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.QueryDataVersionRequestHeader.from_ext(cmd.ext_fields)
        if not cmd.body:
            raise RemoteProtocolError("QUERY_DATA_VERSION without a DataVersion body")
        version = DataVersion.from_json(cmd.body)
        changed, ours = self.table.query_data_version(hdr.broker_addr, version, self.clock())
        return cmd.response(ResponseCode.SUCCESS,
                            ext_fields=h.QueryDataVersionResponseHeader(changed=changed).to_ext(),
                            body=ours.to_json() if ours is not None else None)

    def cluster_info(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=self.table.cluster_info().to_json())

    def all_topics(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topic_list=self.table.all_topics()).to_json())

    def topics_by_cluster(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetTopicsByClusterRequestHeader.from_ext(cmd.ext_fields)
        topics = self.table.topics_by_cluster(hdr.cluster)
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topic_list=topics).to_json())

    def system_topics(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        topics, addr = self.table.system_topics()
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topic_list=topics, broker_addr=addr).to_json())

    def unit_topics(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        topics = self.table.unit_topics(unit=True, unit_sub=False)
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topic_list=topics).to_json())

    def unit_sub_topics(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        topics = self.table.unit_topics(unit=False, unit_sub=True)
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topic_list=topics).to_json())

    def unit_sub_ununit_topics(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        topics = self.table.unit_topics(unit=False, unit_sub=True, not_unit=True)
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topic_list=topics).to_json())

    def delete_topic(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.DeleteTopicFromNamesrvRequestHeader.from_ext(cmd.ext_fields)
        self.table.delete_topic(hdr.topic, hdr.cluster_name)
        return cmd.response(ResponseCode.SUCCESS)

    # ---------------------------------------------------------------------------------------------
    # KV config and permissions
    # ---------------------------------------------------------------------------------------------
    async def put_kv(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.PutKVConfigRequestHeader.from_ext(cmd.ext_fields)
        try:
            self.kv.put(hdr.namespace, hdr.key, hdr.value)
        except KVConfigFullError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        self._kv_version += 1
        await self._persist_kv()
        return cmd.response(ResponseCode.SUCCESS)

    async def _persist_kv(self) -> None:
        """Write the KV table as it is now, off the loop; writes run one at a time, so the last one holds the
        newest table."""
        async with self._kv_write:
            await asyncio.to_thread(self.kv.write, self.kv.snapshot())

    def get_kv(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetKVConfigRequestHeader.from_ext(cmd.ext_fields)
        value = self.kv.get(hdr.namespace, hdr.key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                                f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields=h.GetKVConfigResponseHeader(value=value).to_ext())

    async def delete_kv(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.DeleteKVConfigRequestHeader.from_ext(cmd.ext_fields)
        if self.kv.delete(hdr.namespace, hdr.key):
            self._kv_version += 1
            await self._persist_kv()
        return cmd.response(ResponseCode.SUCCESS)

    def kv_namespace(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetKVListByNamespaceRequestHeader.from_ext(cmd.ext_fields)
        table = self.kv.namespace(hdr.namespace)
        if not table:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {hdr.namespace}")
        return cmd.response(ResponseCode.SUCCESS, body=KVTable(table=table).to_json())

    def wipe_write_perm(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.WipeWritePermOfBrokerRequestHeader.from_ext(cmd.ext_fields)
        count = self.table.set_write_perm(hdr.broker_name, writable=False)
        log.info("wiped write permission of broker %s on %d topics", hdr.broker_name, count)
        return cmd.response(ResponseCode.SUCCESS,
                            ext_fields=h.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext())

    def add_write_perm(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.AddWritePermOfBrokerRequestHeader.from_ext(cmd.ext_fields)
        count = self.table.set_write_perm(hdr.broker_name, writable=True)
        log.info("added write permission of broker %s on %d topics", hdr.broker_name, count)
        return cmd.response(ResponseCode.SUCCESS,
                            ext_fields=h.AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext())

    # ---------------------------------------------------------------------------------------------
    # name server configuration (Java-properties text)
    # ---------------------------------------------------------------------------------------------
    _CONFIG_KEYS = {"listenPort": "listen_port", "orderMessageEnable": "order_message_enable",
                    "kvConfigPath": "kv_config_path",
                    "brokerChannelExpiredTime": "broker_channel_expired_time_ms",
                    "scanNotActiveBrokerInterval": "scan_not_active_broker_interval_ms"}
    _UPDATABLE = {"orderMessageEnable", "brokerChannelExpiredTime"}

    def get_config(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        """RocketMQ's 20 keys (NamesrvConfig and NettyServerConfig) with this server's values, then its own.
        ``clusterTest`` is off and ``productEnvName`` is RocketMQ's default (it only matters with clusterTest);
        ``configStorePath`` is the file given to ``--config``; ``rocketmqHome`` is ``$ROCKETMQ_HOME``, left out
        when unset as RocketMQ leaves out a null."""
        values = {key: getattr(self.config, attr) for key, attr in self._CONFIG_KEYS.items()}
        values.update({"configStorePath": self.config.config_store_path, "clusterTest": False,
                       "productEnvName": "center"})
        if os.environ.get("ROCKETMQ_HOME"):
            values["rocketmqHome"] = os.environ["ROCKETMQ_HOME"]
        values.update(self.remoting_keys())
        lines = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(values.items())]
        return cmd.response(ResponseCode.SUCCESS, body="\n".join(lines).encode() + b"\n")

    def update_config(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        import dataclasses

        from mq.config import from_mapping

        text = bytes(cmd.body or b"").decode("utf-8", "replace")
        updates = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = (p.strip() for p in line.split("=", 1))
            if key not in self._UPDATABLE:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"cannot update {key!r} at run time; updatable: {', '.join(sorted(self._UPDATABLE))}")
            updates[key] = value
        parsed = from_mapping(type(self.config), updates, source="UPDATE_NAMESRV_CONFIG")
        changed = {self._CONFIG_KEYS[k]: getattr(parsed, self._CONFIG_KEYS[k]) for k in updates}
        self.config = dataclasses.replace(self.config, **changed)
        self._kv_version += 1
        log.info("name server config updated: %s", changed)
        return cmd.response(ResponseCode.SUCCESS)


def _decode_registration(cmd: RemotingCommand, known: DataVersion | None, build: bool = False) -> Any:
    """Header, CRC check and body of a REGISTER_BROKER (pure: run in the worker thread for a large body):
    ``(header, TopicConfigSerializeWrapper | None, filter servers, topics skipped, queue datas | None)``, or the
    refusal to send. With ``known`` and an unchanged data version the wrapper holds no topics. With ``build``, a
    master's topics are also turned into the route table's QueueData here (``route_table.queue_datas_of``), so
    the event loop only files them."""
    hdr = h.RegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
    body = bytes(cmd.body or b"")
    if hdr.body_crc32 and (zlib.crc32(body) & 0x7FFFFFFF) != hdr.body_crc32:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
    if not body:
        return hdr, None, [], False, None
    if cmd.version < 37:
        wrapper, filters = TopicConfigSerializeWrapper.from_json(body), []
    else:
        if known is not None and not hdr.compressed:
            raw = fastjson_loads(body)
            wrapped = raw.get("topicConfigSerializeWrapper") if isinstance(raw, dict) else None
            dv = wrapped.get("dataVersion") if isinstance(wrapped, dict) else None
            if isinstance(dv, dict) and DataVersion.from_json_value(dv) == known:
                filters = raw.get("filterServerList") or []
                return hdr, TopicConfigSerializeWrapper(data_version=known), [str(f) for f in filters], True, None
        reg = RegisterBrokerBody.decode(body, compressed=bool(hdr.compressed))
        wrapper, filters = reg.topic_config_serialize_wrapper, list(reg.filter_server_list or [])
    queue_datas = queue_datas_of(hdr.broker_name, wrapper) if build and wrapper is not None and hdr.broker_id == 0 \
        else None
    return hdr, wrapper, filters, False, queue_datas
