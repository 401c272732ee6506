"""Our tools against a real RocketMQ 4.9 cluster: Apache RocketMQ's own name server and broker
(``tests/interop/java_broker.py``, ``$MQ_JAVA_BROKER_CLASSPATH``), the store that broker writes, and replication
between its brokers and ours.

An operator who points `mq` at an existing RocketMQ cluster must find every command working; one who moves to
`mq` must find the old store readable by `mq store` and servable by our broker, with its topics, consumer
offsets and key index; one who mixes them must find a slave of either kind following a master of the other."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from mq.protocol.acl import SessionCredentials
from tests.interop.conftest import Daemons
from tests.interop.helpers import mq_cli
from tests.interop.java_broker import JavaBrokerUnavailable, JavaCluster
from tests.ports import free_port

pytestmark = pytest.mark.interop
#: store geometry shared by the Java broker and the `Daemons` broker that later opens its store
STORE_CONF = {"mappedFileSizeCommitLog": 32 * 1024 * 1024, "maxHashSlotNum": 50_000, "maxIndexNum": 200_000}


@pytest.fixture
def java_cluster(tmp_path):
    c = JavaCluster(tmp_path / "java", traceTopicEnable="true", **STORE_CONF)
    try:
        c.start()
    except JavaBrokerUnavailable as exc:
        c.stop()
        pytest.skip(str(exc))
    try:
        yield c
    finally:
        c.stop()


def mq(ns: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mq.cli.main", "-n", ns, *args], capture_output=True, text=True,
                          timeout=90, stdin=subprocess.DEVNULL)


def _until(fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = fn()
        except AssertionError:
            v = None
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.5)


def test_mq_commands_work_against_a_rocketmq_cluster(java_cluster):
    ns, addr = java_cluster.namesrv, java_cluster.broker_addr
    cluster = _until(lambda: mq_cli(ns, "clusterList"))
    assert "java-broker" in json.dumps(cluster) and addr in json.dumps(cluster)

    created = mq(ns, "updateTopic", "-t", "JT", "-c", "DefaultCluster", "-r", "4", "-w", "4")
    assert created.returncode == 0, created.stderr
    route = mq_cli(ns, "topicRoute", "-t", "JT")
    assert route["brokerDatas"][0]["brokerName"] == "java-broker"
    assert {q["readQueueNums"] for q in route["queueDatas"]} == {4}

    tagged = mq_cli(ns, "send", "-t", "JT", "--tag", "TagA", "--keys", "order-1", "--body", "hello java broker")
    assert tagged["status"] == "SEND_OK" and tagged["broker"] == "java-broker"
    bulk = mq(ns, "send", "-t", "JT", "--tag", "TagB", "--count", "40", "--size", "200")
    assert bulk.returncode == 0 and "sent 40 ok, 0 failed" in bulk.stdout.replace("\n", " "), bulk.stdout

    # a tag filter evaluated by the Java broker and re-checked by us
    pulled = mq_cli(ns, "pull", "-t", "JT", "--expression", "TagA", "--count", "10")
    assert [(m["tags"], m["body"]) for m in pulled] == [("TagA", "hello java broker")]
    assert len(mq_cli(ns, "pull", "-t", "JT", "--expression", "TagB", "--count", "100")) == 40

    by_key = mq_cli(ns, "queryMsgByKey", "-t", "JT", "-k", "order-1")["messages"]
    assert [(m["uniqKey"], m["offsetMsgId"], m["body"]) for m in by_key] == [
        (tagged["msgId"], tagged["offsetMsgId"], "hello java broker")]
    for msg_id in (tagged["msgId"], tagged["offsetMsgId"]):
        found = mq_cli(ns, "queryMsgById", "-i", msg_id, "-t", "JT")
        assert "hello java broker" in json.dumps(found), msg_id

    status = mq_cli(ns, "topicStatus", "-t", "JT")["queues"]
    assert sum(q["maxOffset"] - q["minOffset"] for q in status) == 41
    stored = mq_cli(ns, "queryMsgByOffset", "-t", "JT", "-b", "java-broker", "-q", str(tagged["queueId"]),
                    "-o", str(tagged["queueOffset"]))
    assert "hello java broker" in json.dumps(stored)

    assert mq(ns, "updateSubGroup", "-g", "JG", "-c", "DefaultCluster").returncode == 0
    consumed = mq(ns, "consume", "-t", "JT", "-g", "JG", "--expression", "TagA", "--count", "1")
    assert consumed.returncode == 0 and "hello java broker" in consumed.stdout, consumed.stderr
    progress = _until(lambda: [q for q in mq_cli(ns, "consumerProgress", "-g", "JG")["queues"]
                               if q["topic"] == "JT" and q["consumerOffset"] > 0])
    assert progress, "the consumer's committed offset never reached the Java broker"

    for cmd in (["brokerStatus", "-b", addr], ["getBrokerConfig", "-b", addr], ["topicList"], ["statsAll"],
                ["getNamesrvConfig"], ["queryCq", "-t", "JT", "-q", "0", "-i", "0", "-c", "2", "-b", addr]):
        r = mq(ns, *cmd, "--json")
        assert r.returncode == 0, (cmd, r.stderr)
        json.loads(r.stdout)

    missing = mq(ns, "topicRoute", "-t", "NoSuchTopic")
    assert missing.returncode != 0 and "no route" in missing.stderr.lower()


def test_mqadmin_named_commands_against_a_rocketmq_cluster(java_cluster, tmp_path):
    """The commands that carry mqadmin's names and options, against RocketMQ's own broker."""
    ns = java_cluster.namesrv
    _until(lambda: mq_cli(ns, "clusterList"))
    assert mq(ns, "updateTopic", "-t", "JM", "-c", "DefaultCluster", "-r", "2", "-w", "2").returncode == 0
    sent = mq_cli(ns, "sendMessage", "-t", "JM", "-p", "named", "-k", "jm-key", "-c", "TagM", "-b", "java-broker",
                  "-i", "1")
    assert (sent["status"], sent["queueId"]) == ("SEND_OK", 1)
    for _ in range(3):
        assert mq_cli(ns, "send", "-t", "JM", "--tag", "TagN", "--body", "other")["status"] == "SEND_OK"
    unique = mq_cli(ns, "queryMsgByUniqueKey", "-i", sent["msgId"], "-t", "JM")["messages"]
    assert [m["body"] for m in unique] == ["named"]
    printed = mq_cli(ns, "printMsg", "-t", "JM", "-s", "TagM")
    assert [m["body"] for q in printed["queues"] for m in q["messages"]] == ["named"]
    counted = mq_cli(ns, "printMsgByQueue", "-t", "JM", "-a", "java-broker", "-i", "1", "-f", "true")
    assert counted["count"] >= 1 and {"tag": "TagM", "count": 1} in counted["tagCounts"]
    consumed = mq_cli(ns, "consumeMessage", "-t", "JM", "-c", "10")
    assert sorted(m["body"] for q in consumed["queues"] for m in q["messages"]) == ["named", "other", "other", "other"]

    assert mq(ns, "updateSubGroup", "-g", "JMG", "-c", "DefaultCluster", "-r", "7").returncode == 0
    [cfg] = mq_cli(ns, "getConsumerConfig", "-g", "JMG")
    assert cfg["brokerName"] == "java-broker" and cfg["config"]["retryMaxTimes"] == 7
    consumed = mq(ns, "consume", "-t", "JM", "-g", "JMG", "--count", "4")  # the group gets offsets on both queues
    assert consumed.returncode == 0, consumed.stderr
    for _ in range(2):
        assert mq_cli(ns, "send", "-t", "JM", "--tag", "TagN", "--body", "later")["status"] == "SEND_OK"
    monitored = mq(ns, "startMonitoring", "-r", "1", "--json")  # JMG is found through its retry topic
    assert monitored.returncode == 0, monitored.stderr
    rnd = json.loads(monitored.stdout)
    rows = {r["topic"]: r for r in rnd["undone"] if r["consumerGroup"] == "JMG"}  # JM, and %RETRY%JMG
    row = rows["JM"]
    assert (row["undoneMsgsTotal"], row["clients"]) == (2, 0) and rnd["errors"] == []
    assert row["undoneMsgsDelayTimeMills"] >= 0
    skipped = mq_cli(ns, "skipAccumulatedMessage", "-g", "JMG", "-t", "JM")["offsets"]
    assert sum(o["offset"] for o in skipped) == 6  # every queue at its end

    for cmd, name in ((["exportMetadata", "-c", "DefaultCluster"], "metadata.json"),
                      (["exportConfigs", "-c", "DefaultCluster"], "configs.json"),
                      (["exportMetrics", "-c", "DefaultCluster"], "metrics.json")):
        out = tmp_path / "export"
        r = mq(ns, *cmd, "-f", str(out), "--json")
        assert r.returncode == 0, (cmd, r.stderr)
        assert json.loads((out / name).read_text()) == json.loads(r.stdout)["document"]
    metadata = json.loads((tmp_path / "export" / "metadata.json").read_text())
    assert "JM" in metadata["topicConfigTable"] and "JMG" in metadata["subscriptionGroupTable"]
    configs = json.loads((tmp_path / "export" / "configs.json").read_text())
    assert configs["brokerConfigs"]["java-broker"]["brokerName"] == "java-broker"
    assert "java-broker" in json.loads((tmp_path / "export" / "metrics.json").read_text())["evaluateReport"]


def test_mq_trace_follows_a_message_through_a_rocketmq_broker(java_cluster):
    ns = java_cluster.namesrv
    assert _until(lambda: mq_cli(ns, "clusterList"))
    sent = mq_cli(ns, "send", "-t", "TraceJT", "--tag", "T", "--keys", "k1", "--body", "traced", "--trace")
    trace = _until(lambda: (t := mq_cli(ns, "trace", "-i", sent["msgId"], "--no-groups"))["pubs"] and t)
    assert trace, "no Pub trace record came back from the Java broker's RMQ_SYS_TRACE_TOPIC"
    [pub] = trace["pubs"]
    assert (pub["topic"], pub["tags"], pub["keys"], pub["status"]) == ("TraceJT", "T", "k1", "success")
    assert pub["store_host"] == java_cluster.broker_addr and pub["offset_msg_id"] == sent["offsetMsgId"]


def test_a_store_written_by_rocketmq_is_read_by_mq_store_and_served_by_our_broker(java_cluster, tmp_path):
    ns = java_cluster.namesrv
    assert _until(lambda: mq_cli(ns, "clusterList"))
    assert mq(ns, "updateTopic", "-t", "Moved", "-c", "DefaultCluster", "-r", "2", "-w", "2").returncode == 0
    sent = [mq_cli(ns, "send", "-t", "Moved", "--tag", "T%d" % (i % 2), "--keys", f"key-{i}", "--body", f"m{i}")
            for i in range(10)]
    assert mq(ns, "updateSubGroup", "-g", "MG", "-c", "DefaultCluster").returncode == 0
    assert mq(ns, "consume", "-t", "Moved", "-g", "MG", "--count", "3").returncode == 0
    _until(lambda: sum(q["consumerOffset"] for q in mq_cli(ns, "consumerProgress", "-g", "MG")["queues"]
                       if q["topic"] == "Moved") >= 3)
    java_cluster.stop_broker()  # its shutdown hook persists the offsets

    verify = subprocess.run([sys.executable, "-m", "mq.cli.main", "store", "verify", str(java_cluster.store),
                             "--json"], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    printed = json.loads(subprocess.run([sys.executable, "-m", "mq.cli.main", "store", "print",
                                         str(java_cluster.store), "-t", "Moved", "--count", "100", "--json"],
                                        capture_output=True, text=True, timeout=120, check=True).stdout)
    assert sorted(json.dumps(printed).count(f'"m{i}"') for i in range(10)) == [1] * 10

    root = tmp_path / "ours"
    root.mkdir()
    shutil.copytree(java_cluster.store, root / "store")
    ours = Daemons(str(root))
    ours.start()
    try:
        our_ns = ours.namesrv.address
        bodies = sorted(m["body"] for m in mq_cli(our_ns, "pull", "-t", "Moved", "--count", "100"))
        assert bodies == sorted(f"m{i}" for i in range(10))
        by_key = mq_cli(our_ns, "queryMsgByKey", "-t", "Moved", "-k", "key-7")["messages"]  # Java's index file
        assert [m["body"] for m in by_key] == ["m7"]
        assert "m4" in json.dumps(mq_cli(our_ns, "queryMsgById", "-i", sent[4]["msgId"], "-t", "Moved"))
        offsets = sum(q["consumerOffset"] for q in mq_cli(our_ns, "consumerProgress", "-g", "MG")["queues"]
                      if q["topic"] == "Moved")
        assert offsets >= 3  # the group's committed offsets came with consumerOffset.json
        more = mq_cli(our_ns, "send", "-t", "Moved", "--tag", "T0", "--body", "after the move")
        assert more["status"] == "SEND_OK"
    finally:
        ours.stop()


def _max_offset(ns: str, addr: str) -> int:
    return int(mq_cli(ns, "brokerStatus", "-b", addr)["commitLogMaxOffset"])


def _verify(store) -> dict:
    res = subprocess.run([sys.executable, "-m", "mq.cli.main", "store", "verify", str(store), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)


def test_our_slave_follows_a_rocketmq_master(tmp_path):
    """RocketMQ's master sends 32 KiB of raw log at a time, cutting records anywhere; our slave holds a cut record
    back until it is whole. Small segments make the stream cross BLANK tails too."""
    seg = 1024 * 1024
    master = JavaCluster(tmp_path / "java", mappedFileSizeCommitLog=seg)
    try:
        master.start()
    except JavaBrokerUnavailable as exc:
        master.stop()
        pytest.skip(str(exc))
    slave = None
    try:
        ns = master.namesrv
        assert _until(lambda: mq_cli(ns, "clusterList"))
        assert mq(ns, "updateTopic", "-t", "HaT", "-c", "DefaultCluster", "-r", "2", "-w", "2").returncode == 0
        assert mq(ns, "send", "-t", "HaT", "--count", "3000", "--size", "700").returncode == 0  # ~2.9 segments
        port = free_port()
        conf = tmp_path / "slave.yaml"
        conf.write_text(f"brokerName: java-broker\nbrokerId: 1\nbrokerRole: SLAVE\nlistenPort: {port}\n"
                        f"haListenPort: 0\ngrpcServerPort: -1\nnamesrvAddr: {ns}\nstorePathRootDir: {tmp_path / 'slave-store'}\n"
                        f"mappedFileSizeCommitLog: {seg}\n")
        slave = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "broker", "start", "--config", str(conf)],
                                 env={**os.environ, "MQ_HOME": str(tmp_path / "mq-home")},
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        addr = f"127.0.0.1:{port}"
        assert _until(lambda: _max_offset(ns, addr) > 0, 60), "the slave never received anything"
        assert mq(ns, "send", "-t", "HaT", "--count", "2000", "--size", "700").returncode == 0  # crosses segments
        end = _max_offset(ns, master.broker_addr)
        assert _until(lambda: _max_offset(ns, addr) == end, 60), (_max_offset(ns, addr), end)
        slave.terminate()
        assert slave.wait(60) == 0
        report = _verify(tmp_path / "slave-store")
        # an empty slave starts at the master's last segment (RocketMQ's rule), then follows to the end
        assert report["endOffset"] == end and report["records"] > 2000 and report["badRecords"] == 0
    finally:
        if slave is not None and slave.poll() is None:
            slave.kill()
            slave.wait()
        master.stop()


def test_a_rocketmq_slave_follows_our_master(tmp_path):
    seg = 1024 * 1024
    ours = Daemons(str(tmp_path / "ours"), mapped_file_size_commit_log=seg)
    (tmp_path / "ours").mkdir()
    ours.start()
    slave = None
    try:
        ns = ours.namesrv.address
        assert mq(ns, "updateTopic", "-t", "HaT", "-c", "DefaultCluster", "-r", "2", "-w", "2").returncode == 0
        assert mq(ns, "send", "-t", "HaT", "--count", "2000", "--size", "700").returncode == 0
        slave = JavaCluster(tmp_path / "java", namesrv=ns, brokerName=ours.broker.broker_name, brokerId=1,
                            brokerRole="SLAVE", mappedFileSizeCommitLog=seg)
        try:
            slave.start()
        except JavaBrokerUnavailable as exc:
            pytest.skip(str(exc))
        assert mq(ns, "send", "-t", "HaT", "--count", "2000", "--size", "700").returncode == 0
        end = ours.broker.store.get_max_phy_offset()
        assert _until(lambda: _max_offset(ns, slave.broker_addr) == end, 60), \
            (_max_offset(ns, slave.broker_addr), end)
        slave.stop_broker()
        report = _verify(slave.store)
        # an empty slave starts at the master's last segment (RocketMQ's rule, kept by our master too)
        assert report["endOffset"] == end and report["records"] > 0 and report["badRecords"] == 0
    finally:
        if slave is not None:
            slave.stop()
        ours.stop()


def test_mq_topic_list_and_acl_commands_against_rocketmq(tmp_path):
    """mq topicList -c keeps each topic's consumer groups; mq updateAclConfig without -t/-g sends no empty
    permission lists (RocketMQ refuses those: "Parse Resource format error"), and only what is given changes;
    mq getAclConfig reads RocketMQ's accounts."""
    root = tmp_path / "java"
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "plain_acl.yml").write_text(
        "globalWhiteRemoteAddresses:\naccounts:\n  - accessKey: javaadmin\n    secretKey: 12345678\n"
        "    admin: true\n")
    cluster = JavaCluster(root, aclEnable="true")
    try:
        cluster.start()
    except JavaBrokerUnavailable as exc:
        cluster.stop()
        pytest.skip(str(exc))
    admin = {**os.environ, "MQ_ACCESS_KEY": "javaadmin", "MQ_SECRET_KEY": "12345678"}

    def mq_as_admin(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mq.cli.main", "-n", cluster.namesrv, *args],
                              capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL, env=admin)
    try:
        addr = cluster.broker_addr
        assert mq_as_admin("updateTopic", "-t", "JAclT", "-c", "DefaultCluster", "-r", "2", "-w", "2").returncode == 0
        refused = mq_as_admin("resetOffsetByTime", "-g", "JAclG", "-t", "JAclT", "-s", "now")
        assert refused.returncode != 0 and "THe consumer group <JAclG> not exist" in refused.stderr
        _commit_offsets(addr, "JAclG", "JAclT", 2, SessionCredentials("javaadmin", "12345678"))
        # offline: RocketMQ answers CONSUMER_NOT_ONLINE and mq commits the offsets itself, as mqadmin does
        reset = mq_as_admin("resetOffsetByTime", "-g", "JAclG", "-t", "JAclT", "-s", "now", "--json")
        assert reset.returncode == 0, reset.stderr
        assert {o["queueId"] for o in json.loads(reset.stdout)["offsets"] if "rollbackOffset" in o} == {0, 1}
        res = mq_as_admin("updateAclConfig", "-b", addr, "-a", "javaapp01", "-s", "javasecret1", "-i", "PUB",
                          "-t", "JAclT=PUB|SUB")
        assert res.returncode == 0, res.stdout + res.stderr
        res = mq_as_admin("updateAclConfig", "-b", addr, "-a", "javaapp01", "-s", "javasecret1", "-u", "SUB")
        assert res.returncode == 0, res.stdout + res.stderr  # was "Parse Resource format error"
        shown = json.loads(mq_as_admin("getAclConfig", "-b", addr, "--json").stdout)["brokers"][0]
        app = next(a for a in shown["plainAccessConfigs"] if a["accessKey"] == "javaapp01")
        assert app["defaultTopicPerm"] == "PUB" and app["defaultGroupPerm"] == "SUB"
        assert app["topicPerms"] == ["JAclT=PUB|SUB"]
        topics = json.loads(mq_as_admin("topicList", "-c", "--json").stdout)["topics"]
        assert next(t for t in topics if t["topic"] == "JAclT")["consumerGroups"] == ["JAclG"]
    finally:
        cluster.stop()


def _commit_offsets(addr: str, group: str, topic: str, queues: int, creds) -> None:
    """UPDATE_CONSUMER_OFFSET 0 on each queue, signed (what a consumer commits)."""
    import asyncio

    from mq.protocol import headers as H
    from mq.protocol.codes import RequestCode
    from mq.protocol.command import RemotingCommand
    from mq.remoting import RemotingClient

    async def commit() -> None:
        c = RemotingClient(name="offsets")
        c.credentials = creds
        try:
            for qid in range(queues):
                resp = await c.invoke(addr, RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
                        consumer_group=group, topic=topic, queue_id=qid, commit_offset=0).to_ext()))
                assert resp.code == 0, resp.remark
        finally:
            await c.close()
    asyncio.run(commit())
