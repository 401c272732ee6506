"""Typed request/response headers of RocketMQ 4.x: dataclasses over a command's ``extFields`` (PROTOCOL.md §3.5,
§4). How a class maps to the wire (wire names, Java's number and boolean rules, the generated ``from_ext`` /
``to_ext``) is ``header_codec.py``; RocketMQ 5's pop headers are ``pop_headers.py``. ``REQUEST_HEADERS`` maps
request codes to their header class, for both.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from mq.protocol.codes import RequestCode
from mq.protocol.header_codec import Header, HeaderField, Long, _header, _hot_header  # noqa: F401 (re-exported)
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
    #: the broker's gRPC endpoint port (an mq extension; a Java name server ignores the extField); None: none
    grpc_server_port: int | None = None


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
    #: RocketMQ 5: attribute changes ``+key=value,-key`` (``+message.type=FIFO``)
    attributes: str | None = None
    force: bool | None = None


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
    RequestCode.POP_MESSAGE: PopMessageRequestHeader,
    RequestCode.PEEK_MESSAGE: PeekMessageRequestHeader,
    RequestCode.ACK_MESSAGE: AckMessageRequestHeader,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ChangeInvisibleTimeRequestHeader,
    RequestCode.GET_TOPIC_CONFIG: GetTopicConfigRequestHeader,
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: GetSubscriptionGroupConfigRequestHeader,
}
