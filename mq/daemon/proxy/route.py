"""QueryRoute and QueryAssignment: which broker's gRPC endpoint serves which queues.

Local mode (RocketMQ 5 ``LocalTopicRouteService``): the topic's route comes from the name servers
(GET_ROUTEINFO_BY_TOPIC, reused for ``grpcRouteCacheSeconds``) merged with this broker's own topic table (a
topic created here a moment ago is served before the name servers hear of it). Each broker's queues point at
that broker's gRPC endpoint: ``grpcAddrs`` of the route when its name server is mq's (brokers register
``grpcServerPort``), else the broker's remoting host with this broker's gRPC port (Apache's assumption of one
uniform port). Only masters (broker id 0) serve 5.x clients. Without name servers the route is this broker.

Queues (Apache ``RouteActivity.genMessageQueueFromQueueData``): ``min(read, write)`` READ_WRITE queues, the
extra read or write queues READ or WRITE, none accessible: NONE. ``accept_message_types`` follow the topic's
``+message.type`` attribute when it has one, else all four (MIXED), so that the clients' own type check
never refuses a message the broker would take.

An unknown topic is TOPIC_NOT_FOUND, except that with ``autoCreateTopicEnable`` a valid, non-system name is
created here from TBW102 (what a 4.x producer's first send does), so a 5.x producer works on a fresh broker.

QueryAssignment (push consumers only): one assignment per readable broker with queue id -1 ("all queues of
that broker"), or one per queue for a FIFO group (``consumeMessageOrderly``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from mq.common import topic as T
from mq.daemon.proxy.convert import wrap_namespace
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.status import OK_STATUS, ProxyError, status
from mq.errors import InvalidTopicError, MQError
from mq.protocol.bodies import BrokerData, QueueData, TopicRouteData
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import GetRouteInfoRequestHeader
from mq.remoting import RemotingClient

if TYPE_CHECKING:
    from mq.daemon.proxy.server import GrpcEndpoint

log = logging.getLogger(__name__)

Code = pb.Code
PERM_READ, PERM_WRITE = 4, 2
MESSAGE_TYPE_ATTRIBUTE = "+message.type"
_ALL_TYPES = (pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION)
_TYPES = {"NORMAL": (pb.MessageType.NORMAL,), "FIFO": (pb.MessageType.FIFO,), "DELAY": (pb.MessageType.DELAY,),
          "TRANSACTION": (pb.MessageType.TRANSACTION,), "MIXED": _ALL_TYPES}


def topic_attribute(tc: Any, name: str) -> str | None:
    attrs = getattr(tc, "attributes", None) if tc is not None else None
    if not attrs:
        return None
    value = attrs.get(name)
    if value is None and name.startswith("+"):
        value = attrs.get(name[1:])
    return value


def accepted_types(tc: Any) -> tuple[int, ...]:
    """The message types a topic takes: its ``message.type`` attribute, MIXED when it has none."""
    value = topic_attribute(tc, MESSAGE_TYPE_ATTRIBUTE)
    return _TYPES.get((value or "MIXED").upper(), _ALL_TYPES)


def permission(perm: int) -> int:
    r, w = perm & PERM_READ, perm & PERM_WRITE
    if r and w:
        return pb.Permission.READ_WRITE
    return pb.Permission.READ if r else pb.Permission.WRITE if w else pb.Permission.NONE


def queues_of(qd: QueueData, topic: Any, broker: Any, types: tuple[int, ...]) -> list[Any]:
    perm = qd.perm
    r = w = rw = n = 0
    if perm & PERM_READ and perm & PERM_WRITE:
        rw = min(qd.read_queue_nums, qd.write_queue_nums)
        r, w = qd.read_queue_nums - rw, qd.write_queue_nums - rw
    elif perm & PERM_WRITE:
        w = qd.write_queue_nums
    elif perm & PERM_READ:
        r = qd.read_queue_nums
    else:
        n = max(1, qd.read_queue_nums, qd.write_queue_nums)
    out = []
    qid = 0
    for count, p in ((r, pb.Permission.READ), (w, pb.Permission.WRITE), (rw, pb.Permission.READ_WRITE),
                     (n, pb.Permission.NONE)):
        for _ in range(count):
            out.append(pb.MessageQueue(topic=topic, id=qid, permission=p, broker=broker,
                                       accept_message_types=types))
            qid += 1
    return out


class RouteService:
    def __init__(self, endpoint: "GrpcEndpoint") -> None:
        self.e = endpoint
        self.c = endpoint.c
        self._client: RemotingClient | None = None
        self._cache: dict[str, tuple[float, TopicRouteData | None]] = {}

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # -- the route -------------------------------------------------------------------------------------------
    async def _from_namesrv(self, topic: str) -> TopicRouteData | None:
        addrs = self.c.config.namesrv_addrs
        if not addrs:
            return None
        now = time.monotonic()
        hit = self._cache.get(topic)
        if hit is not None and hit[0] > now:
            return hit[1]
        if self._client is None:
            self._client = RemotingClient(name="grpc->namesrv", connect_timeout=3.0)
        route = None
        ext = GetRouteInfoRequestHeader(topic=topic, accept_standard_json_only=True).to_ext()
        for addr in addrs:
            try:
                resp = await self._client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                               dict(ext)), 3.0)
            except (MQError, OSError) as exc:
                log.debug("route of %s from name server %s failed: %s", topic, addr, exc)
                continue
            if resp.code == ResponseCode.SUCCESS and resp.body:
                try:
                    route = TopicRouteData.from_json(resp.body)
                except MQError as exc:
                    log.warning("name server %s sent an unreadable route of %s: %s", addr, topic, exc)
                    continue
            break
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[topic] = (now + self.c.config.grpc_route_cache_seconds, route)
        return route

    def forget(self, topic: str) -> None:
        self._cache.pop(topic, None)

    def _local(self, topic: str) -> tuple[QueueData, BrokerData] | None:
        c = self.c
        tc = c.topic_config.get(topic)
        if tc is None or c.is_slave:
            return None
        perm = tc.perm & c.config.broker_permission
        qd = QueueData(broker_name=c.broker_name, read_queue_nums=tc.read_queue_nums,
                       write_queue_nums=tc.write_queue_nums, perm=perm, topic_sys_flag=tc.topic_sys_flag)
        bd = BrokerData(cluster=c.cluster, broker_name=c.broker_name, broker_addrs={0: c.address},
                        grpc_addrs={c.address: self.e.advertised_address})
        return qd, bd

    async def route(self, topic: str, *, create: bool = False) -> list[tuple[QueueData, Any]]:
        """[(QueueData, Broker)] of the masters serving ``topic``; TOPIC_NOT_FOUND when none does."""
        route = await self._from_namesrv(topic)
        local = self._local(topic)
        if route is None and local is None and create:
            local = self._auto_create(topic)
        pairs: dict[str, tuple[QueueData, BrokerData]] = {}
        if route is not None:
            brokers = {bd.broker_name: bd for bd in route.broker_datas}
            for qd in route.queue_datas:
                bd = brokers.get(qd.broker_name)
                if bd is not None and 0 in bd.broker_addrs:
                    pairs[qd.broker_name] = (qd, bd)
        if local is not None:
            pairs[local[0].broker_name] = local
        if not pairs:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not found")
        return [(qd, self.broker(bd)) for _name, (qd, bd) in sorted(pairs.items())]

    def broker(self, bd: BrokerData) -> Any:
        addr = bd.broker_addrs.get(0, "")
        endpoint = (bd.grpc_addrs or {}).get(addr)
        if not endpoint:
            endpoint = f"{addr.rpartition(':')[0]}:{self.e.port}"
        host, _, port = endpoint.rpartition(":")
        scheme = pb.AddressScheme.IPv6 if ":" in host else pb.AddressScheme.IPv4
        try:
            import ipaddress

            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            scheme = pb.AddressScheme.DOMAIN_NAME
        return pb.Broker(name=bd.broker_name, id=0, endpoints=pb.Endpoints(
            scheme=scheme, addresses=[pb.Address(host=host.strip("[]"), port=int(port or 0))]))

    def _auto_create(self, topic: str) -> tuple[QueueData, BrokerData] | None:
        c = self.c
        if not c.config.auto_create_topic_enable or c.is_slave:
            return None
        try:
            T.validate_topic(topic)
        except InvalidTopicError:
            return None
        if T.is_system_topic(topic) or T.is_retry_topic(topic) or T.is_dlq_topic(topic):
            return None
        if c.topic_config.create_in_send(topic, T.AUTO_CREATE_TOPIC_KEY_TOPIC, c.config.default_topic_queue_nums) \
                is None:
            return None
        return self._local(topic)

    # -- RPCs ------------------------------------------------------------------------------------------------
    def _topic_name(self, res: Any) -> str:
        name = res.name
        try:
            T.validate_topic(name)
        except InvalidTopicError as exc:
            raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from None
        if T.is_system_topic(name) or name in self.c.topic_config.system_topics():
            raise ProxyError(Code.ILLEGAL_TOPIC, f"system topic {name} is not allowed here")
        return wrap_namespace(res.resource_namespace, name)

    async def query_route(self, req: Any, ctx: Any) -> Any:
        topic = self._topic_name(req.topic)
        self.e.authorize(ctx, {topic: "ANY"})
        pairs = await self.route(topic, create=True)
        types = accepted_types(self.c.topic_config.get(topic))
        queues = []
        for qd, broker in pairs:
            queues.extend(queues_of(qd, req.topic, broker, types))
        return pb.QueryRouteResponse(status=OK_STATUS, message_queues=queues)

    async def query_assignment(self, req: Any, ctx: Any) -> Any:
        topic = self._topic_name(req.topic)
        group = self.e.group_name(req.group)
        self.e.authorize(ctx, {topic: "SUB", T.retry_topic(group): "SUB"})
        pairs = await self.route(topic)
        fifo = self.e.group_is_fifo(group)
        assignments = []
        for qd, broker in pairs:
            if not qd.perm & PERM_READ or qd.read_queue_nums <= 0:
                continue
            perm = permission(qd.perm)
            ids = range(qd.read_queue_nums) if fifo else (-1,)
            for qid in ids:
                assignments.append(pb.Assignment(message_queue=pb.MessageQueue(
                    topic=req.topic, id=qid, permission=perm, broker=broker)))
        if not assignments:
            return pb.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        return pb.QueryAssignmentResponse(status=OK_STATUS, assignments=assignments)
