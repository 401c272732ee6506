"""The client library against the real broker and name server (tests/integration/broker fixtures)."""

from __future__ import annotations

import asyncio
from collections import Counter

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus, SendStatus
from mq.client.producer import Producer
from mq.client.pull_api import PullConsumer, PullStatus
from mq.common import properties as P
from mq.common.message import Message
from mq.config import ConsumerConfig, ProducerConfig


async def wait_for(cond, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def route_ready(instance, topic: str, *brokers, timeout: float = 10.0) -> None:
    """Wait until the name server has a route for ``topic`` (auto-created topics are registered by the broker
    shortly after creation; nudge with register_all)."""
    from mq.errors import TopicNotExistError

    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await instance.update_route(topic)
            return
        except TopicNotExistError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            for b in brokers:
                await b.register_all(force=True)
            await asyncio.sleep(0.2)


def test_send_then_pull(cluster, run, client_config):
    async def main():
        async with Producer(ProducerConfig(group="IP1"), client_config()) as p, \
                PullConsumer("IPull1", client_config()) as pc:
            results = [await p.send(Message("ITopic1", b"hello %d" % i, properties={P.TAGS: "TagA", P.KEYS: "k"}))
                       for i in range(12)]
            big = await p.send(Message("ITopic1", b"z" * 10000))
            assert all(r.status is SendStatus.SEND_OK for r in results)
            await route_ready(pc.instance, "ITopic1", cluster.broker)
            queues = await pc.fetch_subscribe_queues("ITopic1")
            assert len(queues) == 4  # auto-created with the producer's defaultTopicQueueNums
            got = {}
            for q in queues:
                res = await pc.pull(q, 0, 32)
                assert res.status is PullStatus.FOUND
                for m in res.messages:
                    got[m.msg_id] = m
            for r in results:  # every OK send is stored where the result says
                m = got[r.msg_id]
                assert (m.queue_id, m.queue_offset, m.offset_msg_id) == (r.queue.queue_id, r.queue_offset,
                                                                         r.offset_msg_id)
                assert m.tags == "TagA"
            assert got[big.msg_id].body == b"z" * 10000 and got[big.msg_id].sys_flag & 1
            batch = await p.send_batch([Message("ITopic1", b"b%d" % i) for i in range(3)])
            res = await pc.pull(batch.queue, batch.queue_offset, 3)
            assert [m.body for m in res.messages] == [b"b0", b"b1", b"b2"]
            assert [m.msg_id for m in res.messages] == batch.msg_id.split(",")
    run(main())


def test_push_consumer_tag_filter(cluster, run, client_config):
    async def main():
        got = []
        c = PushConsumer(ConsumerConfig(group="IG2", consume_from_where="FIRST"),
                         lambda msgs, ctx: (got.extend(msgs), ConsumeStatus.CONSUME_SUCCESS)[1], client_config())
        async with Producer(ProducerConfig(group="IP2"), client_config()) as p:
            await p.send(Message("ITopic2", b"create"))
            await route_ready(p.instance, "ITopic2", cluster.broker)
            c.subscribe("ITopic2", "TagA || TagC")
            await c.start()
            try:
                for i in range(30):
                    await p.send(Message("ITopic2", b"%d" % i, properties={P.TAGS: "Tag" + "ABC"[i % 3]}))
                await wait_for(lambda: len(got) == 20)
                await asyncio.sleep(0.3)
            finally:
                await c.shutdown()
        assert len(got) == 20 and {m.tags for m in got} == {"TagA", "TagC"}
    run(main())


def test_group_of_three_splits_and_survives_a_leave(cluster, run, client_config):
    async def main():
        received: Counter = Counter()
        per: dict[str, int] = Counter()

        def make(name):
            def listener(msgs, ctx):
                for m in msgs:
                    received[m.body] += 1
                    per[name] += 1
                return ConsumeStatus.CONSUME_SUCCESS
            c = PushConsumer(ConsumerConfig(group="IG3", consume_from_where="FIRST"), listener,
                             client_config(instance_name=name, persist_consumer_offset_interval=0.2))
            c.subscribe("ITopic3")
            return c

        async with Producer(ProducerConfig(group="IP3", default_topic_queue_nums=8), client_config()) as p:
            await p.send(Message("ITopic3", b"warmup"))
            await route_ready(p.instance, "ITopic3", cluster.broker)
            cs = [make(f"c{i}") for i in range(3)]
            for c in cs:
                await c.start()
            for c in cs:
                await c.rebalance()
            owned = lambda c: sorted(q.queue_id for q in c.process_queues if q.topic == "ITopic3")  # noqa: E731
            await wait_for(lambda: sorted(len(owned(c)) for c in cs) == [2, 3, 3])
            assert sorted(sum((owned(c) for c in cs), [])) == list(range(8))
            for i in range(300):
                await p.send(Message("ITopic3", b"n%d" % i))
            await cs[2].shutdown()  # one member leaves mid-stream
            for i in range(300, 600):
                await p.send(Message("ITopic3", b"n%d" % i))
            await wait_for(lambda: sorted(len(owned(c)) for c in cs[:2]) == [4, 4], timeout=15)
            expected = {b"n%d" % i for i in range(600)}
            await wait_for(lambda: expected <= set(received), timeout=20)
            for c in cs[:2]:
                await c.shutdown()
        dups = sum(n - 1 for b, n in received.items() if b in expected and n > 1)
        print(f"group of 3: per member {dict(per)}, duplicates {dups}")
        assert expected <= set(received)  # no message lost
    run(main(), timeout=60)


def test_two_brokers_spread_and_failover(namesrv, broker_factory, run, client_config):
    b1 = broker_factory(broker_name="broker-a")
    b2 = broker_factory(broker_name="broker-b")

    async def main():
        p = await Producer(ProducerConfig(group="IP4", send_latency_fault_enable=True, send_msg_timeout=5.0),
                           client_config()).start()
        try:
            # the topic exists on both brokers once each got a send through the TBW102 route
            first = [await p.send(Message("ITopic4", b"s%d" % i)) for i in range(16)]
            await route_ready(p.instance, "ITopic4", b1, b2)
            for _ in range(50):
                route = p.instance.routes["ITopic4"]
                if len(route.queue_datas) == 2:
                    break
                await asyncio.sleep(0.1)
                await route_ready(p.instance, "ITopic4", b1, b2)
            spread = [await p.send(Message("ITopic4", b"t%d" % i)) for i in range(16)]
            brokers = Counter(r.queue.broker_name for r in spread)
            assert set(brokers) == {"broker-a", "broker-b"}, brokers
            await b2.stop()
            after = [await p.send(Message("ITopic4", b"u%d" % i)) for i in range(20)]
            assert {r.queue.broker_name for r in after} == {"broker-a"}
            assert not p.fault.tolerance.is_available("broker-b")
            # no OK without storage: everything reported on broker-a is there at its offset
            async with PullConsumer("IPull4", client_config()) as pc:
                for r in [*first, *spread, *after]:
                    if r.queue.broker_name != "broker-a":
                        continue
                    res = await pc.pull(r.queue, r.queue_offset, 1)
                    assert res.messages and res.messages[0].msg_id == r.msg_id
        finally:
            await p.shutdown()
    run(main(), timeout=60)
    assert b1.broker_name == "broker-a"
