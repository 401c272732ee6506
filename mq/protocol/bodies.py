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

import enum
import struct
import zlib
from dataclasses import dataclass, field
from typing import ClassVar

from mq.common.fastjson import dumps, loads
from mq.common.javanum import parse_java_int
from mq.common.message import MessageQueue
from mq.errors import RemoteProtocolError
from mq.protocol.body_codec import JsonBody, _dec_str
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


from mq.protocol.admin_bodies import (  # noqa: E402,F401 (re-exported; they build on the bodies above)
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeMessageDirectlyResult,
    ConsumeQueueData,
    ConsumeStats,
    ConsumeStatsList,
    ConsumerOffsetSerializeWrapper,
    CustomizedRetryPolicy,
    ExponentialRetryPolicy,
    GetConsumerStatusBody,
    GroupRetryPolicy,
    OffsetWrapper,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicOffset,
    TopicStatsTable,
    retry_policy_problem,
)
