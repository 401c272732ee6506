"""Orderly push consumption (MessageListenerOrderly) against a real name server and broker on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict

import pytest

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.client.pull_api import PullConsumer, PullStatus
from mq.client.queue_lock import QueueLocker
from mq.client.sync import LoopThread, SyncProducer, SyncPushConsumer
from mq.common import properties as P
from mq.common.message import Message, MessageExt, MessageQueue
from mq.common.topic import dlq_topic
from mq.config import (BrokerConfig, ClientConfig, ConsumerConfig, NamesrvConfig, OrderlyConfig, ProducerConfig,
                       StoreConfig)
from tests.integration.client.test_client_real_broker import route_ready, wait_for
from tests.integration.conftest import TEST_STORE_DEFAULTS

#: Short intervals so that lock moves and suspends take fractions of a second.
FAST = OrderlyConfig(suspend_current_queue_time=0.2, lock_interval=0.5, lock_retry_delay=0.2, unlock_delay=0.2,
                     consume_lock_wait=1.0)


def by_queue(queues, msg, arg):
    return queues[arg % len(queues)]


async def send_ordered(p: Producer, topic: str, n: int, start: int = 0, queues: int = 4) -> dict[int, list[bytes]]:
    """Send ``n`` messages, message i to queue i % queues; return queue id -> bodies in send order."""
    sent: dict[int, list[bytes]] = defaultdict(list)
    for i in range(start, start + n):
        r = await p.send(Message(topic, b"m%04d" % i, properties={P.KEYS: f"k{i}"}), selector=by_queue,
                         arg=i % queues)
        sent[r.queue.queue_id].append(b"m%04d" % i)
    return sent


async def make_topic(p: Producer, topic: str, broker) -> list[MessageQueue]:
    await p.send(Message(topic, b"warmup"), selector=by_queue, arg=0)
    await route_ready(p.instance, topic, broker)
    return await p.fetch_publish_queues(topic)


class Recorder:
    """A listener that records who consumed what, when, and checks a queue is never consumed twice at once."""

    def __init__(self, name: str = "", *, delay: float = 0.0, suspend=lambda m: False, pause: float = -1.0) -> None:
        self.name = name
        self.pause = pause
        self.delay = delay
        self.suspend = suspend
        self.ok: dict[int, list[bytes]] = defaultdict(list)  # queue id -> bodies consumed with SUCCESS
        self.attempts: list[tuple[int, bytes, int, float]] = []  # (queue, body, reconsume_times, time)
        self.spans: list[tuple[int, float, float, str]] = []  # (queue, start, end, consumer)
        self.active: set[int] = set()
        self.max_parallel = 0
        self.overlaps = 0

    async def __call__(self, msgs, ctx):
        q = ctx.queue.queue_id
        if ctx.queue.topic.startswith("%"):
            return ConsumeStatus.CONSUME_SUCCESS
        if q in self.active:
            self.overlaps += 1
        self.active.add(q)
        self.max_parallel = max(self.max_parallel, len(self.active))
        began = time.monotonic()
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            for m in msgs:
                self.attempts.append((q, m.body, m.reconsume_times, time.monotonic()))
            if any(self.suspend(m) for m in msgs):
                ctx.suspend_current_queue_time = self.pause
                return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            self.ok[q].extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS
        finally:
            self.active.discard(q)
            self.spans.append((q, began, time.monotonic(), self.name))

    def bodies(self, q: int) -> list[bytes]:
        return [b for b in self.ok[q] if b != b"warmup"]


class HookLog:
    def __init__(self) -> None:
        self.before = 0
        self.after: list[tuple[bool, str, str]] = []

    def consume_before(self, ctx) -> None:
        self.before += 1

    def consume_after(self, ctx) -> None:
        self.after.append((ctx.success, ctx.status, ctx.props.get("ConsumeContextType", "")))


def test_orderly_keeps_queue_order_and_commits(cluster, run, client_config):
    broker = cluster.broker

    async def main():
        rec, hooks = Recorder(delay=0.002), HookLog()
        async with Producer(ProducerConfig(group="OP1", default_topic_queue_nums=4), client_config()) as p:
            queues = await make_topic(p, "OTopic1", broker)
            assert len(queues) == 4
            c = PushConsumer(ConsumerConfig(group="OG1", consume_from_where="FIRST", consume_thread_max=4,
                                            pull_batch_size=8), rec, client_config(), orderly=True,
                             orderly_config=FAST, hooks=[hooks])
            c.subscribe("OTopic1")
            await c.start()
            try:
                assert c.running_info()["properties"]["PROP_CONSUMEORDERLY"] == "true"
                sent = await send_ordered(p, "OTopic1", 200)
                await wait_for(lambda: all(len(rec.bodies(q)) == len(sent[q]) for q in sent), timeout=20)
                # the broker holds every queue's lock for this client
                owners = {mq.queue_id: broker.lock_processor.locks.owner("OG1", mq) for mq in queues}
                assert owners == {q: c.instance.client_id for q in range(4)}
                assert all(c.process_queues[mq].locked for mq in queues)
                await wait_for(lambda: all(c.offset_store.memory(mq) == (50 if mq.queue_id else 51) for mq in queues))
            finally:
                await c.shutdown()
            # shut down: offsets persisted at the broker, locks released
            async with PullConsumer("OPull1", client_config()) as pc:
                for mq in queues:
                    assert await pc.api.query_consumer_offset("OG1", mq) == (50 if mq.queue_id else 51)
            assert all(broker.lock_processor.locks.owner("OG1", mq) is None for mq in queues)
        for q in range(4):
            assert rec.bodies(q) == sent[q]  # per queue, consumption order is send order, nothing twice
        assert rec.overlaps == 0  # one batch at a time per queue
        assert rec.max_parallel > 1  # queues are consumed in parallel
        assert hooks.before == len(hooks.after) >= 201
        assert all(a == (True, "SUCCESS", "SUCCESS") for a in hooks.after)
    run(main(), timeout=60)


def test_suspend_redelivers_first_and_other_queues_flow(cluster, run, client_config):
    broker = cluster.broker
    target = b"m0021"  # queue 1, the 6th message of that queue

    async def main():
        suspended = []

        def suspend(m):
            if m.body == target and m.reconsume_times < 3:
                suspended.append(m.reconsume_times)
                return True
            return False
        rec, hooks = Recorder(suspend=suspend), HookLog()
        async with Producer(ProducerConfig(group="OP2", default_topic_queue_nums=4), client_config()) as p:
            await make_topic(p, "OTopic2", broker)
            c = PushConsumer(ConsumerConfig(group="OG2", consume_from_where="FIRST", consume_orderly=True), rec,
                             client_config(), orderly_config=FAST, hooks=[hooks])
            c.subscribe("OTopic2")
            await c.start()
            try:
                sent = await send_ordered(p, "OTopic2", 80)
                await wait_for(lambda: all(len(rec.bodies(q)) == len(sent[q]) for q in sent), timeout=20)
            finally:
                await c.shutdown()
        assert suspended == [0, 1, 2]
        # redelivered with a growing reconsume_times, and nothing of queue 1 was consumed in between
        q1 = [(b, rt) for q, b, rt, _ in rec.attempts if q == 1 and b != b"warmup"]
        i = q1.index((target, 0))
        assert q1[i:i + 4] == [(target, 0), (target, 1), (target, 2), (target, 3)]
        assert [b for b, _ in q1[:i]] == sent[1][:5]
        for q in range(4):
            assert rec.bodies(q) == sent[q]
        # while queue 1 was suspended (about 3 x 0.2 s), the other queues kept flowing
        first = next(t for q, b, rt, t in rec.attempts if b == target)
        last = max(t for q, b, rt, t in rec.attempts if b == target)
        assert last - first >= 0.5
        others = [t for q, b, rt, t in rec.attempts if q != 1 and first < t < last]
        assert others, "other queues stalled during the suspend"
        assert c.counters.consumed_failed == 3
        assert sum(1 for a in hooks.after if a == (False, "SUSPEND_CURRENT_QUEUE_A_MOMENT", "FAILED")) == 3
    run(main(), timeout=60)


def test_two_consumers_lock_disjoint_queues_and_hand_over(cluster, run, client_config):
    broker = cluster.broker

    async def main():
        recs = {"a": Recorder("a", delay=0.02), "b": Recorder("b", delay=0.001)}  # a has a backlog when it leaves

        def make(name):
            c = PushConsumer(ConsumerConfig(group="OG3", consume_from_where="FIRST", consume_thread_max=2),
                             recs[name], client_config(instance_name=f"orderly-{name}", rebalance_interval=0.5),
                             orderly=True, orderly_config=FAST)
            c.subscribe("OTopic3")
            return c
        async with Producer(ProducerConfig(group="OP3", default_topic_queue_nums=4), client_config()) as p, \
                PullConsumer("OPull3", client_config()) as third:
            queues = await make_topic(p, "OTopic3", broker)
            a, b = make("a"), make("b")
            await a.start()
            await b.start()
            owned = lambda c: {q for q, pq in c.process_queues.items()  # noqa: E731
                               if q.topic == "OTopic3" and not pq.dropped}
            await wait_for(lambda: len(owned(a)) == 2 and len(owned(b)) == 2, timeout=15)
            assert owned(a) | owned(b) == set(queues)
            await wait_for(lambda: all(broker.lock_processor.locks.owner("OG3", mq) ==
                                       (a if mq in owned(a) else b).instance.client_id for mq in queues))
            # a third client of the group is refused every queue
            assert await QueueLocker(third.instance, "OG3").lock_batch(queues[0].broker_name, queues) == set()
            sent = await send_ordered(p, "OTopic3", 120)
            await asyncio.sleep(0.2)
            await a.shutdown()  # a's queues move to b
            a_done = {q: len(recs["a"].bodies(q)) for q in range(4)}
            assert any(0 < n < len(sent[q]) for q, n in a_done.items()), a_done  # a left mid-queue
            more = await send_ordered(p, "OTopic3", 120, start=120)
            await wait_for(lambda: owned(b) == set(queues), timeout=15)
            await wait_for(lambda: all(broker.lock_processor.locks.owner("OG3", mq) == b.instance.client_id
                                       for mq in queues))
            want = {q: sent[q] + more[q] for q in range(4)}
            got = lambda q: [x for _, _, x in sorted(  # noqa: E731
                (t, n, body) for n, r in recs.items() for (qq, body, _, t) in r.attempts
                if qq == q and body != b"warmup")]
            await wait_for(lambda: all(len(set(got(q))) == len(want[q]) for q in range(4)), timeout=20)
            await b.shutdown()
        for q in range(4):
            assert got(q) == want[q], f"queue {q}"  # nothing lost, nothing twice, order kept across the move
        # no queue was ever in two listeners at once, whichever consumer ran it
        spans = sorted(s for r in recs.values() for s in r.spans)
        for (q1, s1, e1, n1), (q2, s2, e2, n2) in zip(spans, spans[1:]):
            assert not (q1 == q2 and s2 < e1), (q1, n1, n2)
        assert recs["a"].attempts and recs["b"].attempts
    run(main(), timeout=90)


def test_max_reconsume_sends_to_retry_then_dlq(cluster, run, client_config):
    broker = cluster.broker
    poison = b"m0006"  # queue 2

    async def main():
        rec = Recorder(suspend=lambda m: m.body == poison, pause=0.05)  # the listener shortens the 2 s pause
        async with Producer(ProducerConfig(group="OP4", default_topic_queue_nums=4), client_config()) as p:
            await make_topic(p, "OTopic4", broker)
            c = PushConsumer(ConsumerConfig(group="OG4", consume_from_where="FIRST", max_reconsume_times=2),
                             rec, client_config(), orderly=True,
                             orderly_config=OrderlyConfig(suspend_current_queue_time=2.0))
            c.subscribe("OTopic4")
            await c.start()
            try:
                sent = await send_ordered(p, "OTopic4", 20)
                expected = {q: [b for b in sent[q] if b != poison] for q in sent}
                await wait_for(lambda: all(rec.bodies(q) == expected[q] for q in sent), timeout=20)
                mq2 = next(mq for mq in c.process_queues if mq.topic == "OTopic4" and mq.queue_id == 2)
                await wait_for(lambda: c.offset_store.memory(mq2) == len(sent[2]))  # committed past it
            finally:
                await c.shutdown()
            original = next(m for m in await _pull_all(client_config, broker, "OTopic4", 2) if m.body == poison)
            dlq = await _pull_all(client_config, broker, dlq_topic("OG4"), 0)
        tries = [(rt, t) for q, b, rt, t in rec.attempts if b == poison]
        assert [rt for rt, _ in tries] == [0, 1, 2]
        assert tries[-1][1] - tries[0][1] < 1.5  # two pauses of 0.05 s, not of 2 s
        assert c.counters.resent_by_producer == 1
        assert [m.body for m in dlq] == [poison]
        d = dlq[0]
        assert d.properties[P.ORIGIN_MESSAGE_ID] == original.msg_id
        assert d.properties[P.RETRY_TOPIC] == "OTopic4"
        assert d.reconsume_times == 2 and d.properties[P.KEYS] == "k6"
    run(main(), timeout=60)


async def _pull_all(client_config, broker, topic: str, queue_id: int):
    async with PullConsumer("OPullAll", client_config()) as pc:
        await route_ready(pc.instance, topic, broker)
        qs = [q for q in await pc.fetch_subscribe_queues(topic) if q.queue_id == queue_id]
        res = await pc.pull(qs[0], 0, 32)
        return res.messages if res.status is PullStatus.FOUND else []


def test_lost_lock_stops_the_queue_and_relock_rereads_the_offset(cluster, run, client_config):
    """Another client takes queue 3's lock (its broker entry expired): the consumer stops consuming it and stops
    persisting its offset; that client consumes two messages and commits; once it unlocks, the consumer locks
    again and goes on from the committed offset, without the two messages."""
    broker = cluster.broker
    locks = broker.lock_processor.locks

    async def main():
        rec = Recorder()
        async with Producer(ProducerConfig(group="OP5", default_topic_queue_nums=4), client_config()) as p, \
                PullConsumer("OPull5", client_config()) as other:
            queues = await make_topic(p, "OTopic5", broker)
            c = PushConsumer(ConsumerConfig(group="OG5", consume_from_where="FIRST"), rec,
                             client_config(persist_consumer_offset_interval=0.1), orderly=True,
                             orderly_config=FAST)
            c.subscribe("OTopic5")
            await c.start()
            try:
                sent = await send_ordered(p, "OTopic5", 20)
                await wait_for(lambda: all(rec.bodies(q) == sent[q] for q in range(4)))
                mq3 = queues[3]
                pq3 = c.process_queues[mq3]
                await wait_for(lambda: locks.owner("OG5", mq3) == c.instance.client_id)
                locks._table["OG5"][mq3][1] = 0  # the broker entry expires ...
                assert locks.try_lock_batch("OG5", [mq3], "thief") == {mq3}  # ... and another client takes it
                await wait_for(lambda: not pq3.locked and pq3.lock_lost)  # seen at the next lockAll
                more = await send_ordered(p, "OTopic5", 20, start=20)
                await wait_for(lambda: all(rec.bodies(q) == sent[q] + more[q] for q in range(3)))
                await asyncio.sleep(0.5)
                assert rec.bodies(3) == sent[3]  # queue 3 stopped
                await other.api.update_consumer_offset("OG5", mq3, 7)  # "thief" consumed m0023, m0027
                await asyncio.sleep(0.3)  # several offset persists of the consumer: none for queue 3
                assert await other.api.query_consumer_offset("OG5", mq3) == 7
                locks.unlock_batch("OG5", [mq3], "thief")
                await wait_for(lambda: rec.bodies(3) == sent[3] + more[3][2:])
                assert locks.owner("OG5", mq3) == c.instance.client_id
                await asyncio.sleep(0.3)
                assert rec.bodies(3) == sent[3] + more[3][2:]
            finally:
                await c.shutdown()
            assert await other.api.query_consumer_offset("OG5", mq3) == 10
    run(main(), timeout=60)


def test_expired_client_lock_stops_consuming_until_relocked(cluster, run, client_config):
    """No lockAll for a long time: the client-side lock expires (0.5 s here). Queues whose broker lock can be
    renewed go on; queue 2, which another client now holds at the broker, is not consumed until it is free."""
    broker = cluster.broker
    locks = broker.lock_processor.locks
    slow_renewal = OrderlyConfig(lock_interval=60.0, lock_max_live_time=0.5, lock_retry_delay=0.2)

    async def main():
        rec = Recorder()
        async with Producer(ProducerConfig(group="OP6", default_topic_queue_nums=4), client_config()) as p:
            queues = await make_topic(p, "OTopic6", broker)
            c = PushConsumer(ConsumerConfig(group="OG6", consume_from_where="FIRST"), rec, client_config(),
                             orderly=True, orderly_config=slow_renewal)
            c.subscribe("OTopic6")
            await c.start()
            try:
                sent = await send_ordered(p, "OTopic6", 12)
                await wait_for(lambda: all(rec.bodies(q) == sent[q] for q in range(4)))
                mq2 = queues[2]
                locks._table["OG6"][mq2][1] = 0
                assert locks.try_lock_batch("OG6", [mq2], "thief") == {mq2}
                await asyncio.sleep(0.6)  # the client-side locks expire
                pq2 = c.process_queues[mq2]
                assert pq2.locked and pq2.lock_expired(0.5)  # no lockAll ran: only the expiry tells
                more = await send_ordered(p, "OTopic6", 12, start=12)
                await wait_for(lambda: all(rec.bodies(q) == sent[q] + more[q] for q in (0, 1, 3)))
                await asyncio.sleep(0.5)
                assert rec.bodies(2) == sent[2]
                locks.unlock_batch("OG6", [mq2], "thief")
                await wait_for(lambda: rec.bodies(2) == sent[2] + more[2])
            finally:
                await c.shutdown()
    run(main(), timeout=60)


def test_broadcasting_orderly_takes_no_locks(cluster, run, client_config):
    broker = cluster.broker

    async def main():
        rec = Recorder()
        async with Producer(ProducerConfig(group="OP9", default_topic_queue_nums=4), client_config()) as p:
            queues = await make_topic(p, "OTopic9", broker)
            c = PushConsumer(ConsumerConfig(group="OGB", consume_from_where="FIRST", message_model="BROADCASTING"),
                             rec, client_config(), orderly=True, orderly_config=FAST)
            c.subscribe("OTopic9")
            await c.start()
            try:
                sent = await send_ordered(p, "OTopic9", 40)
                await wait_for(lambda: all(rec.bodies(q) == sent[q] for q in range(4)))
                assert all(broker.lock_processor.locks.owner("OGB", mq) is None for mq in queues)
                direct = await c.consume_directly(MessageExt(topic="OTopic9", body=b"again"), "broker-a")
                assert direct["order"] is True and direct["consumeResult"] == "CR_SUCCESS"
            finally:
                await c.shutdown()
    run(main(), timeout=60)


# -- the synchronous facade and `mq consume --orderly` (daemons on their own loop thread) ----------------------
@pytest.fixture
def threaded_cluster(tmp_path):
    from mq.daemon.broker.controller import BrokerController
    from mq.daemon.namesrv.server import NamesrvServer

    lt = LoopThread("orderly-daemons")

    async def start():
        ns = NamesrvServer(NamesrvConfig(host="127.0.0.1", listen_port=0,
                                         kv_config_path=str(tmp_path / "kvConfig.json")))
        await ns.start()
        b = BrokerController(BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr=ns.address),
                             store_config=StoreConfig(store_path_root_dir=str(tmp_path / "store"),
                                                      **TEST_STORE_DEFAULTS))
        await b.start()
        return ns, b
    ns, b = lt.run(start(), timeout=30)
    try:
        yield ns, b, lt
    finally:
        lt.run(b.stop(), timeout=30)
        lt.run(ns.stop(), timeout=30)
        lt.stop()


def _send_sync(ns, b, lt, topic: str, n: int) -> dict[int, list[bytes]]:
    sent: dict[int, list[bytes]] = defaultdict(list)
    cfg = ClientConfig(namesrv_addr=ns.address, instance_name=f"sync-p-{topic}", client_ip="127.0.0.1")
    with SyncProducer(ProducerConfig(group="OPS", default_topic_queue_nums=4), cfg) as p:
        for i in range(n):
            r = p.send(Message(topic, b"m%04d" % i), selector=by_queue, arg=i % 4)
            sent[r.queue.queue_id].append(b"m%04d" % i)
    lt.run(b.register_all(force=True))
    return sent


def test_sync_push_consumer_orderly_runs_a_blocking_listener(threaded_cluster):
    ns, b, lt = threaded_cluster
    sent = _send_sync(ns, b, lt, "OTopic7", 40)
    got: dict[int, list[bytes]] = defaultdict(list)
    threads = set()

    def listener(msgs, ctx):
        time.sleep(0.002)  # blocking is allowed: it runs in a worker thread
        threads.add(threading.current_thread().name)
        got[ctx.queue.queue_id].extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS
    cfg = ClientConfig(namesrv_addr=ns.address, instance_name="sync-orderly", client_ip="127.0.0.1")
    with SyncPushConsumer(ConsumerConfig(group="OG7", consume_from_where="FIRST"), listener, cfg, orderly=True,
                          orderly_config=FAST).subscribe("OTopic7") as c:
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.running_info()["properties"]["PROP_CONSUMEORDERLY"] == "true"
        assert c.stats()["consumed_ok"] == 40
    assert dict(got) == dict(sent)
    assert "mq-client-loop" not in threads


def test_cli_consume_orderly(threaded_cluster):
    from click.testing import CliRunner

    from mq.cli.main import cli

    ns, b, lt = threaded_cluster
    sent = _send_sync(ns, b, lt, "OTopic8", 40)
    def consume(group, *extra):
        return CliRunner().invoke(cli, ["-n", ns.address, "consume", "-t", "OTopic8", "-g", group, "--from", "first",
                                        "--count", "40", "--orderly", "--timeout", "30", *extra],
                                  catch_exceptions=False, standalone_mode=False).output
    out = consume("OG9")
    assert "(CLUSTERING, orderly)" in out and "40 message(s) consumed" in out
    rows = [json.loads(line) for line in consume("OG8", "--json").splitlines() if line.startswith("{")]
    per: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        per[row["queueId"]].append(row["queueOffset"])
    assert {q: offs for q, offs in per.items()} == {q: list(range(len(sent[q]))) for q in sent}
