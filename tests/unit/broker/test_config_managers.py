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
