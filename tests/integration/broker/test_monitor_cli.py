"""`mq startMonitoring` (mqadmin's MonitorService) against real daemons: the backlog, largest queue backlog and
delay each round reports are checked against what the test stored and committed; offset-moved events are those
stored after the monitor started; failures give exit 1 and Ctrl-C exit 130."""

from __future__ import annotations

import asyncio
import json

import pytest

from mq.cli.monitor import Monitor, groups_of, offset_moved_event, undone_by_topic
from mq.client.admin import MQAdmin
from mq.common.message import MessageQueue
from mq.protocol.bodies import OffsetWrapper
from mq.protocol.codes import ResponseCode as C

from tests.integration.broker.test_admin_cli import commit, interrupt_after, send
from tests.integration.broker.wire import heartbeat_cmd, pull_cmd

TOPIC, GROUP = "MonT", "MonG"


@pytest.fixture
def backlog(cluster, mq, client):
    """MonT: 5 messages in queue 0 and 3 in queue 1; MonG (one client online) committed 2 and 0."""
    assert mq("updateTopic", "-t", TOPIC, "-c", "DefaultCluster", "-r", "2", "-w", "2").exit_code == 0
    for qid, n in ((0, 5), (1, 3)):
        for i in range(n):
            send(cluster, client, TOPIC, b"m%d" % i, queue_id=qid)
    hb = heartbeat_cmd("10.2.2.2@monitored", consumer_group=GROUP, topic=TOPIC)
    assert cluster.run(client.invoke(cluster.broker_addr, hb)).code == C.SUCCESS
    commit(cluster, client, GROUP, TOPIC, 0, 2)
    commit(cluster, client, GROUP, TOPIC, 1, 0)
    # the broker registers %RETRY%MonG with the name server as its loop runs on (the monitor finds groups there)
    async def registered():
        async with MQAdmin([cluster.namesrv_addr]) as admin:
            while f"%RETRY%{GROUP}" not in await admin.topic_list():
                await asyncio.sleep(0.05)

    cluster.run(registered(), timeout=10)
    store = cluster.broker.store
    # the delay: last message of queue 0 against the last one MonG consumed there (queue 1: nothing consumed)
    return store.get_message_store_timestamp(TOPIC, 0, 4) - store.get_message_store_timestamp(TOPIC, 0, 1)


def test_a_round_reports_the_backlog_and_delay(cluster, mq, backlog):
    out = json.loads(mq("startMonitoring", "-r", "1", "--json").stdout)
    assert out["round"] == 1 and out["errors"] == [] and out["groups"] >= 1
    [row] = [r for r in out["undone"] if r["consumerGroup"] == GROUP]
    assert row == {"consumerGroup": GROUP, "topic": TOPIC, "undoneMsgsTotal": 6, "undoneMsgsSingleMQ": 3,
                   "undoneMsgsDelayTimeMills": backlog, "clients": 1}
    # the test's client only heartbeats: it cannot give its running info, and the round says so
    [notice] = out["notices"]
    assert notice["consumerGroup"] == GROUP and notice["notice"].startswith(
        "client 10.2.2.2@monitored did not give its running info: ")
    assert out["deleteEvents"] == []

    text = mq("startMonitoring", "-r", "2", "-i", "0.1")
    assert text.exit_code == 0, text.output
    assert text.stdout.count("Round ") == 2 and "Undone messages" in text.stdout
    assert GROUP in text.stdout and TOPIC in text.stdout


def test_offset_moved_events_after_the_start_are_reported(cluster, client, backlog):
    b = cluster.broker

    async def main():
        # one event before the monitor starts: not reported
        assert (await client.invoke(b.address, pull_cmd(TOPIC, 0, 40, group=GROUP))).code == C.PULL_OFFSET_MOVED
        async with MQAdmin([cluster.namesrv_addr]) as admin:
            monitor = Monitor(admin)
            first = await monitor.round()
            assert first["deleteEvents"] == [] and first["errors"] == []
            r = await client.invoke(b.address, pull_cmd(TOPIC, 1, 99, group=GROUP))
            assert r.code == C.PULL_OFFSET_MOVED
            second = await monitor.round()
            assert [{k: v for k, v in e.items() if k != "eventTimestamp"} for e in second["deleteEvents"]] == [
                {"consumerGroup": GROUP, "topic": TOPIC, "brokerName": b.broker_name, "queueId": 1,
                 "offsetRequest": 99, "offsetNew": 3}]
            assert second["deleteEvents"][0]["eventTimestamp"] > 0
            assert (await monitor.round())["deleteEvents"] == []  # each event once
            # a remembered offset beyond the queue (cut back) is read from the queue's end, and the monitor's
            # own reads never leave an OffsetMovedEvent behind
            key = next(iter(monitor.event_offsets))
            monitor.event_offsets[key] = 100
            assert (await monitor.round())["deleteEvents"] == []
            assert monitor.event_offsets[key] == 2
            assert b.store.get_max_offset("OFFSET_MOVED_EVENT", 0) == 2  # the two the test caused

    cluster.run(main())


def test_failures_exit_1_and_ctrl_c_exits_130(cluster, mq_at, backlog):
    res = mq_at("127.0.0.1:1", "startMonitoring", "-r", "1", "--json")
    assert res.exit_code == 1
    assert any("name server" in e for e in json.loads(res.stdout)["errors"])
    assert "part(s) of the rounds failed" in res.stderr

    code, out = interrupt_after(cluster, ["startMonitoring", "-i", "0.2"], b"Round ", 2)
    assert code == 130, out
    assert GROUP in out


def test_undone_by_topic_follows_compute_undone_msgs():
    q = [MessageQueue("A", "b", i) for i in range(3)] + [MessageQueue("B", "b", 0)]
    table = {q[0]: OffsetWrapper(10, 4, 1_000), q[1]: OffsetWrapper(5, 7, 2_000),  # a negative diff is ignored
             q[2]: OffsetWrapper(3, 0, 0), q[3]: OffsetWrapper(1, 1, 5_000)}
    last = {q[0]: 1_600, q[1]: 2_100, q[2]: 9_999, q[3]: 5_000}  # q[2]: nothing consumed, no delay
    assert undone_by_topic("G", table, last) == [
        {"consumerGroup": "G", "topic": "A", "undoneMsgsTotal": 9, "undoneMsgsSingleMQ": 6,
         "undoneMsgsDelayTimeMills": 600},
        {"consumerGroup": "G", "topic": "B", "undoneMsgsTotal": 0, "undoneMsgsSingleMQ": 0,
         "undoneMsgsDelayTimeMills": 0}]
    assert groups_of(["T", "%RETRY%G2", "%DLQ%G3", "%RETRY%G1"]) == ["G1", "G2"]
    body = b'{"consumerGroup":"G","messageQueue":{"brokerName":"b","queueId":2,"topic":"T"},"offsetNew":5,' \
           b'"offsetRequest":9}'
    assert offset_moved_event(body, 7) == {"consumerGroup": "G", "topic": "T", "brokerName": "b", "queueId": 2,
                                           "offsetRequest": 9, "offsetNew": 5, "eventTimestamp": 7}
    assert offset_moved_event(b"not json", 7) is None and offset_moved_event(b"{}", 7) is None
