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
