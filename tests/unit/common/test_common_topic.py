import pytest

from mq.common import topic as T
from mq.errors import InvalidTopicError


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%group", "a|b", "a-b_c", "x" * 127])
def test_valid(name):
    assert T.validate_topic(name) == name


@pytest.mark.parametrize("name,rule", [
    ("", "blank"), ("   ", "blank"), (None, "blank"), ("a b", "illegal characters"), ("主题", "illegal characters"),
    ("a.b", "illegal characters"), ("x" * 128, "max length"),
])
def test_invalid_names_the_rule(name, rule):
    with pytest.raises(InvalidTopicError, match=rule):
        T.validate_topic(name)


def test_system_topics():
    assert T.is_system_topic("TBW102") and T.is_system_topic("rmq_sys_anything")
    assert T.is_system_topic("DefaultCluster", {"DefaultCluster"})
    assert not T.is_system_topic("TopicTest")
    assert T.is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX")
    assert T.retry_topic("g") == "%RETRY%g" and T.dlq_topic("g") == "%DLQ%g"
    assert T.is_retry_topic("%RETRY%g") and T.is_dlq_topic("%DLQ%g")
    with pytest.raises(InvalidTopicError):
        T.validate_group("bad group")


@pytest.mark.parametrize("name", ["abc\n", "../x", "x/../Victim", "a/b", "x\x00", "..", "\n"])
def test_names_that_could_leave_a_directory_are_invalid(name):
    """``$`` matched before a trailing newline, so "abc\\n" passed; a name is checked whole now."""
    with pytest.raises(InvalidTopicError):
        T.validate_topic(name)
    assert not T.is_valid_topic(name)
    with pytest.raises(InvalidTopicError):
        T.validate_group(name)


def test_is_valid_topic():
    assert T.is_valid_topic("TopicTest") and T.is_valid_topic("%RETRY%g") and T.is_valid_topic("x" * 127)
    assert not T.is_valid_topic("x" * 128) and not T.is_valid_topic("") and not T.is_valid_topic(None)
    assert not T.is_valid_topic(b"TopicTest")


def test_internal_topics_refuse_sends_except_the_trace_topics():
    """Issue 28, defect 1: the timer topic was open to clients. Every internal topic RocketMQ refuses, the
    timer topic and every other ``rmq_sys_`` topic refuse sends; the trace topics do not."""
    for topic in (T.SCHEDULE_TOPIC, T.TRANS_HALF_TOPIC, T.TRANS_OP_HALF_TOPIC, T.TRANS_CHECK_MAX_TIME_TOPIC,
                  T.SELF_TEST_TOPIC, T.OFFSET_MOVED_EVENT, T.TIMER_TOPIC, "rmq_sys_REVIVE_LOG_c", "rmq_sys_x"):
        assert T.is_not_allowed_send_topic(topic), topic
    for topic in (T.TRACE_TOPIC, "rmq_sys_TRACE_DATA_cn", "%RETRY%g", "%DLQ%g", "TopicTest", "RMQ_SYS_X"):
        assert not T.is_not_allowed_send_topic(topic), topic
