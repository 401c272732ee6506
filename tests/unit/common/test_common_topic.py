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
