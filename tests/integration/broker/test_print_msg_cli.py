"""`mq printMsg`, `printMsgByQueue`, `consumeMessage` (mqadmin's message dumps) against real daemons: what they
print for tags, time ranges, offsets and counts, and that they commit no consumer offset."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest
from click.testing import CliRunner

from mq.cli.main import cli
from mq.protocol import headers as H
from mq.protocol.codes import ResponseCode as C

from tests.integration.broker.wire import send_cmd


def mq_json(mq, *args: str):
    res = mq(*args, "--json")
    assert res.exit_code == 0, (args, res.output, res.exception)
    return json.loads(res.stdout)


def put(cluster, client, topic: str, body: bytes, tag: str | None, queue_id: int = 0) -> H.SendMessageResponseHeader:
    resp = cluster.run(client.invoke(cluster.broker_addr, send_cmd(topic, body, queue_id=queue_id, tags=tag)))
    assert resp.code == C.SUCCESS, resp.remark
    return H.SendMessageResponseHeader.from_ext(resp.ext_fields)


def mark() -> int:
    """A time strictly between the messages sent before and after it."""
    time.sleep(0.03)
    ms = int(time.time() * 1000)
    time.sleep(0.03)
    return ms


def mqadmin_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d#%H:%M:%S:") + f"{ms % 1000:03d}"


def create_topic(mq, topic: str, queues: int = 2) -> None:
    res = mq("updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", str(queues), "-w", str(queues))
    assert res.exit_code == 0, res.output


def bodies(doc) -> list[str]:
    return [m["body"] for q in doc["queues"] for m in q["messages"]]


def no_offsets_committed(cluster, topic: str) -> None:
    assert cluster.broker.offsets.groups_of_topic(topic) == set()


def test_print_msg_tags_time_range_and_bodies(cluster, mq, client):
    create_topic(mq, "PmT")
    put(cluster, client, "PmT", b"a0", "TagA", 0)
    put(cluster, client, "PmT", b"a1", "TagB", 1)
    t1 = mark()
    put(cluster, client, "PmT", b"b0", "TagA", 0)
    put(cluster, client, "PmT", b"b1", "TagC", 0)
    put(cluster, client, "PmT", b"b2", "TagB", 1)
    t2 = mark()
    put(cluster, client, "PmT", b"c0", "TagA", 0)

    doc = mq_json(mq, "printMsg", "-t", "PmT")
    assert doc["count"] == 6 and doc["subExpression"] == "*"
    assert [(q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"]) for q in doc["queues"]] == [
        (cluster.broker.broker_name, 0, 0, 4), (cluster.broker.broker_name, 1, 0, 2)]
    assert bodies(doc) == ["a0", "b0", "b1", "c0", "a1", "b2"]
    first = doc["queues"][0]["messages"][0]
    assert (first["tags"], first["queueOffset"], first["topic"]) == ("TagA", 0, "PmT")
    assert first["msgId"] == first["uniqKey"] and first["offsetMsgId"] != first["msgId"]

    assert bodies(mq_json(mq, "printMsg", "-t", "PmT", "-s", "TagA || TagB")) == ["a0", "b0", "c0", "a1", "b2"]
    ranged = mq_json(mq, "printMsg", "-t", "PmT", "-b", str(t1), "-e", str(t2))
    assert bodies(ranged) == ["b0", "b1", "b2"] and ranged["count"] == 3
    same = mq_json(mq, "printMsg", "-t", "PmT", "--beginTimestamp", mqadmin_time(t1), "-e", mqadmin_time(t2))
    assert bodies(same) == ["b0", "b1", "b2"]
    assert bodies(mq_json(mq, "printMsg", "-t", "PmT", "-b", str(t1), "-e", str(t2), "-s", "TagA")) == ["b0"]
    assert bodies(mq_json(mq, "printMsg", "-t", "PmT", "-b", str(t2))) == ["c0"]
    assert bodies(mq_json(mq, "printMsg", "-t", "PmT", "-e", str(t1))) == ["a0", "a1"]
    assert bodies(mq_json(mq, "printMsg", "-t", "PmT", "-e", "now")) == ["a0", "b0", "b1", "c0", "a1", "b2"]
    assert set(bodies(mq_json(mq, "printMsg", "-t", "PmT", "-d", "false"))) == {None}

    text = mq("printMsg", "-t", "PmT", "-s", "TagC")
    assert text.exit_code == 0, text.output
    assert "minOffset=0, maxOffset=4: 1 message(s)" in text.stdout and "b1" in text.stdout
    assert "1 message(s) in 2 queue(s) of PmT" in text.stdout
    hidden = mq("printMsg", "-t", "PmT", "-d", "false")
    assert hidden.exit_code == 0 and "NOT PRINT BODY" in hidden.stdout and "c0" not in hidden.stdout
    no_offsets_committed(cluster, "PmT")


def test_print_msg_charset_and_undecodable_bodies(cluster, mq, client):
    create_topic(mq, "PmCs", 1)
    put(cluster, client, "PmCs", "中文消息".encode("gbk"), "TagA")
    put(cluster, client, "PmCs", b"\xff\xfe\x00ok", "TagA")
    assert bodies(mq_json(mq, "printMsg", "-t", "PmCs", "-c", "GBK"))[0] == "中文消息"
    utf8 = bodies(mq_json(mq, "printMsg", "-t", "PmCs"))
    assert "\ufffd" in utf8[0] and utf8[1].endswith("ok")
    text = mq("printMsg", "-t", "PmCs")
    assert text.exit_code == 0 and "ok" in text.stdout


def test_print_msg_by_queue_counts_by_tag_and_prints(cluster, mq, client):
    create_topic(mq, "PqT")
    broker = cluster.broker.broker_name
    for i in range(40):  # more than a pull batch that does not match before the first TagB
        put(cluster, client, "PqT", f"z{i}".encode(), "TagZ")
    t1 = mark()
    for body, tag in [(b"a0", "TagA"), (b"b0", "TagB"), (b"a1", "TagA"), (b"n0", None), (b"b1", "TagB")]:
        put(cluster, client, "PqT", body, tag)
    t2 = mark()
    put(cluster, client, "PqT", b"a2", "TagA")
    put(cluster, client, "PqT", b"other queue", "TagA", 1)

    counted = mq_json(mq, "printMsgByQueue", "-t", "PqT", "-a", broker, "-i", "0", "-f", "true")
    assert counted["count"] == 46 and "messages" not in counted
    assert (counted["brokerName"], counted["queueId"], counted["minOffset"], counted["maxOffset"]) == (
        broker, 0, 0, 46)
    assert counted["tagCounts"] == [{"tag": "TagZ", "count": 40}, {"tag": "TagA", "count": 3},
                                    {"tag": "TagB", "count": 2}, {"tag": "", "count": 1}]
    ranged = mq_json(mq, "printMsgByQueue", "-t", "PqT", "-a", broker, "-i", "0", "-f", "-b", str(t1),
                     "-e", str(t2))
    assert ranged["count"] == 5 and ranged["tagCounts"] == [{"tag": "TagA", "count": 2}, {"tag": "TagB", "count": 2},
                                                            {"tag": "", "count": 1}]

    filtered = mq_json(mq, "printMsgByQueue", "-t", "PqT", "-a", broker, "-i", "0", "-p", "true",
                       "-s", "TagB || TagA")
    assert [m["body"] for m in filtered["messages"]] == [None] * 5 and filtered["count"] == 5
    assert "tagCounts" not in filtered
    with_bodies = mq_json(mq, "printMsgByQueue", "-t", "PqT", "-a", broker, "-i", "0", "-p", "true", "-d", "true",
                          "-s", "TagB")
    assert [(m["body"], m["queueOffset"]) for m in with_bodies["messages"]] == [("b0", 41), ("b1", 44)]
    assert mq_json(mq, "printMsgByQueue", "-t", "PqT", "-a", broker, "-i", "1")["count"] == 1

    text = mq("printMsgByQueue", "-t", "PqT", "-a", broker, "-i", "0", "-f", "true", "-p", "-d", "-s", "TagA")
    assert text.exit_code == 0, text.output
    assert "Count by tag" in text.stdout and "3 message(s)" in text.stdout
    assert "TagA" in text.stdout and "a2" in text.stdout
    quiet = mq("printMsgByQueue", "-t", "PqT", "-a", broker, "-i", "0")
    assert quiet.exit_code == 0 and "minOffset=0, maxOffset=46: 46 message(s)" in quiet.stdout
    assert "z0" not in quiet.stdout
    no_offsets_committed(cluster, "PqT")


def test_print_msg_by_queue_unknown_topic_broker_and_queue(cluster, mq, client):
    create_topic(mq, "PqE")
    broker = cluster.broker.broker_name
    res = mq("printMsgByQueue", "-t", "PqE", "-a", "no-such-broker", "-i", "0")
    assert res.exit_code == 1 and "no-such-broker" in str(res.exception) and broker in str(res.exception)
    res = mq("printMsgByQueue", "-t", "PqE", "-a", broker, "-i", "7")
    assert res.exit_code == 1 and "no readable queue 7" in str(res.exception)
    res = mq("printMsgByQueue", "-t", "NoSuchTopicPq", "-a", broker, "-i", "0")
    assert res.exit_code == 1 and "NoSuchTopicPq" in str(res.exception)
    res = mq("printMsg", "-t", "NoSuchTopicPq")
    assert res.exit_code == 1 and "NoSuchTopicPq" in str(res.exception)


def test_consume_message_by_offset_queue_time_and_topic(cluster, mq, client):
    create_topic(mq, "CmT")
    broker = cluster.broker.broker_name
    for i in range(3):
        put(cluster, client, "CmT", f"q0-{i}".encode(), "TagA", 0)
    put(cluster, client, "CmT", b"q1-0", "TagB", 1)
    t1 = mark()
    for i in range(3, 5):
        put(cluster, client, "CmT", f"q0-{i}".encode(), "TagC", 0)
    put(cluster, client, "CmT", b"q1-1", "TagA", 1)
    t2 = mark()
    put(cluster, client, "CmT", b"q1-2", "TagA", 1)

    by_offset = mq_json(mq, "consumeMessage", "-t", "CmT", "-b", broker, "-i", "0", "-o", "2", "-c", "2",
                        "-g", "CG_CM")
    assert bodies(by_offset) == ["q0-2", "q0-3"] and by_offset["count"] == 2
    assert by_offset["consumerGroup"] == "CG_CM" and by_offset["limit"] == 2
    assert [m["queueOffset"] for m in by_offset["queues"][0]["messages"]] == [2, 3]
    assert bodies(mq_json(mq, "consumeMessage", "-t", "CmT", "-b", broker, "-i", "1")) == ["q1-0", "q1-1", "q1-2"]
    beyond = mq_json(mq, "consumeMessage", "-t", "CmT", "-b", broker, "-i", "1", "-o", "9")
    assert beyond["count"] == 0

    whole = mq_json(mq, "consumeMessage", "-t", "CmT", "-g", "CG_CM")
    assert bodies(whole) == ["q0-0", "q0-1", "q0-2", "q0-3", "q0-4", "q1-0", "q1-1", "q1-2"]
    assert bodies(mq_json(mq, "consumeMessage", "-t", "CmT", "-c", "6")) == [
        "q0-0", "q0-1", "q0-2", "q0-3", "q0-4", "q1-0"]
    assert len(mq_json(mq, "consumeMessage", "-t", "CmT", "-c", "5")["queues"]) == 1  # the budget ends at q0
    assert bodies(mq_json(mq, "consumeMessage", "-t", "CmT", "-s", str(t1), "-e", str(t2))) == [
        "q0-3", "q0-4", "q1-1"]
    assert bodies(mq_json(mq, "consumeMessage", "-t", "CmT", "-b", broker, "-i", "1", "-s", mqadmin_time(t2))) == [
        "q1-2"]
    assert len(bodies(mq_json(mq, "consumeMessage", "-t", "CmT", "-b", broker))) == 8

    text = mq("consumeMessage", "-t", "CmT", "-c", "2")
    assert text.exit_code == 0, text.output
    assert "q0-1" in text.stdout and "q0-2" not in text.stdout and "stopped after 2 message(s)" in text.stderr
    assert cluster.broker.offsets.query("CG_CM", "CmT", 0) == -1
    no_offsets_committed(cluster, "CmT")
    assert mq_json(mq, "consumerProgress", "-g", "CG_CM")["queues"] == []


def test_consume_message_errors(cluster, mq, client):
    create_topic(mq, "CmE", 1)
    res = mq("consumeMessage", "-t", "CmE", "-b", "no-such-broker")
    assert res.exit_code == 1 and "no-such-broker" in str(res.exception)
    res = mq("consumeMessage", "-t", "CmE", "-b", cluster.broker.broker_name, "-i", "3")
    assert res.exit_code == 1 and "no readable queue 3" in str(res.exception)
    res = mq("consumeMessage", "-t", "NoSuchTopicCm")
    assert res.exit_code == 1 and "NoSuchTopicCm" in str(res.exception)


# An address nothing listens on: a command that reached the network would exit 1, not 2.
@pytest.mark.parametrize("args, needle", [
    (["printMsg", "-t", "T", "-b", "yesterday"], "-b"),
    (["printMsg", "-t", "T", "-e", "2024-13-01#00:00:00:000"], "-e"),
    (["printMsg", "-t", "T", "-c", "no-such-charset"], "unknown charset"),
    (["printMsg", "-t", "T", "-b", "2000", "-e", "1000"], "after the end"),
    (["printMsg", "-t", "T", "-d", "maybe"], "-d"),
    (["printMsgByQueue", "-t", "T", "-i", "0"], "-a"),
    (["printMsgByQueue", "-t", "T", "-a", "b"], "-i"),
    (["printMsgByQueue", "-t", "T", "-a", "b", "-i", "0", "-f", "perhaps"], "-f"),
    (["consumeMessage", "-t", "T", "-i", "0"], "-i/--queueId needs -b/--brokerName"),
    (["consumeMessage", "-t", "T", "-b", "b", "-o", "3"], "-o/--offset needs -i/--queueId"),
    (["consumeMessage", "-t", "T", "-c", "0"], "-c"),
    (["consumeMessage", "-t", "T", "-s", str(int(time.time() * 1000) + 3_600_000)], "after now"),
    (["consumeMessage", "-t", "T", "-e", "soon"], "-e"),
    (["consumeMessage", "-t", "T", "-s", "2000", "-e", "1000"], "after the end"),
])
def test_bad_options_are_usage_errors(args, needle):
    res = CliRunner().invoke(cli, ["-n", "127.0.0.1:1", *args])
    assert res.exit_code == 2, (args, res.output)
    assert needle in res.output
