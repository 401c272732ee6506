"""Typed request/response headers of RocketMQ 4.x: dataclasses over a command's ``extFields`` (PROTOCOL.md §3.5,
§4). How a class maps to the wire (wire names, Java's number and boolean rules, the generated ``from_ext`` /
``to_ext``) is ``header_codec.py``; RocketMQ 5's pop headers are ``pop_headers.py``. ``REQUEST_HEADERS`` maps
request codes to their header class, for both.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from mq.protocol.admin_headers import (  # noqa: F401 (re-exported)
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateAccessConfigRequestHeader,
    CreateTopicRequestHeader,
    DeleteAccessConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetAllProducerInfoRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from mq.protocol.codes import RequestCode
from mq.protocol.header_codec import Header, HeaderField, Long, _header, _hot_header  # noqa: F401 (re-exported)
from mq.protocol.namesrv_headers import (  # noqa: F401 (re-exported)
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from mq.protocol.pop_headers import (  # noqa: F401 (re-exported: headers.X names every header)
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    PeekMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

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
    RequestCode.POP_MESSAGE: PopMessageRequestHeader,
    RequestCode.PEEK_MESSAGE: PeekMessageRequestHeader,
    RequestCode.ACK_MESSAGE: AckMessageRequestHeader,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ChangeInvisibleTimeRequestHeader,
    RequestCode.GET_TOPIC_CONFIG: GetTopicConfigRequestHeader,
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: GetSubscriptionGroupConfigRequestHeader,
}
