"""Push and pull consumers against the fake broker: delivery, tag filter, offsets, send-back and local retry."""

from __future__ import annotations

import asyncio

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.client.pull_api import PullConsumer, PullStatus
from mq.common import properties as P
from mq.common.message import Message, MessageQueue
from mq.config import ConsumerConfig, ProducerConfig
from mq.protocol.codes import RequestCode


async def wait_for(cond, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def fill(broker, n: int, topic: str = "TopicTest", tags=("TagA", "TagB")) -> None:
    for i in range(n):
        broker.put(topic, i % 4, b"m%d" % i, {P.TAGS: tags[i % len(tags)], P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"U{i}"})


async def test_pull_consumer_walks_queue_with_filter(fake1, client_config):
    ns, a = fake1
    fill(a, 16)
    async with PullConsumer("PullG", client_config(ns.addr)) as pc:
        queues = await pc.fetch_subscribe_queues("TopicTest")
        assert queues == [MessageQueue("TopicTest", "broker-a", i) for i in range(4)]
        res = await pc.pull(queues[0], 0, 32, "TagA")
        assert res.status is PullStatus.FOUND and res.next_begin_offset == 4 and res.max_offset == 4
        assert [m.body for m in res.messages] == [b"m0", b"m4", b"m8", b"m12"]
        assert res.messages[0].msg_id == "U0" and res.messages[0].properties[P.MAX_OFFSET] == "4"
        assert (await pc.pull(queues[1], 0, 32, "TagA")).status is PullStatus.NO_MATCHED_MSG
        assert (await pc.pull(queues[0], 4, 32)).status is PullStatus.NO_NEW_MSG
        assert (await pc.pull(queues[0], 99, 32)).status is PullStatus.OFFSET_ILLEGAL
        assert await pc.max_offset(queues[0]) == 4 and await pc.fetch_consume_offset(queues[0]) == -1
        await pc.update_consume_offset(queues[0], 3)
        assert await pc.fetch_consume_offset(queues[0]) == 3
        # long polling: the broker answers as soon as a message arrives
        waiter = asyncio.ensure_future(pc.pull(queues[0], 4, 32, block=5.0))
        await asyncio.sleep(0.1)
        assert not waiter.done()
        a.put("TopicTest", 0, b"late", {})
        res = await asyncio.wait_for(waiter, 2)
        assert [m.body for m in res.messages] == [b"late"]


async def test_push_consumer_receives_filtered_and_commits_offsets(fake1, client_config):
    ns, a = fake1
    fill(a, 20)
    got = []
    cfg = ConsumerConfig(group="G1", consume_from_where="FIRST")
    c = PushConsumer(cfg, lambda msgs, ctx: (got.extend(msgs), ConsumeStatus.CONSUME_SUCCESS)[1],
                     client_config(ns.addr, persist_consumer_offset_interval=0.1))
    c.subscribe("TopicTest", "TagB")
    await c.start()
    try:
        await wait_for(lambda: len(got) == 10)
        await wait_for(lambda: all(a.offsets.get(("G1", "TopicTest", q)) == 5 for q in range(4)))
        pull = next(r for r in a.requests if r.code == RequestCode.PULL_MESSAGE)
        assert int(pull.ext_fields["sysFlag"]) & 0x6 == 0x6 and pull.ext_fields["subscription"] == "TagB"
        assert pull.ext_fields["suspendTimeoutMillis"] == "15000"
    finally:
        await c.shutdown()
    assert sorted(m.body for m in got) == sorted(b"m%d" % i for i in range(1, 20, 2))
    assert {m.tags for m in got} == {"TagB"}
    hb = a.heartbeats[-1]
    assert hb.consumer_data_set[0].group_name == "G1"
    assert {s.topic for s in hb.consumer_data_set[0].subscription_data_set} == {"TopicTest", "%RETRY%G1"}


async def test_restart_resumes_from_committed_offset(fake1, client_config):
    ns, a = fake1
    fill(a, 8)
    got = []
    listener = lambda msgs, ctx: (got.extend(m.body for m in msgs), ConsumeStatus.CONSUME_SUCCESS)[1]  # noqa: E731
    c = PushConsumer(ConsumerConfig(group="G2", consume_from_where="FIRST"), listener, client_config(ns.addr))
    c.subscribe("TopicTest")
    await c.start()
    await wait_for(lambda: len(got) == 8)
    await c.shutdown()
    fill(a, 4)
    c = PushConsumer(ConsumerConfig(group="G2", consume_from_where="FIRST"), listener, client_config(ns.addr))
    c.subscribe("TopicTest")
    await c.start()
    await wait_for(lambda: len(got) == 12)
    await asyncio.sleep(0.2)
    await c.shutdown()
    assert len(got) == 12  # nothing consumed twice after a clean shutdown


async def test_consume_from_last_skips_backlog(fake1, client_config):
    ns, a = fake1
    fill(a, 8)
    got = []
    c = PushConsumer(ConsumerConfig(group="G3"), lambda msgs, ctx: (got.extend(msgs),
                                                                    ConsumeStatus.CONSUME_SUCCESS)[1],
                     client_config(ns.addr))
    c.subscribe("TopicTest")
    await c.start()
    try:
        await wait_for(lambda: len([q for q in c.process_queues if q.topic == "TopicTest"]) == 4)
        await asyncio.sleep(0.1)
        a.put("TopicTest", 2, b"new", {})
        await wait_for(lambda: len(got) == 1)
        assert got[0].body == b"new"
    finally:
        await c.shutdown()


async def test_reconsume_later_and_exception_send_back(fake1, client_config):
    ns, a = fake1
    a.put("TopicTest", 0, b"later", {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "UL"})
    a.put("TopicTest", 1, b"boom", {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "UB"})
    seen = []

    def listener(msgs, ctx):
        m = msgs[0]
        seen.append((m.topic, m.body, m.reconsume_times))
        if m.reconsume_times > 0:
            return ConsumeStatus.CONSUME_SUCCESS
        if m.body == b"boom":
            raise RuntimeError("listener failure")
        return ConsumeStatus.RECONSUME_LATER

    c = PushConsumer(ConsumerConfig(group="G4", consume_from_where="FIRST"), listener, client_config(ns.addr))
    c.subscribe("TopicTest")
    await c.start()
    try:
        await wait_for(lambda: len(a.send_backs) == 2)
        assert {(s.group, s.delay_level, s.origin_msg_id, s.max_reconsume_times) for s in a.send_backs} == {
            ("G4", 0, "UL", 16), ("G4", 0, "UB", 16)}
        # the fake stores the copies in %RETRY%G4 at once; the consumer subscribed to it and gets them back,
        # with the original topic restored from RETRY_TOPIC
        await c.rebalance()
        await wait_for(lambda: len(seen) == 4)
        assert sorted(seen[2:]) == [("TopicTest", b"boom", 1), ("TopicTest", b"later", 1)]
    finally:
        await c.shutdown()
    assert a.offsets[("G4", "TopicTest", 0)] == 1 and a.offsets[("G4", "TopicTest", 1)] == 1


async def test_failed_send_back_falls_back_to_producer_then_local_retry(fake1, client_config):
    ns, a = fake1
    a.put("TopicTest", 0, b"x", {})
    a.fail_send_back = True
    calls: dict[bytes, list[int]] = {b"x": [], b"y": []}

    def listener(msgs, ctx):
        m = msgs[0]
        calls[m.body].append(m.reconsume_times)
        return ConsumeStatus.RECONSUME_LATER if len(calls[m.body]) == 1 else ConsumeStatus.CONSUME_SUCCESS

    cfg = ConsumerConfig(group="G5", consume_from_where="FIRST", local_retry_delay=0.5)
    c = PushConsumer(cfg, listener, client_config(ns.addr))
    c.subscribe("TopicTest")
    await c.start()
    mq = MessageQueue("TopicTest", "broker-a", 0)
    try:
        # x: send-back fails, the inner producer re-sends it to %RETRY%G5, whose copy is consumed next
        await wait_for(lambda: c.counters.resent_by_producer == 1)
        retry = a.stored("%RETRY%G5")
        assert len(retry) == 1 and retry[0].properties[P.RETRY_TOPIC] == "TopicTest"
        assert retry[0].properties[P.DELAY_TIME_LEVEL] == "3" and retry[0].reconsume_times == 1
        await wait_for(lambda: calls[b"x"] == [0, 1])
        await wait_for(lambda: c.offset_store.memory(mq) == 1)
        # y: the send-back and the re-send (3 attempts) both fail: y stays cached and is consumed again locally
        a.fail_next_sends = [1] * 3
        a.put("TopicTest", 0, b"y", {})
        await wait_for(lambda: c.counters.local_retries == 1)
        assert c.offset_store.memory(mq) == 1  # the offset cannot pass the unconsumed message at 1
        await wait_for(lambda: calls[b"y"] == [0, 1])
        await wait_for(lambda: c.offset_store.memory(mq) == 2)
        assert len(a.stored("%RETRY%G5")) == 1  # y never reached the broker again
    finally:
        await c.shutdown()


async def test_broadcasting_keeps_offsets_locally(fake1, client_config, tmp_path):
    ns, a = fake1
    fill(a, 4)
    got = []
    cfg = ConsumerConfig(group="GB", message_model="BROADCASTING", consume_from_where="FIRST")
    cc = client_config(ns.addr, local_offset_store_dir=str(tmp_path / "o"))
    c = PushConsumer(cfg, lambda msgs, ctx: (got.extend(msgs), ConsumeStatus.CONSUME_SUCCESS)[1], cc)
    c.subscribe("TopicTest")
    await c.start()
    try:
        await wait_for(lambda: len(got) == 4)
    finally:
        await c.shutdown()
    files = list((tmp_path / "o").rglob("offsets.json"))
    assert len(files) == 1 and '"queueId":3' in files[0].read_text()
    assert not any(k[0] == "GB" for k in a.offsets)  # never sent to the broker
    assert all(s.topic != "%RETRY%GB" for s in a.heartbeats[-1].consumer_data_set[0].subscription_data_set)


async def test_group_of_two_splits_queues_and_rebalances_on_leave(fake1, client_config):
    ns, a = fake1
    got: dict[str, list] = {"c1": [], "c2": []}

    def make(name):
        return PushConsumer(ConsumerConfig(group="GG", consume_from_where="FIRST"),
                            lambda msgs, ctx: (got[name].extend(msgs), ConsumeStatus.CONSUME_SUCCESS)[1],
                            client_config(ns.addr, instance_name=name))
    c1, c2 = make("c1"), make("c2")
    for c in (c1, c2):
        c.subscribe("TopicTest")
    await c1.start()
    await c2.start()
    try:
        await wait_for(lambda: len([q for q in c1.process_queues if q.topic == "TopicTest"]) == 2
                       and len([q for q in c2.process_queues if q.topic == "TopicTest"]) == 2)
        fill(a, 40)
        await wait_for(lambda: len(got["c1"]) + len(got["c2"]) >= 40)
        assert len(got["c1"]) == 20 and len(got["c2"]) == 20
        await c2.shutdown()
        await wait_for(lambda: len([q for q in c1.process_queues if q.topic == "TopicTest"]) == 4)
        fill(a, 8)
        await wait_for(lambda: len(got["c1"]) >= 28)
    finally:
        await c1.shutdown()
        await c2.shutdown()
    bodies = [m.body for m in got["c1"] + got["c2"]]
    assert set(bodies) == {b"m%d" % i for i in range(40)}


async def test_consume_hooks_and_running_info(fake1, client_config):
    ns, a = fake1
    fill(a, 2)
    events = []

    class Hook:
        def consume_before(self, ctx):
            events.append(("before", len(ctx.messages)))

        def consume_after(self, ctx):
            events.append(("after", ctx.success, ctx.status))

    c = PushConsumer(ConsumerConfig(group="GH", consume_from_where="FIRST"),
                     lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS, client_config(ns.addr), hooks=[Hook()])
    c.subscribe("TopicTest")
    await c.start()
    try:
        await wait_for(lambda: len(events) == 4)
        info = c.running_info()
        assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and len(info["mqTable"]) >= 4
    finally:
        await c.shutdown()
    assert events.count(("before", 1)) == 2 and events.count(("after", True, "CONSUME_SUCCESS")) == 2


async def test_producer_to_push_consumer_end_to_end(fake2, client_config):
    ns, brokers = fake2
    got = []
    c = PushConsumer(ConsumerConfig(group="GE"), lambda msgs, ctx: (got.extend(msgs),
                                                                    ConsumeStatus.CONSUME_SUCCESS)[1],
                     client_config(ns.addr))
    c.subscribe("TopicTest", "TagA")
    await c.start()
    p = await Producer(ProducerConfig(group="PE"), client_config(ns.addr)).start()
    try:
        await wait_for(lambda: len(c.process_queues) >= 8)
        await asyncio.sleep(0.1)
        sent = [await p.send(Message("TopicTest", b"e%d" % i, properties={P.TAGS: "TagA" if i % 2 else "TagB"}))
                for i in range(20)]
        await wait_for(lambda: len(got) == 10)
    finally:
        await p.shutdown()
        await c.shutdown()
    assert {m.msg_id for m in got} == {r.msg_id for i, r in enumerate(sent) if i % 2}
