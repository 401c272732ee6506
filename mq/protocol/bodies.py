"""Typed JSON bodies of the RocketMQ remoting protocol (PROTOCOL.md §6).

Every body is a dataclass with snake_case attributes; on the wire it uses RocketMQ's bean names (camelCase,
``clientID``, ``lockOKMQSet``), written the way fastjson writes them: keys sorted, ``None`` members omitted,
enums by name. ``to_json()`` / ``from_json(bytes)`` convert; ``to_json_value()`` / ``from_json_value(obj)`` work
on already parsed values (for nesting).

Reading is tolerant (PROTOCOL.md §6.0, §11): fastjson's unquoted integer keys and object keys, quoted numeric
keys, a trailing newline, enums as names or ordinals (C++ heartbeats), numbers given as strings (C++
``subVersion``), booleans as ``"true"``/``"1"``, missing lists (C++ leaves empty sets out), unknown fields. Input
that is not JSON, or a member of the wrong shape, raises ``RemoteProtocolError`` and nothing else.

Writing: standard JSON (``"0":``) by default; ``to_json(standard=False)`` writes fastjson's unquoted integer keys,
which is what a Java name server sends to clients older than 4.9.4 (``standard_json_for``) and always for
ClusterInfo. Maps keyed by MessageQueue are written in fastjson's object-key form
(``{{"brokerName":"b","queueId":0,"topic":"T"}:5}``), exactly as a Java broker does.

The compressed RegisterBrokerBody (broker option ``compressedRegister``, §6.7) is one zlib stream (level 9)::

    +---------+------------------+---------+-----------------------------------------+---------+--------------+
    | int32 n | DataVersion JSON | int32 t | t x (int32 n | "name rq wq perm type") | int32 n | filter JSON  |
    +---------+------------------+---------+-----------------------------------------+---------+--------------+
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import types
import typing
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from mq.common.fastjson import ObjectKey, dumps, loads
from mq.common.javanum import INT64_MAX, INT64_MIN, parse_java_int
from mq.common.message import MessageQueue
from mq.errors import RemoteProtocolError
from mq.protocol.codes import LanguageCode

COMPRESSED_INT = struct.Struct(">i")
#: Largest inflated RegisterBrokerBody we accept (a zlib bomb guard; 100k topics take about 6 MB).
MAX_INFLATED = 64 * 1024 * 1024
STANDARD_JSON_VERSION = 401  # MQVersion V4_9_4


def standard_json_for(request_version: int, accept_standard_json_only: bool = False) -> bool:
    """Whether a route reply must be standard JSON (Java NS rule, PROTOCOL.md §3.4)."""
    return accept_standard_json_only or request_version >= STANDARD_JSON_VERSION


# ---------------------------------------------------------------------------------------------
# enums (wire: the Java constant name; C++ sends the ordinal)
# ---------------------------------------------------------------------------------------------
class ConsumeType(enum.IntEnum):
    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1
    CONSUME_POP = 2  # RocketMQ 5


class MessageModel(enum.IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


# ---------------------------------------------------------------------------------------------
# conversion machinery: one plan per class, built from its type hints on first use
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# common values
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class DataVersion(JsonBody):
    timestamp: int = 0
    counter: int = 0


@dataclass(slots=True)
class TopicConfig(JsonBody):
    topic_name: str = ""
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    #: RocketMQ 5 topic attributes without their +/- sign (``{"message.type": "FIFO"}``); None: none (not written)
    attributes: dict[str, str] | None = None

    def to_json_value(self) -> dict:
        """``JsonBody.to_json_value`` written out (a broker rewrites topics.json and registers the whole table,
        thousands of these, on every topic change; this is four times faster than the generic encoder)."""
        out = {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
               "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
               "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}
        if None in out.values():  # not a well-typed config: the generic encoder leaves such fields out
            return JsonBody.to_json_value(self)
        if self.attributes is not None:
            return {"attributes": dict(self.attributes), **out}
        return out

    def encode_text(self) -> str:
        """The compressed-register form ``name readQ writeQ perm filterType``."""
        return (f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
                f"{self.topic_filter_type}")

    @classmethod
    def decode_text(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        if len(parts) != 5 or parts[4] not in ("SINGLE_TAG", "MULTI_TAG"):
            raise RemoteProtocolError(f"bad compressed topic config {text[:80]!r}")
        try:
            return cls(parts[0], parse_java_int(parts[1]), parse_java_int(parts[2]), parse_java_int(parts[3]),
                       parts[4])
        except ValueError:
            raise RemoteProtocolError(f"bad compressed topic config {text[:80]!r}") from None


@dataclass(slots=True)
class TopicConfigSerializeWrapper(JsonBody):
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(slots=True)
class RegisterBrokerBody(JsonBody):
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self, compressed: bool = False) -> bytes:
        """The body of REGISTER_BROKER: JSON, or the zlib form when the header says ``compressed``."""
        if not compressed:
            return self.to_json()
        wrapper = self.topic_config_serialize_wrapper
        version = wrapper.data_version.to_json()
        filters = dumps(list(self.filter_server_list))
        raw = bytearray(COMPRESSED_INT.pack(len(version)) + version)
        raw += COMPRESSED_INT.pack(len(wrapper.topic_config_table))
        for tc in wrapper.topic_config_table.values():
            text = tc.encode_text().encode()
            raw += COMPRESSED_INT.pack(len(text)) + text
        raw += COMPRESSED_INT.pack(len(filters)) + filters
        return zlib.compress(bytes(raw), 9)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, compressed: bool = False) -> "RegisterBrokerBody":
        if not compressed:
            return cls.from_json(data)
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(bytes(data), MAX_INFLATED)
        except zlib.error as exc:
            raise RemoteProtocolError(f"compressed RegisterBrokerBody: {exc}") from None
        if inflater.unconsumed_tail:
            raise RemoteProtocolError(f"compressed RegisterBrokerBody inflates beyond {MAX_INFLATED} bytes")
        pos = 0

        def chunk() -> bytes:
            nonlocal pos
            if pos + 4 > len(raw):
                raise RemoteProtocolError("compressed RegisterBrokerBody is truncated")
            (n,) = COMPRESSED_INT.unpack_from(raw, pos)
            if n < 0 or pos + 4 + n > len(raw):
                raise RemoteProtocolError(f"compressed RegisterBrokerBody: bad length {n}")
            pos += 4 + n
            return raw[pos - n:pos]

        version = DataVersion.from_json(chunk())
        if pos + 4 > len(raw):
            raise RemoteProtocolError("compressed RegisterBrokerBody is truncated")
        (count,) = COMPRESSED_INT.unpack_from(raw, pos)
        pos += 4
        if count < 0 or count * 4 > len(raw) - pos:
            raise RemoteProtocolError(f"compressed RegisterBrokerBody: bad topic count {count}")
        table = {}
        for _ in range(count):
            try:
                tc = TopicConfig.decode_text(chunk().decode())
            except UnicodeDecodeError:
                raise RemoteProtocolError("compressed topic config is not UTF-8") from None
            table[tc.topic_name] = tc
        filters = loads(chunk())
        if not isinstance(filters, list):
            raise RemoteProtocolError("compressed RegisterBrokerBody: filter server list is not an array")
        return cls(TopicConfigSerializeWrapper(table, version), [_dec_str(f) for f in filters])


# ---------------------------------------------------------------------------------------------
# routes and cluster
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class QueueData(JsonBody):
    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 6
    topic_sys_flag: int = 0
    WIRE_ALIASES: ClassVar[dict[str, str]] = {"topicSynFlag": "topic_sys_flag"}


@dataclass(slots=True)
class BrokerData(JsonBody):
    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)
    #: remoting address -> gRPC endpoint (``host:grpcServerPort``) of the brokers that serve one; an mq name
    #: server's extension (absent, None, from a Java name server, and for brokers without a gRPC endpoint).
    #: 4.x clients ignore members they do not know.
    grpc_addrs: dict[str, str] | None = None


@dataclass(slots=True)
class TopicRouteData(JsonBody):
    """GET_ROUTEINFO_BY_TOPIC reply; ``to_json(standard=standard_json_for(version, flag))``."""

    order_topic_conf: str | None = None
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class ClusterInfo(JsonBody):
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def to_json(self, *, standard: bool = False) -> bytes:
        """fastjson form (unquoted broker ids) by default, like a Java 4.9 name server."""
        return dumps(self.to_json_value(), fastjson_int_keys=not standard)


@dataclass(slots=True)
class TopicList(JsonBody):
    topic_list: set[str] = field(default_factory=set)
    broker_addr: str | None = None


@dataclass(slots=True)
class KVTable(JsonBody):
    table: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class GroupList(JsonBody):
    group_list: set[str] = field(default_factory=set)


@dataclass(slots=True)
class GetConsumerListByGroupResponseBody(JsonBody):
    consumer_id_list: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# heartbeat and connections
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class SubscriptionData(JsonBody):
    topic: str = ""
    sub_string: str = "*"
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = 0
    expression_type: str = "TAG"  # absent in C++ heartbeats: TAG
    class_filter_mode: bool = False


@dataclass(slots=True)
class ProducerData(JsonBody):
    group_name: str = ""


@dataclass(slots=True)
class ConsumerData(JsonBody):
    group_name: str = ""
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@dataclass(slots=True)
class HeartbeatData(JsonBody):
    client_id: str = ""
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    WIRE_NAMES: ClassVar[dict[str, str]] = {"client_id": "clientID"}


@dataclass(slots=True)
class Connection(JsonBody):
    client_id: str = ""
    client_addr: str = ""
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0


@dataclass(slots=True)
class ConsumerConnection(JsonBody):
    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None


@dataclass(slots=True)
class ProducerConnection(JsonBody):
    connection_set: list[Connection] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# orderly locks
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class LockBatchRequestBody(JsonBody):
    consumer_group: str = ""
    client_id: str = ""
    mq_set: set[MessageQueue] = field(default_factory=set)


@dataclass(slots=True)
class LockBatchResponseBody(JsonBody):
    lock_ok_mq_set: set[MessageQueue] = field(default_factory=set)
    WIRE_NAMES: ClassVar[dict[str, str]] = {"lock_ok_mq_set": "lockOKMQSet"}


@dataclass(slots=True)
class UnlockBatchRequestBody(JsonBody):
    consumer_group: str = ""
    client_id: str = ""
    mq_set: set[MessageQueue] = field(default_factory=set)


# ---------------------------------------------------------------------------------------------
# admin: MessageQueue-keyed statistics, subscription groups, offsets
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class TopicOffset(JsonBody):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@dataclass(slots=True)
class TopicStatsTable(JsonBody):
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)


@dataclass(slots=True)
class OffsetWrapper(JsonBody):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    #: RocketMQ 5: consumer offset + messages in flight (popped, not yet acked); mqadmin 5.x prints the
    #: difference as #Inflight. None (not written) where nothing is in flight.
    pull_offset: int | None = None


@dataclass(slots=True)
class ConsumeStats(JsonBody):
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0


@dataclass(slots=True)
class ResetOffsetBody(JsonBody):
    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerOffsetSerializeWrapper(JsonBody):
    """GET_ALL_CONSUMER_OFFSET (43): ``{"topic@group": {queueId: offset}}``, unquoted ids from Java."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)


#: CustomizedRetryPolicy's default ``next`` (ms): 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
DEFAULT_RETRY_DELAYS_MS = (1000, 5000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
                           420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)
RETRY_POLICY_TYPES = ("CUSTOMIZED", "EXPONENTIAL")


@dataclass(slots=True)
class CustomizedRetryPolicy(JsonBody):
    """RocketMQ 5: the delay before retry n is ``next[n + 2]`` (the 4.x delay levels 3..18), the last beyond."""

    next: list[int] = field(default_factory=lambda: list(DEFAULT_RETRY_DELAYS_MS))

    def next_delay(self, reconsume_times: int) -> int:
        if not self.next:
            return DEFAULT_RETRY_DELAYS_MS[-1]
        return self.next[min(max(reconsume_times, 0) + 2, len(self.next) - 1)]


@dataclass(slots=True)
class ExponentialRetryPolicy(JsonBody):
    """RocketMQ 5: ``min(max, initial * multiplier ** reconsumeTimes)`` ms (reconsumeTimes capped at 32)."""

    initial: int = 5000
    max: int = 7_200_000
    multiplier: int = 2

    def next_delay(self, reconsume_times: int) -> int:
        return min(self.max, self.initial * self.multiplier ** min(max(reconsume_times, 0), 32))


@dataclass(slots=True)
class GroupRetryPolicy(JsonBody):
    """RocketMQ 5 ``GroupRetryPolicy``: ``type`` CUSTOMIZED (the default) or EXPONENTIAL, each with its own
    parameters (absent: that type's defaults)."""

    type: str = "CUSTOMIZED"
    exponential_retry_policy: ExponentialRetryPolicy | None = None
    customized_retry_policy: CustomizedRetryPolicy | None = None

    def policy(self) -> CustomizedRetryPolicy | ExponentialRetryPolicy:
        """The policy in force (Java ``getRetryPolicy``: an unknown type or missing parameters give the
        default customized policy)."""
        if self.type == "EXPONENTIAL" and self.exponential_retry_policy is not None:
            return self.exponential_retry_policy
        if self.type == "CUSTOMIZED" and self.customized_retry_policy is not None:
            return self.customized_retry_policy
        return CustomizedRetryPolicy()


def retry_policy_problem(p: GroupRetryPolicy | None) -> str | None:
    """Why a group retry policy is unusable (an unknown type, no or negative delays), or None."""
    if p is None:
        return None
    if p.type not in RETRY_POLICY_TYPES:
        return f"type must be one of {', '.join(RETRY_POLICY_TYPES)}, not {p.type[:40]!r}"
    e = p.exponential_retry_policy
    if e is not None and not (0 < e.initial <= e.max and e.multiplier >= 1):
        return "exponentialRetryPolicy needs 0 < initial <= max and multiplier >= 1"
    c = p.customized_retry_policy
    if c is not None and (not c.next or min(c.next) < 0 or len(c.next) > 1024):
        return "customizedRetryPolicy.next needs 1 to 1024 delays, none negative"
    return None


@dataclass(slots=True)
class SubscriptionGroupConfig(JsonBody):
    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: RocketMQ 5: a FIFO group (5.x consumers receive in queue order); None is false and is not written,
    #: so a 4.x group's JSON stays as 4.9 writes it
    consume_message_orderly: bool | None = None
    #: RocketMQ 5: the backoff 5.x consumers apply between attempts; None is the default customized policy
    group_retry_policy: GroupRetryPolicy | None = None

    @property
    def orderly(self) -> bool:
        return bool(self.consume_message_orderly)

    def retry_policy(self) -> GroupRetryPolicy:
        return self.group_retry_policy if self.group_retry_policy is not None else GroupRetryPolicy()


@dataclass(slots=True)
class SubscriptionGroupWrapper(JsonBody):
    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(slots=True)
class ConsumeMessageDirectlyResult(JsonBody):
    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None  # CR_SUCCESS, CR_LATER, CR_ROLLBACK, CR_COMMIT, CR_THROW_EXCEPTION, ...
    remark: str | None = None
    spent_time_mills: int = 0


# -- queue administration: QUERY_CONSUME_QUEUE ---------------------------------------------------------------
@dataclass(slots=True)
class ConsumeQueueData(JsonBody):
    """One consume-queue unit as QUERY_CONSUME_QUEUE shows it (the ext fields stay None: no CQ ext here)."""

    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None


@dataclass(slots=True)
class QueryConsumeQueueResponseBody(JsonBody):
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None
    queue_data: list[ConsumeQueueData] = field(default_factory=list)
    max_queue_index: int = 0
    min_queue_index: int = 0



# -- broker statistics: GET_BROKER_CONSUME_STATS, VIEW_BROKER_STATS_DATA, GET_ALL_PRODUCER_INFO, ... ------------
@dataclass(slots=True)
class ConsumeStatsList(JsonBody):
    """GET_BROKER_CONSUME_STATS (317): one ``{group: [ConsumeStats per topic]}`` map per subscription group."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    broker_addr: str | None = None
    total_diff: int = 0


@dataclass(slots=True)
class ProducerInfo(JsonBody):
    client_id: str = ""
    remote_ip: str = ""  # Java: the channel's remote SocketAddress text, "/127.0.0.1:53422"
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: int = 0
    WIRE_NAMES: ClassVar[dict[str, str]] = {"remote_ip": "remoteIP"}


@dataclass(slots=True)
class ProducerTableInfo(JsonBody):
    """GET_ALL_PRODUCER_INFO (328): producer group -> its connected instances."""

    data: dict[str, list[ProducerInfo]] = field(default_factory=dict)


@dataclass(slots=True)
class BrokerStatsItem(JsonBody):
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@dataclass(slots=True)
class BrokerStatsData(JsonBody):
    """VIEW_BROKER_STATS_DATA (315): one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)


@dataclass(slots=True)
class GetConsumerStatusBody(JsonBody):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) answer (``messageQueueTable``) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    (223) answer (``consumerTable``: client id -> {MessageQueue: offset})."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)
