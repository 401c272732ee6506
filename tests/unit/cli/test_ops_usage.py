"""updateTopicPerm, consumerStatus, allocateMQ, sendMsgStatus, checkMsgSendRT, clusterRT: bad input is a usage
error (exit 2) before any network; and the pure helpers behind their output."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mq.cli.consumer_status import (allocation, analyze, client_summary, normalize_running_info, parse_client_list,
                                    version_desc)
from mq.cli.main import COMMANDS, cli
from mq.cli.send_rt import rt_body, rt_summary, status_body, tlog_line
from mq.cli.topic_admin import perm_text
from mq.common.fastjson import loads
from mq.common.message import MessageQueue

# Nothing listens here: a command that reached the network would exit 1, not 2.
NS = ["-n", "127.0.0.1:1"]

OPS = ["updateTopicPerm", "consumerStatus", "allocateMQ", "sendMsgStatus", "checkMsgSendRT", "clusterRT"]


@pytest.mark.parametrize("args, needle", [
    (["updateTopicPerm", "-t", "T", "-p", "6"], "exactly one of -c/--cluster and -b/--broker-addr"),
    (["updateTopicPerm", "-t", "T", "-p", "6", "-c", "C", "-b", "h:1"], "exactly one of"),
    (["updateTopicPerm", "-t", "T", "-p", "5", "-c", "C"], "-p"),
    (["updateTopicPerm", "-t", "T", "-p", "7", "-c", "C"], "'2', '4', '6'"),
    (["updateTopicPerm", "-t", "T", "-c", "C"], "-p"),
    (["updateTopicPerm", "-t", "bad topic!", "-p", "6", "-c", "C"], "illegal characters"),
    (["consumerStatus"], "-g"),
    (["consumerStatus", "-g", "G", "-i", " "], "must not be empty"),
    (["consumerStatus", "-g", "bad group?"], "illegal characters"),
    (["allocateMQ", "-t", "T"], "-i"),
    (["allocateMQ", "-t", "T", "-i", "a,,b"], "empty entries"),
    (["allocateMQ", "-t", "T", "-i", "a,b,a"], "given twice: a"),
    (["allocateMQ", "-t", "", "-i", "a"], "blank"),
    (["sendMsgStatus"], "-b"),
    (["sendMsgStatus", "-b", "broker-a", "-c", "0"], "-c"),
    (["sendMsgStatus", "-b", "broker-a", "-s", "0"], "-s"),
    (["sendMsgStatus", "-b", "broker a"], "illegal characters"),
    (["checkMsgSendRT", "-t", "T", "-a", "0"], "-a"),
    (["checkMsgSendRT", "-t", "T", "-s", "-3"], "-s"),
    (["checkMsgSendRT", "-t", "T", "--timeout", "0"], "--timeout"),
    (["checkMsgSendRT", "-t", "a/b"], "illegal characters"),
    (["clusterRT", "-a", "0"], "-a"),
    (["clusterRT", "-r", "-1"], "-r"),
    (["clusterRT", "-i", "-5"], "-i"),
    (["clusterRT", "-p", "maybe"], "-p"),
])
def test_bad_input_is_a_usage_error(args, needle):
    res = CliRunner().invoke(cli, NS + args)
    assert res.exit_code == 2, (args, res.output, res.exception)
    assert needle in res.output, (args, res.output)


def test_commands_are_listed_with_help_and_json():
    assert set(OPS) <= set(COMMANDS)
    top = CliRunner().invoke(cli, ["--help"])
    for name in OPS:
        assert name in top.output
        sub = CliRunner().invoke(cli, [name, "--help"])
        assert sub.exit_code == 0 and "--json" in sub.output, name
    assert "--rounds" in CliRunner().invoke(cli, ["clusterRT", "--help"]).output


def test_perm_text():
    assert [perm_text(p) for p in (6, 4, 2, 0, 7)] == ["6 (RW)", "4 (R)", "2 (W)", "0 (-)", "7 (RW)"]


def test_version_desc_follows_mqversion_ordinals():
    # V4_9_4 is the ordinal every 4.9.4 client sends (MQ_VERSION = 401)
    assert version_desc(401) == "V4_9_4"
    assert version_desc(400) == "V4_9_4_SNAPSHOT"
    assert version_desc(212) == "V4_0_0_SNAPSHOT" and version_desc(213) == "V4_0_0"
    assert version_desc(395) == "V4_9_1" and version_desc(413) == "V5_0_0"
    assert version_desc(611) == "V5_9_9"
    assert version_desc(100) == "100" and version_desc(612) == "612"


def test_allocation_averagely_sorted_like_the_consumers():
    queues = [MessageQueue("T", "b", i) for i in (7, 3, 0, 5, 1, 6, 2, 4)]
    table = allocation(queues, ["c3", "c1", "c2"])
    assert list(table) == ["c1", "c2", "c3"]
    assert {c: [q.queue_id for q in qs] for c, qs in table.items()} == {"c1": [0, 1, 2], "c2": [3, 4, 5],
                                                                        "c3": [6, 7]}
    two_brokers = [MessageQueue("T", b, i) for b in ("b2", "b1") for i in range(2)]
    table = allocation(two_brokers, ["x", "y", "z", "w", "v"])
    taken = [(q.broker_name, q.queue_id) for qs in table.values() for q in qs]
    assert sorted(taken) == [("b1", 0), ("b1", 1), ("b2", 0), ("b2", 1)] and table["z"] == []


def test_parse_client_list():
    assert parse_client_list(" a , b,c") == ["a", "b", "c"]
    with pytest.raises(ValueError, match="empty"):
        parse_client_list("a,")
    with pytest.raises(ValueError, match="twice"):
        parse_client_list("a,b,b")


JAVA_RUNNING_INFO = (
    b'{"jstack":"\\"main\\" #1 prio=5","mqTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
    b'{"cachedMsgCount":3,"cachedMsgMaxOffset":12,"cachedMsgMinOffset":10,"cachedMsgSizeInMiB":0,"commitOffset":10,'
    b'"droped":false,"lastConsumeTimestamp":1000,"lastLockTimestamp":0,"lastPullTimestamp":1500,"locked":false,'
    b'"tryUnlockTimes":0},{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"cachedMsgCount":0,"commitOffset":7}},'
    b'"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMEORDERLY":"false","messageModel":'
    b'"CLUSTERING","PROP_CLIENT_VERSION":"V4_9_4","PROP_CONSUMER_START_TIMESTAMP":1000},'
    b'"statusTable":{"T":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":1.5,"consumeRT":2.0,'
    b'"pullRT":1.0,"pullTPS":3.0}},"subscriptionSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG",'
    b'"subString":"*","subVersion":1,"tagsSet":[],"topic":"T"},{"classFilterMode":false,"codeSet":[],'
    b'"subString":"*","subVersion":2,"tagsSet":[],"topic":"%RETRY%G"}]}')


def test_normalize_running_info_of_a_java_client():
    info = normalize_running_info(loads(JAVA_RUNNING_INFO))
    assert [(r["topic"], r["brokerName"], r["queueId"], r["commitOffset"]) for r in info["mqTable"]] == [
        ("T", "broker-a", 0, 7), ("T", "broker-a", 1, 10)]
    assert [s["topic"] for s in info["subscriptionSet"]] == ["%RETRY%G", "T"]
    assert info["properties"]["PROP_CONSUMER_START_TIMESTAMP"] == "1000"
    assert info["statusTable"]["T"]["consumeOKTPS"] == 1.5 and info["jstack"].startswith('"main"')
    s = client_summary(info)
    assert s == {"subscriptions": ["%RETRY%G(*)", "T(*)"], "consumeType": "CONSUME_PASSIVELY",
                 "messageModel": "CLUSTERING", "consumeOrderly": False, "clientVersion": "V4_9_4",
                 "processQueues": 2, "cachedMsgCount": 3}


def test_analyze_flags_blocked_queues_and_different_subscriptions():
    info = normalize_running_info(loads(JAVA_RUNNING_INFO))
    # queue 1 holds 3 messages and last consumed at t=1000 ms
    assert analyze({"c1": info}, now_ms=1000 + 60_000) == []
    warnings = analyze({"c1": info}, now_ms=1000 + 60_001)
    assert warnings == ["c1 T/broker-a/1 can't consume for a while, maybe blocked, 60001ms"]
    other = dict(info, subscriptionSet=[{"topic": "U", "subString": "a||b"}], mqTable=[])
    assert analyze({"c1": info, "c2": other}, now_ms=2000) == ["different subscriptions in the same consumer group"]
    orderly = dict(info, properties={**info["properties"], "PROP_CONSUMEORDERLY": "true"})
    # queue 1 says locked=false; queue 0 does not say (not reported)
    assert analyze({"c1": orderly}, now_ms=5000) == ["c1 T/broker-a/1 can't lock for a while, 5000ms"]


def test_bodies_and_rt_summary():
    assert status_body(5) == b"hello" and len(status_body(128)) == 128 and status_body(22) == b"hello jodie" * 2
    assert rt_body(3) == b"aaa"
    rows = [{"rtMs": 9.0, "error": None}, {"rtMs": 1.0, "error": None}, {"rtMs": 3.0, "error": "timeout"},
            {"rtMs": 2.0, "error": None}]
    s = rt_summary(rows)
    assert (s["count"], s["ok"], s["failed"]) == (4, 3, 1)
    assert s["avgRtMs"] == 2.0  # the first send (9 ms) is left out, as mqadmin does
    assert (s["avgOkRtMs"], s["minRtMs"], s["maxRtMs"], s["p99RtMs"]) == (4.0, 1.0, 9.0, 9.0)
    assert rt_summary([{"rtMs": 4.0, "error": None}])["avgRtMs"] == 4.0
    assert rt_summary([])["avgRtMs"] == 0.0
    planned = rt_summary(rows[:2], 5)  # 3 sends never made (broker unreachable) count as failed
    assert (planned["count"], planned["ok"], planned["failed"], planned["skipped"]) == (5, 2, 3, 3)


def test_tlog_line():
    import time

    line = tlog_line(0.0, "room1", "DefaultCluster", "broker-a", 2.5)
    stamp, room, cluster, broker, rt = line.split("|")
    assert stamp == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(0.0))
    assert (room, cluster, broker, rt) == ("room1", "DefaultCluster", "broker-a", "3")  # half up
