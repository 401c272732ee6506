"""The broker process (RocketMQ ``BrokerController``): store, tables, processors and timers wired together.

Start-up order: bind the listener (the port is needed for STOREHOST and offsetMsgIds) -> load and start the
store -> load topics / subscription groups / offsets -> register processors -> start timers -> register with
every name server. ``stop`` reverses it: unregister, stop timers, close the listener, persist offsets, shut the
store down.

Replication (STORE.md §13, ``mq.daemon.broker.ha``): a master (ASYNC_MASTER / SYNC_MASTER, brokerId 0) runs
``HAService`` on ``haListenPort``; a SLAVE (brokerId > 0) runs ``HAClient`` towards the master's HA address and
``SlaveSynchronize``; both are started before the first registration (which advertises the HA address) and
stopped before the store shuts down. ``controller.ha`` is the HAService or the HAClient.

Metrics (``mq.daemon.metrics``): with ``metricsExporterType: PROM`` the remoting server's request observer is
installed before listening, and the Prometheus endpoint is served from start to stop.

Timers: name-server registration (``registerNameServerPeriod``), offset persistence
(``flushConsumerOffsetInterval``), client channel expiry (``clientChannelScanInterval`` /
``channelExpiredTimeout``) and fast failure (``fastFailureScanIntervalMs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from mq.config import BrokerConfig, ProcessorLimits, StoreConfig
from mq.daemon.broker.client_manager import ConsumerManager, ProducerManager
from mq.daemon.broker.flow_control import ADMIN_GROUP, HEARTBEAT_GROUP, QUERY_GROUP, SEND_GROUP, FastFailure
from mq.daemon.broker.long_polling import LoopPoster, PullHoldService
from mq.daemon.broker.offsets import ConsumerOffsetManager
from mq.daemon.broker.registration import Registrar
from mq.daemon.broker.stats import BrokerStats
from mq.daemon.broker.subscription_group import SubscriptionGroupManager
from mq.daemon.broker.topic_config import TopicConfigManager
from mq.daemon.runtime import DaemonError, cancel_tasks, describe_bind_error
from mq.errors import MQError
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import NotifyConsumerIdsChangedRequestHeader
from mq.remoting import RemotingServer
from mq.store.message_store import MessageStore

log = logging.getLogger(__name__)


class BrokerController:
    def __init__(self, config: BrokerConfig, *, store_config: StoreConfig | None = None,
                 clock: Callable[[], int] | None = None) -> None:
        self.config = config
        self.store_config = store_config or StoreConfig()
        self.server = RemotingServer(config.host, config.listen_port, limits=config.frame_limits, name="broker",
                                     connection_limits=config.connection_limits)
        self.server.configure_group(SEND_GROUP, ProcessorLimits(max(1, config.send_message_thread_pool_nums),
                                                                config.send_thread_pool_queue_capacity))
        self.server.configure_group(QUERY_GROUP, ProcessorLimits(max(1, config.query_message_thread_pool_nums),
                                                                 config.query_thread_pool_queue_capacity))
        self.server.configure_group(ADMIN_GROUP, ProcessorLimits(max(1, config.admin_broker_thread_pool_nums)))
        self.server.configure_group(HEARTBEAT_GROUP, ProcessorLimits(max(1, config.heartbeat_thread_pool_nums),
                                                                     config.heartbeat_thread_pool_queue_capacity))
        root = Path(self.store_config.store_path_root_dir)
        self.store: MessageStore | None = None
        self.acl = None  # PlainAccessValidator when aclEnable
        self.topic_config = TopicConfigManager(config, root, on_change=self._topics_changed)
        self.subscription_groups = SubscriptionGroupManager(config, root)
        self.offsets = ConsumerOffsetManager(root, self.store_config.store_error_log_interval_ms / 1000.0)
        self.consumers = ConsumerManager(on_ids_changed=self._consumer_ids_changed)
        self.producers = ProducerManager()
        self.stats = BrokerStats(self)
        self.registrar = Registrar(self)
        self.fast_failure = FastFailure(self.server, send_wait_ms=config.wait_time_mills_in_send_queue,
                                        interval_ms=config.fast_failure_scan_interval_ms)
        self.poster: LoopPoster | None = None
        self.hold_service: PullHoldService | None = None
        self.send_processor: Any = None
        self.pull_processor: Any = None
        self.client_processor: Any = None
        self.query_processor: Any = None
        self.lock_processor: Any = None
        # delivery services: delay levels, transactions, arbitrary delay; built in start()
        self.schedule_service: Any = None
        self.transaction_service: Any = None
        self.timer_service: Any = None
        # replication (mq.daemon.broker.ha): HAService on a master, HAClient on a slave; built in start()
        self.ha: Any = None
        #: the gRPC endpoint for RocketMQ 5.x clients (mq.daemon.proxy), None when grpcServerPort is -1
        self.grpc: Any = None
        self.slave_sync: Any = None
        #: the Prometheus endpoint (mq.daemon.metrics) when metricsExporterType is PROM; built in start()
        self.metrics: Any = None
        # RocketMQ 5 pop consumption (mq.daemon.broker.pop); ``clock`` (epoch ms) is for tests
        from mq.daemon.broker.pop.service import PopService

        self.pop_service = PopService(self, clock=clock)
        self._tasks: list[asyncio.Task] = []
        self._started = False
        self._stopping = False

    # -- identity ----------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return f"{self.config.advertised_host}:{self.port}"

    @property
    def broker_name(self) -> str:
        return self.config.broker_name

    @property
    def cluster(self) -> str:
        return self.config.broker_cluster_name

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def is_slave(self) -> bool:
        return self.store_config.broker_role.upper() == "SLAVE"

    @property
    def ha_port(self) -> int:
        """The HA port advertised to the name servers: the bound one on a master, else haListenPort."""
        from mq.daemon.broker.ha.master import HAService

        if isinstance(self.ha, HAService) and self.ha.port:
            return self.ha.port
        configured = self.store_config.ha_listen_port
        return configured if configured > 0 else self.port + 1

    @property
    def ha_address(self) -> str:
        return f"{self.config.broker_ip2 or self.config.advertised_host}:{self.ha_port}"

    def _check_role(self) -> None:
        role = self.store_config.broker_role.upper()
        if role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise DaemonError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {role!r}")
        if role == "SLAVE" and self.broker_id <= 0:
            raise DaemonError(f"a SLAVE needs brokerId > 0 (brokerId is {self.broker_id})")
        if role != "SLAVE" and self.broker_id != 0:
            raise DaemonError(f"a master ({role}) must have brokerId 0 (brokerId is {self.broker_id}); RocketMQ "
                              f"forces 0: set brokerId: 0, or brokerRole: SLAVE for a slave")

    def _install_acl(self) -> None:
        from mq.daemon.broker.acl import PlainAccessValidator, default_acl_file

        path = Path(self.config.acl_file).expanduser() if self.config.acl_file else \
            default_acl_file(self.store_config.store_path_root_dir)
        validator = self.acl = PlainAccessValidator(path)

        def refuse(conn, cmd):
            # A large heartbeat's resources are checked once it is decoded off the loop (ClientProcessor).
            deferred = {} if cmd.code == RequestCode.HEART_BEAT and self.server.is_heavy(cmd) else None
            reason = validator.check(conn.remote_addr, cmd, need=deferred)
            if reason is None:
                return None
            log.debug("ACL refused request code %d from %s: %s", cmd.code, conn.remote_addr, reason)
            return cmd.response(ResponseCode.SYSTEM_ERROR, validator.refusal_remark(reason))

        self.server.registry.request_filter = refuse

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._check_role()
        if self.is_slave:  # RocketMQ lowers a slave's accessMessageInMemoryMaxRatio by 10 (STORE.md §13.6)
            ratio = self.store_config.access_message_in_memory_max_ratio
            self.store_config = dataclasses.replace(self.store_config,
                                                    access_message_in_memory_max_ratio=max(0, ratio - 10))
        loop = asyncio.get_running_loop()
        self.poster = LoopPoster(loop)
        if self.config.acl_enable:
            self._install_acl()  # before listening: a missing or bad ACL file stops the start
        from mq.daemon.metrics.service import broker_metrics

        self.metrics = broker_metrics(self)  # before listening: it times requests from the first one
        try:
            await self.server.start()
        except OSError as exc:
            raise DaemonError(describe_bind_error(exc, self.config.host, self.config.listen_port)) from None
        try:
            self._open_store()
            self.topic_config.load()
            self.subscription_groups.load()
            self.offsets.load()
            from mq.daemon.broker.processors import register_all

            self._make_delivery_services()  # before the processors, which use them
            register_all(self)
            await self._start_ha()
            if self.metrics is not None:
                await self.metrics.start()
            await self._start_grpc()
        except BaseException:
            await self._stop_grpc()
            if self.metrics is not None:
                await self.metrics.stop()
            await self._stop_ha()
            await self.server.stop()
            if self.store is not None:
                self.store.shutdown()
            raise
        self.server.on_connection_closed(self._connection_closed)
        self.fast_failure.start()
        self._tasks = [loop.create_task(self._periodic(self.config.flush_consumer_offset_interval,
                                                       self._persist_offsets, "offset persistence")),
                       loop.create_task(self._periodic(self.config.client_channel_scan_interval,
                                                       self.scan_clients, "client channel scan"))]
        self._start_delivery_services()
        self.pop_service.start()
        self._started = True
        ok = await self.registrar.register_all(force=True)
        self.registrar.start()
        log.info("broker %s (%s, id %d) listening on %s:%d, advertised %s%s, store %s; registered with %d/%d name "
                 "servers", self.broker_name, self.cluster, self.broker_id, self.config.host, self.port,
                 self.address, f", gRPC {self.grpc.advertised_address}" if self.grpc is not None else "",
                 self.store_config.store_path_root_dir, ok, len(self.config.namesrv_addrs))

    def _open_store(self) -> None:
        assert self.poster is not None
        self.hold_service = PullHoldService(asyncio.get_running_loop(), self.poster, self._reexecute_pull,
                                            self.config.max_held_pull_requests)
        hold = self.hold_service
        pull_held = hold.held_topics()
        pop_polling = self.pop_service.open_polling()
        pop_held = pop_polling.held_topics()

        def on_dispatch(topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
            # one dict lookup per service: most dispatched messages wake nothing
            if topic in pull_held:
                hold.on_dispatch(topic, queue_id, max_offset, tags_code)
            if topic in pop_held:
                pop_polling.on_dispatch(topic, queue_id, max_offset, tags_code)

        store = MessageStore(self.store_config, store_host=(self.config.advertised_host, self.port),
                             on_dispatch=on_dispatch, index_scheduler=self.poster)
        try:
            store.load()
            store.start()
        except MQError:
            store.shutdown()
            raise
        except OSError as exc:
            store.shutdown()
            raise DaemonError(f"cannot open the store at {self.store_config.store_path_root_dir}: {exc}") from None
        self.store = store

    def _reexecute_pull(self, req: Any) -> None:
        self.pull_processor.reexecute(req)

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self._started:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.registrar.unregister_all(), 3.0)
        await self.registrar.stop()
        await self.fast_failure.stop()
        await self._stop_delivery_services()  # before the store shuts down
        try:
            await self.pop_service.stop()  # answers held pops while their connections are open
        except Exception:
            log.exception("stopping the pop service failed")
        await cancel_tasks(*self._tasks)
        self._tasks = []
        await self._stop_grpc()
        if self.metrics is not None:
            await self.metrics.stop()
        if self.hold_service is not None:
            self.hold_service.drop_all()
        if self.pull_processor is not None:
            self.pull_processor.close()
        await self.server.stop()
        await self._stop_ha()
        self.offsets.persist(force=True)
        if self.store is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)
        self._started = False
        log.info("broker %s stopped", self.broker_name)

    async def __aenter__(self) -> "BrokerController":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the gRPC endpoint (mq.daemon.proxy) ------------------------------------------------------------------
    @property
    def grpc_port(self) -> int | None:
        """The bound gRPC port, None without a gRPC endpoint."""
        return self.grpc.port if self.grpc is not None else None

    async def _start_grpc(self) -> None:
        if self.config.grpc_server_port < 0:
            return
        from mq.daemon.proxy.server import GrpcEndpoint

        endpoint = GrpcEndpoint(self)
        await endpoint.start()
        self.grpc = endpoint
        self.server.registry.foreign_protocol_hint = (
            f"RocketMQ 5.x gRPC clients connect to this broker's gRPC endpoint {endpoint.advertised_address}")

    async def _stop_grpc(self) -> None:
        endpoint, self.grpc = self.grpc, None
        if endpoint is not None:
            try:
                await endpoint.stop()
            except Exception:
                log.exception("stopping the gRPC endpoint failed")

    # -- replication (STORE.md §13) -------------------------------------------------------------------------
    async def _start_ha(self) -> None:
        from mq.daemon.broker.ha.master import HAService
        from mq.daemon.broker.ha.slave import HAClient
        from mq.daemon.broker.ha.slave_sync import SlaveSynchronize

        scfg = self.store_config
        if self.is_slave:
            # haMasterAddress is used when set (RocketMQ: at least 6 characters); else the name server's answer
            fixed = scfg.ha_master_address if len(scfg.ha_master_address) >= 6 else ""
            self.ha = HAClient(self.store, scfg, fixed)
            self.ha.start()
            self.slave_sync = SlaveSynchronize(self)
            self.slave_sync.start()
            return
        # -1: listenPort + 1 (BrokerStartup); an ephemeral listenPort (0) gets an ephemeral HA port too
        port = scfg.ha_listen_port
        if port < 0:
            port = self.config.listen_port + 1 if self.config.listen_port > 0 else 0
        service = HAService(self.store, scfg, host=self.config.host, port=port)
        try:
            await service.start()
        except OSError as exc:
            raise DaemonError(f"cannot listen for slaves (haListenPort): "
                              f"{describe_bind_error(exc, self.config.host, port)}") from None
        self.ha = service

    async def _stop_ha(self) -> None:
        for part in (self.slave_sync, self.ha):
            if part is not None:
                try:
                    await part.stop()
                except Exception:
                    log.exception("stopping %s failed", type(part).__name__)

    def on_master_info(self, master_addr: str, ha_server_addr: str) -> None:
        """A registration answer named this slave's master (RocketMQ ``updateMasterHAServerAddrPeriodically``)."""
        if not self.is_slave:
            return
        if self.slave_sync is not None and master_addr:
            self.slave_sync.update_master_addr(master_addr)
        if self.ha is not None and ha_server_addr and len(self.store_config.ha_master_address) < 6:
            self.ha.update_master_address(ha_server_addr)

    # -- delivery services -----------------------------------------------------------------------------------
    def _make_delivery_services(self) -> None:
        from mq.daemon.broker.schedule import ScheduleMessageService
        from mq.daemon.broker.timer import TimerMessageService
        from mq.daemon.broker.transaction import TransactionalMessageService

        self.schedule_service = ScheduleMessageService(self)
        self.transaction_service = TransactionalMessageService(self)
        self.timer_service = TimerMessageService(self)

    def _start_delivery_services(self) -> None:
        self.schedule_service.start()
        self.transaction_service.start()
        self.timer_service.start()

    async def _stop_delivery_services(self) -> None:
        for svc in (self.timer_service, self.transaction_service, self.schedule_service):
            if svc is not None:
                try:
                    await svc.stop()
                except Exception:
                    log.exception("stopping %s failed", type(svc).__name__)

    # -- contract helpers --------------------------------------------------------------------------------
    async def register_all(self, force: bool = False) -> None:
        await self.registrar.register_all(force)

    async def call_client(self, conn: Any, cmd: RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
        return await conn.invoke(cmd, timeout)

    def notify_client_oneway(self, conn: Any, cmd: RemotingCommand) -> None:
        try:
            conn.invoke_oneway(cmd)
        except MQError as exc:
            log.debug("oneway request %s to %s failed: %s", cmd.code, getattr(conn, "remote_addr", conn), exc)

    def earliest_message_time(self) -> int:
        store = self.store
        if store is None or store.get_max_phy_offset() <= store.get_min_phy_offset():
            return -1
        ts = store.commit_log.store_timestamp_of(store.get_min_phy_offset())
        return -1 if ts is None else ts

    def disk_total_text(self) -> str:
        try:
            usage = shutil.disk_usage(self.store_config.store_path_root_dir)
        except OSError:
            return "unknown"
        return f"{usage.total / 2**30:.2f} GiB, Free : {usage.free / 2**30:.2f} GiB"

    def replace_config(self, **changes: Any) -> None:
        """Apply runtime config changes (UPDATE_BROKER_CONFIG): replaces the frozen config object."""
        self.config = cfg = dataclasses.replace(self.config, **changes)
        for part in (self.topic_config, self.subscription_groups):
            part.config = cfg
        # values the hot paths keep at hand, which RocketMQ re-reads on every use
        self.fast_failure.send_wait_s = cfg.wait_time_mills_in_send_queue / 1000.0
        send = self.send_processor
        if send is not None:
            send.region, send.trace_on, send.fast_failure = cfg.region_id, cfg.trace_on, cfg.broker_fast_failure_enable

    def replace_store_config(self, **changes: Any) -> None:
        """Apply runtime store config changes (UPDATE_BROKER_CONFIG with MessageStoreConfig keys)."""
        self.store_config = dataclasses.replace(self.store_config, **changes)
        self.store.update_config(**changes)

    # -- callbacks ---------------------------------------------------------------------------------------
    def _topics_changed(self, tc: Any) -> None:
        if self._started:
            self.registrar.register_soon(tc)

    def _consumer_ids_changed(self, group: str) -> None:
        info = self.consumers.get(group)
        if info is None:
            return
        ext = NotifyConsumerIdsChangedRequestHeader(group).to_ext()
        for conn in list(info.channels):
            if getattr(conn, "closed", True):
                continue
            self.notify_client_oneway(conn, RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                                    dict(ext)))

    def _connection_closed(self, conn: Any) -> None:
        if self.hold_service is not None:
            self.hold_service.drop_connection(conn)
        self.pop_service.connection_closed(conn)
        self.producers.connection_closed(conn)
        groups = self.consumers.connection_closed(conn)
        if groups:
            log.info("connection %s closed: left consumer groups %s", getattr(conn, "remote_addr", conn), groups)

    def scan_clients(self) -> None:
        exp = self.config.channel_expired_timeout
        now = int(time.time() * 1000)
        for group, cid in self.consumers.scan_expired(exp, now) + self.producers.scan_expired(exp, now):
            log.info("client %s of group %s dropped after %d ms of silence", cid, group, exp)
        if self.grpc is not None:
            self.grpc.tick()

    def _persist_offsets(self) -> None:
        self.offsets.persist()
        self.stats.tick()

    async def _periodic(self, interval_ms: int, fn: Any, what: str) -> None:
        interval = max(0.01, interval_ms / 1000.0)
        while True:
            await asyncio.sleep(interval)
            try:
                fn()
            except Exception:
                log.exception("%s failed", what)
