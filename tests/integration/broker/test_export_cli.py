"""`mq exportMetadata`, `exportConfigs`, `exportMetrics` (mqadmin's export/ commands) against real daemons: the file
each writes under -f, its document, --json, and the errors."""

from __future__ import annotations

import json
import os

import pytest

from mq.cli.export_admin import (BROKER_CONFIG_KEYS, is_user_group, is_user_topic, merge_tables,
                                 message_average_size, metadata_file_name, total_data)
from mq.common import properties as P
from mq.protocol.codes import ResponseCode as C

from tests.integration.broker.wire import heartbeat_cmd, props, send_cmd
from tests.integration.broker.test_admin_cli import subprocess_mq

CLUSTER = "DefaultCluster"


def mq_json(mq, *args: str):
    res = mq(*args, "--json")
    assert res.exit_code == 0, (args, res.output, res.exception)
    return json.loads(res.stdout)


@pytest.fixture
def out(tmp_path):
    """Where the exports go: not tmp_path itself, which holds the brokers' stores."""
    return tmp_path / "export"


def read(path) -> dict:
    return json.loads(path.read_text())


def ok(res) -> None:
    assert res.exit_code == 0, (res.output, res.exception)


def make_metadata(cluster, mq) -> None:
    """Two topics, a group, and the group's retry and DLQ topics."""
    ok(mq("updateTopic", "-t", "ExpT1", "-c", CLUSTER, "-r", "3", "-w", "4"))
    ok(mq("updateTopic", "-t", "ExpT2", "-c", CLUSTER, "-r", "2", "-w", "2", "-p", "4"))
    ok(mq("updateSubGroup", "-g", "ExpG1", "-c", CLUSTER, "-q", "2", "-r", "5"))
    for topic in ("%RETRY%ExpG1", "%DLQ%ExpG1"):
        ok(mq("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "1", "-w", "1"))


# ---------------------------------------------------------------------------------------------------------
# exportMetadata
# ---------------------------------------------------------------------------------------------------------
def test_export_metadata_of_a_cluster(cluster, mq, out):
    make_metadata(cluster, mq)
    res = mq("exportMetadata", "-c", CLUSTER, "-f", str(out / "out"))
    ok(res)
    path = out / "out" / "metadata.json"
    assert f"export {path} success" in res.stdout and f"of cluster {CLUSTER}" in res.stdout

    doc = read(path)
    assert set(doc) == {"topicConfigTable", "subscriptionGroupTable", "exportTime"}
    topics = doc["topicConfigTable"]
    assert topics["ExpT1"] == {"topicName": "ExpT1", "readQueueNums": 3, "writeQueueNums": 4, "perm": 6,
                               "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
    assert (topics["ExpT2"]["readQueueNums"], topics["ExpT2"]["perm"]) == (2, 4)
    assert not any(t.startswith(("%RETRY%", "%DLQ%")) for t in topics)  # no -s
    system = set(cluster.broker.topic_config.system_topics())
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX"} <= system
    assert not system & set(topics)
    groups = doc["subscriptionGroupTable"]
    assert groups["ExpG1"]["retryQueueNums"] == 2 and groups["ExpG1"]["retryMaxTimes"] == 5
    assert groups["ExpG1"]["groupName"] == "ExpG1"
    assert not {"TOOLS_CONSUMER", "SELF_TEST_C_GROUP", "CID_RMQ_SYS_TRANS"} & set(groups)
    assert isinstance(doc["exportTime"], int) and doc["exportTime"] > 1_600_000_000_000

    special = read_export(mq, out / "s", "metadata.json", "-c", CLUSTER, "-s")
    assert {"%RETRY%ExpG1", "%DLQ%ExpG1", "ExpT1"} <= set(special["topicConfigTable"])


def read_export(mq, directory, name: str, *args: str) -> dict:
    ok(mq("exportMetadata", "-f", str(directory), *args))
    assert [p.name for p in directory.iterdir()] == [name]
    return read(directory / name)


def test_export_metadata_topic_or_group_only(cluster, mq, out):
    make_metadata(cluster, mq)
    topics = read_export(mq, out / "t", "topic.json", "-c", CLUSTER, "-t")
    assert set(topics) == {"topicConfigTable", "exportTime"} and "ExpT1" in topics["topicConfigTable"]
    groups = read_export(mq, out / "g", "subscriptionGroup.json", "--clusterName", CLUSTER,
                         "--subscriptionGroup")
    assert set(groups) == {"subscriptionGroupTable", "exportTime"} and "ExpG1" in groups["subscriptionGroupTable"]
    both = read_export(mq, out / "tg", "topic.json", "-c", CLUSTER, "-t", "-g")  # mqadmin: -t wins
    assert set(both) == {"topicConfigTable", "exportTime"}


def test_export_metadata_of_one_broker(cluster, mq, out):
    make_metadata(cluster, mq)
    b = cluster.broker_addr
    topics = read_export(mq, out / "t", "topic.json", "-b", b, "-t")
    assert set(topics) == {"topicConfigTable", "dataVersion"}  # mqadmin writes the broker's wrapper as is
    assert set(topics["dataVersion"]) == {"timestamp", "counter"}
    assert topics["topicConfigTable"]["ExpT1"]["writeQueueNums"] == 4
    assert "%RETRY%ExpG1" not in topics["topicConfigTable"]
    special = read_export(mq, out / "ts", "topic.json", "--brokerAddr", b, "--topic", "--specialTopic")
    assert "%DLQ%ExpG1" in special["topicConfigTable"]
    groups = read_export(mq, out / "g", "subscriptionGroup.json", "-b", b, "-g")
    assert set(groups) == {"subscriptionGroupTable", "dataVersion"} and "ExpG1" in groups["subscriptionGroupTable"]
    both = read_export(mq, out / "m", "metadata.json", "-b", b)  # mqadmin writes nothing here
    assert set(both) == {"topicConfigTable", "subscriptionGroupTable", "exportTime"}
    assert "ExpT2" in both["topicConfigTable"] and "ExpG1" in both["subscriptionGroupTable"]


def test_export_metadata_merges_the_masters_of_a_cluster(cluster, mq, out, broker_factory):
    broker_factory(broker_name="exp-broker-b")
    ok(mq("updateTopic", "-t", "ExpMerged", "-c", CLUSTER, "-r", "3", "-w", "5"))
    ok(mq("updateSubGroup", "-g", "ExpMergedG", "-c", CLUSTER, "-q", "2"))
    ok(mq("updateTopic", "-t", "ExpOnlyA", "-b", cluster.broker_addr, "-r", "2", "-w", "2"))
    doc = read_export(mq, out / "e", "metadata.json", "-c", CLUSTER)
    topics = doc["topicConfigTable"]
    assert (topics["ExpMerged"]["readQueueNums"], topics["ExpMerged"]["writeQueueNums"]) == (6, 10)
    assert (topics["ExpOnlyA"]["readQueueNums"], topics["ExpOnlyA"]["writeQueueNums"]) == (2, 2)
    assert doc["subscriptionGroupTable"]["ExpMergedG"]["retryQueueNums"] == 4


def test_export_metadata_json_output(cluster, mq, out):
    make_metadata(cluster, mq)
    printed = mq_json(mq, "exportMetadata", "-c", CLUSTER, "-f", str(out))
    assert printed["file"] == str(out / "metadata.json")
    assert printed["document"] == read(out / "metadata.json")
    assert "ExpT1" in printed["document"]["topicConfigTable"]


def test_export_metadata_errors(cluster, mq, out):
    for args in ([], ["-c", CLUSTER, "-b", cluster.broker_addr], ["-b", "nohost"]):
        res = mq("exportMetadata", "-f", str(out), *args)
        assert res.exit_code == 2, (args, res.output)
    unknown = mq("exportMetadata", "-c", "NoSuchCluster", "-f", str(out / "x"))
    assert unknown.exit_code == 1 and "NoSuchCluster" in str(unknown.exception)
    assert not (out / "x").exists()  # nothing written

    blocker = out / "a-file"
    out.mkdir()
    blocker.write_text("")
    code, out, err = subprocess_mq(cluster, "exportMetadata", "-c", CLUSTER, "-f", str(blocker / "sub"))
    assert code == 1 and out == ""
    assert err.strip().count("\n") == 0 and "cannot write" in err and str(blocker / "sub") in err


# ---------------------------------------------------------------------------------------------------------
# exportConfigs
# ---------------------------------------------------------------------------------------------------------
def test_export_configs(cluster, mq, mq_at, out, namesrv_factory):
    res = mq("exportConfigs", "-c", CLUSTER, "-f", str(out))
    ok(res)
    path = out / "configs.json"
    assert f"export {path} success" in res.stdout and "1 master(s)" in res.stdout
    doc = read(path)
    assert set(doc) == {"brokerConfigs", "clusterScale"}
    name = cluster.broker.broker_name
    cfg = doc["brokerConfigs"][name]
    assert set(cfg) == set(BROKER_CONFIG_KEYS) and len(cfg) == 16  # the keys mqadmin keeps, and only those
    assert (cfg["brokerName"], cfg["brokerClusterName"], cfg["brokerId"], cfg["brokerRole"]) == (
        name, CLUSTER, "0", "ASYNC_MASTER")
    assert cfg["autoCreateTopicEnable"] in ("true", "false") and cfg["maxMessageSize"].isdigit()
    assert doc["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}

    other = namesrv_factory()  # namesrvSize counts the -n list, as mqadmin's getNameServerAddressList
    two = mq_at(f"{cluster.namesrv_addr};{other.address}", "exportConfigs", "--clusterName", CLUSTER,
                "--filePath", str(out / "two"), "--json")
    ok(two)
    printed = json.loads(two.stdout)
    assert printed["file"] == str(out / "two" / "configs.json")
    assert printed["document"]["clusterScale"]["namesrvSize"] == 2
    assert printed["document"] == read(out / "two" / "configs.json")


def test_export_configs_counts_masters_and_slaves(cluster, mq, out, broker_factory):
    broker_factory(broker_name="exp-broker-b")
    broker_factory(broker_name="exp-broker-b", broker_id=1, broker_role="SLAVE", ha_listen_port=0)
    doc = mq_json(mq, "exportConfigs", "-c", CLUSTER, "-f", str(out))["document"]
    assert doc["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 2, "slaveBrokerSize": 1}
    assert set(doc["brokerConfigs"]) == {cluster.broker.broker_name, "exp-broker-b"}
    assert doc["brokerConfigs"]["exp-broker-b"]["brokerId"] == "0"  # the master's config


def test_export_configs_errors(cluster, mq, out):
    missing = mq("exportConfigs", "-f", str(out))
    assert missing.exit_code == 2 and "Missing option '-c'" in missing.output
    unknown = mq("exportConfigs", "-c", "NoSuchCluster", "-f", str(out))
    assert unknown.exit_code == 1 and "NoSuchCluster" in str(unknown.exception)
    assert not (out / "configs.json").exists()


# ---------------------------------------------------------------------------------------------------------
# exportMetrics
# ---------------------------------------------------------------------------------------------------------
def test_export_metrics(cluster, mq, client, run, out):
    make_metadata(cluster, mq)
    for i in range(3):
        resp = run(client.invoke(cluster.broker_addr, send_cmd("ExpT1", b"x" * 100, queue_id=i)))
        assert resp.code == C.SUCCESS
    delayed = props(tags="T", **{P.DELAY_TIME_LEVEL: "3"})
    assert run(client.invoke(cluster.broker_addr, send_cmd("ExpT1", b"later", properties=delayed))).code == C.SUCCESS
    assert run(client.invoke(cluster.broker_addr, heartbeat_cmd("10.0.0.9@exp", consumer_group="ExpG1",
                                                                   topic="ExpT1"))).code == C.SUCCESS

    res = mq("exportMetrics", "-c", CLUSTER, "-f", str(out))
    ok(res)
    path = out / "metrics.json"
    assert f"export {path} success" in res.stdout and "1 broker(s)" in res.stdout
    doc = read(path)
    assert set(doc) == {"evaluateReport", "totalData"}
    report = doc["evaluateReport"][cluster.broker.broker_name]
    assert set(report) == {"runtimeEnv", "runtimeQuota", "runtimeVersion"}
    # cpuNum: the config's clientCallbackExecutorThreads, as mqadmin reads it; no totalMemKBytes (nor in 4.9.7)
    assert report["runtimeEnv"] == {"cpuNum": str(os.cpu_count())}
    quota = report["runtimeQuota"]
    assert set(quota) == {"diskRatio", "tps", "oneDayNum", "messageAverageSize", "topicSize", "groupSize"}
    assert set(quota["diskRatio"]) == {"commitLogDiskRatio", "consumeQueueDiskRatio"}
    assert set(quota["tps"]) == {"normalInTps", "normalOutTps", "transInTps", "scheduleInTps"}
    assert quota["tps"]["normalInTps"] >= 0.0 and quota["tps"]["transInTps"] == 0.0
    assert quota["oneDayNum"] == {"normalOneDayInNum": 0, "normalOneDayOutNum": 0, "transOneDayInNum": 0,
                                  "scheduleOneDayInNum": quota["oneDayNum"]["scheduleOneDayInNum"]}
    assert float(quota["messageAverageSize"]) > 100  # four messages of 100+ body bytes, plus their headers
    assert quota["topicSize"] == 2  # ExpT1, ExpT2: no system, retry or DLQ topics
    assert quota["groupSize"] == 1  # ExpG1
    assert report["runtimeVersion"] == {"rocketmqVersion": "V4_9_7", "clientInfo": ["JAVA%V4_9_7"]}

    tps = doc["totalData"]["totalTps"]
    assert tps == {"totalNormalInTps": quota["tps"]["normalInTps"], "totalNormalOutTps": quota["tps"]["normalOutTps"],
                   "totalTransInTps": 0.0, "totalScheduleInTps": quota["tps"]["scheduleInTps"]}
    assert doc["totalData"]["totalOneDayNum"] == quota["oneDayNum"]

    printed = mq_json(mq, "exportMetrics", "--clusterName", CLUSTER, "--filePath", str(out / "j"))
    assert printed["file"] == str(out / "j" / "metrics.json") and printed["document"] == read(out / "j" /
                                                                                           "metrics.json")


def test_export_metrics_reads_the_half_and_schedule_topic_stats(cluster, mq, out):
    """transIn*/scheduleIn* are the TOPIC_PUT_NUMS items of the half and schedule topics (a Java broker counts
    prepared and delayed messages there): fed straight into the broker's stats, then one 10 s sample taken."""
    stats = cluster.broker.stats
    stats.on_topic_put("SCHEDULE_TOPIC_XXXX", 6, 600)
    stats.on_topic_put("RMQ_SYS_TRANS_HALF_TOPIC", 3, 300)
    later = stats.clock() + 11_000
    stats.tick(later)
    stats.clock = lambda: later
    doc = mq_json(mq, "exportMetrics", "-c", CLUSTER, "-f", str(out))["document"]
    quota = doc["evaluateReport"][cluster.broker.broker_name]["runtimeQuota"]
    assert (quota["tps"]["scheduleInTps"], quota["tps"]["transInTps"]) == (pytest.approx(0.6), pytest.approx(0.3))
    assert (quota["oneDayNum"]["scheduleOneDayInNum"], quota["oneDayNum"]["transOneDayInNum"]) == (6, 3)
    assert doc["totalData"]["totalTps"]["totalScheduleInTps"] == quota["tps"]["scheduleInTps"]
    assert doc["totalData"]["totalOneDayNum"]["transOneDayInNum"] == 3


def test_export_metrics_sums_the_brokers(cluster, mq, out, broker_factory):
    broker_factory(broker_name="exp-broker-b")
    ok(mq("updateTopic", "-t", "ExpEverywhere", "-c", CLUSTER))
    doc = mq_json(mq, "exportMetrics", "-c", CLUSTER, "-f", str(out))["document"]
    reports = doc["evaluateReport"]
    assert set(reports) == {cluster.broker.broker_name, "exp-broker-b"}
    assert all(r["runtimeQuota"]["topicSize"] == 1 for r in reports.values())
    assert doc["totalData"] == total_data(reports.values())


def test_export_metrics_errors(cluster, mq, out):
    missing = mq("exportMetrics", "-f", str(out))
    assert missing.exit_code == 2 and "Missing option '-c'" in missing.output
    unknown = mq("exportMetrics", "-c", "NoSuchCluster", "-f", str(out))
    assert unknown.exit_code == 1 and "NoSuchCluster" in str(unknown.exception)
    assert not (out / "metrics.json").exists()


# ---------------------------------------------------------------------------------------------------------
# the pure helpers (no sockets)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("topic, special, expected", [
    ("T", False, True), ("%RETRY%G", False, False), ("%DLQ%G", False, False), ("%RETRY%G", True, True),
    ("%DLQ%G", True, True), ("SYS", True, False), ("TBW102", True, False), ("rmq_sys_wheel_timer", False, False),
])
def test_user_topic_filter(topic, special, expected):
    assert is_user_topic(topic, {"SYS"}, special) is expected


def test_user_group_filter():
    assert is_user_group("G1") and is_user_group("CID_RMQ_SYSX") is True
    assert not any(is_user_group(g) for g in ("TOOLS_CONSUMER", "CID_RMQ_SYS_X", "__MONITOR_CONSUMER",
                                                "DEFAULT_CONSUMER", "CID_ONSAPI_PULL"))


def test_merge_tables_sums_only_the_named_members():
    a = {"T": {"readQueueNums": 2, "writeQueueNums": 3, "perm": 6}, "A": {"readQueueNums": 1, "writeQueueNums": 1,
                                                                          "perm": 6}}
    b = {"T": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 2}}
    merged = merge_tables([a, b], ("readQueueNums", "writeQueueNums"))
    assert merged == {"T": {"readQueueNums": 6, "writeQueueNums": 7, "perm": 2}, "A": a["A"]}
    assert a["T"]["readQueueNums"] == 2  # inputs untouched


def test_message_average_size_and_file_names():
    assert message_average_size({"putMessageAverageSize": "12.5"}) == "12.5"
    assert message_average_size({"putMessageSizeTotal": "300", "putMessageTimesTotal": "4"}) == "75.0"
    assert message_average_size({"putMessageSizeTotal": "0", "putMessageTimesTotal": "0"}) == "0.0"
    assert message_average_size({}) is None
    assert [metadata_file_name(t, g) for t, g in ((False, False), (True, False), (False, True), (True, True))] == [
        "metadata.json", "topic.json", "subscriptionGroup.json", "topic.json"]
