"""Admin calls to name servers and brokers (what mqadmin does), asyncio-native.

``MQAdmin`` tries the configured name servers in order and moves on to the next one only when a server
cannot be reached; every non-success answer becomes a typed ``BrokerError``.
"""

from __future__ import annotations

import logging
from typing import Sequence

from mq.errors import BrokerError, ConnectError, RemotingError, TopicNotExistError
from mq.protocol import headers as h
from mq.protocol.bodies import ClusterInfo, KVTable, TopicList, TopicRouteData
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient

log = logging.getLogger(__name__)


class MQAdmin:
    def __init__(self, namesrv_addrs: Sequence[str], *, timeout: float = 5.0,
                 client: RemotingClient | None = None) -> None:
        if not namesrv_addrs:
            raise ConnectError("no name server address given (set -n/--namesrv or $NAMESRV_ADDR)")
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout
        self._own_client = client is None
        self.client = client or RemotingClient(name="admin")

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

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None = None) -> None:
        await self.call_namesrv(RemotingCommand.request(
            RequestCode.DELETE_TOPIC_IN_NAMESRV,
            h.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext()))
