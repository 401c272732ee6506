"""Typed, frozen configuration objects, passed down explicitly (never global).

Each daemon and the client get a dataclass with RocketMQ's defaults; YAML files use RocketMQ's key names
(``listenPort``, ``namesrvAddr``, ...). ``load_yaml`` maps those names onto the dataclass fields and rejects
unknown keys with a ``ConfigError`` that names the key and the accepted ones.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mq.errors import ConfigError

T = TypeVar("T")

DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911


@dataclass(frozen=True, slots=True)
class FrameLimits:
    """Limits the frame decoder enforces before it allocates anything (PROTOCOL.md §1)."""

    max_frame: int = 16 * 1024 * 1024  # RocketMQ's com.rocketmq.remoting.frameMaxLength
    max_header: int = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessorLimits:
    """Bounded concurrency and queue for one request-code group on a server."""

    concurrency: int = 16
    queue_capacity: int = 10000


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-connection memory bounds and idle policy of the remoting transport (mq/remoting)."""

    #: Requests handed to async handlers and not yet finished; at this count the connection stops reading.
    max_inflight: int = 1024
    #: Transport write-buffer marks: above ``write_high_water`` a server connection stops reading.
    write_high_water: int = 4 * 1024 * 1024
    write_low_water: int = 1024 * 1024
    #: A server connection with no read or write for this many seconds is closed (0 disables).
    idle_timeout: float = 120.0


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """Name server settings; YAML keys follow RocketMQ's namesrv.conf / NettyServerConfig names."""

    host: str = "127.0.0.1"
    listen_port: int = DEFAULT_NAMESRV_PORT
    #: A broker not heard from for this long is dropped (RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME).
    broker_channel_expired_time_ms: int = 120_000
    #: How often the expiry scan runs (RocketMQ: every 10 s).
    scan_not_active_broker_interval_ms: int = 10_000
    order_message_enable: bool = False
    kv_config_path: str = ""
    frame_limits: FrameLimits = field(default_factory=FrameLimits)


#: YAML key (RocketMQ spelling) -> field name, for keys whose snake_case form differs.
_ALIASES: dict[str, str] = {
    "listenPort": "listen_port",
    "brokerChannelExpiredTime": "broker_channel_expired_time_ms",
    "scanNotActiveBrokerInterval": "scan_not_active_broker_interval_ms",
    "orderMessageEnable": "order_message_enable",
    "kvConfigPath": "kv_config_path",
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
class StoreConfig:
    """Message store settings: RocketMQ ``MessageStoreConfig`` names in snake_case, 4.9 defaults (STORE.md §15).

    Sizes are bytes, intervals milliseconds, ``file_reserved_time`` hours, ratios percent unless named ``*_ratio``
    as a fraction (the two RocketMQ system properties)."""

    store_path_root_dir: str = str(Path.home() / "store")
    #: Empty: ``<root>/commitlog``.
    store_path_commit_log: str = ""
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    #: 300,000 units of 20 bytes; rounded up to a multiple of 20.
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = "ASYNC_FLUSH"  # or SYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    check_crc_on_recover: bool = True
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    file_reserved_time: int = 72
    clean_resource_interval: int = 10_000
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    destroy_maped_file_interval_forcibly: int = 120_000
    clean_file_forcibly_enable: bool = True
    #: rocketmq.broker.diskSpaceCleanForciblyRatio
    disk_space_clean_forcibly_ratio: float = 0.85
    #: rocketmq.broker.diskSpaceWarningLevelRatio: above it, writes are refused.
    disk_space_warning_level_ratio: float = 0.90
    max_transfer_bytes_on_message_in_memory: int = 262_144
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 65_536
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    message_index_enable: bool = True
    message_index_safe: bool = False
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    broker_role: str = "ASYNC_MASTER"
    #: a slave also corrects moved pull offsets (and stores an OffsetMovedEvent) instead of retrying
    offset_check_in_slave: bool = False
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    os_page_cache_busy_timeout_mills: int = 1000
    duplication_enable: bool = False
    warm_maped_file_enable: bool = False
    #: bring the commit log's pages into the page cache this many bytes ahead of the writer, in a background
    #: thread, so puts take no allocating page faults (``mq.store.warm``: MADV_POPULATE_READ where Linux has it,
    #: else zero-fill; warmMapedFileEnable warms whole segments). -1 (the default) lets the flush mode choose:
    #: 16 MiB under ASYNC_FLUSH where the kernel can populate (puts stop paying for fresh pages, which on some
    #: VMs costs them a third of their rate), off under SYNC_FLUSH (the thread competes with the group commit
    #: for the second core: 91-92 k against 111-115 k msg/s from 64 writers); 0 is off.
    warm_ahead_bytes: int = -1
    transient_store_pool_enable: bool = False
    # -- HA: master/slave replication (STORE.md §13; mq.daemon.broker.ha) ---------------------------------------
    #: haListenPort: -1 = listenPort + 1 (what BrokerStartup sets), 0 = an ephemeral port (tests)
    ha_listen_port: int = -1
    #: haMasterAddress ``host:port`` of the master's HA port; empty: learnt from the name server's answer
    ha_master_address: str = ""
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    #: SYNC_MASTER: a slave further behind than this is "not available"
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    #: slaveReadEnable: masters may suggest pulling from a slave, slaves serve pulls
    slave_read_enable: bool = False
    #: SlaveSynchronize period (RocketMQ: 10 s, first run after 3 s); tests shorten it
    slave_sync_interval: int = 10_000

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type.upper() == "SYNC_FLUSH"

    def commit_log_dir(self) -> Path:
        if self.store_path_commit_log:
            return Path(self.store_path_commit_log.split(",")[0])
        return Path(self.store_path_root_dir) / "commitlog"

    def consume_queue_unit_file_size(self) -> int:
        """``mapped_file_size_consume_queue`` rounded up to whole 20-byte units."""
        return -(-self.mapped_file_size_consume_queue // 20) * 20

    def delay_level_millis(self) -> list[int]:
        """Level 1.. -> delay in ms, parsed from ``message_delay_level`` (s, m, h, d suffixes)."""
        unit = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        out = []
        for tok in self.message_delay_level.split():
            try:
                out.append(int(tok[:-1]) * unit[tok[-1]])
            except (KeyError, ValueError):
                raise ConfigError(f"messageDelayLevel: bad level {tok!r}") from None
        return out


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What every client (producer, consumer) of one ``MQClientInstance`` shares: RocketMQ ``ClientConfig``.

    Intervals are seconds (RocketMQ's are ms: ``pollNameServerInterval`` 30000 -> 30.0)."""

    namesrv_addr: str = "127.0.0.1:9876"
    #: Empty: the first non-loopback IPv4 address of this host (RocketMQ ``RemotingUtil.getLocalAddress``).
    client_ip: str = ""
    #: "DEFAULT" becomes the PID, as in Java; give each client in one process its own name to get its own id.
    instance_name: str = "DEFAULT"
    unit_name: str = ""
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    #: rocketmq.client.rebalance.waitInterval
    rebalance_interval: float = 20.0
    #: Delay before retrying a pull or a send-back after an exception (pullTimeDelayMillsWhenException).
    pull_time_delay_when_exception: float = 1.0
    connect_timeout: float = 3.0
    #: Timeout of admin-style calls to brokers and name servers (offset queries, heartbeats, route lookups).
    call_timeout: float = 3.0
    #: BROADCASTING offsets: <dir>/<clientId>/<group>/offsets.json (rocketmq.client.localOffsetStoreDir).
    local_offset_store_dir: str = str(Path.home() / ".rocketmq_offsets")
    #: Largest body, in bytes, a consumer inflates from a compressed message; a body that would inflate past
    #: it is skipped with a WARNING, as a zlib bomb (4 MiB of zlib can inflate to 4 GiB). Producers check
    #: maxMessageSize (4 MiB by default) before they compress, so real bodies stay far below.
    max_inflated_body_size: int = 64 * 1024 * 1024
    #: ACL: with an access key every request is signed (RocketMQ's AclClientRPCHook)
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    security_token: str = field(default="", repr=False)

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """``DefaultMQProducer`` settings (FEATURES.md §6.1); timeouts in seconds."""

    group: str = "DEFAULT_PRODUCER"
    send_msg_timeout: float = 3.0
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    max_message_size: int = 4 * 1024 * 1024
    default_topic_queue_nums: int = 4
    create_topic_key: str = "TBW102"
    send_latency_fault_enable: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """``DefaultMQPushConsumer`` settings (FEATURES.md §5.6); times in seconds.

    ``message_model``: "CLUSTERING" or "BROADCASTING"; ``consume_from_where``: "LAST", "FIRST" or "TIMESTAMP"
    (``consume_timestamp`` as RocketMQ's yyyyMMddHHmmss, empty = 30 minutes ago)."""

    group: str = "DEFAULT_CONSUMER"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "LAST"
    consume_timestamp: str = ""
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100 * 1024 * 1024
    consume_concurrently_max_span: int = 2000
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    pull_interval: float = 0.0
    flow_control_delay: float = 0.05
    broker_suspend_max_time: float = 15.0
    consumer_timeout_when_suspend: float = 30.0
    #: -1: 16 (the broker's retryMaxTimes).
    max_reconsume_times: int = -1
    #: Local re-consume delay when a send-back fails (Java: 5 s).
    local_retry_delay: float = 5.0
    post_subscription_when_pull: bool = True
    #: MessageListenerOrderly: queue-locked, one batch at a time per queue (timings in ``OrderlyConfig``).
    consume_orderly: bool = False


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Broker settings: RocketMQ ``BrokerConfig`` / ``NettyServerConfig`` names in snake_case, 4.9 defaults.

    YAML (or broker.conf) keys use RocketMQ's spelling (``brokerName``, ``listenPort``, ``namesrvAddr``, ...);
    keys naming a ``StoreConfig`` field (``storePathRootDir``, ``flushDiskType``, ``fileReservedTime``, ...) go
    to the store config: ``broker_configs_from_mapping`` splits them. Intervals are milliseconds."""

    broker_name: str = "broker-a"
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    #: Address to bind.
    host: str = "127.0.0.1"
    listen_port: int = DEFAULT_BROKER_PORT
    #: Advertised IPv4 (offsetMsgId, STOREHOST, name-server registration); empty: the bind host.
    broker_ip1: str = ""
    #: Name servers, ``;``-separated; empty: do not register.
    namesrv_addr: str = ""
    #: brokerIP2: host of the HA address sent to the name servers; empty: the advertised host
    broker_ip2: str = ""
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    reject_transaction_message: bool = False
    notify_consumer_ids_changed_enable: bool = True
    #: Async send workers; 1 keeps one global FIFO (sends never wait on I/O in a worker).
    send_message_thread_pool_nums: int = 1
    send_thread_pool_queue_capacity: int = 10_000
    query_message_thread_pool_nums: int = 4
    query_thread_pool_queue_capacity: int = 20_000
    broker_fast_failure_enable: bool = True
    wait_time_mills_in_send_queue: int = 200
    #: How often queued requests are checked against their wait limit (RocketMQ: 10 ms).
    fast_failure_scan_interval_ms: int = 20
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    #: Upper bound of a pull's hold time, whatever the client asks.
    broker_suspend_max_time_millis: int = 15_000
    #: Most pull requests held at once; beyond it a pull with nothing to return is answered at once.
    max_held_pull_requests: int = 10_000
    #: SYNC_FLUSH sends waiting for their flush before new sends are made to wait in their worker.
    max_pending_flush_acks: int = 20_000
    register_name_server_period: int = 30_000
    register_broker_timeout_mills: int = 6000
    compressed_register: bool = False
    force_register: bool = True
    #: A client channel silent this long is dropped (ConsumerManager CHANNEL_EXPIRED_TIMEOUT).
    channel_expired_timeout: int = 120_000
    client_channel_scan_interval: int = 10_000
    flush_consumer_offset_interval: int = 5000
    #: rocketmq.broker.rebalance.lockMaxLiveTime
    rebalance_lock_max_live_time: int = 60_000
    #: Connections with no traffic for this many seconds are closed (serverChannelMaxIdleTimeSeconds).
    server_channel_max_idle_time_seconds: int = 120
    frame_limits: FrameLimits = field(default_factory=FrameLimits)
    # -- delivery (retry/DLQ, schedule, transactions, timer): the DELIVERY helper's additions ------------------
    #: delayOffset.json persistence period (ScheduleMessageService: 10 s).
    flush_delay_offset_interval: int = 10_000
    #: Pause of a schedule level's loop when nothing is due (RocketMQ: 100 ms).
    schedule_poll_interval_ms: int = 100
    #: Perm of a %DLQ% topic created on demand: 6 since 4.9.2 (2 before).
    dlq_topic_perm: int = 6
    #: Pause between transaction check passes.
    transaction_check_interval: int = 60_000
    #: A half message younger than this is not checked (its immunity).
    transaction_time_out: int = 6000
    #: Checks of one half message before it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = 15
    #: Arbitrary delay (``__STARTDELIVERTIME`` / ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC``) on or off.
    timer_enable: bool = True
    #: Farthest accepted deliver time, seconds ahead (30 days); later ones are refused (MESSAGE_ILLEGAL).
    timer_max_delay_sec: int = 30 * 86_400
    #: Timer wheel tick; a message is due in the tick holding its deliver time.
    timer_precision_ms: int = 100
    #: Seconds covered by one timer bucket file (the wheel's slot span on disk).
    timer_bucket_span_sec: int = 60
    #: Timer checkpoint (bucket fsync + checkpoint.json) period.
    timer_flush_interval_ms: int = 500
    #: Parked messages further ahead are re-put (renewed in the commit log) this often; < fileReservedTime.
    timer_roll_window_sec: int = 2 * 86_400
    #: Request-reply: also store each reply in ``<cluster>_REPLY_TOPIC`` (storeReplyMessageEnable).
    store_reply_message_enable: bool = True
    #: plain ACL (RocketMQ's PlainAccessValidator): requests must be signed by an account of plain_acl.yml
    acl_enable: bool = False
    #: where plain_acl.yml is read from; empty: $ROCKETMQ_HOME/conf/plain_acl.yml, else <store root>/conf/plain_acl.yml
    acl_file: str = ""
    #: SQL92 property filters (expressionType SQL92) on pull and heartbeat
    enable_property_filter: bool = False
    #: SQL92 filters also apply to the group's %RETRY% topic
    filter_support_retry: bool = False

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
#: broker.conf keys RocketMQ has that mean nothing for this broker; accepted and ignored.
BROKER_IGNORED_KEYS = frozenset({"deleteWhenHour", "brokerRole_",
                                 "pullMessageThreadPoolNums",
                                 "useEpollNativeSelector", "serverWorkerThreads"})


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
        if bname in broker_names and bname != "frame_limits":
            broker_part[key] = value
            continue
        sname = key if key in store_names else _snake(key)
        if sname in store_names:
            store_part[sname] = value
            continue
        accepted = sorted(set(_BROKER_ALIASES) | {n for n in broker_names if n != "frame_limits"} | store_names)
        raise ConfigError(f"{source}: unknown key {key!r}; accepted keys: {', '.join(accepted)}")
    broker = from_mapping(BrokerConfig, broker_part, source=source, aliases=_BROKER_ALIASES)
    store = from_mapping(StoreConfig, store_part, source=source)
    if base_store is not None:
        store = dataclasses.replace(base_store, **{k: getattr(store, k) for k in store_part})
    return broker, store


@dataclass(frozen=True, slots=True)
class OrderlyConfig:
    """Orderly push consumption (``ConsumeMessageOrderlyService``, ``ProcessQueue``, ``RebalancePushImpl``),
    RocketMQ 4.9 defaults in seconds; tests shorten them."""

    #: suspendCurrentQueueTimeMillis: pause of a queue after SUSPEND_CURRENT_QUEUE_A_MOMENT (clamped 0.01..30).
    suspend_current_queue_time: float = 1.0
    #: REBALANCE_LOCK_INTERVAL: LOCK_BATCH_MQ of every owned queue this often (the first after 1 s).
    lock_interval: float = 20.0
    #: REBALANCE_LOCK_MAX_LIVE_TIME: a client-side lock not renewed for this long no longer allows consuming.
    lock_max_live_time: float = 30.0
    #: Wait before pulling again a queue that is not locked, or re-locking after a failed lock (3000 ms).
    lock_retry_delay: float = 3.0
    #: UNLOCK_DELAY_TIME_MILLS: a removed queue that still had cached messages is unlocked this much later.
    unlock_delay: float = 20.0
    #: How long a rebalance waits for a removed queue's in-flight batch before trying again next time (1000 ms).
    consume_lock_wait: float = 1.0
    #: MAX_TIME_CONSUME_CONTINUOUSLY: one queue yields to the others after consuming this long.
    max_time_consume_continuously: float = 60.0
