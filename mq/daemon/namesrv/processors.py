"""Request processors of the name server (RocketMQ's DefaultRequestProcessor), PROTOCOL.md §4.2–§4.3.

Every handler is a plain function: the route table lives on the event loop, so each request runs to completion
before the next starts, and concurrent registrations cannot interleave. Routes are cached encoded, per topic and
JSON form, until the route table or the KV config changes. A REGISTER_BROKER whose body is over the server's
offload threshold (a broker with tens of thousands of topics, or a hostile client) has its body checked and
decoded in the server's worker thread (``offloaded``); the table is then updated in one step on the loop.
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import Any, Callable

from mq.config import NamesrvConfig
from mq.daemon.namesrv.kv_config import KVConfig
from mq.daemon.namesrv.route_table import ORDER_TOPIC_CONFIG_NAMESPACE, RouteTable
from mq.errors import RemoteProtocolError
from mq.protocol import headers as h
from mq.protocol.bodies import (DataVersion, KVTable, RegisterBrokerBody, TopicConfigSerializeWrapper, TopicList,
                                standard_json_for)
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
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
                                    f"No topic route info in name server for the topic: {hdr.topic}")
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
        return self._registered(conn, cmd, _decode_registration(cmd))

    async def register_broker_heavy(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        with gc_pause:
            return self._registered(conn, cmd, await self.server.offload(_decode_registration, cmd))

    def _registered(self, conn: object, cmd: RemotingCommand, decoded: Any) -> RemotingCommand:
        if isinstance(decoded, RemotingCommand):  # refused while decoding
            peer = getattr(conn, "remote_addr", conn)
            if self.server is not None:
                self.server.throttle.warning(("register-refused", decoded.remark),
                                             "register broker from %s refused: %s", peer, decoded.remark)
            else:
                log.warning("register broker from %s refused: %s", peer, decoded.remark)
            return decoded
        hdr, wrapper, filters = decoded
        result = self.table.register_broker(
            cluster=hdr.cluster_name, broker_addr=hdr.broker_addr, broker_name=hdr.broker_name,
            broker_id=hdr.broker_id, ha_server_addr=hdr.ha_server_addr, wrapper=wrapper, filter_servers=filters,
            channel=conn, now_ms=self.clock(), grpc_port=hdr.grpc_server_port)
        resp_hdr = h.RegisterBrokerResponseHeader(ha_server_addr=result.ha_server_addr or None,
                                                  master_addr=result.master_addr or None)
        order = self.kv.namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=resp_hdr.to_ext(),
                            body=KVTable(table=order).to_json() if order else None)

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
    def put_kv(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.PutKVConfigRequestHeader.from_ext(cmd.ext_fields)
        self.kv.put(hdr.namespace, hdr.key, hdr.value)
        self._kv_version += 1
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetKVConfigRequestHeader.from_ext(cmd.ext_fields)
        value = self.kv.get(hdr.namespace, hdr.key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                                f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields=h.GetKVConfigResponseHeader(value=value).to_ext())

    def delete_kv(self, conn: object, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.DeleteKVConfigRequestHeader.from_ext(cmd.ext_fields)
        self.kv.delete(hdr.namespace, hdr.key)
        self._kv_version += 1
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
        lines = []
        for key, attr in sorted(self._CONFIG_KEYS.items()):
            value = getattr(self.config, attr)
            lines.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
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


def _decode_registration(cmd: RemotingCommand) -> Any:
    """Header, CRC check and body of a REGISTER_BROKER (pure: run in the worker thread for a large body):
    ``(header, TopicConfigSerializeWrapper | None, filter servers)``, or the refusal to send."""
    hdr = h.RegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
    body = bytes(cmd.body or b"")
    if hdr.body_crc32 and (zlib.crc32(body) & 0x7FFFFFFF) != hdr.body_crc32:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
    wrapper: TopicConfigSerializeWrapper | None = None
    filters: list[str] = []
    if body:
        if cmd.version >= 37:
            reg = RegisterBrokerBody.decode(body, compressed=bool(hdr.compressed))
            wrapper = reg.topic_config_serialize_wrapper
            filters = list(reg.filter_server_list or [])
        else:
            wrapper = TopicConfigSerializeWrapper.from_json(body)
    return hdr, wrapper, filters
