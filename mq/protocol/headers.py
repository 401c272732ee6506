"""Typed request/response headers: dataclasses over a command's ``extFields`` (PROTOCOL.md §3.5, §4).

Every header is a frozen, slotted dataclass whose attributes are snake_case and whose wire keys are
RocketMQ's field names (camelCase by default; ``WIRE_NAMES`` where RocketMQ spells it otherwise: ``clientID``,
``MSG_REGION``, the V2 send letters ``a``..``m``). The five per-message ones (send V1/V2 request, send response,
pull request/response) are slotted but not frozen, for speed: treat them as immutable too.

- ``to_ext()`` -> ``dict[str, str]``: every value text, booleans ``"true"``/``"false"``, ``None`` fields left out
  (what Java and the C++ client's response decoders expect).
- ``from_ext(ext)`` reads what the three clients send, with Java's rules (``RemotingCommand
  .decodeCommandCustomHeader``): an ``int``/``Long`` field must be what ``Integer.parseInt``/``Long.parseLong``
  accept -- an optional ``+``/``-`` and decimal digits, nothing else (no spaces, no ``_``, no ``0x``), within
  the 32-bit (``Int``, the default for ``int``) or 64-bit (``Long``) range -- numbers sent as JSON numbers
  arrive as their text (the codec's job). Booleans follow ``Boolean.parseBoolean`` (``"true"`` in any case is
  true, anything else false) except that the C++ client's ``"1"`` is also true (Java reads it as false, which
  breaks C++ batches, PROTOCOL.md §4.1.2). An empty string for a non-string field means "absent" (Java's binary
  header turns ``""`` into null); unknown keys are ignored. A missing required field, or a number that does not
  parse, raises ``HeaderFieldError`` (a ``RemoteProtocolError``) in Java's words: ``the custom field <queueId>
  is null``; the dispatcher answers it SYSTEM_ERROR with that text.

A field without a default is required (Java ``@CFNotNull``). ``FIELDS`` lists each class's fields
(attribute, wire name, type, required, default); ``from_ext``/``to_ext`` are generated from it once per class as
straight-line code, so the per-message ones (``SendMessageRequestHeaderV2.from_ext``,
``SendMessageResponseHeader.to_ext``) cost about a microsecond.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from mq.common import native
from mq.common.javanum import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, parse_java_int
from mq.errors import HeaderFieldError
from mq.protocol.codes import RequestCode

_TRUE = frozenset(("true", "1", "TRUE", "True"))
#: the C twins of the generated code (``_codec.c``), or None
_c_spec, _c_from_ext, _c_to_ext = native.load("mq.protocol._codec", "header_spec", "header_from_ext", "header_to_ext")


class _JavaLong:
    """Marks an ``int`` header field that is a Java ``long``/``Long`` (64-bit); plain ``int`` is Java ``int``."""


#: A header field of Java type ``long``/``Long``.
Long = Annotated[int, _JavaLong]


class HeaderField(typing.NamedTuple):
    attr: str
    wire: str
    kind: type  # str, int, bool or float
    required: bool
    default: Any
    long: bool = False  # an int field that is a Java long


def _text(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is str:
        return v
    return str(int(v)) if isinstance(v, int) else str(v)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _missing(cls: type, wire: str) -> HeaderFieldError:
    return HeaderFieldError(f"the custom field <{wire}> is null", header=cls.__name__, field=wire)


def _int_field(cls: type, wire: str, v: Any, long: bool) -> int:
    """The slow path of an int/long field: exact Java syntax and range, or ``HeaderFieldError``."""
    lo, hi = (INT64_MIN, INT64_MAX) if long else (INT32_MIN, INT32_MAX)
    try:
        if type(v) is str:
            return parse_java_int(v, lo, hi)
        if type(v) is int and lo <= v <= hi:  # a dict built in Python rather than decoded
            return v
    except ValueError:
        pass
    raise HeaderFieldError(f"the custom field <{wire}> is not {'a long' if long else 'an int'}: {str(v)[:40]!r}",
                           header=cls.__name__, field=wire)


def _float_field(cls: type, wire: str, v: Any) -> float:
    if type(v) is str and "_" not in v:
        try:
            return float(v)
        except ValueError:
            pass
    raise HeaderFieldError(f"the custom field <{wire}> is not a double: {str(v)[:40]!r}", header=cls.__name__,
                           field=wire)


class Header:
    """Base of every typed header; ``from_ext``/``to_ext`` are generated per class by ``_header`` (and
    ``py_from_ext``/``py_to_ext``, the same without the C codec's fast path)."""

    __slots__ = ()
    WIRE_NAMES: ClassVar[dict[str, str]] = {}
    FIELDS: ClassVar[tuple[HeaderField, ...]] = ()

    @classmethod
    def wire_names(cls) -> tuple[str, ...]:
        return tuple(f.wire for f in cls.FIELDS)

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None):  # generated per class by @_header
        raise TypeError(f"{cls.__name__} is not a header class: decorate it with @_header")

    def to_ext(self) -> dict[str, str]:  # generated per class by @_header
        raise TypeError(f"{type(self).__name__} is not a header class: decorate it with @_header")


def _fields(cls: type) -> tuple[HeaderField, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # X | None
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        long = False
        if typing.get_origin(tp) is Annotated:
            long = _JavaLong in tp.__metadata__
            tp = typing.get_args(tp)[0]
        if tp not in (str, int, bool, float):
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported header type {tp!r}")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(HeaderField(f.name, cls.WIRE_NAMES.get(f.name) or _camel(f.name), tp, required,
                               None if required else f.default, long))
    return tuple(out)


def _compile(cls: type) -> None:
    """Generate straight-line ``from_ext``/``to_ext`` for ``cls`` (as ``dataclasses`` does for ``__init__``):
    a loop over the fields costs about 0.5 µs per field, the unrolled code a fraction of that. Where the C codec
    is built, both first ask its twins (``header_from_ext``/``header_to_ext``), which read and write the usual
    case the same way and return None for the rest; ``py_from_ext``/``py_to_ext`` are the Python code alone."""
    fields = _fields(cls)
    ns: dict[str, Any] = {"_missing": _missing, "_int_field": _int_field, "_float_field": _float_field,
                          "_TRUE": _TRUE, "_text": _text}
    spec = None
    if _c_spec is not None and not hasattr(cls, "__post_init__"):
        spec = _c_spec(cls, fields)
    ns.update(_spec=spec, _cfrom=_c_from_ext, _cto=_c_to_ext)
    dec = ["def py_from_ext(cls, ext):", "    g = (ext or {}).get"]
    enc = ["def py_to_ext(self):", "    out = {}"]
    for i, f in enumerate(fields):
        w = repr(f.wire)
        ns[f"_d{i}"] = f.default
        absent = f"raise _missing(cls, {w})" if f.required else f"a{i} = _d{i}"
        dec.append(f"    v = g({w})")
        if f.kind is str:
            dec += [f"    if v is None: {absent}", f"    else: a{i} = v if type(v) is str else str(v)"]
        else:
            dec += ["    if v is None or v == '':", f"        {absent}", "    else:"]
            if f.kind is bool:
                dec.append(f"        a{i} = v is True or v in _TRUE or str(v).lower() == 'true'")
            elif f.kind is int:
                # Fast path: plain digits short enough to be in range (9 for an int, 18 for a long).
                short = 18 if f.long else 9
                dec += [f"        if type(v) is str and len(v) <= {short} and v.isdecimal(): a{i} = int(v)",
                        f"        else: a{i} = _int_field(cls, {w}, v, {f.long})"]
            else:
                dec.append(f"        a{i} = _float_field(cls, {w}, v)")
        expr = {str: "v if type(v) is str else _text(v)", int: "str(v) if type(v) is int else _text(v)",
                bool: "'true' if v else 'false'", float: "str(v)"}[f.kind]
        enc += [f"    v = self.{f.attr}", f"    if v is not None: out[{w}] = {expr}"]
    dec.append(f"    return cls({', '.join(f'a{i}' for i in range(len(fields)))})")
    enc.append("    return out")
    if spec is None:
        fast = ["from_ext = py_from_ext", "to_ext = py_to_ext"]
    else:
        fast = ["def from_ext(cls, ext):", "    h = _cfrom(_spec, cls, ext)", "    return py_from_ext(cls, ext) if h is None else h",
                "", "def to_ext(self):", "    out = _cto(_spec, self)", "    return py_to_ext(self) if out is None else out"]
    exec("\n".join(dec) + "\n\n" + "\n".join(enc) + "\n\n" + "\n".join(fast), ns)  # noqa: S102 - generated from the field list
    for name in ("from_ext", "to_ext", "py_from_ext", "py_to_ext"):
        ns[name].__qualname__ = f"{cls.__name__}.{name}"
    cls.FIELDS = fields
    cls.from_ext = classmethod(ns["from_ext"])
    cls.to_ext = ns["to_ext"]
    cls.py_from_ext = classmethod(ns["py_from_ext"])
    cls.py_to_ext = ns["py_to_ext"]


def _header(cls):
    cls = dataclass(frozen=True, slots=True)(cls)
    _compile(cls)
    return cls


def _hot_header(cls):
    """Per-message headers: slotted but not frozen (a frozen __init__ costs 1.6 µs more for 13 fields)."""
    cls = dataclass(slots=True)(cls)
    _compile(cls)
    return cls


# ---------------------------------------------------------------------------------------------
# plain ACL administration (50-53)
# ---------------------------------------------------------------------------------------------
@_header
class CreateAccessConfigRequestHeader(Header):
    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    #: comma-separated ``name=PERM`` entries
    topic_perms: str | None = None
    group_perms: str | None = None


@_header
class DeleteAccessConfigRequestHeader(Header):
    access_key: str


@_header
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    #: comma-separated address patterns
    global_white_addrs: str
    acl_file_full_path: str | None = None


@_header
class GetBrokerAclConfigResponseHeader(Header):
    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None


# ---------------------------------------------------------------------------------------------
# send (10 / 310 / 320)
# ---------------------------------------------------------------------------------------------
@_hot_header
class SendMessageRequestHeader(Header):
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None

    def to_v2(self) -> "SendMessageRequestHeaderV2":
        return SendMessageRequestHeaderV2(*(getattr(self, f) for f in _SEND_FIELDS))


_SEND_FIELDS = tuple(f.name for f in dataclasses.fields(SendMessageRequestHeader))
_V2_LETTERS = dict(zip(_SEND_FIELDS, "abcdefghijkml"))  # batch is m, maxReconsumeTimes is l


@_hot_header
class SendMessageRequestHeaderV2(Header):
    """SEND_MESSAGE_V2: the V1 fields under one-letter keys; same attribute names as the V1 header."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None
    WIRE_NAMES: ClassVar[dict[str, str]] = _V2_LETTERS

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(*(getattr(self, f) for f in _SEND_FIELDS))

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> "SendMessageRequestHeaderV2":
        return v1.to_v2()


@_hot_header
class SendMessageResponseHeader(Header):
    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    msg_region: str | None = None
    trace_on: bool | None = None
    WIRE_NAMES: ClassVar[dict[str, str]] = {"msg_region": "MSG_REGION", "trace_on": "TRACE_ON"}


# ---------------------------------------------------------------------------------------------
# pull (11)
# ---------------------------------------------------------------------------------------------
@_hot_header
class PullMessageRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int
    commit_offset: Long
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: str | None = None
    expression_type: str | None = None


@_hot_header
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long


# ---------------------------------------------------------------------------------------------
# offsets and queries (12, 14, 15, 29-33)
# ---------------------------------------------------------------------------------------------
@_header
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int


@_header
class QueryConsumerOffsetResponseHeader(Header):
    offset: Long


@_header
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long


@_header
class GetMaxOffsetRequestHeader(Header):
    topic: str
    queue_id: int


@_header
class GetMaxOffsetResponseHeader(Header):
    offset: Long


@_header
class GetMinOffsetRequestHeader(Header):
    topic: str
    queue_id: int


@_header
class GetMinOffsetResponseHeader(Header):
    offset: Long


@_header
class SearchOffsetRequestHeader(Header):
    topic: str
    queue_id: int
    timestamp: Long


@_header
class SearchOffsetResponseHeader(Header):
    offset: Long


@_header
class GetEarliestMsgStoretimeRequestHeader(Header):
    topic: str
    queue_id: int


@_header
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: Long


@_header
class ViewMessageRequestHeader(Header):
    offset: Long


@_header
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long
    unique_key_query: bool | None = None
    WIRE_NAMES: ClassVar[dict[str, str]] = {"unique_key_query": "_UNIQUE_KEY_QUERY"}


@_header
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


# ---------------------------------------------------------------------------------------------
# clients (35, 36, 37, 38, 39, 40; HEART_BEAT 34 and LOCK/UNLOCK 41/42 have no header)
# ---------------------------------------------------------------------------------------------
@_header
class UnregisterClientRequestHeader(Header):
    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None
    WIRE_NAMES: ClassVar[dict[str, str]] = {"client_id": "clientID"}


@_header
class GetConsumerListByGroupRequestHeader(Header):
    """Response: no header, body ``bodies.GetConsumerListByGroupResponseBody``."""

    consumer_group: str


@_header
class ConsumerSendMsgBackRequestHeader(Header):
    offset: Long
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@_header
class EndTransactionRequestHeader(Header):
    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@_header
class QueryCorrectionOffsetHeader(Header):
    """QUERY_CORRECTION_OFFSET (308): groups to leave out (comma separated), the group to compare with, topic."""

    compare_group: str
    topic: str
    filter_groups: str | None = None


@_header
class ResumeCheckHalfMessageRequestHeader(Header):
    """RESUME_CHECK_HALF_MESSAGE (323): the offsetMsgId of a half message (or of its copy in
    TRANS_CHECK_MAX_TIME_TOPIC) whose transaction checks start again."""

    msg_id: str | None = None


@_header
class CheckTransactionStateRequestHeader(Header):
    tran_state_table_offset: Long
    commit_log_offset: Long
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@_header
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str


# ---------------------------------------------------------------------------------------------
# name server (100-106, 205, 206, 216, 219, 224, 322, 327)
# ---------------------------------------------------------------------------------------------
@_header
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@_header
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    compressed: bool = False
    body_crc32: int = 0


@_header
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@_header
class UnregisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@_header
class QueryDataVersionRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@_header
class QueryDataVersionResponseHeader(Header):
    changed: bool


@_header
class PutKVConfigRequestHeader(Header):
    namespace: str
    key: str
    value: str


@_header
class GetKVConfigRequestHeader(Header):
    namespace: str
    key: str


@_header
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@_header
class DeleteKVConfigRequestHeader(Header):
    namespace: str
    key: str


@_header
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str


@_header
class WipeWritePermOfBrokerRequestHeader(Header):
    broker_name: str


@_header
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int


@_header
class AddWritePermOfBrokerRequestHeader(Header):
    broker_name: str


@_header
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int


@_header
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@_header
class GetTopicsByClusterRequestHeader(Header):
    cluster: str


# ---------------------------------------------------------------------------------------------
# admin -> broker (17, 202, 203, 204, 207, 208, 215, 220/222, 221, 300, 303, 307, 309)
# ---------------------------------------------------------------------------------------------
@_header
class CreateTopicRequestHeader(Header):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    order: bool = False


@_header
class DeleteTopicRequestHeader(Header):
    topic: str


@_header
class GetTopicStatsInfoRequestHeader(Header):
    topic: str


@_header
class GetConsumeStatsRequestHeader(Header):
    consumer_group: str
    topic: str | None = None


@_header
class GetConsumerConnectionListRequestHeader(Header):
    consumer_group: str


@_header
class GetProducerConnectionListRequestHeader(Header):
    producer_group: str


@_header
class DeleteSubscriptionGroupRequestHeader(Header):
    group_name: str
    remove_offset: bool = False


@_header
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: str
    group: str
    timestamp: Long
    is_force: bool


@_header
class GetConsumerStatusRequestHeader(Header):
    topic: str
    group: str
    client_addr: str | None = None


@_header
class QueryTopicConsumeByWhoRequestHeader(Header):
    topic: str


@_header
class QueryConsumeTimeSpanRequestHeader(Header):
    topic: str
    group: str


@_header
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@_header
class ConsumeMessageDirectlyResultRequestHeader(Header):
    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


#: Request code -> its request header class (codes without a header, e.g. HEART_BEAT, are absent).
# -- queue administration: CLONE_GROUP_OFFSET, QUERY_CONSUME_QUEUE, CLEAN_*, DELETE_EXPIRED_COMMITLOG --------------
@_header
class CloneGroupOffsetRequestHeader(Header):
    """CLONE_GROUP_OFFSET (314): copy ``srcGroup``'s offsets of ``topic`` (blank: each of its topics)."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@_header
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (321): ``count`` units of ``queueId@topic`` from queue offset ``index``."""

    topic: str | None = None
    queue_id: int = 0
    index: Long = 0
    count: int = 0
    consumer_group: str | None = None



# -- broker statistics: GET_BROKER_CONSUME_STATS, VIEW_BROKER_STATS_DATA, GET_ALL_PRODUCER_INFO, ... ------------
@_header
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317): Java's field is ``isOrder`` (wire key ``isOrder``)."""

    is_order: bool = False


@_header
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): e.g. ``TOPIC_PUT_NUMS`` / ``T``, ``GROUP_GET_NUMS`` / ``T@G``."""

    stats_name: str
    stats_key: str


@_header
class GetAllProducerInfoRequestHeader(Header):
    """GET_ALL_PRODUCER_INFO (328): no fields."""


@_header
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> requesting client: the reply's send header plus where it was
    born and stored (``bornHost``/``storeHost`` as ``ip:port`` text) and when the broker pushed it."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    born_host: str
    store_host: str
    store_timestamp: Long
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False


REQUEST_HEADERS: dict[int, type[Header]] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.RESUME_CHECK_HALF_MESSAGE: ResumeCheckHalfMessageRequestHeader,
    RequestCode.QUERY_CORRECTION_OFFSET: QueryCorrectionOffsetHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnregisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: GetConsumerStatusRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    RequestCode.QUERY_CONSUME_TIME_SPAN: QueryConsumeTimeSpanRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
}
