"""Typed, frozen configuration objects, passed down explicitly (never global).

Each daemon and the client get a dataclass with RocketMQ's defaults (the store's in ``mq.config_store``, the
client library's and the web console's in ``mq.config_client``, the remoting server's shared settings and limits
in ``mq.config_remoting``, all importable from here); YAML files use
RocketMQ's key names (``listenPort``, ``namesrvAddr``, ...). ``load_yaml`` maps those names onto the dataclass fields and rejects
unknown keys with a ``ConfigError`` that names the key and the accepted ones.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mq.config_client import ClientConfig, ConsumerConfig, DashboardConfig, OrderlyConfig, ProducerConfig
from mq.config_remoting import ConnectionLimits, FrameLimits, ProcessorLimits, RemotingServerConfig
from mq.config_store import StoreConfig
from mq.errors import ConfigError

__all__ = ["BROKER_IGNORED_KEYS", "DEFAULT_BROKER_PORT", "DEFAULT_NAMESRV_PORT", "BrokerConfig", "ClientConfig",
           "ConnectionLimits", "ConsumerConfig", "DashboardConfig", "FrameLimits", "NamesrvConfig", "OrderlyConfig",
           "ProcessorLimits", "ProducerConfig", "RemotingServerConfig", "StoreConfig", "broker_configs_from_mapping",
           "from_mapping", "load_yaml"]

T = TypeVar("T")

DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911


@dataclass(frozen=True, slots=True)
class NamesrvConfig(RemotingServerConfig):
    """Name server settings; YAML keys follow RocketMQ's namesrv.conf / NettyServerConfig names."""

    #: Address to bind (``--host`` overrides it).
    host: str = "127.0.0.1"
    #: Port of the remoting server (``--port`` overrides it).
    listen_port: int = DEFAULT_NAMESRV_PORT
    #: A broker not heard from for this long, ms, is dropped (RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME).
    broker_channel_expired_time_ms: int = 120_000
    #: How often the expiry scan runs, ms (RocketMQ: every 10 s).
    scan_not_active_broker_interval_ms: int = 10_000
    #: Route answers carry the topic's ORDER_TOPIC_CONFIG KV entry (orderTopicConf).
    order_message_enable: bool = False
    #: File of the KV config; empty: ``$MQ_HOME/namesrv/kvConfig.json``.
    kv_config_path: str = ""
    #: Most keys the KV config holds (mq's bound; RocketMQ has none); a PUT_KV_CONFIG of a new key past it is refused.
    kv_config_max_entries: int = 100_000
    #: Most bytes of namespaces, keys and values (UTF-8) the KV config holds (mq's bound; RocketMQ has none); a
    #: PUT_KV_CONFIG past it is refused. It also bounds the time one kvConfig.json write or one
    #: GET_KVLIST_BY_NAMESPACE answer takes (about 20 ms for 16 MiB).
    kv_config_max_bytes: int = 16 * 1024 * 1024
    #: The config file the name server was started with (``mq namesrv start --config``), shown by
    #: getNamesrvConfig; empty without one.
    config_store_path: str = ""
    #: Metrics exporter: ``PROM`` serves Prometheus metrics over HTTP, ``DISABLE`` (the default) serves none.
    metrics_exporter_type: str = "DISABLE"
    #: Address the metrics endpoint binds; empty: the name server's own ``host``.
    metrics_prom_exporter_host: str = ""
    #: Port of the name server's metrics endpoint (``/metrics``); 5558, next to a broker's 5557; 0: any free port.
    metrics_prom_exporter_port: int = 5558
    #: Extra labels on every metric, ``key1:value1,key2:value2`` (RocketMQ's metricsLabel).
    metrics_label: str = ""


#: YAML key (RocketMQ spelling) -> field name, for keys whose snake_case form differs.
_ALIASES: dict[str, str] = {
    "listenPort": "listen_port",
    "brokerChannelExpiredTime": "broker_channel_expired_time_ms",
    "scanNotActiveBrokerInterval": "scan_not_active_broker_interval_ms",
    "orderMessageEnable": "order_message_enable",
    "kvConfigPath": "kv_config_path",
    "configStorePath": "config_store_path",
    "bindAddress": "host",
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def from_mapping(cls: type[T], data: dict[str, Any], *, source: str = "config",
                 aliases: dict[str, str] | None = None) -> T:
    """Build ``cls`` from a mapping of RocketMQ-style keys; unknown keys raise ConfigError."""
    names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    table = dict(_ALIASES)
    if aliases:
        table.update(aliases)
    kwargs: dict[str, Any] = {}
    for key, value in (data or {}).items():
        name = table.get(key) or (key if key in names else _snake(key))
        if name not in names:
            accepted = sorted({k for k, v in table.items() if v in names} | set(names))
            raise ConfigError(f"{source}: unknown key {key!r}; accepted keys: {', '.join(accepted)}")
        kwargs[name] = _coerce(names[name], value, key, source)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # pragma: no cover - defensive
        raise ConfigError(f"{source}: {exc}") from exc


def _coerce(f: dataclasses.Field, value: Any, key: str, source: str) -> Any:
    typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        if typ == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if typ == "int":
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if typ == "float":
            return float(value)
        if typ == "str":
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {key} must be a {typ}, got {value!r}") from None
    return value


def load_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML (or RocketMQ ``key=value`` properties) file into a flat mapping."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if isinstance(data, str) and "=" in text:
        # A broker.conf-style properties file: key=value lines.
        data = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            k, v = line.split("=", 1)
            data[k.strip()] = v.strip()
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of keys to values")
    return data


@dataclass(frozen=True, slots=True)
class BrokerConfig(RemotingServerConfig):
    """Broker settings: RocketMQ ``BrokerConfig`` / ``NettyServerConfig`` names in snake_case, 4.9 defaults.

    YAML (or broker.conf) keys use RocketMQ's spelling (``brokerName``, ``listenPort``, ``namesrvAddr``, ...);
    keys naming a ``StoreConfig`` field (``storePathRootDir``, ``flushDiskType``, ``fileReservedTime``, ...) go
    to the store config: ``broker_configs_from_mapping`` splits them. Intervals are milliseconds."""

    #: Name of the master/slave set; a master and its slaves share it.
    broker_name: str = "broker-a"
    #: Cluster the broker registers under.
    broker_cluster_name: str = "DefaultCluster"
    #: 0 for the master, 1 and up for slaves.
    broker_id: int = 0
    #: Address to bind.
    host: str = "127.0.0.1"
    #: Port of the remoting server; the HA port defaults to this plus 1.
    listen_port: int = DEFAULT_BROKER_PORT
    #: Advertised IPv4 (offsetMsgId, STOREHOST, name-server registration); empty: the bind host.
    broker_ip1: str = ""
    #: Name servers, ``;``-separated; empty: do not register.
    namesrv_addr: str = ""
    #: brokerIP2: host of the HA address sent to the name servers; empty: the advertised host
    broker_ip2: str = ""
    #: Region reported in send answers and message traces.
    region_id: str = "DefaultRegion"
    #: Send answers tell clients to trace (traceOn).
    trace_on: bool = True
    #: Broker-wide permission: 6 read and write, 4 read only, 2 write only.
    broker_permission: int = 6
    #: A send to an unknown topic creates it (through the TBW102 template topic).
    auto_create_topic_enable: bool = True
    #: A consumer group is created on first use.
    auto_create_subscription_group: bool = True
    #: Queues of an auto-created topic (and of TBW102).
    default_topic_queue_nums: int = 8
    #: The cluster-name topic is readable and writable.
    cluster_topic_enable: bool = True
    #: The broker-name topic is readable and writable.
    broker_topic_enable: bool = True
    #: Create the trace topic (msgTraceTopicName) on this broker.
    trace_topic_enable: bool = False
    #: Name of the trace topic.
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    #: Refuse transactional (half) messages.
    reject_transaction_message: bool = False
    #: Tell a group's consumers when its membership changes, so they rebalance at once.
    notify_consumer_ids_changed_enable: bool = True
    #: Async send workers; 1 keeps one global FIFO (sends never wait on I/O in a worker).
    send_message_thread_pool_nums: int = 1
    #: Sends waiting for a send worker; beyond it SYSTEM_BUSY.
    send_thread_pool_queue_capacity: int = 10_000
    #: Workers for queries by key and id.
    query_message_thread_pool_nums: int = 4
    #: Queries waiting for a worker; beyond it SYSTEM_BUSY.
    query_thread_pool_queue_capacity: int = 20_000
    #: Workers for admin requests (topics, groups, offsets, stats, config; mqadmin's requests).
    admin_broker_thread_pool_nums: int = 16
    #: Workers for heartbeats that must wait (a new consumer group's retry topic is registered with the name
    #: servers first); the others are answered at once.
    heartbeat_thread_pool_nums: int = 4
    #: Heartbeats waiting for a worker; beyond it SYSTEM_BUSY.
    heartbeat_thread_pool_queue_capacity: int = 50_000
    #: Refuse sends while a put holds the put lock too long (osPageCacheBusyTimeoutMills), and answer sends queued
    #: longer than waitTimeMillsInSendQueue with SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE].
    broker_fast_failure_enable: bool = True
    #: A send queued longer than this, ms, is answered SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE].
    wait_time_mills_in_send_queue: int = 200
    #: How often queued requests are checked against their wait limit (RocketMQ: 10 ms).
    fast_failure_scan_interval_ms: int = 20
    #: Hold a pull that finds nothing for the client's suspend time; off: for shortPollingTimeMills.
    long_polling_enable: bool = True
    #: Hold time of an empty pull when long polling is off, ms.
    short_polling_time_mills: int = 1000
    #: Most pull requests held at once; beyond it a pull with nothing to return is answered at once.
    max_held_pull_requests: int = 10_000
    #: A pull with the SUSPEND flag that would find fewer than pullCoalesceMessages messages (or fewer than it
    #: asks for) waits this long, in microseconds, and is then answered with what was stored meanwhile, or held
    #: if there is still nothing: fewer, fuller answers while consumers keep up (RocketMQ's reput thread batches
    #: new messages 1 ms at a time). 0 answers every pull at once. At most maxHeldPullRequests wait at once.
    pull_coalesce_micros: int = 300
    #: A pull that would find at least this many messages (or all it asks for) is answered at once.
    pull_coalesce_messages: int = 8
    #: SYNC_FLUSH sends waiting for their flush before new sends are made to wait in their worker.
    max_pending_flush_acks: int = 20_000
    #: Period of the full registration with every name server, ms (at most 60 s).
    register_name_server_period: int = 30_000
    #: Timeout of one registration request, ms.
    register_broker_timeout_mills: int = 6000
    #: Send the registration body zlib-compressed.
    compressed_register: bool = False
    #: Periodic registrations send the topic table even when the name server already has its version.
    force_register: bool = True
    #: A client channel silent this long, ms, is dropped (ConsumerManager CHANNEL_EXPIRED_TIMEOUT).
    channel_expired_timeout: int = 120_000
    #: Period of the scan that drops silent client channels, ms.
    client_channel_scan_interval: int = 10_000
    #: Period of writing consumerOffset.json, ms.
    flush_consumer_offset_interval: int = 5000
    #: A queue lock (orderly consumption) not renewed for this long, ms, is free again
    #: (rocketmq.broker.rebalance.lockMaxLiveTime).
    rebalance_lock_max_live_time: int = 60_000
    # -- delivery (retry/DLQ, schedule, transactions, timer) ----------------------------------------------------
    #: delayOffset.json persistence period, ms (ScheduleMessageService: 10 s).
    flush_delay_offset_interval: int = 10_000
    #: Pause of a schedule level's loop when nothing is due (RocketMQ: 100 ms).
    schedule_poll_interval_ms: int = 100
    #: Perm of a %DLQ% topic created on demand: 6 since 4.9.2 (2 before).
    dlq_topic_perm: int = 6
    #: Pause between transaction check passes, ms.
    transaction_check_interval: int = 60_000
    #: A half message younger than this, ms, is not checked (its immunity).
    transaction_time_out: int = 6000
    #: Checks of one half message before it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = 15
    #: Arbitrary delay (``__STARTDELIVERTIME`` / ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC``) on or off.
    timer_enable: bool = True
    #: Farthest accepted deliver time, seconds ahead (30 days); later ones are refused (MESSAGE_ILLEGAL).
    timer_max_delay_sec: int = 30 * 86_400
    #: Timer wheel tick, ms; a message is due in the tick holding its deliver time.
    timer_precision_ms: int = 100
    #: Seconds covered by one timer bucket file (the wheel's slot span on disk).
    timer_bucket_span_sec: int = 60
    #: Timer checkpoint (bucket fsync + checkpoint.json) period, ms.
    timer_flush_interval_ms: int = 500
    #: Parked messages further ahead are re-put (renewed in the commit log) this often; < fileReservedTime.
    timer_roll_window_sec: int = 2 * 86_400
    #: A delivery problem of the timer, schedule or transaction services that repeats (a message set aside
    #: because its real topic is invalid or missing, a put that keeps failing) is logged at most once per this
    #: many milliseconds per kind, with a count of the ones held back in between.
    delivery_error_log_interval_ms: int = 10_000
    #: Request-reply: also store each reply in ``<cluster>_REPLY_TOPIC`` (storeReplyMessageEnable).
    store_reply_message_enable: bool = True
    #: plain ACL (RocketMQ's PlainAccessValidator): requests must be signed by an account of plain_acl.yml
    acl_enable: bool = False
    #: where plain_acl.yml is read from; empty: ``$ROCKETMQ_HOME/conf/plain_acl.yml``, else
    #: ``<storePathRootDir>/conf/plain_acl.yml``
    acl_file: str = ""
    #: SQL92 property filters (expressionType SQL92) on pull and heartbeat
    enable_property_filter: bool = False
    #: SQL92 filters also apply to the group's %RETRY% topic
    filter_support_retry: bool = False
    # -- metrics (RocketMQ 5's BrokerMetricsManager settings) ------------------------------------------------
    #: Metrics exporter: ``PROM`` serves Prometheus metrics over HTTP, ``DISABLE`` (the default) serves none.
    metrics_exporter_type: str = "DISABLE"
    #: Address the metrics endpoint binds; empty: the broker's own ``host`` (bind address).
    metrics_prom_exporter_host: str = ""
    #: Port of the broker's metrics endpoint (``/metrics``); 0: any free port.
    metrics_prom_exporter_port: int = 5557
    #: Extra labels on every metric, ``key1:value1,key2:value2`` (RocketMQ's metricsLabel).
    metrics_label: str = ""
    # -- RocketMQ 5 pop consumption (mq.daemon.broker.pop) ---------------------------------------------------
    #: Pop retry topics are named %RETRY%{group}+{topic} instead of %RETRY%{group}_{topic} (5.3's default)
    enable_retry_topic_v2: bool = False
    #: Percent of pops that read the group's pop retry topic before the topic itself
    pop_from_retry_probability: int = 20
    #: A new pop group starts at offset 0 when the queue's first message is still in memory (else at the end)
    init_pop_offset_by_check_msg_in_mem: bool = True
    #: Stop popping a queue for a group while it has more than popInflightMessageThreshold un-acked messages
    enable_pop_message_threshold: bool = True
    #: Un-acked (popped, not yet acked or revived) messages per group and queue before pops skip the queue
    pop_inflight_message_threshold: int = 10_000
    #: Held (long-polling) pop requests in total; beyond it a pop with nothing to return gets POLLING_FULL
    max_pop_polling_size: int = 100_000
    #: Held pop requests per topic and group; beyond it POLLING_FULL
    pop_polling_size: int = 1024
    #: Longest pollTime a pop may ask for, ms (longer ones are cut to it)
    pop_max_poll_time_ms: int = 60_000
    #: Longest invisible time a pop or change-invisible-time may ask for, ms (12 h; must stay below
    #: fileReservedTime, as the checkpoint that brings a message back lives in the commit log)
    max_invisible_time_mills: int = 12 * 3_600_000
    #: Pop revive tick, ms: an un-acked message comes back within this (plus popReviveMarginMs) of its time
    pop_revive_precision_ms: int = 100
    #: Seconds of revive times held by one pop revive bucket file
    pop_revive_bucket_span_sec: int = 60
    #: Pop revive checkpoint (bucket fsync, offsets, order info, checkpoint.json) period, ms
    pop_revive_flush_interval_ms: int = 500
    #: A due checkpoint waits this much longer (ms) before its un-acked messages are revived (clock jitter)
    pop_revive_margin_ms: int = 200
    #: Receipt handles remembered as acked or replaced until they expire, so a late ack of a replaced handle
    #: answers INVALID and a change of a finished one is refused; beyond this many the oldest are forgotten
    pop_finished_handles: int = 100_000
    # -- gRPC endpoint (RocketMQ 5 clients; mq.daemon.proxy) ------------------------------------------------------
    #: Port of the gRPC endpoint for RocketMQ 5.x clients (RocketMQ proxy's grpcServerPort); -1: no gRPC
    #: endpoint; 0: any free port (also what a broker on an ephemeral listenPort 0 gets with the default 8081).
    grpc_server_port: int = 8081
    #: Address the gRPC endpoint binds; empty: the broker's bind address (``host``).
    grpc_bind_address: str = ""
    #: Most gRPC client sessions (distinct x-mq-client-id) served at once; beyond it new clients get TOO_MANY_REQUESTS.
    grpc_max_sessions: int = 10_000
    #: Seconds a QueryRoute answer built from the name server's route is reused.
    grpc_route_cache_seconds: float = 5.0
    #: Shortest invisible time a ReceiveMessage may ask for, ms (RocketMQ proxy: 10 s).
    grpc_min_invisible_time_ms: int = 10_000
    #: Longest invisible time a ReceiveMessage or ChangeInvisibleDuration may ask for, ms (12 h).
    grpc_max_invisible_time_ms: int = 12 * 3_600_000
    #: Invisible time given to push consumers' messages (auto_renew), ms; renewed while the client holds them.
    grpc_default_invisible_time_ms: int = 60_000
    #: Renew an auto-renewed message this long before its invisible time ends, ms.
    grpc_renew_ahead_ms: int = 10_000
    #: Stop renewing a message a push consumer has held this long, ms (RocketMQ: 3 h).
    grpc_renew_max_hold_ms: int = 3 * 3_600_000
    #: Shortest long polling of a ReceiveMessage, ms (RocketMQ proxy: 5 s); a call with less time left fails.
    grpc_min_long_polling_ms: int = 5_000
    #: Longest long polling of a ReceiveMessage, ms (RocketMQ proxy: 20 s); also what Settings tell consumers.
    grpc_max_long_polling_ms: int = 20_000
    #: Messages returned by one ReceiveMessage at most (RocketMQ: 32).
    grpc_max_receive_batch: int = 32

    @property
    def advertised_host(self) -> str:
        return self.broker_ip1 or self.host

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]


_BROKER_ALIASES: dict[str, str] = {
    "brokerIP1": "broker_ip1",
    "brokerIP2": "broker_ip2",
    "brokerClusterName": "broker_cluster_name",
    "namesrvAddr": "namesrv_addr",
    "listenPort": "listen_port",
    "bindAddress": "host",
    "rocketmqBrokerRebalanceLockMaxLiveTime": "rebalance_lock_max_live_time",
}
#: StoreConfig keys RocketMQ spells otherwise than the camelCase of the field.
_STORE_ALIASES: dict[str, str] = {
    "osPageCacheBusyTimeOutMills": "os_page_cache_busy_timeout_mills",
    "checkCRCOnRecover": "check_crc_on_recover",
}
#: broker.conf keys RocketMQ has that mean nothing for this broker; accepted and ignored.
#: ``brokerSuspendMaxTimeMillis`` capped held pulls in earlier versions of mq; RocketMQ's broker has no such cap
#: (the name is a client setting), so the key is accepted from old configs and ignored.
BROKER_IGNORED_KEYS = frozenset({"deleteWhenHour", "brokerRole_",
                                 "pullMessageThreadPoolNums",
                                 "useEpollNativeSelector", "serverWorkerThreads",
                                 "brokerSuspendMaxTimeMillis"})


def broker_configs_from_mapping(data: dict[str, Any], *, source: str = "config",
                                base_store: "StoreConfig | None" = None) -> tuple[BrokerConfig, "StoreConfig"]:
    """Split a broker.conf/YAML mapping into (BrokerConfig, StoreConfig); unknown keys raise ConfigError."""
    store_names = {f.name for f in dataclasses.fields(StoreConfig)}
    broker_names = {f.name for f in dataclasses.fields(BrokerConfig)}
    broker_part: dict[str, Any] = {}
    store_part: dict[str, Any] = {}
    for key, value in (data or {}).items():
        if key in BROKER_IGNORED_KEYS:
            continue
        bname = _BROKER_ALIASES.get(key) or (key if key in broker_names else _snake(key))
        if bname in broker_names:
            broker_part[key] = value
            continue
        sname = _STORE_ALIASES.get(key) or (key if key in store_names else _snake(key))
        if sname in store_names:
            store_part[sname] = value
            continue
        accepted = sorted(set(_BROKER_ALIASES) | set(_STORE_ALIASES) | broker_names | store_names)
        raise ConfigError(f"{source}: unknown key {key!r}; accepted keys: {', '.join(accepted)}")
    broker = from_mapping(BrokerConfig, broker_part, source=source, aliases=_BROKER_ALIASES)
    store = from_mapping(StoreConfig, store_part, source=source, aliases=_STORE_ALIASES)
    if base_store is not None:
        store = dataclasses.replace(base_store, **{k: getattr(store, k) for k in store_part})
    return broker, store
