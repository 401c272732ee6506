"""Delay levels against a real broker: ScheduleMessageService delivery time, delayOffset.json, restarts."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .delivery_helpers import make_topic, wait_for, stored_records

from mq.client.producer import Producer
from mq.common import properties as P
from mq.common.message import Message
from mq.config import ProducerConfig

LEVELS = "1s 2s 4s 5s"



def test_levels_1_and_3_on_time(namesrv, broker_factory, run, client_config):
    broker = broker_factory(message_delay_level=LEVELS)

    async def go():
        await make_topic(broker, "TopicS1")
        async with Producer(ProducerConfig(group="PG_S1"), client_config()) as p:
            sent = {}
            for level in (1, 3):
                m = Message("TopicS1", f"level{level}".encode(), properties={P.TAGS: f"L{level}"})
                m.delay_time_level = level
                m.wait_store_msg_ok = True  # WAIT=true, as Java's Message sets it
                r = await p.send(m)
                sent[r.msg_id] = (level, time.time() * 1000)
            await wait_for(lambda: len(stored_records(broker, "TopicS1")) >= 2, 15)
            return sent

    sent = run(go(), 30)
    got = stored_records(broker, "TopicS1")
    assert len(got) == 2
    parked = {m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]: m
              for m in stored_records(broker, "SCHEDULE_TOPIC_XXXX", queues=4)}
    for m in got:
        uniq = m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        level, t_send = sent[uniq]
        want = {1: 1000, 3: 4000}[level]
        late = m.store_timestamp - t_send - want
        assert -1000 <= late <= 1000, (level, late)
        # RocketMQ 4.9.7's ScheduleMessageService.messageTimeup stores the parked message's properties string as
        # it is: DELAY=<level> and the producer's WAIT survive (getDelayTimeLevel() returns the level), and so do
        # REAL_TOPIC / REAL_QID
        assert m.properties[P.DELAY_TIME_LEVEL] == str(level)
        assert m.properties[P.WAIT_STORE_MSG_OK] == "true"
        assert m.properties[P.REAL_TOPIC] == "TopicS1"
        assert m.properties[P.TAGS] == f"L{level}"
        assert list(m.properties.items()) == list(parked[uniq].properties.items())
    # the consume queue of the real topic carries the tag hash, not the deliver time
    from mq.common.tags import tags_code
    for q in range(4):
        cq = broker.store.cq_table.find("TopicS1", q, create=False)
        if cq is not None and cq.max_offset:
            assert cq.get_unit(0)[2] in (tags_code("L1"), tags_code("L3"))


def test_delayed_messages_survive_restart(namesrv, broker_factory, run, client_config, tmp_path):
    store_dir = str(tmp_path / "s")
    broker = broker_factory(store_dir=store_dir, message_delay_level=LEVELS, flush_delay_offset_interval=200)
    n = 120

    async def send_all():
        await make_topic(broker, "TopicS2")
        async with Producer(ProducerConfig(group="PG_S2"), client_config()) as p:
            ids = set()
            for i in range(n):
                m = Message("TopicS2", b"%d" % i)
                m.delay_time_level = 1 + i % 3  # 1 s, 2 s, 4 s
                ids.add((await p.send(m)).msg_id)
            return ids

    ids = run(send_all(), 60)
    time.sleep(1.2)  # part delivered, part still parked
    run(broker.stop())
    offsets = json.loads((Path(store_dir) / "config" / "delayOffset.json").read_text())["offsetTable"]
    assert set(offsets) <= {"1", "2", "3", "4"}
    broker2 = broker_factory(store_dir=store_dir, message_delay_level=LEVELS)

    async def wait_all():
        await wait_for(lambda: {m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
                                for m in stored_records(broker2, "TopicS2")} >= ids, 20)

    run(wait_all(), 30)
    got = stored_records(broker2, "TopicS2")
    assert {m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in got} == ids
    # at-least-once: a few units delivered after the last offset persistence may come again, never many
    assert len(got) - n <= n // 4
