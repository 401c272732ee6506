"""topics.json and subscriptionGroup.json as a RocketMQ 4.9 broker writes them, read and written back by the
broker's managers (fastjson's pretty print, Java's defaults for missing fields, a .bak of the previous file)."""

from __future__ import annotations

import json
from pathlib import Path

from mq.config import BrokerConfig
from mq.daemon.broker.subscription_group import SubscriptionGroupManager
from mq.daemon.broker.topic_config import TopicConfigManager
from mq.protocol.bodies import SubscriptionGroupConfig, TopicConfig

JAVA_TOPICS = """{
\t"dataVersion":{
\t\t"counter":3,
\t\t"timestamp":1690000000000
\t},
\t"topicConfigTable":{
\t\t"TopicTest":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":4,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":4
\t\t}
\t}
}"""


def test_topics_file_from_java_loads_and_round_trips(tmp_path: Path) -> None:
    m = TopicConfigManager(BrokerConfig(), tmp_path)
    m.file.path.parent.mkdir(parents=True)
    m.file.path.write_text(JAVA_TOPICS)
    m.load()
    assert m.get("TopicTest") == TopicConfig("TopicTest", 4, 4, 6, "SINGLE_TAG", 0, False)
    assert m.data_version.counter == 3 and m.data_version.timestamp == 1690000000000
    assert m.get("TBW102") is not None  # the built-ins are there too
    m.put(TopicConfig("Ord", order=True, perm=4))
    assert m.data_version.counter == 4
    again = TopicConfigManager(BrokerConfig(), tmp_path)
    again.load()
    assert again.get("Ord") == TopicConfig("Ord", 16, 16, 4, "SINGLE_TAG", 0, True)
    assert again.get("TopicTest") == m.get("TopicTest")
    assert json.loads(m.file.path.read_text())["topicConfigTable"]["Ord"] == {
        "order": True, "perm": 4, "readQueueNums": 16, "topicFilterType": "SINGLE_TAG", "topicName": "Ord",
        "topicSysFlag": 0, "writeQueueNums": 16}
    assert json.loads(m.file.bak_path.read_text())["topicConfigTable"]["TopicTest"]["readQueueNums"] == 4


def test_subscription_groups_take_java_defaults_and_round_trip(tmp_path: Path) -> None:
    m = SubscriptionGroupManager(BrokerConfig(), tmp_path)
    m.file.path.parent.mkdir(parents=True)
    m.file.path.write_text('{"dataVersion":{"counter":1,"timestamp":5},'
                           '"subscriptionGroupTable":{"G":{"groupName":"G","retryMaxTimes":3}}}')
    m.load()
    g = m.get("G")
    assert g == SubscriptionGroupConfig("G", retry_max_times=3)
    assert (g.consume_enable, g.consume_from_min_enable, g.consume_broadcast_enable, g.retry_queue_nums,
            g.broker_id, g.which_broker_when_consume_slowly, g.notify_consumer_ids_changed_enable) == (
        True, True, True, 1, 0, 1, True)
    m.put(SubscriptionGroupConfig("H", consume_enable=False))
    again = SubscriptionGroupManager(BrokerConfig(), tmp_path)
    again.load()
    assert again.get("H") == SubscriptionGroupConfig("H", consume_enable=False)
    assert again.get("G") == g
    assert json.loads(m.file.path.read_text())["subscriptionGroupTable"]["H"]["consumeEnable"] is False


def test_names_that_are_no_topic_or_group_are_skipped_at_load(tmp_path: Path) -> None:
    """Issue 28, defect 1: a name that reaches the store becomes a path; topics.json, subscriptionGroup.json
    and consumerOffset.json may hold names no broker could have made (edited by hand, or written by an older
    broker through the timer's back door). They are skipped with a warning."""
    from mq.daemon.broker.offsets import ConsumerOffsetManager

    cfg = tmp_path / "config"
    cfg.mkdir()
    good = {"perm": 6, "readQueueNums": 1, "writeQueueNums": 1}
    (cfg / "topics.json").write_text(json.dumps({"topicConfigTable": {
        "Good": dict(good, topicName="Good"), "../../x": dict(good, topicName="../../x"),
        "Alias": dict(good, topicName="Other")}}))
    (cfg / "subscriptionGroup.json").write_text(json.dumps({"subscriptionGroupTable": {
        "G": {"groupName": "G"}, "a/../b": {"groupName": "a/../b"}}}))
    (cfg / "consumerOffset.json").write_text(json.dumps({"offsetTable": {
        "Good@G": {"0": 5, "2147483648": 7, "1": -3}, "../x@G": {"0": 1}, "nogroup": {"0": 1}}}))
    topics = TopicConfigManager(BrokerConfig(), tmp_path)
    topics.load()
    assert "Good" in topics.all() and "../../x" not in topics.all() and "Alias" not in topics.all()
    groups = SubscriptionGroupManager(BrokerConfig(), tmp_path)
    groups.load()
    assert "G" in groups.all() and "a/../b" not in groups.all()
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.load()
    assert offsets.table() == {"Good@G": {0: 5}}


def test_topics_and_groups_are_made_only_with_valid_names(tmp_path: Path) -> None:
    import pytest

    from mq.daemon.broker.offsets import ConsumerOffsetManager
    from mq.errors import InvalidTopicError

    topics = TopicConfigManager(BrokerConfig(), tmp_path)
    topics.load()
    with pytest.raises(InvalidTopicError):
        topics.put(TopicConfig(topic_name="../x"))
    with pytest.raises(InvalidTopicError):
        topics.create_system("%RETRY%" + "g" * 121, 1, 6)  # a valid group, but too long for a topic name
    assert topics.create_in_send("a/b", "TBW102", 4) is None
    groups = SubscriptionGroupManager(BrokerConfig(), tmp_path)
    groups.load()
    assert groups.find_or_create("../g") is None and groups.find_or_create("g") is not None
    offsets = ConsumerOffsetManager(tmp_path)
    assert not offsets.commit("c", "G", "T", 2**31, 1)  # Java cannot read such a queue id back
    assert not offsets.commit("c", "G", "T", 0, -1) and not offsets.commit("c", "G", "../T", 0, 1)
    assert offsets.commit("c", "G", "T", 0, 1) and offsets.query("G", "T", 0) == 1


def test_a_topic_that_cannot_be_saved_is_not_made(tmp_path: Path, monkeypatch) -> None:
    """Issue 28, defect 6: a topic auto-created on a full disk lived in memory only, and its acknowledged
    messages' topic was gone after a crash. A topic whose topics.json write fails is not made."""
    import errno

    import pytest

    from mq.daemon.broker.topic_config import TopicConfigNotSaved
    from mq.store import config_files

    topics = TopicConfigManager(BrokerConfig(), tmp_path)
    topics.load()
    version = topics.data_version.counter

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(config_files, "write_atomically", full)
    with pytest.raises(TopicConfigNotSaved, match="No space left on device"):
        topics.create_in_send("New", "TBW102", 4)
    with pytest.raises(TopicConfigNotSaved):
        topics.create_system("%RETRY%g", 1, 6)
    assert topics.get("New") is None and topics.get("%RETRY%g") is None
    assert topics.data_version.counter == version
