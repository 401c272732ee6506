"""Arbitrary delay against a real broker: __STARTDELIVERTIME / TIMER_DELIVER_MS / TIMER_DELAY_SEC delivered on
time across a broker restart, none lost, and the limits."""

from __future__ import annotations

import time

import pytest
from .delivery_helpers import make_topic, wait_for, stored_records

from mq.client.producer import Producer
from mq.common import properties as P
from mq.common.message import Message
from mq.config import ProducerConfig
from mq.errors import BrokerError
from mq.protocol.codes import ResponseCode



def test_3s_and_10s_across_a_restart(namesrv, broker_factory, run, client_config, tmp_path):
    store_dir = str(tmp_path / "s")
    broker = broker_factory(store_dir=store_dir)

    async def send():
        await make_topic(broker, "TopicD1")
        async with Producer(ProducerConfig(group="PG_D1"), client_config()) as p:
            now = int(time.time() * 1000)
            a = Message("TopicD1", b"three", properties={P.START_DELIVER_TIME: str(now + 3000), P.TAGS: "a"})
            b = Message("TopicD1", b"ten", properties={"TIMER_DELAY_SEC": "10"})
            ra = await p.send(a)
            rb = await p.send(b)
            assert ra.queue.topic == "TopicD1"
            return {"three": now + 3000, "ten": now + 10_000}

    due = run(send(), 20)
    assert stored_records(broker, "TopicD1") == []  # parked, not visible
    run(wait_for(lambda: stored_records(broker, "TopicD1"), 6), 10)
    first = stored_records(broker, "TopicD1")
    assert [m.body for m in first] == [b"three"]
    late = first[0].store_timestamp - due["three"]
    assert 0 <= late <= 1000, late
    assert first[0].properties[P.TAGS] == "a" and first[0].properties["TIMER_OUT_MS"] == str(due["three"])
    run(broker.stop())  # restart with "ten" still parked
    time.sleep(1.0)
    broker2 = broker_factory(store_dir=store_dir)
    run(wait_for(lambda: len(stored_records(broker2, "TopicD1")) >= 2, 12), 15)
    got = {m.body: m for m in stored_records(broker2, "TopicD1")}
    assert set(got) == {b"three", b"ten"}
    late = got[b"ten"].store_timestamp - due["ten"]
    assert 0 <= late <= 1000, late


def test_none_lost_across_restart(namesrv, broker_factory, run, client_config, tmp_path):
    store_dir = str(tmp_path / "s")
    broker = broker_factory(store_dir=store_dir)
    n = 150

    async def send():
        await make_topic(broker, "TopicD2")
        async with Producer(ProducerConfig(group="PG_D2"), client_config()) as p:
            now = int(time.time() * 1000)
            ids = {}
            for i in range(n):
                at = now + 1000 + (i * 37) % 4000
                r = await p.send(Message("TopicD2", b"%d" % i, properties={"TIMER_DELIVER_MS": str(at)}))
                ids[r.msg_id] = at
            return ids

    ids = run(send(), 30)
    time.sleep(1.5)
    run(broker.stop())  # some delivered, the rest parked
    broker2 = broker_factory(store_dir=store_dir)
    run(wait_for(lambda: {m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
                          for m in stored_records(broker2, "TopicD2")} >= set(ids), 15), 20)
    got = stored_records(broker2, "TopicD2")
    assert {m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in got} == set(ids)
    for m in got:
        assert m.store_timestamp >= ids[m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]]


def test_limits(broker, run, client_config, namesrv):
    async def go():
        await make_topic(broker, "TopicD3")
        async with Producer(ProducerConfig(group="PG_D3"), client_config()) as p:
            far = int(time.time() * 1000) + 31 * 86_400_000
            with pytest.raises(BrokerError) as ei:
                await p.send(Message("TopicD3", b"x", properties={P.START_DELIVER_TIME: str(far)}))
            assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
            with pytest.raises(BrokerError) as ei:
                await p.send(Message("TopicD3", b"x", properties={"TIMER_DELAY_SEC": "soon"}))
            assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
            past = int(time.time() * 1000) - 5000  # a past deliver time is delivered at once
            await p.send(Message("TopicD3", b"now", properties={P.START_DELIVER_TIME: str(past)}))

    run(go(), 20)
    assert [m.body for m in stored_records(broker, "TopicD3")] == [b"now"]


def test_far_timers_roll_and_arrive_on_time(broker_factory, run, client_config):
    """With a 2 s roll window a 5 s timer is renewed in the commit log (rolled) twice, then delivered on time."""
    broker = broker_factory(timer_roll_window_sec=2)

    async def go():
        await make_topic(broker, "TopicD4")
        async with Producer(ProducerConfig(group="PG_D4"), client_config()) as p:
            at = int(time.time() * 1000) + 5000
            await p.send(Message("TopicD4", b"far", properties={"TIMER_DELIVER_MS": str(at)}))
            await wait_for(lambda: stored_records(broker, "TopicD4"), 10)
            return at

    at = run(go(), 20)
    m = stored_records(broker, "TopicD4")[0]
    assert 0 <= m.store_timestamp - at <= 1000
    assert broker.timer_service.rolled == 2 and m.properties["TIMER_ROLL_TIMES"] == "2"
    # each roll put a fresh copy in the timer topic
    assert broker.store.get_max_offset("rmq_sys_wheel_timer", 0) == 3


def test_a_batch_with_a_timer_property_is_refused(broker, client, run):
    """A batch is stored as it is, so a timed message inside one would be delivered at once: refused instead."""
    from mq.common import properties as P
    from mq.common.message import Message
    from mq.common.record import encode_batch
    from mq.protocol import headers as H
    from mq.protocol.codes import RequestCode, ResponseCode
    from mq.protocol.command import RemotingCommand

    body = encode_batch([Message("TimedBatch", b"a", properties={P.KEYS: "k1"}),
                         Message("TimedBatch", b"b", properties={"TIMER_DELAY_SEC": "30"})])
    hdr = H.SendMessageRequestHeaderV2(producer_group="PG", topic="TimedBatch", default_topic="TBW102",
                                       default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=0, flag=0,
                                       properties="", batch=True)
    resp = run(client.invoke(broker.address, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, hdr.to_ext(),
                                                                       body)))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert "not supported in a batch" in resp.remark
    assert broker.store.get_max_offset("TimedBatch", 0) == 0  # nothing stored
