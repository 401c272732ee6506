"""Retry and DLQ against a real broker: CONSUMER_SEND_MSG_BACK, %RETRY% re-delivery through the schedule
service, %DLQ% after the maximum, and the broker-side rules (FEATURES.md §3)."""

from __future__ import annotations

import asyncio
import time

from .delivery_helpers import FAST_LEVELS, make_topic, wait_for

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus, SendStatus
from mq.client.producer import Producer
from mq.common import properties as P
from mq.common.message import Message
from mq.config import ConsumerConfig, ProducerConfig
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import ConsumerSendMsgBackRequestHeader


def test_succeeds_on_third_attempt(namesrv, broker_factory, run, client_config):
    broker = broker_factory(message_delay_level=FAST_LEVELS)
    attempts: list[tuple[float, int, str, int]] = []

    def listener(msgs, ctx):
        m = msgs[0]
        attempts.append((time.monotonic(), m.reconsume_times, m.topic, m.delay_time_level))
        return ConsumeStatus.CONSUME_SUCCESS if len(attempts) >= 3 else ConsumeStatus.RECONSUME_LATER

    async def go():
        await make_topic(broker, "TopicR1")
        # a brand-new group: its %RETRY% topic is routed before the heartbeat's answer, so the consumer's first
        # rebalance takes the retry queue too (no 20 s wait for the next one)
        async with Producer(ProducerConfig(group="PG_R1"), client_config()) as p:
            res = await p.send(Message("TopicR1", b"work", properties={P.TAGS: "t"}))
            assert res.status is SendStatus.SEND_OK
            c = PushConsumer(ConsumerConfig(group="CG_R1", consume_from_where="FIRST"), listener, client_config())
            c.subscribe("TopicR1", "*")
            await c.start()
            try:
                await wait_for(lambda: len(attempts) >= 3, 15)
                await asyncio.sleep(2.5)  # nothing more may arrive once it succeeded
            finally:
                await c.shutdown()
            return res

    res = run(go(), 60)
    assert len(attempts) == 3
    assert [a[1] for a in attempts] == [0, 1, 2]
    # a redelivered retry keeps DELAY = 3 + reconsumeTimes, as RocketMQ 4.9.7 stores it (getDelayTimeLevel())
    assert [a[3] for a in attempts] == [0, 3, 4]
    # the consumer sees the original topic again (RETRY_TOPIC restored)
    assert {a[2] for a in attempts} == {"TopicR1"}
    # each retry waited for its (1 s) delay level
    assert attempts[1][0] - attempts[0][0] >= 0.8
    assert broker.topic_config.get("%RETRY%CG_R1") is not None
    assert broker.topic_config.get("%DLQ%CG_R1") is None
    assert res.msg_id


def test_poison_message_reaches_dlq(namesrv, broker_factory, run, client_config):
    broker = broker_factory(message_delay_level=FAST_LEVELS)
    seen: list[int] = []

    def listener(msgs, ctx):
        seen.append(msgs[0].reconsume_times)
        return ConsumeStatus.RECONSUME_LATER

    async def go():
        await make_topic(broker, "TopicR2")
        await make_topic(broker, "%RETRY%CG_R2", 1)  # an existing group (a new one waits for a rebalance)
        async with Producer(ProducerConfig(group="PG_R2"), client_config()) as p:
            res = await p.send(Message("TopicR2", b"poison"))
            c = PushConsumer(ConsumerConfig(group="CG_R2", consume_from_where="FIRST", max_reconsume_times=2),
                             listener, client_config())
            c.subscribe("TopicR2", "*")
            await c.start()
            try:
                await wait_for(lambda: broker.store.get_max_offset("%DLQ%CG_R2", 0) >= 1, 30)
                await asyncio.sleep(1.5)
            finally:
                await c.shutdown()
            return res

    res = run(go(), 60)
    assert seen == [0, 1, 2]  # the first attempt and two retries, then the DLQ
    tc = broker.topic_config.get("%DLQ%CG_R2")
    assert tc is not None and tc.perm == 6 and tc.read_queue_nums == 1
    got = broker.store.get_message("x", "%DLQ%CG_R2", 0, 0, 10)
    from mq.common.record import decode_record

    dead = decode_record(got.buffers[0])
    assert dead.body == b"poison"
    assert dead.reconsume_times == 3
    assert dead.properties[P.RETRY_TOPIC] == "TopicR2"
    assert dead.properties[P.ORIGIN_MESSAGE_ID]
    assert dead.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == res.msg_id
    assert P.DELAY_TIME_LEVEL not in dead.properties


def test_send_back_rules(broker, run, client):
    """Broker rules of §3.1 on the wire: unknown offset, delayLevel < 0 -> DLQ, level 0 -> 3 + times."""
    store = broker.store

    async def go():
        hdr = ConsumerSendMsgBackRequestHeader(offset=10**9, group="CG_R3", delay_level=0)
        r = await client.invoke(broker.address, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                                         hdr.to_ext()))
        assert r.code == ResponseCode.SYSTEM_ERROR
        from mq.common.message import MessageExtBrokerInner
        res = store.put_message(MessageExtBrokerInner(topic="TopicR3", body=b"x", properties={P.TAGS: "a"},
                                                      born_host=("127.0.0.1", 1)))
        phy = res.phy_offsets[0]
        hdr = ConsumerSendMsgBackRequestHeader(offset=phy, group="CG_R3", delay_level=0)
        r = await client.invoke(broker.address, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                                         hdr.to_ext()))
        assert r.code == ResponseCode.SUCCESS, r.remark
        hdr = ConsumerSendMsgBackRequestHeader(offset=phy, group="CG_R3", delay_level=-1)
        r = await client.invoke(broker.address, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                                         hdr.to_ext()))
        assert r.code == ResponseCode.SUCCESS, r.remark

    run(go())
    from mq.common.record import decode_record

    parked = decode_record(store.get_message("x", "SCHEDULE_TOPIC_XXXX", 2, 0, 1).buffers[0])
    assert parked.properties[P.DELAY_TIME_LEVEL] == "3"
    assert parked.properties[P.REAL_TOPIC] == "%RETRY%CG_R3"
    assert parked.reconsume_times == 1
    dead = decode_record(store.get_message("x", "%DLQ%CG_R3", 0, 0, 1).buffers[0])
    assert dead.reconsume_times == 1 and dead.properties[P.RETRY_TOPIC] == "TopicR3"


def _cli(namesrv, *args: str):
    from click.testing import CliRunner

    from mq.cli.main import cli

    return asyncio.to_thread(CliRunner().invoke, cli, ["-n", namesrv.address, *args], catch_exceptions=False)


def test_dlq_list_and_resend_brings_it_back(namesrv, broker_factory, run, client_config):
    import json

    broker = broker_factory(message_delay_level=FAST_LEVELS)
    attempts: list[tuple[str, int]] = []
    healed = asyncio.Event()

    def listener(msgs, ctx):
        m = msgs[0]
        attempts.append((m.topic, m.reconsume_times))
        if m.body == b"poison" and not healed.is_set():
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    async def go():
        await make_topic(broker, "TopicR4")
        await make_topic(broker, "%RETRY%CG_R4", 1)  # an existing group (a new one waits for a rebalance)
        async with Producer(ProducerConfig(group="PG_R4"), client_config()) as p:
            res = await p.send(Message("TopicR4", b"poison", properties={P.TAGS: "bad"}))
            c = PushConsumer(ConsumerConfig(group="CG_R4", consume_from_where="FIRST", max_reconsume_times=1),
                             listener, client_config())
            c.subscribe("TopicR4", "*")
            await c.start()
            try:
                await wait_for(lambda: broker.store.get_max_offset("%DLQ%CG_R4", 0) >= 1, 30)
                await broker.register_all(force=True)
                listed = await _cli(namesrv, "dlq", "list", "-g", "CG_R4", "--json")
                assert listed.exit_code == 0, listed.output
                table = await _cli(namesrv, "dlq", "list", "-g", "CG_R4")
                assert table.exit_code == 0 and "Dead letters of CG_R4 (1)" in table.output
                healed.set()  # the bug is fixed: the next delivery succeeds
                n = len(attempts)
                resent = await _cli(namesrv, "dlq", "resend", "-g", "CG_R4", "-i", res.msg_id, "--json")
                assert resent.exit_code == 0, resent.output
                await wait_for(lambda: len(attempts) > n, 20)
            finally:
                await c.shutdown()
            return res, json.loads(listed.output), json.loads(resent.output)

    res, listed, resent = run(go(), 90)
    assert listed["count"] == 1
    dead = listed["messages"][0]
    assert dead["msgId"] == res.msg_id and dead["failures"] == 2 and dead["originalTopic"] == "TopicR4"
    assert resent["resent"][0]["to"] == "%RETRY%CG_R4" and resent["resent"][0]["msgId"] == res.msg_id
    # the consumer got it again, under its original topic, with a fresh retry count
    assert attempts[-1] == ("TopicR4", 0)
