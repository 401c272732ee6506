"""Broker statistics admin requests (315, 317, 328, 223) and `mq brokerConsumeStats / producer / statsAll /
getConsumerStatus` against real daemons; every figure is checked against what the test sent and pulled.

The broker's stats clock is replaced by one the test moves: a sample is taken at a fixed start, the test sends
and pulls, then moves the clock 10 s on so the next request samples the minute window exactly once."""

from __future__ import annotations


import pytest

from mq.common import properties as P
from mq.common.message import MessageQueue
from mq.protocol import headers as H
from mq.protocol.bodies import BrokerStatsData, ConsumeStatsList, GetConsumerStatusBody, ProducerTableInfo
from mq.protocol.codes import RequestCode as R, ResponseCode as C
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient

from tests.integration.broker.test_admin_cli import mq_json
from tests.integration.broker.wire import heartbeat_cmd, props, pull_cmd, req, send_cmd

GET_ALL_PRODUCER_INFO = 328
TOPIC, IDLE, GROUP = "StatT", "StatIdle", "StatCG"


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def call(cluster, client, cmd: RemotingCommand) -> RemotingCommand:
    return cluster.run(client.invoke(cluster.broker_addr, cmd))


def create_topic(cluster, client, topic: str, queues: int, order: bool = False) -> None:
    resp = call(cluster, client, req(R.UPDATE_AND_CREATE_TOPIC, H.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=queues, write_queue_nums=queues, perm=6,
        topic_filter_type="SINGLE_TAG", order=order)))
    assert resp.code == C.SUCCESS, resp.remark


@pytest.fixture
def traffic(cluster, client):
    """StatT (2 queues): 6 messages to queue 0 and 4 to queue 1; StatCG pulls all 6 of queue 0 (one PULL) and 2
    of queue 1 (one PULL) and commits 6 and 2; the minute window is then sampled 10 s after an empty sample."""
    stats = cluster.broker.stats
    clock = Clock(stats.clock() + 3_600_000)
    stats.clock = clock
    stats.tick()  # samples every window at `start`, before any item exists
    create_topic(cluster, client, TOPIC, 2)
    create_topic(cluster, client, IDLE, 1)
    for qid, n in ((0, 6), (1, 4)):
        for i in range(n):
            resp = call(cluster, client, send_cmd(TOPIC, f"m{qid}-{i}".encode() * 10, queue_id=qid))
            assert resp.code == C.SUCCESS, resp.remark
    pulled_bytes = 0
    for qid, max_nums in ((0, 32), (1, 2)):
        resp = call(cluster, client, pull_cmd(TOPIC, qid, 0, group=GROUP, max_nums=max_nums))
        assert resp.code == C.SUCCESS, resp.remark
        pulled_bytes += len(resp.body)
    for qid, off in ((0, 6), (1, 2)):
        resp = call(cluster, client, req(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
            consumer_group=GROUP, topic=TOPIC, queue_id=qid, commit_offset=off)))
        assert resp.code == C.SUCCESS
    clock.now += 10_000
    return {"put_bytes": cluster.broker.store.get_max_phy_offset(), "pulled_bytes": pulled_bytes}


def view(cluster, client, name: str, key: str) -> RemotingCommand:
    return call(cluster, client, req(R.VIEW_BROKER_STATS_DATA, H.ViewBrokerStatsDataRequestHeader(
        stats_name=name, stats_key=key)))


def figures(resp: RemotingCommand) -> dict[str, tuple[int, float, float]]:
    assert resp.code == C.SUCCESS, resp.remark
    bsd = BrokerStatsData.from_json(resp.body)
    return {w: (it.sum, round(it.tps, 6), round(it.avgpt, 6))
            for w, it in (("minute", bsd.stats_minute), ("hour", bsd.stats_hour), ("day", bsd.stats_day))}


def test_view_broker_stats_data(cluster, client, traffic):
    zero = (0, 0.0, 0.0)
    assert figures(view(cluster, client, "TOPIC_PUT_NUMS", TOPIC)) == {"minute": (10, 1.0, 1.0), "hour": zero,
                                                                      "day": zero}
    size = traffic["put_bytes"]
    assert size > 10 * 100
    assert figures(view(cluster, client, "TOPIC_PUT_SIZE", TOPIC))["minute"] == (size, round(size / 10, 6),
                                                                                round(size / 10, 6))
    assert figures(view(cluster, client, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}"))["minute"] == (8, 0.8, 4.0)
    got = traffic["pulled_bytes"]
    assert figures(view(cluster, client, "GROUP_GET_SIZE", f"{TOPIC}@{GROUP}"))["minute"] == (
        got, round(got / 10, 6), round(got / 2, 6))
    assert figures(view(cluster, client, "BROKER_PUT_NUMS", cluster.broker.cluster))["minute"] == (10, 1.0, 0.0)
    # the raw body is fastjson-shaped: sorted keys, doubles as doubles
    raw = view(cluster, client, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}").body
    assert raw.startswith(b'{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":')
    missing = view(cluster, client, "TOPIC_PUT_NUMS", "NoSuchTopic")
    assert (missing.code, missing.remark) == (C.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist")
    assert view(cluster, client, "GROUP_GET_NUMS", TOPIC).code == C.SYSTEM_ERROR



def test_puts_are_counted_under_the_topic_stored(cluster, client):
    """As a Java broker does (it counts ``msg.getTopic()`` after the store rewrote it): a delayed message under
    SCHEDULE_TOPIC_XXXX, a prepared one under RMQ_SYS_TRANS_HALF_TOPIC, neither under the topic it was sent to."""
    stats = cluster.broker.stats
    clock = Clock(stats.clock() + 3_600_000)
    stats.clock = clock
    stats.tick()
    create_topic(cluster, client, "StatStored", 1)
    sends = [props("T"), props("T", **{P.DELAY_TIME_LEVEL: "2"}), props("T", **{P.DELAY_TIME_LEVEL: "2"}),
             props("T", **{P.TRANSACTION_PREPARED: "true", P.PRODUCER_GROUP: "TxPG"})]
    for p in sends:
        prepared = P.TRANSACTION_PREPARED in p  # sysFlag TRANSACTION_PREPARED_TYPE as well
        resp = call(cluster, client, send_cmd("StatStored", b"x" * 50, properties=p, group="TxPG",
                                              sys_flag=4 if prepared else 0))
        assert resp.code == C.SUCCESS, resp.remark
    clock.now += 10_000
    assert figures(view(cluster, client, "TOPIC_PUT_NUMS", "StatStored"))["minute"][0] == 1
    assert figures(view(cluster, client, "TOPIC_PUT_NUMS", "SCHEDULE_TOPIC_XXXX"))["minute"][0] == 2
    assert figures(view(cluster, client, "TOPIC_PUT_NUMS", "RMQ_SYS_TRANS_HALF_TOPIC"))["minute"][0] == 1
    assert figures(view(cluster, client, "BROKER_PUT_NUMS", cluster.broker.cluster))["minute"][0] == 4

def test_broker_consume_stats_wire_and_cli(cluster, client, traffic, mq):
    resp = call(cluster, client, req(R.GET_BROKER_CONSUME_STATS, H.GetConsumeStatsInBrokerHeader(is_order=False)))
    assert resp.code == C.SUCCESS
    assert resp.body.startswith(b'{"brokerAddr":"' + cluster.broker_addr.encode() + b'","consumeStatsList":[')
    csl = ConsumeStatsList.from_json(resp.body)
    assert csl.total_diff == 2
    groups = {g: lst for entry in csl.consume_stats_list for g, lst in entry.items()}
    assert GROUP in groups and "TOOLS_CONSUMER" in groups and groups["TOOLS_CONSUMER"] == []
    (cs,) = groups[GROUP]
    b = cluster.broker.broker_name
    assert {(mq.topic, mq.broker_name, mq.queue_id): (ow.broker_offset, ow.consumer_offset)
            for mq, ow in cs.offset_table.items()} == {(TOPIC, b, 0): (6, 6), (TOPIC, b, 1): (4, 2)}
    assert all(ow.last_timestamp > 0 for ow in cs.offset_table.values())
    assert cs.consume_tps == pytest.approx(0.8)
    # isOrder: StatT is not an order topic
    resp = call(cluster, client, req(R.GET_BROKER_CONSUME_STATS, H.GetConsumeStatsInBrokerHeader(is_order=True)))
    csl = ConsumeStatsList.from_json(resp.body)
    assert csl.total_diff == 0 and {g: lst for e in csl.consume_stats_list for g, lst in e.items()}[GROUP] == []

    out = mq_json(mq, "brokerConsumeStats", "-b", cluster.broker_addr)
    assert out["totalDiff"] == 2 and out["brokerAddr"] == cluster.broker_addr
    assert [(r["topic"], r["group"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"])
            for r in out["queues"]] == [(TOPIC, GROUP, 0, 6, 6, 0), (TOPIC, GROUP, 1, 4, 2, 2)]
    out = mq_json(mq, "brokerConsumeStats", "-b", cluster.broker_addr, "-l", "1")
    assert [(r["queueId"], r["diff"]) for r in out["queues"]] == [(1, 2)]
    res = mq("brokerConsumeStats", "-b", cluster.broker_addr, "-o", "true")
    assert res.exit_code == 0, res.output
    assert GROUP not in res.stdout and "Diff Total: 0" in res.stdout
    res = mq("brokerConsumeStats", "-b", cluster.broker_addr)
    assert res.exit_code == 0 and TOPIC in res.stdout and "Diff Total: 2" in res.stdout


def test_stats_all_cli(cluster, traffic, mq):
    out = mq_json(mq, "statsAll", "-t", TOPIC)
    assert out["errors"] == []
    assert out["rows"] == [{"topic": TOPIC, "group": GROUP, "accumulation": 2, "inTps": 1.0, "outTps": 0.8,
                            "inMsg24Hour": 10, "outMsg24Hour": 8}]
    out = mq_json(mq, "statsAll")
    idle = [r for r in out["rows"] if r["topic"] == IDLE]
    assert idle == [{"topic": IDLE, "group": "", "accumulation": 0, "inTps": 0.0, "outTps": None,
                     "inMsg24Hour": 0, "outMsg24Hour": "NO_CONSUMER"}]
    assert not any(r["topic"].startswith(("%RETRY%", "%DLQ%")) for r in out["rows"])
    active = mq_json(mq, "statsAll", "-a")
    assert [r["topic"] for r in active["rows"]] == [TOPIC]
    res = mq("statsAll", "-t", TOPIC)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stdout.splitlines() if TOPIC in ln)
    assert [c.strip() for c in line.strip("│ ").split("│")] == [TOPIC, GROUP, "2", "1.00", "0.80", "10", "8"]
    res = mq("statsAll", "-t", "NoSuchTopic")
    assert res.exit_code == 1 and "not known to the name server" in res.output


def test_producer_info_wire_and_cli(cluster, client, mq):
    resp = call(cluster, client, heartbeat_cmd("127.0.0.1@prod-a", producer_group="StatPG"))
    assert resp.code == C.SUCCESS
    resp = call(cluster, client, RemotingCommand.request(GET_ALL_PRODUCER_INFO))
    assert resp.code == C.SUCCESS
    table = ProducerTableInfo.from_json(resp.body)
    (p,) = table.data["StatPG"]
    local = client.connections[cluster.broker_addr].local_addr  # the broker's view of this connection
    assert p.client_id == "127.0.0.1@prod-a" and p.language.name == "JAVA" and p.version == 407
    assert p.remote_ip == f"/{local}" and local.startswith("127.0.0.1:")
    assert p.last_update_timestamp > 0
    assert b'"remoteIP":"/127.0.0.1:' in resp.body
    out = mq_json(mq, "producer", "-b", cluster.broker_addr)
    assert [(r["group"], r["clientId"], r["remoteIP"], r["language"]) for r in out["producers"]] == [
        ("StatPG", "127.0.0.1@prod-a", p.remote_ip, "JAVA")]
    res = mq("producer", "-b", cluster.broker_addr)
    assert res.exit_code == 0 and "127.0.0.1@prod-a" in res.stdout and "StatPG" in res.stdout


class FakeConsumer:
    """A RemotingClient that heartbeats a consumer group and answers GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    def __init__(self, client_id: str, offsets: dict[MessageQueue, int] | None, code: int = C.SUCCESS) -> None:
        self.client_id = client_id
        self.offsets = offsets
        self.code = code
        self.asked: list[dict[str, str]] = []
        self.remoting = RemotingClient(name=client_id)
        self.remoting.register(R.GET_CONSUMER_STATUS_FROM_CLIENT, self.on_status)

    def on_status(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        self.asked.append(dict(cmd.ext_fields))
        if self.code != C.SUCCESS:
            return cmd.response(self.code, "not now")
        return cmd.response(C.SUCCESS, body=GetConsumerStatusBody(message_queue_table=self.offsets).to_json())

    async def join(self, addr: str) -> None:
        resp = await self.remoting.invoke(addr, heartbeat_cmd(self.client_id, consumer_group=GROUP, topic=TOPIC))
        assert resp.code == C.SUCCESS


def test_get_consumer_status_wire_and_cli(cluster, client, mq, run):
    create_topic(cluster, client, TOPIC, 2)
    b = cluster.broker.broker_name
    q0, q1 = MessageQueue(TOPIC, b, 0), MessageQueue(TOPIC, b, 1)
    a = FakeConsumer("127.0.0.1@fake-a", {q0: 5, q1: 7})
    z = FakeConsumer("127.0.0.1@fake-z", {q1: 3})
    bad = FakeConsumer("127.0.0.1@fake-bad", None, code=C.SYSTEM_ERROR)
    try:
        for fc in (a, z, bad):
            run(fc.join(cluster.broker_addr))
        resp = call(cluster, client, req(R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, H.GetConsumerStatusRequestHeader(
            topic=TOPIC, group=GROUP)))
        assert resp.code == C.SUCCESS, resp.remark
        table = GetConsumerStatusBody.from_json(resp.body).consumer_table
        assert table == {a.client_id: {q0: 5, q1: 7}, z.client_id: {q1: 3}}  # the failing client is left out
        assert a.asked == [{"topic": TOPIC, "group": GROUP}] and len(bad.asked) == 1
        assert resp.body.startswith(b'{"consumerTable":{') and resp.body.endswith(b',"messageQueueTable":{}}')

        out = mq_json(mq, "getConsumerStatus", "-g", GROUP, "-t", TOPIC, "-i", z.client_id)
        assert out["queues"] == [{"clientId": z.client_id, "topic": TOPIC, "brokerName": b, "queueId": 1,
                                  "offset": 3}]
        assert (len(a.asked), len(z.asked), len(bad.asked)) == (1, 2, 1)  # -i: only that client is asked
        res = mq("getConsumerStatus", "-g", GROUP, "-t", TOPIC)
        assert res.exit_code == 0, res.output
        assert f"group={GROUP}, topic={TOPIC}" in res.stdout
        assert res.stdout.count("fake-a") == 2 and res.stdout.count("fake-z") == 1
        res = mq("getConsumerStatus", "-g", "NobodyHere", "-t", TOPIC)
        assert res.exit_code == 1  # the MQError reaches mq.cli.main, which prints it as one line
        assert "No Any Consumer online in the consumer group: [NobodyHere]" in str(res.exception)
    finally:
        for fc in (a, z, bad):
            run(fc.remoting.close())
