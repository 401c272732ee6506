"""Typed headers of the administrative requests to a broker (RocketMQ 4.x: topics, groups, offsets resets,
statistics, queue administration, plain ACL). Re-exported by ``headers.py``, where ``REQUEST_HEADERS`` maps codes
to them.
"""

from __future__ import annotations

from mq.protocol.header_codec import Header, Long, _header


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
