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
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    os_page_cache_busy_timeout_mills: int = 1000
    duplication_enable: bool = False
    warm_maped_file_enable: bool = False
    transient_store_pool_enable: bool = False

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
