"""RocketMQ 5's pop consumption headers (POP_MESSAGE 200050, PEEK_MESSAGE 200052, ACK_MESSAGE 200051,
CHANGE_MESSAGE_INVISIBLETIME 200053) and its metadata reads (GET_TOPIC_CONFIG 351, GET_SUBSCRIPTIONGROUP_CONFIG
352), with the Java types of rocketmq-all-5.3.3's remoting/protocol/header classes (``long``/``Long`` fields are
``Long``)."""

from __future__ import annotations

from mq.protocol.header_codec import Header, Long, _header

@_header
class PopMessageRequestHeader(Header):
    """POP_MESSAGE (200050). ``queueId`` -1: any queue of the broker; ``initMode`` 0 MIN, 1 MAX;
    ``order``: a FIFO pop (the queue stays blocked until its messages are acked or come back)."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: Long
    poll_time: Long
    born_time: Long
    init_mode: int
    exp_type: str | None = None
    exp: str | None = None
    order: bool = False
    attempt_id: str | None = None


@_header
class PopMessageResponseHeader(Header):
    """Sent with every pop answer (the Java client decodes it whatever the code)."""

    pop_time: Long
    invisible_time: Long
    revive_qid: int
    rest_num: Long
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@_header
class PeekMessageRequestHeader(Header):
    """PEEK_MESSAGE (200052): read from the group's pop offset without changing anything."""

    topic: str
    queue_id: int
    max_msg_nums: int
    consumer_group: str


@_header
class AckMessageRequestHeader(Header):
    """ACK_MESSAGE (200051). ``topic`` is the message's real topic (its pop retry topic for a retried
    message); ``extraInfo`` the message's POP_CK; ``offset`` its queue offset."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long


@_header
class ChangeInvisibleTimeRequestHeader(Header):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the message comes back ``invisibleTime`` ms from now."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long
    invisible_time: Long


@_header
class ChangeInvisibleTimeResponseHeader(Header):
    pop_time: Long
    invisible_time: Long
    revive_qid: int


@_header
class GetTopicConfigRequestHeader(Header):
    """GET_TOPIC_CONFIG (351); ``lo`` (logic queue mapping) is accepted and has no effect here."""

    topic: str
    lo: bool | None = None


@_header
class GetSubscriptionGroupConfigRequestHeader(Header):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352)."""

    group: str
