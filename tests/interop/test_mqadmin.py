"""RocketMQ's own admin tool, mqadmin (rocketmq-tools 4.9.x, ``MQAdminStartup``), against our name server and broker.

An operator who keeps using mqadmin must find it working unchanged: every command here goes through the Java
admin client (DefaultMQAdminExt) and prints what the tool prints for a Java broker. The classpath comes from
``$MQ_MQADMIN_CLASSPATH`` (a RocketMQ 4.9.x binary distribution's ``lib/*`` will do); without it, or without
``java``, the tests skip. mqadmin insists on a logback file under ``$ROCKETMQ_HOME/conf``: the test writes a
minimal one that logs nowhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mq.common.fastjson import loads as fastjson_loads
from tests.interop.conftest import Daemons
from tests.interop.helpers import mq_cli

pytestmark = pytest.mark.interop
LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<configuration><root level="OFF"/></configuration>
"""


class MqAdmin:
    def __init__(self, classpath: str, home: Path, ns: str) -> None:
        self.classpath = classpath
        self.home = home
        self.ns = ns

    def __call__(self, *args: str, ok: bool = True) -> str:
        proc = subprocess.run(["java", "-cp", self.classpath, f"-Drocketmq.home.dir={self.home}",
                               f"-Duser.home={self.home}", "org.apache.rocketmq.tools.command.MQAdminStartup",
                               *args, "-n", self.ns], capture_output=True, text=True, timeout=90,
                              stdin=subprocess.DEVNULL)
        out = proc.stdout + proc.stderr
        if ok:
            assert "Exception" not in out and "failed" not in out, out[-3000:]
        return out


@pytest.fixture
def mqadmin(tmp_path):
    classpath = os.environ.get("MQ_MQADMIN_CLASSPATH", "")
    if not classpath or shutil.which("java") is None:
        pytest.skip("set MQ_MQADMIN_CLASSPATH to the rocketmq-tools 4.9.x classpath (and have java) to run mqadmin")
    home = tmp_path / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "logback_tools.xml").write_text(LOGBACK)
    d = Daemons(str(tmp_path))
    d.start()
    try:
        yield d, MqAdmin(classpath, home, d.namesrv.address)
    finally:
        d.stop()


def test_mqadmin_topics_messages_and_queries(mqadmin):
    d, admin = mqadmin
    ns, broker = d.namesrv.address, d.broker.address
    assert f"create topic to {broker} success" in admin("updateTopic", "-c", "DefaultCluster", "-t", "AdmT",
                                                          "-r", "4", "-w", "4")
    listing = admin("clusterList")
    assert "DefaultCluster" in listing and "broker-a" in listing and broker in listing and "V4_9_7" in listing
    assert "AdmT" in admin("topicList").split()
    route = fastjson_loads(admin("topicRoute", "-t", "AdmT"))  # fastjson: unquoted integer keys
    assert route["brokerDatas"][0]["brokerAddrs"] == {0: broker} and route["queueDatas"][0]["writeQueueNums"] == 4

    sent = admin("sendMessage", "-t", "AdmT", "-p", "hello mqadmin", "-c", "TagA", "-k", "admkey")
    row = next(line.split() for line in sent.splitlines() if line.startswith("broker-a"))
    assert row[2] == "SEND_OK"
    uniq = row[3]
    stored = mq_cli(ns, "pull", "-t", "AdmT", "--from", "first")
    assert [(m["msgId"], m["body"], m["keys"]) for m in stored] == [(uniq, "hello mqadmin", "admkey")]
    offset_id, queue_id = stored[0]["offsetMsgId"], str(stored[0]["queueId"])

    assert uniq in admin("queryMsgByKey", "-t", "AdmT", "-k", "admkey")
    for out in (admin("queryMsgByUniqueKey", "-t", "AdmT", "-i", uniq), admin("queryMsgById", "-i", offset_id),
                admin("queryMsgByOffset", "-t", "AdmT", "-b", "broker-a", "-i", queue_id, "-o", "0")):
        assert "Topic:               AdmT" in out or "topic=AdmT" in out, out
        assert "admkey" in out
    assert "hello mqadmin" in admin("printMsg", "-t", "AdmT")
    status = admin("topicStatus", "-t", "AdmT")
    assert [line.split()[:4] for line in status.splitlines() if line.startswith("broker-a")
            and line.split()[1] == queue_id] == [["broker-a", queue_id, "0", "1"]]
    cq = admin("queryCq", "-t", "AdmT", "-q", queue_id, "-i", "0", "-c", "1")
    assert f"physicOffset={int(offset_id[-16:], 16)}" in cq  # an offsetMsgId ends with the commit-log offset

    assert "delete topic [AdmT] from cluster [DefaultCluster] success" in admin("deleteTopic", "-c",
                                                                                 "DefaultCluster", "-t", "AdmT")
    assert d.broker.topic_config.get("AdmT") is None


def test_mqadmin_broker_groups_and_name_server(mqadmin, tmp_path):
    d, admin = mqadmin
    broker = d.broker.address
    status = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in
                                               admin("brokerStatus", "-b", broker).splitlines() if ":" in line)}
    assert status["brokerVersionDesc"] == "V4_9_7" and "commitLogMaxOffset" in status

    assert "update broker config success" in admin("updateBrokerConfig", "-b", broker, "-k", "fileReservedTime",
                                                   "-v", "48")
    assert "fileReservedTime                                  =  48" in admin("getBrokerConfig", "-b", broker)
    assert d.broker.store.cleaner.config.file_reserved_time == 48
    export = tmp_path / "export"
    for command in ("exportConfigs", "exportMetadata", "exportMetrics"):
        assert "success" in admin(command, "-c", "DefaultCluster", "-f", str(export))
    configs = json.loads((export / "configs.json").read_text())
    assert configs["brokerConfigs"]["broker-a"]["fileReservedTime"] == "48"

    assert "create subscription group" in admin("updateSubGroup", "-c", "DefaultCluster", "-g", "AdmG", "-r", "5")
    assert "retryMaxTimes                           =  5" in admin("getConsumerConfig", "-g", "AdmG")
    assert "delete subscription group [AdmG]" in admin("deleteSubGroup", "-g", "AdmG", "-c", "DefaultCluster")
    assert d.broker.subscription_groups.get("AdmG") is None

    assert "OK" in admin("wipeWritePerm", "-b", "broker-a")
    assert "OK" in admin("addWritePerm", "-b", "broker-a")
    assert "success" in admin("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "AdmT", "-v", "broker-a:4")
    assert "success" in admin("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "AdmT")
    config = admin("getNamesrvConfig")
    assert f"============{d.namesrv.address}============" in config and "kvConfigPath" in config
    for command in ("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"):
        assert "success" in admin(command, "-c", "DefaultCluster")


def test_mqadmin_sees_a_live_consumer_group(mqadmin):
    d, admin = mqadmin
    ns = d.namesrv.address
    mq_cli(ns, "updateTopic", "-t", "AdmLive", "-c", "DefaultCluster", "-r", "2", "-w", "2")
    mq_cli(ns, "send", "-t", "AdmLive", "--tag", "TagA", "--count", "4")
    consumer = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "consume", "-t", "AdmLive", "-g", "AdmLiveG",
                                 "-n", ns, "--count", "1000", "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        for _ in range(4):  # it consumed the four messages
            assert consumer.stdout.readline(), consumer.stderr.read()
        # the client commits offsets every few seconds; until it has, consumerProgress has nothing to show (a
        # Java broker answers the same way: the group's topics come from its committed offsets)
        deadline = time.monotonic() + 20
        ends = {q: d.broker.store.get_max_offset("AdmLive", q) for q in (0, 1)}
        while {q["queueId"]: q["consumerOffset"] for q in mq_cli(ns, "consumerProgress", "-g", "AdmLiveG")["queues"]
               if q["topic"] == "AdmLive"} != ends:
            assert time.monotonic() < deadline, "the consumer never committed its offsets"
            time.sleep(0.5)
        connection = admin("consumerConnection", "-g", "AdmLiveG")
        assert "PYTHON" in connection or "OTHER" in connection or "JAVA" in connection, connection
        assert "AdmLive" in connection and "CLUSTERING" in connection
        progress = admin("consumerProgress", "-g", "AdmLiveG")
        rows = [line.split() for line in progress.splitlines() if line.startswith("AdmLive ")]
        assert sorted((r[2], r[3], r[4]) for r in rows) == sorted((str(q), str(o), str(o)) for q, o in ends.items())
        assert "rollback consumer offset" in admin("resetOffsetByTime", "-g", "AdmLiveG", "-t", "AdmLive",
                                                   "-s", "now")
        assert "clone group offset success" in admin("cloneGroupOffset", "-s", "AdmLiveG", "-d", "AdmLiveG2",
                                                     "-t", "AdmLive")
    finally:
        consumer.kill()
        consumer.communicate()
