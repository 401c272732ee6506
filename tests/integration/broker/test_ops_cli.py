"""`mq updateTopicPerm`, `consumerStatus`, `allocateMQ`, `sendMsgStatus`, `checkMsgSendRT`, `clusterRT` against
real daemons (and, for consumerStatus, a real Python PushConsumer on the test's loop).

As in test_admin_cli.py the daemons and the consumer run on the test's event loop; each CLI call runs in a
worker thread while the loop keeps serving."""

from __future__ import annotations

import asyncio
import json

import pytest

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.config import ConsumerConfig
from mq.protocol.bodies import TopicConfigSerializeWrapper
from mq.protocol.codes import RequestCode as R, ResponseCode as C

from tests.integration.broker.test_admin_cli import interrupt_after, mq_json, send, subprocess_mq
from tests.integration.broker.wire import heartbeat_cmd, req
from tests.integration.namesrv.conftest import register_command


def failing(mq, *args: str) -> tuple[int, dict, str]:
    """Run with --json, expect exit 1; return (exit code, parsed stdout, stderr)."""
    res = mq(*args, "--json")
    assert res.exit_code == 1, (args, res.output, res.exception)
    return res.exit_code, json.loads(res.stdout), res.stderr


def broker_topic_perm(cluster, client, topic: str) -> int:
    resp = cluster.run(client.invoke(cluster.broker_addr, req(R.GET_ALL_TOPIC_CONFIG)))
    assert resp.code == C.SUCCESS
    return TopicConfigSerializeWrapper.from_json(resp.body).topic_config_table[topic].perm


def stored(mq, topic: str) -> dict[int, int]:
    return {q["queueId"]: q["maxOffset"] for q in mq_json(mq, "topicStatus", "-t", topic)["queues"]}


# ---------------------------------------------------------------------------------------------------------
def test_update_topic_perm_broker_and_cluster(cluster, mq, client):
    assert mq("updateTopic", "-t", "OpsT1", "-c", "DefaultCluster", "-r", "3", "-w", "2").exit_code == 0
    name = cluster.broker.broker_name

    out = mq_json(mq, "updateTopicPerm", "-t", "OpsT1", "-p", "4", "-b", cluster.broker_addr)
    assert out["brokers"] == [{"brokerName": name, "addr": cluster.broker_addr, "oldPerm": 6, "newPerm": 4,
                               "status": "updated", "error": None}]
    assert broker_topic_perm(cluster, client, "OpsT1") == 4
    tc = cluster.broker.topic_config.get("OpsT1")
    assert (tc.perm, tc.read_queue_nums, tc.write_queue_nums) == (4, 3, 2)  # only perm changed
    route = mq_json(mq, "topicRoute", "-t", "OpsT1")
    assert [(q["brokerName"], q["perm"]) for q in route["queueDatas"]] == [(name, 4)]
    # read-only now: nothing can be sent to it
    res = mq("checkMsgSendRT", "-t", "OpsT1", "-a", "2")
    assert res.exit_code == 1 and "no writable queue" in str(res.exception)

    text = mq("updateTopicPerm", "-t", "OpsT1", "-p", "6", "-c", "DefaultCluster")
    assert text.exit_code == 0, text.output
    assert "4 (R)" in text.stdout and "6 (RW)" in text.stdout and "updated" in text.stdout
    assert broker_topic_perm(cluster, client, "OpsT1") == 6
    again = mq_json(mq, "updateTopicPerm", "-t", "OpsT1", "-p", "6", "-c", "DefaultCluster")
    assert [(b["oldPerm"], b["status"]) for b in again["brokers"]] == [(6, "unchanged")]

    # a broker without the topic is an error row and exit 1; so is an unreachable broker
    _, out, err = failing(mq, "updateTopicPerm", "-t", "OpsNoSuch", "-p", "2", "-c", "DefaultCluster")
    assert out["brokers"][0]["status"] == "error" and "does not exist on broker" in out["brokers"][0]["error"]
    assert "1 of 1 broker(s) failed" in err
    assert cluster.broker.topic_config.get("OpsNoSuch") is None  # not created by the attempt
    _, out, _ = failing(mq, "updateTopicPerm", "-t", "OpsT1", "-p", "2", "-b", "127.0.0.1:1")
    assert out["brokers"][0]["addr"] == "127.0.0.1:1" and "127.0.0.1:1" in out["brokers"][0]["error"]
    bad = mq("updateTopicPerm", "-t", "OpsT1", "-p", "2", "-c", "NoSuchCluster")
    assert bad.exit_code == 1 and "NoSuchCluster" in str(bad.exception)


# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def consumer(cluster, mq, client, client_config):
    """A started PushConsumer of group OpsG2 on topic OpsT2 (4 queues, 6 messages), holding every queue."""
    assert mq("updateTopic", "-t", "OpsT2", "-c", "DefaultCluster", "-r", "4", "-w", "4").exit_code == 0
    for i in range(6):
        send(cluster, client, "OpsT2", b"m%d" % i, queue_id=i % 4)
    got = []
    c = PushConsumer(ConsumerConfig(group="OpsG2", consume_from_where="FIRST"),
                     lambda msgs, ctx: (got.extend(msgs), ConsumeStatus.CONSUME_SUCCESS)[1], client_config())
    c.subscribe("OpsT2", "TagA || TagB")

    async def start():
        await c.start()
        deadline = asyncio.get_running_loop().time() + 15
        while len(c.process_queues) < 4 or len(got) < 6:
            assert asyncio.get_running_loop().time() < deadline, (len(c.process_queues), len(got))
            await c.rebalance()
            await asyncio.sleep(0.05)

    cluster.run(start())
    yield c
    cluster.run(c.shutdown(grace=1.0))


def test_consumer_status_lists_the_running_consumer(cluster, mq, consumer):
    cid = consumer.instance.client_id
    out = mq_json(mq, "consumerStatus", "-g", "OpsG2")
    assert out["group"] == "OpsG2" and out["sameSubscription"] is True and out["warnings"] == []
    [row] = out["clients"]
    assert row["clientId"] == cid and row["ok"] is True and row["error"] is None
    assert row["language"] and row["versionDesc"] == "V4_9_7"
    assert row["broker"] == cluster.broker_addr
    assert row["consumeType"] == "CONSUME_PASSIVELY" and row["messageModel"] == "CLUSTERING"
    assert "OpsT2(TagA || TagB)" in row["subscriptions"]
    # the 4 queues of OpsT2, plus the %RETRY%OpsG2 queue once its route has reached the client (timing)
    assert row["processQueues"] == len(consumer.process_queues)
    assert sorted(q.queue_id for q in consumer.process_queues if q.topic == "OpsT2") == [0, 1, 2, 3]

    text = mq("consumerStatus", "-g", "OpsG2")
    assert text.exit_code == 0 and cid in text.stdout and "CONSUME_PASSIVELY" in text.stdout

    # mqadmin consumerProgress -s true: the client consuming each queue
    progress = mq_json(mq, "consumerProgress", "-g", "OpsG2", "-t", "OpsT2", "-s", "true")["queues"]
    mine = [r for r in progress if r["topic"] == "OpsT2"]
    assert len(mine) == 4 and {r["clientIp"] for r in mine} == {row["clientAddr"]}
    assert all("clientIp" not in r for r in mq_json(mq, "consumerProgress", "-g", "OpsG2", "-t", "OpsT2")["queues"])
    shown = mq("consumerProgress", "-g", "OpsG2", "-t", "OpsT2", "--showClientIP")
    assert shown.exit_code == 0 and "Client" in shown.stdout

    info = mq_json(mq, "consumerStatus", "-g", "OpsG2", "-i", cid)
    assert info["clientId"] == cid and info["broker"] == cluster.broker_addr
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info["properties"]["PROP_CLIENT_VERSION"] == "V4_9_7"
    ours = [r for r in info["mqTable"] if r["topic"] == "OpsT2"]
    assert [(r["brokerName"], r["queueId"]) for r in ours] == [(cluster.broker.broker_name, q) for q in range(4)]
    # every message was consumed: the commit offsets the client reports are the queues' ends (2, 2, 1, 1)
    assert [r["commitOffset"] for r in ours] == [2, 2, 1, 1]
    assert [r["cachedMsgCount"] for r in ours] == [0, 0, 0, 0]
    assert {s["topic"]: s["subString"] for s in info["subscriptionSet"]}["OpsT2"] == "TagA || TagB"

    detail = mq("consumerStatus", "-g", "OpsG2", "-i", cid, "-s")
    assert detail.exit_code == 0, detail.output
    assert "Process queues" in detail.stdout and "jstack: the client sent none" in detail.stdout
    assert mq_json(mq, "consumerStatus", "-g", "OpsG2", "-b", cluster.broker_addr)["clients"][0]["ok"] is True


def test_query_msg_by_id_pushes_a_message_to_one_client(cluster, mq, consumer, client):
    """mqadmin ``queryMsgById -i ID -g GROUP -d CLIENTID``: the client consumes the message at once and answers."""
    cid = consumer.instance.client_id
    sent = send(cluster, client, "OpsT2", b"pushed", queue_id=1)
    out = mq_json(mq, "queryMsgById", "-i", sent.msg_id, "-g", "OpsG2", "-d", cid)
    assert [(r["msgId"], r["offsetMsgId"], r["consumeResult"]) for r in out] == [(sent.msg_id, sent.msg_id,
                                                                                  "CR_SUCCESS")]
    text = mq("queryMsgById", "--msgId", sent.msg_id, "--consumerGroup", "OpsG2", "--clientId", cid)
    assert text.exit_code == 0 and "CR_SUCCESS" in text.stdout
    nobody = mq("queryMsgById", "-i", sent.msg_id, "-g", "OpsG2", "-d", "10.9.9.9@nobody")
    assert nobody.exit_code == 1 and "10.9.9.9@nobody" in (nobody.output + str(nobody.exception))
    assert mq("queryMsgById", "-i", sent.msg_id, "-g", "OpsG2").exit_code == 2  # -g needs -d


def test_consumer_status_failures(cluster, mq, consumer, client):
    offline = mq("consumerStatus", "-g", "OpsNobody")
    assert offline.exit_code == 1 and "not online" in str(offline.exception)
    unknown = mq("consumerStatus", "-g", "OpsG2", "-i", "10.9.9.9@nobody")
    assert unknown.exit_code == 1 and "not online" in str(unknown.exception)
    assert "10.9.9.9@nobody" in str(unknown.exception)

    # a second "client" that heartbeats but cannot answer running-info requests: an error row, exit 1
    hb = heartbeat_cmd("10.1.1.1@mute", consumer_group="OpsG2", topic="OpsT2")
    assert cluster.run(client.invoke(cluster.broker_addr, hb)).code == C.SUCCESS
    _, out, err = failing(mq, "consumerStatus", "-g", "OpsG2")
    rows = {r["clientId"]: r for r in out["clients"]}
    assert set(rows) == {consumer.instance.client_id, "10.1.1.1@mute"}
    assert rows[consumer.instance.client_id]["ok"] is True
    assert rows["10.1.1.1@mute"]["ok"] is False and "not supported" in rows["10.1.1.1@mute"]["error"]
    assert "1 of 2 client(s) did not answer" in err

    code, _, err = subprocess_mq(cluster, "consumerStatus", "-g", "OpsNobody")
    assert code == 1 and "not online" in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1


# ---------------------------------------------------------------------------------------------------------
def test_allocate_mq_averagely(cluster, mq):
    assert mq("updateTopic", "-t", "OpsT3", "-c", "DefaultCluster", "-r", "8", "-w", "8").exit_code == 0
    out = mq_json(mq, "allocateMQ", "-t", "OpsT3", "-i", "10.0.0.3@c,10.0.0.1@a,10.0.0.2@b")
    assert out["queues"] == 8
    got = {cid: [(q["brokerName"], q["queueId"]) for q in qs] for cid, qs in out["result"].items()}
    name = cluster.broker.broker_name
    assert got == {"10.0.0.1@a": [(name, 0), (name, 1), (name, 2)], "10.0.0.2@b": [(name, 3), (name, 4), (name, 5)],
                   "10.0.0.3@c": [(name, 6), (name, 7)]}
    text = mq("allocateMQ", "-t", "OpsT3", "-i", "x,y")
    assert text.exit_code == 0 and f"{name}:0 {name}:1 {name}:2 {name}:3" in text.stdout
    missing = mq("allocateMQ", "-t", "OpsNoSuchTopic", "-i", "a,b")
    assert missing.exit_code == 1 and "OpsNoSuchTopic" in str(missing.exception)


# ---------------------------------------------------------------------------------------------------------
def test_send_msg_status_to_the_broker_topic(cluster, mq):
    name = cluster.broker.broker_name
    before = sum(stored(mq, name).values())
    out = mq_json(mq, "sendMsgStatus", "-b", name, "-c", "5", "-s", "100")
    assert out["topic"] == name and out["summary"]["ok"] == 5 and out["summary"]["failed"] == 0
    rows = out["results"]
    assert [r["status"] for r in rows] == ["SEND_OK"] * 5 and all(r["rtMs"] > 0 for r in rows)
    assert [r["queueOffset"] for r in rows] == list(range(before, before + 5))
    assert sum(stored(mq, name).values()) == before + 5
    msg = mq_json(mq, "queryMsgById", "-i", rows[2]["offsetMsgId"])["messages"][0]
    assert msg["body"] == ("hello jodie" * 10)[:100] and msg["topic"] == name

    text = mq("sendMsgStatus", "-b", name, "-c", "2")
    assert text.exit_code == 0 and "Avg RT" in text.stdout and "SEND_OK" in text.stdout
    unknown = mq("sendMsgStatus", "-b", "no-such-broker")
    assert unknown.exit_code == 1 and "not known to the name server" in str(unknown.exception)


def test_check_msg_send_rt_round_robin(cluster, mq):
    assert mq("updateTopic", "-t", "OpsT5", "-c", "DefaultCluster", "-r", "2", "-w", "2").exit_code == 0
    out = mq_json(mq, "checkMsgSendRT", "-t", "OpsT5", "-a", "6", "-s", "64")
    assert [(r["queueId"], r["queueOffset"], r["status"]) for r in out["results"]] == [
        (0, 0, "SEND_OK"), (1, 0, "SEND_OK"), (0, 1, "SEND_OK"), (1, 1, "SEND_OK"), (0, 2, "SEND_OK"),
        (1, 2, "SEND_OK")]
    s = out["summary"]
    assert (s["count"], s["ok"], s["failed"]) == (6, 6, 0)
    assert s["avgRtMs"] == round(sum(r["rtMs"] for r in out["results"][1:]) / 5, 3)
    assert stored(mq, "OpsT5") == {0: 3, 1: 3}
    body = mq_json(mq, "queryMsgById", "-i", out["results"][0]["offsetMsgId"])["messages"][0]["body"]
    assert body == "a" * 64

    missing = mq("checkMsgSendRT", "-t", "OpsNoSuchTopic", "-a", "3")
    assert missing.exit_code == 1 and "no route for topic 'OpsNoSuchTopic'" in str(missing.exception)
    assert cluster.broker.topic_config.get("OpsNoSuchTopic") is None  # not auto-created through TBW102


def test_cluster_rt_every_broker(cluster, mq, broker_factory):
    name = cluster.broker.broker_name
    before = sum(stored(mq, name).values())
    [rnd] = [mq_json(mq, "clusterRT", "-a", "4", "-s", "16")]
    assert rnd["round"] == 1 and rnd["amount"] == 4
    assert [(b["cluster"], b["broker"], b["ok"], b["failed"]) for b in rnd["brokers"]] == [
        ("DefaultCluster", name, 4, 0)]
    assert sum(stored(mq, name).values()) == before + 4
    tlog = mq("clusterRT", "-a", "2", "-p", "true", "-m", "roomA", "-c", "DefaultCluster")
    assert tlog.exit_code == 0, tlog.output
    assert tlog.stdout.strip().split("|")[1:4] == ["roomA", "DefaultCluster", name]

    # a second broker whose own topic takes no writes: its row fails, the exit code is 1, the first is measured
    other = broker_factory(broker_name="ops-broker-b", broker_topic_enable=False)
    lines = mq("clusterRT", "-a", "3", "--json")
    assert lines.exit_code == 1, lines.output
    rows = {b["broker"]: b for b in json.loads(lines.stdout)["brokers"]}
    assert (rows[name]["ok"], rows[name]["failed"]) == (3, 0)
    assert (rows[other.broker_name]["ok"], rows[other.broker_name]["failed"]) == (0, 3)
    assert "no writable queue" in rows[other.broker_name]["error"]
    assert "ops-broker-b" in lines.stderr
    assert mq("sendMsgStatus", "-b", other.broker_name, "-c", "1").exit_code == 1

    two = mq("clusterRT", "-a", "1", "-c", "DefaultCluster", "--rounds", "2", "-i", "0.1")
    assert two.exit_code == 1 and "round 1" in two.stdout and "round 2" in two.stdout
    unknown = mq("clusterRT", "-c", "NoSuchCluster")
    assert unknown.exit_code == 1 and "NoSuchCluster" in str(unknown.exception)


def test_cluster_rt_interval_alone_repeats_until_interrupted(cluster):
    """mqadmin's ``clusterRT -i N`` measures every N seconds until stopped: -i without -r loops until Ctrl-C."""
    code, out = interrupt_after(cluster, ["clusterRT", "-a", "1", "-c", "DefaultCluster", "-i", "0.05", "--json"],
                                b'"round":', 3)  # more rounds than the default one
    assert code == 130, out  # stopped by Ctrl-C, no send failed
    assert '"round": 1' in out and '"round": 3' in out


def test_unreachable_broker_is_measured_as_failures_and_given_up(cluster, mq, client):
    """A broker the name server lists but nobody answers for: a few sends fail, the rest are skipped (not one
    timeout per message), the reachable broker is still measured, exit 1."""
    ghost = register_command(broker_name="ops-ghost", broker_addr="127.0.0.1:1", topics={"ops-ghost": 1})
    assert cluster.run(client.invoke(cluster.namesrv_addr, ghost)).code == C.SUCCESS

    res = mq("clusterRT", "-a", "10", "-c", "DefaultCluster", "--json")
    assert res.exit_code == 1, res.output
    rows = {b["broker"]: b for b in json.loads(res.stdout)["brokers"]}
    assert (rows["ops-ghost"]["ok"], rows["ops-ghost"]["failed"], rows["ops-ghost"]["skipped"]) == (0, 10, 7)
    assert "127.0.0.1:1" in rows["ops-ghost"]["error"]
    name = cluster.broker.broker_name
    assert (rows[name]["ok"], rows[name]["failed"], rows[name]["skipped"]) == (10, 0, 0)

    _, out, err = failing(mq, "sendMsgStatus", "-b", "ops-ghost", "-c", "5")
    assert [r["status"] for r in out["results"]] == ["FAILED"] * 3
    assert (out["summary"]["failed"], out["summary"]["skipped"]) == (5, 2) and "5 of 5 send(s) failed" in err
