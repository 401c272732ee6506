"""Registration with the name servers (RocketMQ ``BrokerOuterAPI``), PROTOCOL.md §4.3.

REGISTER_BROKER carries a RegisterBrokerBody (the topic table and its data version; zlib form when
``compressedRegister``) and ``bodyCrc32``. It is sent to every name server concurrently at start, every
``registerNameServerPeriod`` (30 s) and soon after each topic change; UNREGISTER_BROKER at a clean shutdown.
After a topic is created or updated only that topic goes, with the table's new data version (RocketMQ's
``registerIncrementBrokerData``): a name server adds or updates the topics a body holds and keeps the others,
so a broker with thousands of topics does not send, nor make every name server parse, its whole table for
each new one. A deletion, and every periodic registration, sends the whole table.
When the broker is not both readable and writable, every topic's perm is narrowed to ``brokerPermission``.
A name server that cannot be reached is logged and retried on the next period; it never stops the broker.

``haServerAddr`` is ``brokerIP2 (or the advertised host):<HA port actually bound>``. A broker serving gRPC
(``mq.daemon.proxy``) adds ``grpcServerPort`` to the header: mq's name servers put ``grpcAddrs`` in routes for
the 5.x clients' QueryRoute; a Java name server ignores the extField. A slave reads ``masterAddr``
and ``haServerAddr`` from each answer and hands them to the controller (``on_master_info``), which points its
HA client and slave synchronization at them (unless ``haMasterAddress`` is configured).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import TYPE_CHECKING, Sequence

from mq.daemon.runtime import cancel_tasks
from mq.errors import MQError
from mq.protocol.bodies import (RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper)
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import (RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
                                 UnregisterBrokerRequestHeader)
from mq.remoting import RemotingClient

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)


class Registrar:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.client = RemotingClient(name="broker->namesrv", connect_timeout=3.0)
        self._task: asyncio.Task | None = None
        self._soon: asyncio.Task | None = None
        self._dirty = False
        #: what register_soon has to send: the whole table, or the topics changed since the last send
        self._full = False
        self._changed: set[str] = set()
        self.registrations = 0
        self.last_errors: dict[str, str] = {}

    @property
    def namesrv_addrs(self) -> list[str]:
        return self.c.config.namesrv_addrs

    def _body(self, topics: Sequence[TopicConfig] | None = None) -> bytes:
        """The whole topic table, or only ``topics`` with the table's data version."""
        c = self.c
        if topics is None:
            wrapper = c.topic_config.wrapper()
        else:
            wrapper = TopicConfigSerializeWrapper(topic_config_table={tc.topic_name: tc for tc in topics},
                                                  data_version=c.topic_config.data_version)
        perm = c.config.broker_permission
        if perm & 6 != 6:  # not both readable and writable: narrow every topic (PermName)
            table = {}
            for name, tc in wrapper.topic_config_table.items():
                table[name] = TopicConfig(topic_name=tc.topic_name, read_queue_nums=tc.read_queue_nums,
                                          write_queue_nums=tc.write_queue_nums, perm=tc.perm & perm,
                                          topic_filter_type=tc.topic_filter_type, topic_sys_flag=tc.topic_sys_flag,
                                          order=tc.order)
            wrapper = TopicConfigSerializeWrapper(topic_config_table=table, data_version=wrapper.data_version)
        return RegisterBrokerBody(topic_config_serialize_wrapper=wrapper).encode(c.config.compressed_register)

    async def register_all(self, force: bool = False, topics: Sequence[TopicConfig] | None = None) -> int:
        """Register with every name server now, with the whole topic table or only ``topics``; returns how
        many accepted."""
        addrs = self.namesrv_addrs
        if not addrs:
            return 0
        c = self.c
        body = self._body(topics)
        ext = RegisterBrokerRequestHeader(c.broker_name, c.address, c.cluster, c.ha_address, c.broker_id,
                                          c.config.compressed_register, zlib.crc32(body) & 0x7FFFFFFF,
                                          getattr(c, "grpc_port", None)).to_ext()
        timeout = c.config.register_broker_timeout_mills / 1000.0
        results = await asyncio.gather(*(self._register_one(a, ext, body, timeout) for a in addrs))
        ok = sum(results)
        self.registrations += 1
        return ok

    async def _register_one(self, addr: str, ext: dict[str, str], body: bytes, timeout: float) -> bool:
        cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(ext), body)
        try:
            resp = await self.client.invoke(addr, cmd, timeout)
        except (MQError, OSError) as exc:
            if self.last_errors.get(addr) != str(exc):
                log.warning("register with name server %s failed: %s", addr, exc)
            self.last_errors[addr] = str(exc)
            return False
        if resp.code != ResponseCode.SUCCESS:
            log.warning("name server %s refused registration: code %s %s", addr, resp.code, resp.remark)
            self.last_errors[addr] = f"code {resp.code}"
            return False
        if addr in self.last_errors:
            log.info("registered with name server %s again", addr)
            del self.last_errors[addr]
        if self.c.is_slave:
            rh = RegisterBrokerResponseHeader.from_ext(resp.ext_fields or {})
            if rh.master_addr or rh.ha_server_addr:
                self.c.on_master_info(rh.master_addr or "", rh.ha_server_addr or "")
        return True

    async def unregister_all(self) -> None:
        c = self.c
        ext = UnregisterBrokerRequestHeader(c.broker_name, c.address, c.cluster, c.broker_id).to_ext()

        async def one(addr: str) -> None:
            try:
                await self.client.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(ext)),
                                         2.0)
            except (MQError, OSError) as exc:
                log.warning("unregister from name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in self.namesrv_addrs))

    def register_soon(self, changed: TopicConfig | None = None) -> None:
        """Coalesce topic changes into one registration on the next loop iterations: the ``changed`` topics
        only, or the whole table once a change without one (a deletion) is among them. A change that arrives
        while a registration is already on the wire is sent by one more registration right after it, so
        the name servers never miss the newest topic table."""
        if changed is None:
            self._full = True
        else:
            self._changed.add(changed.topic_name)
        self._dirty = True
        if self._soon is not None and not self._soon.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._soon = loop.create_task(self._register_later())

    async def register_pending(self) -> int:
        """Send what ``register_soon`` has collected at once (the admin's topic update waits for it, without
        the coalescing delay); returns how many name servers accepted, 0 when nothing was pending."""
        if not self._dirty:
            return 0
        self._dirty = False
        full, names = self._full, self._changed
        self._full, self._changed = False, set()
        topics = None
        if not full:
            table = self.c.topic_config
            topics = [tc for tc in map(table.get, sorted(names)) if tc is not None]
        return await self.register_all(force=True, topics=topics)

    async def _register_later(self) -> None:
        while self._dirty:
            await asyncio.sleep(0.01)
            try:
                await self.register_pending()
            except Exception:
                log.exception("registration after a topic change failed")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        period = min(max(self.c.config.register_name_server_period, 10_000), 60_000) / 1000.0
        if self.c.config.register_name_server_period < 10_000:  # tests may ask for faster periods
            period = max(0.05, self.c.config.register_name_server_period / 1000.0)
        while True:
            await asyncio.sleep(period)
            try:
                await self.register_all(force=self.c.config.force_register)
            except Exception:
                log.exception("periodic registration failed")

    async def stop(self) -> None:
        await cancel_tasks(self._task, self._soon)
        self._task = self._soon = None
        await self.client.close()
