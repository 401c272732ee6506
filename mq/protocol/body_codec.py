"""How a JSON body dataclass maps to the wire (PROTOCOL.md §6.0): ``JsonBody``, the base of every body in
``bodies.py`` and ``admin_bodies.py``, builds one conversion plan per class from its type hints on first use:
RocketMQ's bean names, tolerant decoding (fastjson's dialect, enums by name or ordinal, numbers as strings,
booleans as text), fastjson-style encoding (keys sorted, ``None`` omitted, MessageQueue map keys as objects).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, Callable, ClassVar

from mq.common.fastjson import ObjectKey, dumps, loads
from mq.common.javanum import INT64_MAX, INT64_MIN, parse_java_int
from mq.common.message import MessageQueue
from mq.errors import RemoteProtocolError

Conv = tuple[Callable[[Any], Any], Callable[[Any], Any]]  # (decode, encode)


def _bad(what: str, value: Any) -> RemoteProtocolError:
    return RemoteProtocolError(f"{what}: unexpected {type(value).__name__} {str(value)[:60]!r}")


def _dec_str(v: Any) -> str:
    if type(v) is str:
        return v
    if isinstance(v, (int, float)):
        return "true" if v is True else "false" if v is False else str(v)
    raise _bad("expected a string", v)


def _dec_int(v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, str):
        try:
            return parse_java_int(v, INT64_MIN, INT64_MAX)
        except ValueError:
            raise _bad("expected an integer", v) from None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise _bad("expected an integer", v)


def _dec_float(v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            raise _bad("expected a number", v) from None
    raise _bad("expected a number", v)


def _dec_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if isinstance(v, str) and v.lower() in ("true", "false", "1", "0"):
        return v.lower() in ("true", "1")
    if type(v) is int and v in (0, 1):
        return bool(v)
    raise _bad("expected a boolean", v)


def _ident(v: Any) -> Any:
    return v


def _enum_conv(cls: type[enum.IntEnum]) -> Conv:
    def dec(v: Any) -> enum.IntEnum:
        try:
            if type(v) is str:
                return cls[v] if not v.lstrip("-").isdigit() else cls(int(v))
            if type(v) is int:
                return cls(v)
        except (KeyError, ValueError):
            pass
        raise _bad(f"not a {cls.__name__}", v)
    return dec, lambda e: e.name


def _list_conv(item: Conv, as_set: bool) -> Conv:
    idec, ienc = item

    def dec(v: Any) -> Any:
        if not isinstance(v, list):
            raise _bad("expected an array", v)
        items = [idec(x) for x in v]
        return set(items) if as_set else items

    def enc(v: Any) -> list:
        if isinstance(v, (set, frozenset)):
            try:
                v = sorted(v)
            except TypeError:
                v = list(v)
        return [ienc(x) for x in v]
    return dec, enc


def _mq_key(k: Any) -> "MessageQueue":
    if isinstance(k, MessageQueue):
        return k
    if isinstance(k, ObjectKey):
        obj = k.as_dict()
    elif isinstance(k, str) and k.startswith("{"):
        obj = loads(k)  # fastjson also accepts the MessageQueue JSON as a string key
    else:
        raise _bad("expected a MessageQueue key", k)
    if not isinstance(obj, dict) or not {"topic", "brokerName", "queueId"} <= obj.keys():
        raise _bad("MessageQueue key needs topic, brokerName and queueId", k)
    return MessageQueue.from_json_value(obj)


def _dict_conv(key_type: Any, value: Conv) -> Conv:
    vdec, venc = value
    if key_type is str:
        kdec: Callable[[Any], Any] = _dec_str
    elif key_type is int:
        kdec = _dec_int
    elif key_type is MessageQueue:
        kdec = _mq_key
    else:
        raise TypeError(f"unsupported map key type {key_type!r}")

    def dec(v: Any) -> dict:
        if not isinstance(v, dict):
            raise _bad("expected an object", v)
        return {kdec(k): vdec(x) for k, x in v.items()}

    def enc(v: dict) -> dict:
        return {k: venc(x) for k, x in v.items()}
    return dec, enc


def _conv(tp: Any) -> Conv:
    if tp is str:
        return _dec_str, _ident
    if tp is int:
        return _dec_int, int
    if tp is float:
        return _dec_float, float
    if tp is bool:
        return _dec_bool, bool
    if tp is Any:
        return _ident, _ident
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return _enum_conv(tp)
    if tp is MessageQueue:
        return MessageQueue.from_json_value, MessageQueue.to_json_value
    if isinstance(tp, type) and issubclass(tp, JsonBody):
        return tp.from_json_value, lambda b: b.to_json_value()
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _conv(inner[0])
    if origin in (list, set):
        return _list_conv(_conv(args[0]), origin is set)
    if origin is dict:
        return _dict_conv(args[0], _conv(args[1]))
    raise TypeError(f"unsupported body field type {tp!r}")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class JsonBody:
    """Base of every body: wire names, tolerant decoding, fastjson-style encoding."""

    __slots__ = ()
    #: attribute -> wire name, where camelCase of the attribute is not RocketMQ's spelling
    WIRE_NAMES: ClassVar[dict[str, str]] = {}
    #: extra wire names accepted on input (older spellings)
    WIRE_ALIASES: ClassVar[dict[str, str]] = {}
    _plans: ClassVar[dict[type, tuple]] = {}

    @classmethod
    def _plan(cls) -> tuple:
        plan = JsonBody._plans.get(cls)
        if plan is None:
            hints = typing.get_type_hints(cls)
            entries = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                wire = cls.WIRE_NAMES.get(f.name) or _camel(f.name)
                dec, enc = _conv(hints[f.name])
                entries.append((wire, f.name, dec, enc))
            entries.sort(key=lambda e: e[0])  # fastjson's SortField order
            by_wire = {e[0]: e for e in entries}
            for alias, attr in cls.WIRE_ALIASES.items():
                by_wire.setdefault(alias, next(e for e in entries if e[1] == attr))
            plan = (tuple(entries), by_wire)
            JsonBody._plans[cls] = plan
        return plan

    def to_json_value(self) -> dict:
        out = {}
        for wire, attr, _dec, enc in self._plan()[0]:
            v = getattr(self, attr)
            if v is not None:
                out[wire] = enc(v)
        return out

    def to_json(self, *, standard: bool = True) -> bytes:
        """JSON bytes; ``standard=False`` writes integer map keys unquoted as fastjson does."""
        return dumps(self.to_json_value(), fastjson_int_keys=not standard)

    @classmethod
    def from_json_value(cls, obj: Any):
        if not isinstance(obj, dict):
            raise _bad(f"{cls.__name__} must be a JSON object", obj)
        by_wire = cls._plan()[1]
        kwargs = {}
        for k, v in obj.items():
            entry = by_wire.get(k)
            if entry is None or v is None:
                continue  # unknown fields are ignored, nulls mean "default"
            try:
                kwargs[entry[1]] = entry[2](v)
            except RemoteProtocolError as exc:
                raise RemoteProtocolError(f"{cls.__name__}.{k}: {exc}") from None
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                raise RemoteProtocolError(f"{cls.__name__}.{k}: {exc}") from None
        return cls(**kwargs)

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str):
        if data is None or len(data) == 0:
            raise RemoteProtocolError(f"{cls.__name__}: empty body")
        return cls.from_json_value(loads(data))
