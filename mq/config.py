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

    #: Largest frame accepted, bytes (RocketMQ's com.rocketmq.remoting.frameMaxLength); a longer frame closes the
    #: connection.
    max_frame: int = 16 * 1024 * 1024
    #: Largest header inside a frame, bytes.
    max_header: int = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessorLimits:
    """Bounded concurrency and queue for one request-code group on a server."""

    #: Workers serving this group's requests at once.
    concurrency: int = 16
    #: Requests waiting for a worker; beyond it a request is answered SYSTEM_BUSY [OVERLOAD].
    queue_capacity: int = 10000


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Memory and time bounds of the remoting transport (mq/remoting), per connection and per server.

    "Pending" bytes of a connection are its unsent output (our buffer plus the transport's) plus the frames of
    its requests that handlers hold (queued to or running in async handlers). While they are at or above
    ``write_high_water`` the connection's requests are not handed to handlers and it is not read; it resumes at
    ``write_low_water``. Seconds of 0 disable the timer they name."""

    #: Requests handed to async handlers and not yet finished; at this count the connection stops reading.
    max_inflight: int = 1024
    #: Pending bytes at which a server connection stops being served and read.
    write_high_water: int = 4 * 1024 * 1024
    #: Pending bytes at which a stopped server connection is served and read again.
    write_low_water: int = 1024 * 1024
    #: Pending bytes of all connections of a server together: above it no request is handed to a handler and
    #: the connection with the most unsent output among those whose peer does not read is closed.
    max_total_output: int = 256 * 1024 * 1024
    #: Seconds a connection may stay above ``write_high_water`` without its peer reading anything; then it is
    #: closed.
    write_stall_timeout: float = 30.0
    #: A server connection with no whole frame read and nothing written for this many seconds is closed; bytes
    #: of an unfinished frame do not count as traffic.
    idle_timeout: float = 120.0
    #: Seconds within which a frame must arrive whole once its first byte has come; then the connection is
    #: closed.
    frame_timeout: float = 30.0
    #: Bytes of unfinished frames held for all connections of a server together; the connection whose read
    #: goes over it is closed.
    max_total_partial: int = 256 * 1024 * 1024
    #: Request bodies larger than this many bytes are decoded off the event loop (a worker thread), where the
    #: handler supports it.
    offload_body_threshold: int = 256 * 1024
    #: Seconds between two log records of the same kind of bad request (malformed frames, unparsable headers,
    #: refused connections); the ones in between are counted.
    bad_request_log_interval: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_inflight", "write_high_water", "max_total_output", "max_total_partial"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.write_low_water <= self.write_high_water:
            raise ConfigError(f"write_low_water ({self.write_low_water}) must be between 0 and write_high_water "
                              f"({self.write_high_water})")
        for name in ("write_stall_timeout", "idle_timeout", "frame_timeout", "bad_request_log_interval",
                     "offload_body_threshold"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must not be negative, got {getattr(self, name)}")


_CL = ConnectionLimits()
_FL = FrameLimits()
#: ConnectionLimits field -> the YAML key that sets it (for error messages)
_LIMIT_KEYS = {"max_inflight": "maxInflightRequestsPerChannel", "write_high_water": "writeBufferHighWaterMark",
               "write_low_water": "writeBufferLowWaterMark", "max_total_output": "writeBufferTotalLimit",
               "max_total_partial": "partialFrameTotalLimit", "write_stall_timeout": "writeStallTimeoutSeconds",
               "idle_timeout": "serverChannelMaxIdleTimeSeconds", "frame_timeout": "frameCompleteTimeoutSeconds",
               "bad_request_log_interval": "badRequestLogIntervalSeconds",
               "offload_body_threshold": "heavyBodyThreshold"}


@dataclass(frozen=True, slots=True)
class RemotingServerConfig:
    """The listener settings both daemons share (RocketMQ ``NettyServerConfig`` names where it has them).

    ``frame_limits`` and ``connection_limits`` turn them into what ``mq.remoting`` takes."""

    #: serverChannelMaxIdleTimeSeconds: a connection with no whole request read and nothing written for this
    #: many seconds is closed (a frame trickled byte by byte does not keep it open); 0 never closes one.
    server_channel_max_idle_time_seconds: int = int(_CL.idle_timeout)
    #: frameMaxLength (com.rocketmq.remoting.frameMaxLength): largest frame in bytes; a longer one closes the
    #: connection.
    frame_max_length: int = _FL.max_frame
    #: Largest frame header in bytes; a longer one closes the connection.
    frame_max_header_length: int = _FL.max_header
    #: Seconds a frame may take to arrive whole once its first byte came; then the connection is closed.
    frame_complete_timeout_seconds: float = _CL.frame_timeout
    #: Bytes of unfinished frames held for all connections together; the connection whose read goes over it is
    #: closed.
    partial_frame_total_limit: int = _CL.max_total_partial
    #: writeBufferHighWaterMark: a connection with this many bytes of unsent answers and unanswered requests is
    #: neither read nor served until it drops to writeBufferLowWaterMark.
    write_buffer_high_water_mark: int = _CL.write_high_water
    #: writeBufferLowWaterMark: see writeBufferHighWaterMark (bytes).
    write_buffer_low_water_mark: int = _CL.write_low_water
    #: Bytes of unsent answers and unanswered requests of all connections together; above it no request is
    #: served and the connection holding the most output its peer does not read is closed.
    write_buffer_total_limit: int = _CL.max_total_output
    #: Seconds a connection may stay over writeBufferHighWaterMark while its peer reads nothing; then it is
    #: closed. 0 never closes one.
    write_stall_timeout_seconds: float = _CL.write_stall_timeout
    #: Requests of one connection queued to or running in worker pools; at this count it is no longer read.
    max_inflight_requests_per_channel: int = _CL.max_inflight
    #: Request bodies (heartbeats, lock batches, broker registrations) larger than this many bytes are decoded in
    #: a worker thread, so one large request does not hold up other connections.
    heavy_body_threshold: int = _CL.offload_body_threshold
    #: Seconds between two log records of one kind of bad request (malformed frame, unparsable header, refused
    #: connection); the ones in between are counted in the next record.
    bad_request_log_interval_seconds: float = _CL.bad_request_log_interval

    def __post_init__(self) -> None:
        try:
            self.connection_limits
        except ConfigError as exc:  # name the keys the operator wrote
            text = str(exc)
            for name, key in _LIMIT_KEYS.items():
                text = text.replace(name, key)
            raise ConfigError(text) from None
        if self.frame_max_length < 16 or not 0 < self.frame_max_header_length <= self.frame_max_length:
            raise ConfigError(f"frameMaxHeaderLength ({self.frame_max_header_length}) must be positive and at most "
                              f"frameMaxLength ({self.frame_max_length})")

    @property
    def frame_limits(self) -> FrameLimits:
        return FrameLimits(max_frame=self.frame_max_length, max_header=self.frame_max_header_length)

    @property
    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(max_inflight=self.max_inflight_requests_per_channel,
                                write_high_water=self.write_buffer_high_water_mark,
                                write_low_water=self.write_buffer_low_water_mark,
                                max_total_output=self.write_buffer_total_limit,
                                write_stall_timeout=float(self.write_stall_timeout_seconds),
                                idle_timeout=float(self.server_channel_max_idle_time_seconds),
                                frame_timeout=float(self.frame_complete_timeout_seconds),
                                max_total_partial=self.partial_frame_total_limit,
                                offload_body_threshold=self.heavy_body_threshold,
                                bad_request_log_interval=float(self.bad_request_log_interval_seconds))


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

    #: Store root: commitlog/, consumequeue/, index/, config/ and the checkpoint (``mq broker`` defaults it to
    #: ``$MQ_HOME/store``; ``--store`` overrides it).
    store_path_root_dir: str = str(Path.home() / "store")
    #: Directory of the commit log; empty: ``<storePathRootDir>/commitlog``.
    store_path_commit_log: str = ""
    #: Size of one commit-log segment, bytes. A store must be opened with the size it was written with.
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    #: Size of one consume-queue segment, bytes: 300,000 units of 20 bytes (rounded up to a multiple of 20). A store
    #: must be opened with the size it was written with.
    mapped_file_size_consume_queue: int = 300_000 * 20
    #: ASYNC_FLUSH: answer once the page cache holds the message; SYNC_FLUSH: after fdatasync (group commit).
    flush_disk_type: str = "ASYNC_FLUSH"  # or SYNC_FLUSH
    #: ASYNC_FLUSH: period of the commit log's flush thread, ms.
    flush_interval_commit_log: int = 500
    #: ASYNC_FLUSH: a periodic flush writes back only when at least this many 4 KiB pages are dirty.
    flush_commit_log_least_pages: int = 4
    #: ASYNC_FLUSH: the flush writes back everything at least this often, however few pages are dirty, ms.
    flush_commit_log_thorough_interval: int = 10_000
    #: Period of the consume-queue flush thread, ms.
    flush_interval_consume_queue: int = 1000
    #: A periodic consume-queue flush writes back only when at least this many 4 KiB pages are dirty.
    flush_consume_queue_least_pages: int = 2
    #: Consume queues are flushed whole at least this often, ms.
    flush_consume_queue_thorough_interval: int = 60_000
    #: SYNC_FLUSH (and SYNC_MASTER): a send not flushed (replicated) within this many ms is answered
    #: FLUSH_DISK_TIMEOUT (FLUSH_SLAVE_TIMEOUT).
    sync_flush_timeout: int = 5000
    #: Largest message body accepted, bytes.
    max_message_size: int = 4 * 1024 * 1024
    #: Crash recovery checks every record's body CRC.
    check_crc_on_recover: bool = True
    #: Hours (``04``, or several as ``04;16``) at which expired commit-log segments are deleted.
    delete_when: str = "04"
    #: Disk use, percent, above which expired segments are deleted at any hour.
    disk_max_used_space_ratio: int = 75
    #: Commit-log segments are kept at least this many hours (retention).
    file_reserved_time: int = 72
    #: Period of the retention and disk-space check, ms.
    clean_resource_interval: int = 10_000
    #: Accepted from RocketMQ's broker.conf; not used (segments are deleted at most 10 per pass).
    delete_commit_log_files_interval: int = 100
    #: Accepted from RocketMQ's broker.conf; not used.
    delete_consume_queue_files_interval: int = 100
    #: Accepted from RocketMQ's broker.conf; not used.
    destroy_maped_file_interval_forcibly: int = 120_000
    #: Above diskSpaceCleanForciblyRatio, delete segments that have not expired yet, oldest first.
    clean_file_forcibly_enable: bool = True
    #: Disk use (a fraction) above which segments are deleted before they expire
    #: (rocketmq.broker.diskSpaceCleanForciblyRatio).
    disk_space_clean_forcibly_ratio: float = 0.85
    #: rocketmq.broker.diskSpaceWarningLevelRatio: above it, writes are refused.
    disk_space_warning_level_ratio: float = 0.90
    #: Bytes one pull returns at most while its messages lie within accessMessageInMemoryMaxRatio of RAM of the
    #: log's end.
    max_transfer_bytes_on_message_in_memory: int = 262_144
    #: Messages one pull returns at most while they lie within accessMessageInMemoryMaxRatio of RAM of the log's end.
    max_transfer_count_on_message_in_memory: int = 32
    #: Bytes one pull returns at most once its messages lie further behind the log's end.
    max_transfer_bytes_on_message_in_disk: int = 65_536
    #: Messages one pull returns at most once they lie further behind the log's end.
    max_transfer_count_on_message_in_disk: int = 8
    #: Percent of RAM: messages further behind the log's end count as on disk (smaller pulls; with slaveReadEnable
    #: the consumer is pointed at a slave); a slave uses this minus 10.
    access_message_in_memory_max_ratio: int = 40
    #: Build the key index (index/ files) for queries by key and by unique key.
    message_index_enable: bool = True
    #: Crash recovery starts no later than the index checkpoint, so index entries lost in the crash are rebuilt.
    message_index_safe: bool = False
    #: Hash slots per index file; with maxIndexNum it fixes an index file's size (420 MB by default).
    max_hash_slot_num: int = 5_000_000
    #: Entries per index file.
    max_index_num: int = 20_000_000
    #: Most messages one query by key returns.
    max_msgs_num_batch: int = 64
    #: Most messages a query by unique key (message id) returns.
    default_query_max_num: int = 32
    #: ASYNC_MASTER, SYNC_MASTER (a send is answered once a slave holds it) or SLAVE.
    broker_role: str = "ASYNC_MASTER"
    #: a slave also corrects moved pull offsets (and stores an OffsetMovedEvent) instead of retrying
    offset_check_in_slave: bool = False
    #: Delay of each level 1, 2, ... (suffixes s, m, h, d); retries use levels 3 and up.
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    #: While a put has held the put lock longer than this, ms, puts are refused OS_PAGECACHE_BUSY and (with
    #: brokerFastFailureEnable) sends SYSTEM_BUSY.
    os_page_cache_busy_timeout_mills: int = 1000
    #: Accepted from RocketMQ's broker.conf; not used.
    duplication_enable: bool = False
    #: Warm whole commit-log segments ahead of the writer (overrides warmAheadBytes).
    warm_maped_file_enable: bool = False
    #: Bring the commit log's pages into the page cache this many bytes ahead of the writer, in a background
    #: thread, so puts take no allocating page faults (``mq.store.warm``: MADV_POPULATE_READ where Linux has it,
    #: else zero-fill). -1 lets the flush mode choose: 16 MiB under ASYNC_FLUSH where the kernel can populate, off
    #: under SYNC_FLUSH (the thread would take the second core from the group commit); 0 is off.
    warm_ahead_bytes: int = -1
    #: Accepted from RocketMQ's broker.conf; not used (SYNC_FLUSH always stages records in a write buffer).
    transient_store_pool_enable: bool = False
    #: A store error that repeats (a put refused on a full disk, a record whose topic cannot become a consume
    #: queue, a record recovery sets aside) is logged at most once per this many milliseconds per kind, with a
    #: count of the ones held back in between.
    store_error_log_interval_ms: int = 10_000
    # -- HA: master/slave replication (STORE.md §13; mq.daemon.broker.ha) ---------------------------------------
    #: haListenPort: -1 = listenPort + 1 (what BrokerStartup sets), 0 = an ephemeral port (tests)
    ha_listen_port: int = -1
    #: haMasterAddress ``host:port`` of the master's HA port; empty: learnt from the name server's answer
    ha_master_address: str = ""
    #: A slave reports its offset to the master at least this often, ms.
    ha_send_heartbeat_interval: int = 5000
    #: An HA connection silent this long, ms, is closed.
    ha_housekeeping_interval: int = 20_000
    #: Largest chunk of commit log the master sends a slave at once, bytes.
    ha_transfer_batch_size: int = 32 * 1024
    #: SYNC_MASTER: a slave further behind than this many bytes is "not available"
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

    #: Name servers, ``;``-separated.
    namesrv_addr: str = "127.0.0.1:9876"
    #: Empty: the first non-loopback IPv4 address of this host (RocketMQ ``RemotingUtil.getLocalAddress``).
    client_ip: str = ""
    #: "DEFAULT" becomes the PID, as in Java; give each client in one process its own name to get its own id.
    instance_name: str = "DEFAULT"
    #: Appended to the client id (``ip@instance@unit``) when set.
    unit_name: str = ""
    #: Routes of the topics in use are refreshed this often, seconds.
    poll_name_server_interval: float = 30.0
    #: A heartbeat with every group goes to every known broker this often, seconds.
    heartbeat_broker_interval: float = 30.0
    #: Consumer offsets are committed this often, seconds.
    persist_consumer_offset_interval: float = 5.0
    #: rocketmq.client.rebalance.waitInterval
    rebalance_interval: float = 20.0
    #: Delay before retrying a pull or a send-back after an exception (pullTimeDelayMillsWhenException).
    pull_time_delay_when_exception: float = 1.0
    #: Timeout of a TCP connection to a broker or name server, seconds.
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
    #: ACL: the secret key that signs requests with ``access_key``.
    secret_key: str = field(default="", repr=False)
    #: ACL: a session token sent with signed requests (optional).
    security_token: str = field(default="", repr=False)

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """``DefaultMQProducer`` settings (FEATURES.md §6.1); timeouts in seconds."""

    #: Producer group name.
    group: str = "DEFAULT_PRODUCER"
    #: Timeout of one send, retries included, seconds.
    send_msg_timeout: float = 3.0
    #: Extra attempts of a failed synchronous send (on another broker where there is one).
    retry_times_when_send_failed: int = 2
    #: Extra attempts of a failed asynchronous send.
    retry_times_when_send_async_failed: int = 2
    #: Also retry a send answered with a non-OK store status (flush or slave timeout).
    retry_another_broker_when_not_store_ok: bool = False
    #: Bodies of at least this many bytes are zlib-compressed (not batches).
    compress_msg_body_over_howmuch: int = 4096
    #: zlib level of that compression.
    compress_level: int = 5
    #: Largest body accepted by ``send``, bytes.
    max_message_size: int = 4 * 1024 * 1024
    #: Queues asked for when a send creates a topic through ``create_topic_key``.
    default_topic_queue_nums: int = 4
    #: Template topic whose route serves a topic that does not exist yet (auto-creation).
    create_topic_key: str = "TBW102"
    #: Avoid brokers that answered slowly or failed recently (latency fault tolerance).
    send_latency_fault_enable: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """``DefaultMQPushConsumer`` settings (FEATURES.md §5.6); times in seconds.

    ``message_model``: "CLUSTERING" or "BROADCASTING"; ``consume_from_where``: "LAST", "FIRST" or "TIMESTAMP"
    (``consume_timestamp`` as RocketMQ's yyyyMMddHHmmss, empty = 30 minutes ago)."""

    #: Consumer group name.
    group: str = "DEFAULT_CONSUMER"
    #: CLUSTERING (each message to one member of the group) or BROADCASTING (to every member).
    message_model: str = "CLUSTERING"
    #: Where a group with no committed offset starts: LAST, FIRST or TIMESTAMP.
    consume_from_where: str = "LAST"
    #: TIMESTAMP's start, ``yyyyMMddHHmmss``; empty: 30 minutes ago.
    consume_timestamp: str = ""
    #: Messages asked for per pull.
    pull_batch_size: int = 32
    #: A queue stops pulling while this many of its messages wait to be consumed.
    pull_threshold_for_queue: int = 1000
    #: A queue stops pulling while this many bytes of its messages wait to be consumed.
    pull_threshold_size_for_queue: int = 100 * 1024 * 1024
    #: A queue stops pulling while its waiting messages span more offsets than this.
    consume_concurrently_max_span: int = 2000
    #: Listener calls running at once.
    consume_thread_max: int = 20
    #: Messages handed to one listener call.
    consume_message_batch_max_size: int = 1
    #: Pause after each pull of a queue, seconds.
    pull_interval: float = 0.0
    #: Pause of a flow-controlled queue before it checks again, seconds.
    flow_control_delay: float = 0.05
    #: How long the broker may hold a pull that finds nothing, seconds.
    broker_suspend_max_time: float = 15.0
    #: Timeout of such a held pull on the client side, seconds.
    consumer_timeout_when_suspend: float = 30.0
    #: -1: 16 (the broker's retryMaxTimes).
    max_reconsume_times: int = -1
    #: Local re-consume delay when a send-back fails (Java: 5 s).
    local_retry_delay: float = 5.0
    #: Pulls carry the subscription expression, and the broker filters by it.
    post_subscription_when_pull: bool = True
    #: MessageListenerOrderly: queue-locked, one batch at a time per queue (timings in ``OrderlyConfig``).
    consume_orderly: bool = False


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
    #: Upper bound of a pull's hold time, ms, whatever the client asks.
    broker_suspend_max_time_millis: int = 15_000
    #: Most pull requests held at once; beyond it a pull with nothing to return is answered at once.
    max_held_pull_requests: int = 10_000
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
        if bname in broker_names:
            broker_part[key] = value
            continue
        sname = key if key in store_names else _snake(key)
        if sname in store_names:
            store_part[sname] = value
            continue
        accepted = sorted(set(_BROKER_ALIASES) | broker_names | store_names)
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


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """The web console (``mq dashboard``): where it listens, the cluster it shows and who may use it."""

    #: Address the console binds to (``--host`` overrides it). Any address but a loopback one requires a login:
    #: the console refuses to start without ``usersFile``.
    host: str = "127.0.0.1"
    #: HTTP port of the console (``--port`` overrides it).
    listen_port: int = 8080
    #: Name servers of the cluster shown, ``;``-separated; empty: ``-n``, else ``$NAMESRV_ADDR``, else
    #: 127.0.0.1:9876.
    namesrv_addr: str = ""
    #: ACL: the access key the console signs its requests with (a cluster with aclEnable); empty: unsigned.
    access_key: str = ""
    #: ACL: the secret key that goes with ``accessKey``.
    secret_key: str = field(default="", repr=False)
    #: YAML file of the accounts that may log in (``users: [{username, password, role}]``, passwords hashed with
    #: ``mq dashboard hash-password``); empty: no login, allowed only on a loopback address.
    users_file: str = ""
    #: Ask for a login even on a loopback address (needs ``usersFile``).
    login_required: bool = False
    #: Secret that signs session cookies; empty: a random one at each start (everyone logs in again after a
    #: restart).
    session_secret: str = field(default="", repr=False)
    #: A login lasts this long, seconds.
    session_max_age: int = 8 * 3600
    #: Session cookies only over HTTPS (set it when a TLS proxy is in front of the console).
    secure_cookies: bool = False
    #: Folder where ``mq trace analyze --html`` reports are written; the newest ``*.html`` in it is shown.
    #: Empty: no report page.
    trace_report_dir: str = ""
    #: Trace topic that message traces are read from.
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    #: Live figures (lag, TPS, cluster state) refresh this often, seconds.
    refresh_interval: float = 5.0
    #: Timeout of each call the console makes to a name server or broker, seconds.
    admin_timeout: float = 5.0
    #: Most messages a query by time range or by key shows (newest first).
    max_query_messages: int = 500
