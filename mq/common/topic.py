"""Topic names: validation (FEATURES.md §1.4) and system topics (FEATURES.md §1.2-1.3)."""

from __future__ import annotations

import re

from mq.errors import InvalidTopicError

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
#: RocketMQ 5's timer topic, where messages wait for an arbitrary deliver time (``mq.daemon.broker.timer``)
TIMER_TOPIC = SYSTEM_TOPIC_PREFIX + "wheel_timer"
#: RocketMQ 5 clients of the CLOUD access channel send trace data to ``rmq_sys_TRACE_DATA_<region>``
TRACE_DATA_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "TRACE_DATA_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255

SYSTEM_TOPICS = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC, TRACE_TOPIC,
    TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
})
#: Topics no client may send to (NO_PERMISSION): RocketMQ's set (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET) and
#: the timer topic. The broker writes them itself; a client that could would choose where the broker later
#: delivers (REAL_TOPIC, REAL_QID) and when. ``is_not_allowed_send_topic`` also refuses every other internal
#: ``rmq_sys_`` topic.
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT, TIMER_TOPIC,
})

#: fullmatch, so that a trailing newline is refused too (``$`` would match before one)
_VALID = re.compile(r"[%|a-zA-Z0-9_-]+")
_valid = _VALID.fullmatch


def validate_topic(topic: str | None) -> str:
    """Return ``topic`` if valid, else raise InvalidTopicError naming the broken rule."""
    if topic is None or not topic.strip():
        raise InvalidTopicError("The specified topic is blank.")
    if not _valid(topic):
        raise InvalidTopicError(
            f"The specified topic[{topic!r}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise InvalidTopicError(f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    return topic


def is_valid_topic(topic: object) -> bool:
    """Whether ``topic`` is a legal topic name (``validate_topic`` without the reason): the store's check before
    a name becomes a directory of the consume queues, so that no name ("..", "a/b", "x\\n") can leave it."""
    return topic.__class__ is str and len(topic) <= TOPIC_MAX_LENGTH and _valid(topic) is not None  # type: ignore


def validate_group(group: str | None) -> str:
    """Client ``Validators.checkGroup``: same characters, at most 255."""
    if group is None or not group.strip():
        raise InvalidTopicError("the specified group is blank")
    if not _valid(group):
        raise InvalidTopicError(
            f"the specified group[{group!r}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    if len(group) > GROUP_MAX_LENGTH:
        raise InvalidTopicError(f"the specified group is longer than group max length {GROUP_MAX_LENGTH}.")
    return group


def is_system_topic(topic: str, extra: frozenset[str] | set[str] = frozenset()) -> bool:
    """In the system set (plus broker-specific ``extra`` names) or prefixed ``rmq_sys_``."""
    return topic in SYSTEM_TOPICS or topic in extra or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """A topic clients may not send to: RocketMQ's forbidden set, the timer topic, and any other ``rmq_sys_``
    topic (internal to brokers), except RocketMQ 5's CLOUD trace topics ``rmq_sys_TRACE_DATA_*``."""
    return topic in NOT_ALLOWED_SEND_TOPICS or (topic.startswith(SYSTEM_TOPIC_PREFIX)
                                                and not topic.startswith(TRACE_DATA_TOPIC_PREFIX))


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"
