"""``MQClientInstance``: what every producer and consumer of one client id shares (RocketMQ's
``MQClientInstance``).

- one ``RemotingClient`` (one connection per broker and name server);
- the route table: topic -> ``TopicRouteData`` from the name server, refreshed every
  ``poll_name_server_interval`` (30 s) for every topic in use and on demand after a failed send (at most once a
  second per topic); broker name -> {broker id: address};
- a heartbeat (HEART_BEAT 34 with every producer and consumer group) to every known broker every 30 s, and at once
  when a client starts;
- consumer timers: offsets persisted every 5 s, rebalance every 20 s and on NOTIFY_CONSUMER_IDS_CHANGED;
- handlers for broker-initiated requests (``mq.client.client_processor``); replies to ``Producer.request``
  wait in ``request_futures``, whose expired entries are scanned out every second.

Instances are shared per (client id, event loop): ``acquire(config)`` returns the running one or starts a new
one; ``release()`` shuts it down when its last user leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
from typing import Any, Protocol

from mq.client.admin import MQAdmin
from mq.client.client_processor import ClientRemotingProcessor
from mq.client.request_reply import RequestFutureTable
from mq.client.route_cache import MASTER_ID, TopicPublishInfo, publish_info, subscribe_queues
from mq.common.message import MessageQueue
from mq.config import ClientConfig
from mq.errors import MQError, RemotingError, TopicNotExistError
from mq.protocol import headers as h
from mq.protocol.bodies import (
    ConsumerData,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    ProducerData,
    TopicRouteData,
)
from mq.protocol.acl import SessionCredentials
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient

log = logging.getLogger(__name__)

CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
ROUTE_REFRESH_MIN_GAP = 1.0


class ProducerLike(Protocol):
    group: str


class ConsumerLike(Protocol):
    group: str

    def consumer_data(self) -> ConsumerData: ...

    def topics(self) -> set[str]: ...

    async def rebalance(self) -> None: ...

    async def persist_offsets(self) -> None: ...

    def running_info(self) -> dict[str, Any]: ...

    async def consume_directly(self, msg: Any, broker_name: str | None) -> dict[str, Any]: ...

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> list[MessageQueue]: ...

    def offset_table(self, topic: str = "") -> dict[MessageQueue, int]: ...


def local_ip() -> str:
    """The first non-loopback IPv4 address (the address a UDP socket towards a public address would use)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"


def build_client_id(config: ClientConfig) -> str:
    ip = config.client_ip or local_ip()
    name = str(os.getpid()) if config.instance_name == "DEFAULT" else config.instance_name
    cid = f"{ip}@{name}"
    if config.unit_name:
        cid += f"@{config.unit_name}"
    return cid


_INSTANCES: dict[tuple[str, int], "MQClientInstance"] = {}


class MQClientInstance:
    def __init__(self, config: ClientConfig, *, client: RemotingClient | None = None) -> None:
        self.config = config
        self.client_ip = config.client_ip or local_ip()
        self.client_id = build_client_id(config)
        self.remoting = client or RemotingClient(name=f"client {self.client_id}",
                                                 connect_timeout=config.connect_timeout)
        if config.access_key:
            self.remoting.credentials = SessionCredentials(config.access_key, config.secret_key,
                                                           config.security_token or None)
        self.admin = MQAdmin(config.namesrv_addrs, timeout=config.call_timeout, client=self.remoting)
        self.producers: dict[str, Any] = {}
        self.consumers: dict[str, Any] = {}
        self.routes: dict[str, TopicRouteData] = {}
        self.publish: dict[str, TopicPublishInfo] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self._route_fetched: dict[str, float] = {}
        self._route_locks: dict[str, asyncio.Lock] = {}
        self._tasks: list[asyncio.Task] = []
        self._rebalance_wakeup = asyncio.Event()
        #: request-reply: correlation id -> pending ``Producer.request`` future
        self.request_futures = RequestFutureTable()
        self._refs = 0
        self._inner_producer: Any = None
        self._started = False
        self._key: tuple[str, int] | None = None

    # -- sharing ----------------------------------------------------------------------------------------
    @classmethod
    async def acquire(cls, config: ClientConfig) -> "MQClientInstance":
        key = (build_client_id(config), id(asyncio.get_running_loop()))
        inst = _INSTANCES.get(key)
        if inst is None:
            inst = cls(config)
            inst._key = key
            _INSTANCES[key] = inst
            await inst.start()
        inst._refs += 1
        return inst

    async def release(self) -> None:
        self._refs -= 1
        if self._refs <= 0:
            if self._key is not None and _INSTANCES.get(self._key) is self:
                del _INSTANCES[self._key]
            await self.shutdown()

    # -- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        ClientRemotingProcessor(self).register(self.remoting)
        loop = asyncio.get_running_loop()
        cfg = self.config
        self._tasks = [
            loop.create_task(self._every(cfg.poll_name_server_interval, self.refresh_routes, first=0.01)),
            loop.create_task(self._every(cfg.heartbeat_broker_interval, self.heartbeat_all, first=1.0)),
            loop.create_task(self._every(cfg.persist_consumer_offset_interval, self.persist_all_offsets,
                                         first=cfg.persist_consumer_offset_interval)),
            loop.create_task(self._rebalance_loop()),
            loop.create_task(self._every(1.0, self._scan_requests, first=1.0)),
        ]

    async def inner_producer(self) -> Any:
        """The client's own producer (group CLIENT_INNER_PRODUCER), used to re-send failed messages."""
        if self._inner_producer is None:
            from mq.client.producer import Producer
            from mq.config import ProducerConfig

            producer = Producer(ProducerConfig(group=CLIENT_INNER_PRODUCER_GROUP), self.config, instance=self)
            await producer.start()
            self._inner_producer = producer
        return self._inner_producer

    async def shutdown(self) -> None:
        if not self._started:
            return
        if self._inner_producer is not None:
            with contextlib.suppress(MQError):
                await self._inner_producer.shutdown()
            self._inner_producer = None
        self._started = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        await self.remoting.close()

    async def _every(self, interval: float, fn: Any, *, first: float) -> None:
        await asyncio.sleep(first)
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: periodic %s failed", self.client_id, getattr(fn, "__name__", fn))
            await asyncio.sleep(interval)

    # -- registration -----------------------------------------------------------------------------------
    def register_producer(self, producer: Any) -> None:
        if producer.group in self.producers:
            raise MQError(f"producer group {producer.group!r} already has a producer in client {self.client_id}")
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: Any) -> None:
        if consumer.group in self.consumers:
            raise MQError(f"consumer group {consumer.group!r} already has a consumer in client {self.client_id}")
        self.consumers[consumer.group] = consumer

    async def unregister(self, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """Forget a client and tell every broker (UNREGISTER_CLIENT 35)."""
        if producer_group:
            self.producers.pop(producer_group, None)
        if consumer_group:
            self.consumers.pop(consumer_group, None)
        hdr = h.UnregisterClientRequestHeader(client_id=self.client_id, producer_group=producer_group,
                                              consumer_group=consumer_group).to_ext()
        calls = [self._quiet_call(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, dict(hdr)))
                 for addr in self.all_broker_addrs()]
        await asyncio.gather(*calls)

    async def _quiet_call(self, addr: str, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            return await self.remoting.invoke(addr, cmd, timeout=self.config.call_timeout)
        except MQError as exc:
            log.debug("%s: %s to %s failed: %s", self.client_id, cmd.code, addr, exc)
            return None

    # -- routes -----------------------------------------------------------------------------------------
    async def update_route(self, topic: str, *, force: bool = True) -> TopicRouteData:
        """Fetch ``topic``'s route from the name server (TopicNotExistError "no route for topic ...")."""
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            last = self._route_fetched.get(topic, 0.0)
            if topic in self.routes and (not force or time.monotonic() - last < ROUTE_REFRESH_MIN_GAP):
                return self.routes[topic]
            route = await self.admin.topic_route(topic)
            self._route_fetched[topic] = time.monotonic()
            self.routes[topic] = route
            for bd in route.broker_datas:
                self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
            info = publish_info(topic, route)
            old = self.publish.get(topic)
            if old is not None:
                info.counter = old.counter
            self.publish[topic] = info
            return route

    async def publish_info(self, topic: str, default_topic: str | None = None,
                           default_queue_nums: int = 4) -> TopicPublishInfo:
        """The topic's write queues; with ``default_topic`` (TBW102) a topic the name server does not know yet
        is sent to the brokers of the default topic, which auto-create it (Java ``tryToFindTopicPublishInfo``)."""
        info = self.publish.get(topic)
        if info is None or not info.ok:
            try:
                await self.update_route(topic, force=False)
            except TopicNotExistError as exc:
                if not default_topic:
                    raise
                try:
                    base = await self.admin.topic_route(default_topic)
                except TopicNotExistError:
                    raise exc from None
                route = TopicRouteData(queue_datas=[
                    dataclasses.replace(qd, read_queue_nums=min(default_queue_nums, qd.read_queue_nums),
                                        write_queue_nums=min(default_queue_nums, qd.write_queue_nums))
                    for qd in base.queue_datas], broker_datas=base.broker_datas)
                for bd in route.broker_datas:
                    self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
                self.publish[topic] = publish_info(topic, route)
            info = self.publish[topic]
        return info

    async def subscribe_queues(self, topic: str, *, refresh: bool = False) -> list[MessageQueue]:
        route = self.routes.get(topic)
        if route is None or refresh:
            route = await self.update_route(topic, force=refresh)
        return subscribe_queues(topic, route)

    async def refresh_routes(self) -> None:
        topics = set(self.publish)
        for c in list(self.consumers.values()):
            topics |= c.topics()
        for topic in sorted(topics):
            try:
                await self.update_route(topic)
            except TopicNotExistError:
                log.debug("%s: no route for %s", self.client_id, topic)
            except MQError as exc:
                log.warning("%s: route refresh of %s failed: %s", self.client_id, topic, exc)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def any_broker_addr(self, broker_name: str) -> str | None:
        addrs = self.broker_addrs.get(broker_name) or {}
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return addrs[min(addrs)] if addrs else None

    async def find_broker_addr(self, mq: MessageQueue, *, master: bool = True) -> str:
        addr = self.master_addr(mq.broker_name) if master else self.any_broker_addr(mq.broker_name)
        if addr is None:
            await self.update_route(mq.topic)
            addr = self.master_addr(mq.broker_name) if master else self.any_broker_addr(mq.broker_name)
        if addr is None:
            raise RemotingError(f"broker {mq.broker_name!r} is not in the route of topic {mq.topic!r}")
        return addr

    def all_broker_addrs(self) -> list[str]:
        return sorted({a for addrs in self.broker_addrs.values() for a in addrs.values()})

    # -- calls ------------------------------------------------------------------------------------------
    async def call(self, addr: str, cmd: RemotingCommand, *, ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
                   timeout: float | None = None) -> RemotingCommand:
        return await self.admin.call_broker(addr, cmd, ok=ok, timeout=timeout or self.config.call_timeout)

    async def find_consumer_ids(self, topic: str, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP from one broker of ``topic`` (Java picks one at random)."""
        queues = await self.subscribe_queues(topic)
        brokers = sorted({q.broker_name for q in queues})
        for name in brokers:
            addr = self.any_broker_addr(name)
            if addr is None:
                continue
            cmd = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                          h.GetConsumerListByGroupRequestHeader(consumer_group=group).to_ext())
            try:
                resp = await self.call(addr, cmd)
            except MQError as exc:
                log.debug("%s: consumer list from %s failed: %s", self.client_id, addr, exc)
                continue
            if resp.body:
                return sorted(GetConsumerListByGroupResponseBody.from_json(resp.body).consumer_id_list)
        return []

    # -- heartbeat --------------------------------------------------------------------------------------
    def heartbeat_data(self) -> HeartbeatData:
        producers = [ProducerData(group_name=g) for g in sorted(self.producers)]
        consumers = [c.consumer_data() for _, c in sorted(self.consumers.items())]
        return HeartbeatData(client_id=self.client_id, producer_data_set=producers, consumer_data_set=consumers)

    async def heartbeat_all(self) -> int:
        """Send a heartbeat to every known broker (masters only if there are no consumers); return successes."""
        if not self.producers and not self.consumers:
            return 0
        body = self.heartbeat_data().to_json()
        addrs = []
        for addrs_by_id in self.broker_addrs.values():
            for bid, addr in addrs_by_id.items():
                if bid == MASTER_ID or self.consumers:
                    addrs.append(addr)
        results = await asyncio.gather(*(self._quiet_call(a, RemotingCommand.request(RequestCode.HEART_BEAT,
                                                                                         body=body))
                                         for a in sorted(set(addrs))))
        return sum(1 for r in results if r is not None and r.code == ResponseCode.SUCCESS)

    # -- consumer timers --------------------------------------------------------------------------------
    async def persist_all_offsets(self) -> None:
        for c in list(self.consumers.values()):
            await c.persist_offsets()

    def rebalance_soon(self) -> None:
        self._rebalance_wakeup.set()

    async def rebalance_all(self) -> None:
        for c in list(self.consumers.values()):
            try:
                await c.rebalance()
            except MQError as exc:
                log.warning("%s: rebalance of %s failed: %s", self.client_id, c.group, exc)

    async def _rebalance_loop(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._rebalance_wakeup.wait(), self.config.rebalance_interval)
            self._rebalance_wakeup.clear()
            try:
                await self.rebalance_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: rebalance failed", self.client_id)

    async def _scan_requests(self) -> None:
        self.request_futures.scan_expired()
