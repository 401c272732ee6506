"""The admin CLI (`mq updateTopic`, `topicStatus`, `consumerProgress`, `queryMsgBy*`, ...) against real daemons.

The daemons run on the test's event loop; each CLI call runs in a worker thread (CliRunner on
``mq.cli.main:cli``, or ``python -m mq.cli.main`` in a subprocess for exit codes and stderr), so the loop keeps
serving while the command talks to it."""

from __future__ import annotations

import asyncio
import json
import sys


from mq.common import properties as P
from mq.common.msg_id import UniqKeyGenerator
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode as R, ResponseCode as C

from tests.integration.broker.wire import heartbeat_cmd, req, send_cmd


def mq_json(mq, *args: str):
    res = mq(*args, "--json")
    assert res.exit_code == 0, (args, res.output, res.exception)
    return json.loads(res.stdout)


def subprocess_mq(cluster, *args: str) -> tuple[int, str, str]:
    async def go():
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mq.cli.main", "-n", cluster.namesrv_addr,
                                                    *args, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode, out.decode(), err.decode()
    return cluster.run(go(), timeout=60)


def send(cluster, client, topic: str, body: bytes, *, queue_id: int = 0, keys: str | None = None,
         uniq: str | None = None) -> H.SendMessageResponseHeader:
    props = {P.TAGS: "TagA", P.WAIT_STORE_MSG_OK: "true"}
    if keys:
        props[P.KEYS] = keys
    props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq or UniqKeyGenerator("127.0.0.1", pid=4242).next()
    resp = cluster.run(client.invoke(cluster.broker_addr, send_cmd(topic, body, queue_id=queue_id,
                                                                   properties=P.encode_properties(props))))
    assert resp.code == C.SUCCESS, resp.remark
    return H.SendMessageResponseHeader.from_ext(resp.ext_fields)


def commit(cluster, client, group: str, topic: str, queue_id: int, offset: int) -> None:
    resp = cluster.run(client.invoke(cluster.broker_addr, req(R.UPDATE_CONSUMER_OFFSET,
                                                              H.UpdateConsumerOffsetRequestHeader(
                                                                  consumer_group=group, topic=topic,
                                                                  queue_id=queue_id, commit_offset=offset))))
    assert resp.code == C.SUCCESS


def test_update_topic_list_route_status_delete(cluster, mq, client):
    res = mq("updateTopic", "-t", "CliT1", "-c", "DefaultCluster", "-r", "3", "-w", "3")
    assert res.exit_code == 0, res.output
    assert "create topic CliT1" in res.stdout and cluster.broker_addr in res.stdout
    plain = [t["topic"] for t in mq_json(mq, "topicList")["topics"]]
    assert "CliT1" in plain
    detailed = mq_json(mq, "topicList", "-c")["topics"]  # routes asked concurrently, rows in the list's order
    assert [t["topic"] for t in detailed] == [t for t in plain if not t.startswith(("%RETRY%", "%DLQ%"))]
    assert next(t for t in detailed if t["topic"] == "CliT1") == {
        "topic": "CliT1", "clusters": ["DefaultCluster"], "brokers": [cluster.broker.broker_name],
        "consumerGroups": []}
    # the consumer groups of each topic, as mqadmin topicList -c shows them (queryTopicConsumeByWho)
    mq("updateTopic", "-t", "CliT1g", "-c", "DefaultCluster")
    commit(cluster, client, "CliT1G", "CliT1g", 0, 0)
    detailed = mq_json(mq, "topicList", "-c")["topics"]
    assert next(t for t in detailed if t["topic"] == "CliT1g")["consumerGroups"] == ["CliT1G"]
    text = mq("topicList", "-c")
    assert text.exit_code == 0 and "CliT1G" in text.stdout
    route = mq_json(mq, "topicRoute", "-t", "CliT1")
    assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == [
        (cluster.broker.broker_name, 3, 3)]
    listed = mq_json(mq, "topicRoute", "-t", "CliT1", "-l")  # mqadmin's list format: a row per broker, totals
    assert listed["brokers"] == [{"clusterName": "DefaultCluster", "brokerName": cluster.broker.broker_name,
                                  "brokerAddrs": {"0": cluster.broker_addr}, "readQueueNums": 3, "writeQueueNums": 3,
                                  "perm": 6}]
    assert listed["total"] == {"brokers": 1, "readQueueNums": 3, "writeQueueNums": 3}
    text = mq("topicRoute", "-t", "CliT1", "-l")
    assert text.exit_code == 0 and "Total:" in text.stdout and cluster.broker_addr in text.stdout
    status = mq_json(mq, "topicStatus", "-t", "CliT1")
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in status["queues"]] == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]
    table = mq("topicStatus", "-t", "CliT1")
    assert table.exit_code == 0 and "Status of CliT1" in table.stdout and "3 queue(s)" in table.stdout

    res = mq("deleteTopic", "-t", "CliT1", "-c", "DefaultCluster")
    assert res.exit_code == 0, res.output
    assert "CliT1" not in [t["topic"] for t in mq_json(mq, "topicList")["topics"]]
    assert mq("topicStatus", "-t", "CliT1").exit_code != 0


def test_namesrv_option_after_the_command_as_mqadmin_takes_it(cluster, mq_at):
    """``mq updateTopic -n ADDR ...`` works as ``mqadmin updateTopic -n ADDR ...`` does, and wins over ``mq -n``."""
    dead = "127.0.0.1:1"
    res = mq_at(dead, "updateTopic", "-n", cluster.namesrv_addr, "-t", "CliNAfter", "-c", "DefaultCluster")
    assert res.exit_code == 0, res.output
    res = mq_at(dead, "topicRoute", "-t", "CliNAfter", "--namesrv", cluster.namesrv_addr, "--json")
    assert res.exit_code == 0, res.output
    assert [q["brokerName"] for q in json.loads(res.stdout)["queueDatas"]] == [cluster.broker.broker_name]
    res = mq_at(dead, "topicRoute", "-t", "CliNAfter")
    assert res.exit_code != 0 and dead in str(res.exception)
    res = mq_at(cluster.namesrv_addr, "dlq", "list", "-g", "NoSuchGroup", "-n", dead)
    assert res.exit_code != 0 and dead in str(res.exception)
    res = mq_at(cluster.namesrv_addr, "trace", "-i", "0" * 32, "-n", dead)  # a group that runs itself takes it too
    assert res.exit_code != 0 and dead in str(res.exception)


def test_update_topic_order_and_target_errors(cluster, mq, client):
    res = mq("updateTopic", "-t", "CliOrd", "-b", cluster.broker_addr, "-w", "2", "-r", "2", "--order", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["orderConf"] == f"{cluster.broker.broker_name}:2"
    kv = cluster.run(client.invoke(cluster.namesrv_addr, req(R.GET_KV_CONFIG, H.GetKVConfigRequestHeader(
        namespace="ORDER_TOPIC_CONFIG", key="CliOrd"))))
    assert H.GetKVConfigResponseHeader.from_ext(kv.ext_fields).value == f"{cluster.broker.broker_name}:2"
    assert mq("updateTopic", "-t", "CliOrd").exit_code == 2  # neither -c nor -b
    bad = mq("updateTopic", "-t", "CliOrd", "-c", "NoSuchCluster")
    assert bad.exit_code == 1 and "NoSuchCluster" in str(bad.exception)


def test_mqadmin_spellings_of_boolean_and_queue_options(cluster, mq, client):
    """What an operator used to mqadmin types: ``-o true``/``-o false`` values, and ``queryMsgByOffset -i``."""
    name = cluster.broker.broker_name
    ordered = mq_json(mq, "updateTopic", "-t", "CliOrdV", "-b", cluster.broker_addr, "-w", "1", "-r", "1", "-o", "true")
    assert ordered["orderConf"] == f"{name}:1"
    plain = mq_json(mq, "updateTopic", "-t", "CliPlainV", "-b", cluster.broker_addr, "-o", "false")
    assert not plain.get("orderConf")
    mq_json(mq, "updateTopic", "-t", "CliUnitV", "-b", cluster.broker_addr, "-u", "true", "-s", "true")
    assert cluster.broker.topic_config.get("CliUnitV").topic_sys_flag == 3  # FLAG_UNIT | FLAG_UNIT_SUB
    send(cluster, client, "CliOrdV", b"first")
    send(cluster, client, "CliOrdV", b"second")
    at = mq_json(mq, "queryMsgByOffset", "-t", "CliOrdV", "-b", name, "-i", "0", "-o", "1")
    assert at["body"] == "second"

    commit(cluster, client, "CliGV", "CliOrdV", 0, 0)
    # -f false only moves offsets back: the latest offset (2) is ahead of the committed 0, so it stays 0
    kept = mq_json(mq, "resetOffsetByTime", "-g", "CliGV", "-t", "CliOrdV", "-s", "now", "-f", "false")
    assert [o["offset"] for o in kept["offsets"]] == [0]
    moved = mq_json(mq, "resetOffsetByTime", "-g", "CliGV", "-t", "CliOrdV", "-s", "now", "-f", "true")
    assert [o["offset"] for o in moved["offsets"]] == [2]
    assert mq("updateTopic", "-t", "CliOrdV", "-b", cluster.broker_addr, "-o", "maybe").exit_code == 2


def test_consumer_progress_and_reset(cluster, mq, client):
    mq("updateTopic", "-t", "CliT2", "-c", "DefaultCluster", "-r", "2", "-w", "2")
    for i in range(6):
        send(cluster, client, "CliT2", b"p%d" % i, queue_id=i % 2)
    commit(cluster, client, "CliG2", "CliT2", 0, 1)
    commit(cluster, client, "CliG2", "CliT2", 1, 3)
    out = mq_json(mq, "consumerProgress", "-g", "CliG2")
    rows = [(q["topic"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"]) for q in out["queues"]]
    assert rows == [("CliT2", 0, 3, 1, 2), ("CliT2", 1, 3, 3, 0)]
    assert out["totals"]["diff"] == 2 and out["totals"]["lastTimestamp"] > 0
    text = mq("consumerProgress", "-g", "CliG2")
    assert text.exit_code == 0 and "Diff Total: 2" in text.stdout
    every = mq_json(mq, "consumerProgress")["groups"]  # groups asked concurrently, listed by name
    assert [g["group"] for g in every] == sorted(g["group"] for g in every)
    groups = {g["group"]: g for g in every}
    assert groups["CliG2"]["diffTotal"] == 2 and groups["CliG2"]["clients"] == 0

    res = mq_json(mq, "resetOffsetByTime", "-g", "CliG2", "-t", "CliT2", "-s", "0")
    assert [(o["queueId"], o["offset"]) for o in res["offsets"]] == [(0, 0), (1, 0)]
    # no consumer online: the broker answers CONSUMER_NOT_ONLINE and the offsets are committed here, as mqadmin's
    # resetOffsetByTimestampOld does: #brokerOffset #consumerOffset #timestampOffset #rollbackOffset per queue
    assert [(o["brokerOffset"], o["consumerOffset"], o["timestampOffset"], o["rollbackOffset"])
            for o in res["offsets"]] == [(3, 1, 0, 0), (3, 3, 0, 0)]
    text = mq("resetOffsetByTime", "-g", "CliG2", "-t", "CliT2", "-s", "0")
    assert text.exit_code == 0 and "#rollbackOffset" in text.stdout and "no consumer online" in text.stdout
    out = mq_json(mq, "consumerProgress", "-g", "CliG2")
    assert [q["consumerOffset"] for q in out["queues"]] == [0, 0] and out["totals"]["diff"] == 6
    res = mq_json(mq, "resetOffsetByTime", "-g", "CliG2", "-t", "CliT2", "-s", "now")
    assert [o["offset"] for o in res["offsets"]] == [3, 3]
    assert mq("resetOffsetByTime", "-g", "CliG2", "-t", "CliT2", "-s", "yesterday").exit_code == 2


def test_query_messages_by_key_id_and_offset(cluster, mq, client):
    mq("updateTopic", "-t", "CliT3", "-c", "DefaultCluster", "-r", "1", "-w", "1")
    uniq = UniqKeyGenerator("127.0.0.1", pid=4242)
    ids = [uniq.next() for _ in range(3)]
    sent = [send(cluster, client, "CliT3", b"hello %d" % i, keys=f"order-{i % 2} common", uniq=ids[i]) for i in range(3)]

    found = mq_json(mq, "queryMsgByKey", "-t", "CliT3", "-k", "order-0")["messages"]
    assert [m["body"] for m in found] == ["hello 2", "hello 0"]  # newest first
    assert all(m["brokerName"] == cluster.broker.broker_name for m in found)
    assert len(mq_json(mq, "queryMsgByKey", "-t", "CliT3", "-k", "common", "--max", "2")["messages"]) == 2
    assert mq_json(mq, "queryMsgByKey", "-t", "CliT3", "-k", "nope")["messages"] == []

    by_offset_id = mq_json(mq, "queryMsgById", "-i", sent[1].msg_id)
    assert by_offset_id["foundAs"] == "offsetMsgId"
    m = by_offset_id["messages"][0]
    assert (m["body"], m["uniqKey"], m["offsetMsgId"], m["queueOffset"]) == ("hello 1", ids[1], sent[1].msg_id, 1)
    assert m["properties"]["KEYS"] == "order-1 common"
    by_uniq = mq_json(mq, "queryMsgById", "-i", ids[2], "-t", "CliT3")
    assert by_uniq["foundAs"] == "uniqKey" and by_uniq["messages"][0]["body"] == "hello 2"
    text = mq("queryMsgById", "-i", sent[0].msg_id)
    assert text.exit_code == 0 and "hello 0" in text.stdout and "Property KEYS" in text.stdout
    assert mq("queryMsgById", "-i", ids[0]).exit_code == 2  # a UNIQ_KEY needs -t

    # mqadmin queryMsgById -s true: sent again as it is, UNIQ_KEY and keys kept, to a new offset
    [again] = mq_json(mq, "queryMsgById", "-i", sent[1].msg_id, "-s", "true")
    assert (again["msgId"], again["status"], again["uniqKey"], again["originalOffsetMsgId"]) == \
        (sent[1].msg_id, "SEND_OK", ids[1], sent[1].msg_id)
    assert again["offsetMsgId"] != sent[1].msg_id and again["queueOffset"] == 3
    copies = mq_json(mq, "queryMsgByKey", "-t", "CliT3", "-k", "order-1")["messages"]
    assert [m["body"] for m in copies] == ["hello 1", "hello 1"] and {m["uniqKey"] for m in copies} == {ids[1]}
    assert all(m["properties"].get("CLUSTER") == "DefaultCluster" for m in copies)
    # -u: the unit name of the producer that sends again (its client id gets "@unit"); only with -s
    [unit] = mq_json(mq, "queryMsgById", "-i", sent[1].msg_id, "-s", "true", "-u", "UnitX")
    assert unit["status"] == "SEND_OK" and unit["queueOffset"] == 4
    assert mq("queryMsgById", "-i", sent[1].msg_id, "-u", "UnitX").exit_code == 2
    # mqadmin queryMsgByUniqueKey: the newest copy with that UNIQ_KEY; -a every copy
    newest = mq_json(mq, "queryMsgByUniqueKey", "-i", ids[1], "-t", "CliT3")
    assert newest["foundAs"] == "uniqKey" and [m["queueOffset"] for m in newest["messages"]] == [4]
    every = mq_json(mq, "queryMsgByUniqueKey", "-i", ids[1], "-t", "CliT3", "-a")["messages"]
    assert sorted(m["queueOffset"] for m in every) == [1, 3, 4] and {m["body"] for m in every} == {"hello 1"}
    assert mq("queryMsgByUniqueKey", "-i", ids[1]).exit_code == 2  # -t is required
    gone = mq("queryMsgByUniqueKey", "-i", "0" * 32, "-t", "CliT3")
    assert gone.exit_code == 1

    at = mq_json(mq, "queryMsgByOffset", "-t", "CliT3", "-b", cluster.broker.broker_name, "-q", "0", "-o", "2")
    assert (at["body"], at["queueOffset"], at["uniqKey"]) == ("hello 2", 2, ids[2])
    past = mq("queryMsgByOffset", "-t", "CliT3", "-b", cluster.broker_addr, "-q", "0", "-o", "5")
    assert past.exit_code == 1 and "has no message" in str(past.exception)


def test_broker_status_cluster_list_and_groups(cluster, mq, client, run):
    send(cluster, client, "CliT4", b"x")
    kv = mq_json(mq, "brokerStatus", "-b", cluster.broker_addr)
    assert {"putTps", "getTransferedTps", "msgPutTotalTodayNow", "brokerVersionDesc"} <= set(kv)
    per_cluster = mq_json(mq, "brokerStatus", "-c", "DefaultCluster")
    assert list(per_cluster) == [cluster.broker_addr]
    rows = mq_json(mq, "clusterList")["clusters"]
    assert len(rows) == 1 and rows[0]["address"] == cluster.broker_addr
    assert rows[0]["version"] == "V4_9_7" and rows[0]["putToday"] >= 1 and "inTps" in rows[0] and "outTps" in rows[0]
    text = mq("clusterList")
    assert text.exit_code == 0 and "InTPS" in text.stdout and "V4_9_7" in text.stdout
    more = mq_json(mq, "clusterList", "-m")["clusters"]  # mqadmin's --moreStats: messages yesterday and today
    assert more[0]["inTotalToday"] == rows[0]["putToday"] >= 1 and more[0]["inTotalYest"] >= 0
    assert "version" not in more[0]
    text = mq("clusterList", "--moreStats")
    assert text.exit_code == 0 and "In Yesterday" in text.stdout

    assert mq("updateSubGroup", "-g", "CliSG", "-b", cluster.broker_addr, "-r", "5").exit_code == 0
    assert cluster.broker.subscription_groups.get("CliSG").retry_max_times == 5
    assert mq("deleteSubGroup", "-g", "CliSG", "-c", "DefaultCluster").exit_code == 0
    assert cluster.broker.subscription_groups.get("CliSG") is None

    assert mq("updateBrokerConfig", "-b", cluster.broker_addr, "-k", "defaultTopicQueueNums", "-v", "4").exit_code == 0
    assert mq_json(mq, "getBrokerConfig", "-b", cluster.broker_addr)["defaultTopicQueueNums"] == "4"
    # a MessageStoreConfig key, as mqadmin updateBrokerConfig -k fileReservedTime sends it: the cleaner uses it
    assert mq("updateBrokerConfig", "-b", cluster.broker_addr, "-k", "fileReservedTime", "-v", "48").exit_code == 0
    config = mq_json(mq, "getBrokerConfig", "-b", cluster.broker_addr)
    assert config["fileReservedTime"] == "48"
    # every key mqadmin exportConfigs reads is there (features we lack are reported off)
    assert {k: config[k] for k in ("brokerRole", "filterServerNums", "msgTraceTopicName", "useTLS")} == {
        "brokerRole": "ASYNC_MASTER", "filterServerNums": "0", "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC",
        "useTLS": "false"}
    assert cluster.broker.store.cleaner.config.file_reserved_time == 48
    refused = mq("updateBrokerConfig", "-b", cluster.broker_addr, "-k", "mappedFileSizeCommitLog", "-v", "1024")
    assert refused.exit_code != 0 and "cannot be changed at run time" in str(refused.exception)

    offline = mq("consumerConnection", "-g", "CliG5")
    assert offline.exit_code == 1 and "not online" in str(offline.exception)
    hb = heartbeat_cmd("10.1.1.1@cli", consumer_group="CliG5", topic="CliT4", producer_group="CliPG5")
    assert run(client.invoke(cluster.broker_addr, hb)).code == C.SUCCESS
    cc = mq_json(mq, "consumerConnection", "-g", "CliG5")
    assert [c["clientId"] for c in cc["connectionSet"]] == ["10.1.1.1@cli"] and "CliT4" in cc["subscriptionTable"]
    pc = mq_json(mq, "producerConnection", "-g", "CliPG5", "-t", "CliT4")
    assert [c["clientId"] for c in pc["connectionSet"]] == ["10.1.1.1@cli"]


def test_error_paths_exit_non_zero_with_one_line(cluster):
    cases = [
        (("topicStatus", "-t", "NoSuchTopic"), "NoSuchTopic"),
        (("brokerStatus", "-b", "127.0.0.1:1"), "127.0.0.1:1"),
        (("queryMsgById", "-i", "not-an-id"), "hexadecimal"),
        (("consumerConnection", "-g", "NobodyHere"), "not online"),
    ]
    for args, needle in cases:
        code, out, err = subprocess_mq(cluster, *args)
        assert code != 0, args
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert needle in err, (args, err)
        assert "Traceback" not in err
        if code == 1:
            assert len(lines) == 1, (args, err)


def test_mqadmin_camel_case_long_names(cluster, mq, mq_at, client):
    """What an operator used to mqadmin types: its long option names (--clusterName, --msgKey, --groupName...)."""
    name = cluster.broker.broker_name
    res = mq("updateTopic", "--topic", "CliCamel", "--clusterName", "DefaultCluster", "--readQueueNums", "2",
             "--writeQueueNums", "2")
    assert res.exit_code == 0, res.output
    route = mq_json(mq, "topicRoute", "--topic", "CliCamel")
    assert [(q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == [(2, 2)]
    sent = send(cluster, client, "CliCamel", b"camel", queue_id=1, keys="camel-key")
    found = mq_json(mq, "queryMsgByKey", "--topic", "CliCamel", "--msgKey", "camel-key")["messages"]
    assert [m["body"] for m in found] == ["camel"]
    assert mq_json(mq, "queryMsgById", "--msgId", sent.msg_id)["messages"][0]["body"] == "camel"
    at = mq_json(mq, "queryMsgByOffset", "--topic", "CliCamel", "--brokerName", name, "--queueId", "1", "--offset", "0")
    assert at["body"] == "camel"

    commit(cluster, client, "CliCamelG", "CliCamel", 1, 0)
    progress = mq_json(mq, "consumerProgress", "--groupName", "CliCamelG")
    assert [(q["queueId"], q["brokerOffset"], q["diff"]) for q in progress["queues"]] == [(0, 0, 0), (1, 1, 1)]

    res = mq("updateSubGroup", "--groupName", "CliCamelSG", "--brokerAddr", cluster.broker_addr, "--retryMaxTimes", "7",
             "--consumeBroadcastEnable", "false")
    assert res.exit_code == 0, res.output
    sg = cluster.broker.subscription_groups.get("CliCamelSG")
    assert (sg.retry_max_times, sg.consume_broadcast_enable) == (7, False)
    res = mq("deleteSubGroup", "--groupName", "CliCamelSG", "--clusterName", "DefaultCluster", "--removeOffset", "true")
    assert res.exit_code == 0, res.output
    assert cluster.broker.subscription_groups.get("CliCamelSG") is None

    assert "putTps" in mq_json(mq, "brokerStatus", "--brokerAddr", cluster.broker_addr)
    listed = mq("topicList", "--clusterModel")
    assert listed.exit_code == 0 and "CliCamel" in listed.stdout
    # mqadmin's -n namesrvAddr after the command wins over a dead global -n
    res = mq_at("127.0.0.1:1", "topicStatus", "--namesrvAddr", cluster.namesrv_addr, "--topic", "CliCamel", "--json")
    assert res.exit_code == 0, res.output
    assert mq("deleteTopic", "--topic", "CliCamel", "--clusterName", "DefaultCluster").exit_code == 0
    assert "CliCamel" not in [t["topic"] for t in mq_json(mq, "topicList")["topics"]]


def test_consumer_connection_asks_only_the_given_broker(cluster, mq, client, run, broker_factory):
    other = broker_factory(broker_name="cli-broker-b")
    assert run(client.invoke(cluster.broker_addr, heartbeat_cmd("10.1.1.1@a", consumer_group="CliCCG",
                                                                   topic="CliCCT"))).code == C.SUCCESS
    assert run(client.invoke(other.address, heartbeat_cmd("10.1.1.2@b", consumer_group="CliCCG",
                                                             topic="CliCCT"))).code == C.SUCCESS

    def clients(*args: str) -> list[str]:
        return sorted(c["clientId"] for c in mq_json(mq, "consumerConnection", *args)["connectionSet"])

    assert clients("-g", "CliCCG") == ["10.1.1.1@a", "10.1.1.2@b"]  # without -b: every master
    assert clients("-g", "CliCCG", "-b", cluster.broker_addr) == ["10.1.1.1@a"]
    assert clients("--consumerGroup", "CliCCG", "--brokerAddr", other.address) == ["10.1.1.2@b"]
    text = mq("consumerConnection", "-g", "CliCCG", "-b", other.address)
    assert text.exit_code == 0 and "10.1.1.2@b" in text.stdout and "10.1.1.1@a" not in text.stdout
    assert f"on {other.address}" in text.stdout

    # a group online on the other broker only: -b of this one says so
    assert run(client.invoke(other.address, heartbeat_cmd("10.1.1.3@b", consumer_group="CliCCG2"))).code == C.SUCCESS
    assert clients("-g", "CliCCG2") == ["10.1.1.3@b"]
    offline = mq("consumerConnection", "-g", "CliCCG2", "-b", cluster.broker_addr)
    assert offline.exit_code == 1 and "not online" in str(offline.exception)


def test_broker_config_of_every_master_of_a_cluster(cluster, mq, broker_factory):
    other = broker_factory(broker_name="cli-broker-c")
    addrs = {cluster.broker_addr: cluster.broker.broker_name, other.address: other.broker_name}

    configs = mq_json(mq, "getBrokerConfig", "-c", "DefaultCluster")
    assert {addr: cfg["brokerName"] for addr, cfg in configs.items()} == addrs
    text = mq("getBrokerConfig", "--clusterName", "DefaultCluster")
    assert text.exit_code == 0, text.output
    for addr, broker_name in addrs.items():
        assert f"Config of {addr}" in text.stdout and broker_name in text.stdout
    single = mq_json(mq, "getBrokerConfig", "--brokerAddr", other.address)  # -b keeps its plain shape
    assert single["brokerName"] == other.broker_name

    res = mq("updateBrokerConfig", "-c", "DefaultCluster", "-k", "defaultTopicQueueNums", "-v", "5")
    assert res.exit_code == 0, res.output
    assert all(f"on {addr} success" in res.stdout for addr in addrs)
    assert all(mq_json(mq, "getBrokerConfig", "-b", addr)["defaultTopicQueueNums"] == "5" for addr in addrs)
    assert cluster.broker.config.default_topic_queue_nums == 5 and other.config.default_topic_queue_nums == 5
    out = mq_json(mq, "updateBrokerConfig", "--clusterName", "DefaultCluster", "--key", "defaultTopicQueueNums",
                  "--value", "6")
    assert (out["cluster"], sorted(out["brokers"]), out["failed"]) == ("DefaultCluster", sorted(addrs), {})
    assert all(mq_json(mq, "getBrokerConfig", "-b", addr)["defaultTopicQueueNums"] == "6" for addr in addrs)

    refused = mq("updateBrokerConfig", "-c", "DefaultCluster", "-k", "mappedFileSizeCommitLog", "-v", "1024")
    assert refused.exit_code == 1 and "2 of 2 broker(s) failed" in refused.stderr
    assert "cannot be changed at run time" in refused.stderr
    unknown = mq("getBrokerConfig", "-c", "NoSuchCluster")
    assert unknown.exit_code == 1 and "NoSuchCluster" in str(unknown.exception)
    assert mq("updateBrokerConfig", "-c", "NoSuchCluster", "-k", "defaultTopicQueueNums", "-v", "4").exit_code == 1


def test_query_msg_by_id_takes_a_comma_separated_list(cluster, mq, client):
    from mq.common.msg_id import create_offset_msg_id

    mq("updateTopic", "-t", "CliIds", "-c", "DefaultCluster", "-r", "1", "-w", "1")
    uniq = UniqKeyGenerator("127.0.0.1", pid=4242)
    ids = [uniq.next() for _ in range(2)]
    sent = [send(cluster, client, "CliIds", b"body %d" % i, uniq=ids[i]) for i in range(2)]

    both = mq_json(mq, "queryMsgById", "-i", f"{sent[0].msg_id},{sent[1].msg_id}")
    assert [(d["msgId"], d["foundAs"], [m["body"] for m in d["messages"]]) for d in both] == [
        (sent[0].msg_id, "offsetMsgId", ["body 0"]), (sent[1].msg_id, "offsetMsgId", ["body 1"])]
    by_uniq = mq_json(mq, "queryMsgById", "--msgId", f"{ids[1]}, {ids[0]}", "-t", "CliIds")
    assert [(d["msgId"], d["messages"][0]["body"]) for d in by_uniq] == [(ids[1], "body 1"), (ids[0], "body 0")]
    text = mq("queryMsgById", "-i", f"{sent[0].msg_id},{sent[1].msg_id}")
    assert text.exit_code == 0 and "body 0" in text.stdout and "body 1" in text.stdout
    assert f"Message {sent[1].msg_id}" in text.stdout

    host, port = cluster.broker_addr.rsplit(":", 1)
    ghost = create_offset_msg_id((host, int(port)), 10 ** 9)  # on the broker, past its commit log
    res = mq("queryMsgById", "-i", f"{sent[0].msg_id},{ghost}", "--json")
    assert res.exit_code == 1, res.output
    assert [d["msgId"] for d in json.loads(res.stdout)] == [sent[0].msg_id]  # the one found is still printed
    assert ghost in res.stderr and sent[0].msg_id not in res.stderr and "1 of 2" in res.stderr
    unknown_uniq = UniqKeyGenerator("127.0.0.1", pid=4243).next()
    res = mq("queryMsgById", "-i", f"{ids[0]},{unknown_uniq}", "-t", "CliIds")
    assert res.exit_code == 1 and unknown_uniq in res.stderr and "body 0" in res.stdout
    alone = mq("queryMsgById", "-i", ghost, "--json")
    assert alone.exit_code == 1 and alone.stdout == "" and f"message {ghost} not found" in alone.stderr


def interrupt_after(cluster, args: list[str], marker: bytes, count: int) -> tuple[int, str]:
    """Run ``mq ARGS`` in a subprocess until its output holds ``marker`` ``count`` times, then Ctrl-C it;
    (exit code, all output)."""
    import signal

    async def go() -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mq.cli.main", "-n", cluster.namesrv_addr,
                                                    *args, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        out = b""
        try:
            while out.count(marker) < count:
                chunk = await asyncio.wait_for(proc.stdout.read(4096), timeout=30)
                assert chunk, (out, await proc.stderr.read())
                out += chunk
        finally:
            proc.send_signal(signal.SIGINT)
        rest, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
        return proc.returncode, (out + rest).decode()

    return cluster.run(go(), timeout=90)


def test_cluster_list_interval_repeats_until_interrupted(cluster):
    """mqadmin's ``clusterList -i N`` prints every N seconds until stopped."""
    code, out = interrupt_after(cluster, ["clusterList", "-i", "0.2", "--json"], b'"clusters":', 3)
    assert code == 130, out
    assert out.count(cluster.broker_addr) >= 3


def test_mqadmin_send_skip_and_consumer_config(cluster, mq, client):
    """mqadmin's sendMessage (-p/-k/-c/-b/-i), skipAccumulatedMessage (offsets to the end) and getConsumerConfig."""
    name = cluster.broker.broker_name
    mq("updateTopic", "-t", "CliSkip", "-c", "DefaultCluster", "-r", "2", "-w", "2")
    sent = mq_json(mq, "sendMessage", "-t", "CliSkip", "-p", "via mqadmin", "-k", "sk1", "-c", "TagS", "-b", name,
                   "-i", "1")
    assert (sent["status"], sent["broker"], sent["queueId"], sent["queueOffset"]) == ("SEND_OK", name, 1, 0)
    got = mq_json(mq, "queryMsgByKey", "-t", "CliSkip", "-k", "sk1")["messages"]
    assert [(m["body"], m["tags"]) for m in got] == [("via mqadmin", "TagS")]
    assert mq("sendMessage", "-t", "CliSkip", "-p", "x", "-i", "1").exit_code == 2  # -i needs -b
    for i in range(4):
        send(cluster, client, "CliSkip", b"backlog %d" % i, queue_id=i % 2)
    commit(cluster, client, "CliSkipG", "CliSkip", 0, 0)
    commit(cluster, client, "CliSkipG", "CliSkip", 1, 0)
    skipped = mq_json(mq, "skipAccumulatedMessage", "-g", "CliSkipG", "-t", "CliSkip")
    assert [(o["queueId"], o["offset"]) for o in skipped["offsets"]] == [(0, 2), (1, 3)]
    assert mq_json(mq, "consumerProgress", "-g", "CliSkipG")["totals"]["diff"] == 0

    mq("updateSubGroup", "-g", "CliCfgG", "-c", "DefaultCluster", "-r", "5")
    [cfg] = mq_json(mq, "getConsumerConfig", "-g", "CliCfgG")
    assert (cfg["clusterName"], cfg["brokerName"], cfg["brokerAddr"]) == ("DefaultCluster", name, cluster.broker_addr)
    assert cfg["config"]["groupName"] == "CliCfgG" and cfg["config"]["retryMaxTimes"] == 5
    text = mq("getConsumerConfig", "-g", "CliCfgG")
    assert text.exit_code == 0 and "retryMaxTimes" in text.stdout and f"DefaultCluster:{name}" in text.stdout
    assert mq("getConsumerConfig", "-g", "NoSuchGroup").exit_code == 1
