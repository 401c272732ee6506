"""A running push consumer obeys an offset reset pushed by the broker (RESET_CONSUMER_CLIENT_OFFSET 220, sent
after ``mq resetOffsetByTime``) and answers GET_CONSUMER_STATUS_FROM_CLIENT (221), against the real daemons.

Listeners wait on a gate (an ``asyncio.Event``) so a test controls when consumption may move offsets: while the
gate is shut the redelivered messages sit in the listener or the cache, and the broker's committed offsets must
stay at the reset values although the consumer persists every 0.2 s.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from click.testing import CliRunner

from mq.cli.main import cli as mq_cli
from mq.client.admin import MQAdmin
from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.client_processor import reset_offset_table
from mq.client.producer import Producer
from mq.common.message import Message, MessageQueue
from mq.config import ConsumerConfig, OrderlyConfig, ProducerConfig
from mq.protocol import headers as h
from mq.protocol.bodies import GetConsumerStatusBody
from mq.protocol.codes import LanguageCode, RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

from tests.integration.client.test_client_real_broker import route_ready, wait_for

PERSIST = 0.2


class Recorder:
    """An async listener recording (queue id, offset, body) per call; it waits while the gate is shut."""

    def __init__(self, *, open_gate: bool = True) -> None:
        self.gate = asyncio.Event()
        if open_gate:
            self.gate.set()
        self.started: list[tuple[int, int, bytes]] = []  # at entry, before the gate
        self.done: list[tuple[int, int, bytes]] = []      # returned CONSUME_SUCCESS

    async def __call__(self, msgs, ctx) -> ConsumeStatus:
        self.started.extend((m.queue_id, m.queue_offset, m.body) for m in msgs)
        await self.gate.wait()
        self.done.extend((m.queue_id, m.queue_offset, m.body) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS


def committed(broker, group: str, topic: str, queues: int = 4) -> list[int]:
    return [broker.offsets.query(group, topic, q) for q in range(queues)]


def max_offsets(broker, topic: str, queues: int = 4) -> list[int]:
    return [broker.store.get_max_offset(topic, q) for q in range(queues)]


async def reset_applied(c: PushConsumer, topic: str, resets: int, queues: int = 4) -> None:
    """Wait until ``c`` has applied ``resets`` resets and pulls every queue of ``topic`` again."""
    await wait_for(lambda: c.counters.offset_resets >= resets
                   and sum(1 for mq, pq in c.process_queues.items() if mq.topic == topic and not pq.dropped)
                   == queues)


async def hold_still(broker, group: str, topic: str, expected: list[int], seconds: float) -> None:
    """The broker's committed offsets stay ``expected`` for ``seconds`` (several persist periods)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert committed(broker, group, topic) == expected
        await asyncio.sleep(0.05)


async def start_consumer(client_config, group: str, topic: str, listener, **cfg) -> PushConsumer:
    c = PushConsumer(ConsumerConfig(group=group, consume_from_where="FIRST", **cfg), listener,
                     client_config(persist_consumer_offset_interval=PERSIST))
    c.subscribe(topic)
    return await c.start()


def test_reset_back_redelivers_everything_and_keeps_the_broker_offsets(cluster, run, client_config):
    topic, group = "RTopic1", "RG1"
    runner = CliRunner()

    async def mq_cli_json(*args: str) -> dict:
        import json

        res = await asyncio.to_thread(runner.invoke, mq_cli, ["-n", cluster.namesrv_addr, *args, "--json"],
                                      env={"COLUMNS": "250"})
        assert res.exit_code == 0, (res.output, res.exception)
        return json.loads(res.stdout)

    async def main():
        rec = Recorder()
        async with Producer(ProducerConfig(group="RP1"), client_config()) as p:
            await p.send(Message(topic, b"warmup"))
            await route_ready(p.instance, topic, cluster.broker)
            await asyncio.sleep(0.05)
            t0 = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            sent = [await p.send(Message(topic, b"m%d" % i)) for i in range(40)]
        first = [(r.queue.queue_id, r.queue_offset, b"m%d" % i) for i, r in enumerate(sent)]
        c = await start_consumer(client_config, group, topic, rec)
        try:
            tops = max_offsets(cluster.broker, topic)
            assert sum(tops) == 41
            await wait_for(lambda: len(rec.done) == 41 and committed(cluster.broker, group, topic) == tops)

            rec.gate.clear()  # from here on a consumed batch waits, so offsets cannot move
            before = len(rec.started)
            res = await mq_cli_json("resetOffsetByTime", "-g", group, "-t", topic, "-s", str(t0))
            reset_to = [o["offset"] for o in sorted(res["offsets"], key=lambda o: o["queueId"])]
            # every queue goes back to its first message after t0 (the warmup message stays consumed)
            assert reset_to == [min([o for q, o, _ in first if q == qid], default=tops[qid]) for qid in range(4)]
            assert reset_to != tops
            await reset_applied(c, topic, 1)
            assert [c.offset_table(topic).get(MessageQueue(topic, cluster.broker.broker_name, q)) for q in
                    range(4)] == reset_to
            # several persist periods pass: the old in-memory offsets (tops) are never written back
            await wait_for(lambda: len(rec.started) > before)
            await hold_still(cluster.broker, group, topic, reset_to, 6 * PERSIST)

            rec.gate.set()
            await wait_for(lambda: len(rec.done) >= 41 + 40)
            await asyncio.sleep(0.3)
            again = rec.done[41:]
            assert Counter(again) == Counter(first)  # each of the 40 exactly once more; the warmup not
            await wait_for(lambda: committed(cluster.broker, group, topic) == tops)
        finally:
            await c.shutdown()
        assert committed(cluster.broker, group, topic) == tops
    run(main(), timeout=60)


def test_reset_forward_skips_the_backlog(cluster, run, client_config):
    topic, group = "RTopic2", "RG2"

    async def main():
        rec = Recorder(open_gate=False)
        async with Producer(ProducerConfig(group="RP2"), client_config()) as p:
            await p.send(Message(topic, b"warmup"))
            await route_ready(p.instance, topic, cluster.broker)
            for i in range(30):
                await p.send(Message(topic, b"old%d" % i))
            tops = max_offsets(cluster.broker, topic)
            c = await start_consumer(client_config, group, topic, rec, consume_thread_max=2)
            try:
                # two listener calls wait at the gate, the rest of the backlog sits in the caches
                await wait_for(lambda: len(rec.started) == 2
                               and sum(pq.msg_count for pq in c.process_queues.values()) == 31)
                async with MQAdmin(client_config().namesrv_addrs) as admin:
                    table = await admin.reset_offset_by_timestamp(cluster.broker_addr, topic, group, -1, True)
                assert [table[MessageQueue(topic, cluster.broker.broker_name, q)] for q in range(4)] == tops
                await reset_applied(c, topic, 1)
                assert committed(cluster.broker, group, topic) == tops
                assert sum(pq.msg_count for mq, pq in c.process_queues.items() if mq.topic == topic) == 0
                rec.gate.set()  # the two waiting calls end, on dropped queues: their offsets are discarded
                await hold_still(cluster.broker, group, topic, tops, 5 * PERSIST)
                assert len(rec.started) == 2 and len(rec.done) == 2  # nothing of the backlog consumed again

                new = [await p.send(Message(topic, b"new%d" % i)) for i in range(8)]
                await wait_for(lambda: len(rec.done) == 10)
                await asyncio.sleep(0.3)
                assert sorted(b for _, _, b in rec.done[2:]) == sorted(b"new%d" % i for i in range(8))
                assert len(rec.started) == 10
                final = max_offsets(cluster.broker, topic)
                assert sum(final) - sum(tops) == len(new)
                await wait_for(lambda: committed(cluster.broker, group, topic) == final)
            finally:
                await c.shutdown()
    run(main(), timeout=60)


def test_consumer_status_and_cpp_reset_for_broadcasting(cluster, run, client, client_config):
    topic, group = "RTopic3", "RG3"

    async def main():
        rec = Recorder()
        async with Producer(ProducerConfig(group="RP3"), client_config()) as p:
            await p.send(Message(topic, b"warmup"))
            await route_ready(p.instance, topic, cluster.broker)
            for i in range(11):
                await p.send(Message(topic, b"b%d" % i))
        tops = max_offsets(cluster.broker, topic)
        c = await start_consumer(client_config, group, topic, rec, message_model="BROADCASTING")
        try:
            await wait_for(lambda: len(rec.done) == 12)
            mqs = [MessageQueue(topic, cluster.broker.broker_name, q) for q in range(4)]
            await wait_for(lambda: [c.offset_table(topic).get(mq) for mq in mqs] == tops)

            # 221 straight over the broker's channel to the client
            ch = cluster.broker.consumers.find_channel(group, c.instance.client_id)
            ext = h.GetConsumerStatusRequestHeader(topic=topic, group=group).to_ext()
            resp = await cluster.broker.call_client(ch.conn, RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext))
            assert resp.code == ResponseCode.SUCCESS
            assert resp.body.startswith(b'{"consumerTable":{},"messageQueueTable":{{"brokerName":')
            assert GetConsumerStatusBody.from_json(resp.body).message_queue_table == dict(zip(mqs, tops))
            # an unknown group: SUCCESS with an empty table, as Java
            ext2 = h.GetConsumerStatusRequestHeader(topic=topic, group="NoSuchGroup").to_ext()
            resp = await cluster.broker.call_client(ch.conn, RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext2))
            assert resp.code == ResponseCode.SUCCESS
            assert GetConsumerStatusBody.from_json(resp.body).message_queue_table == {}
            # ... and through the broker (INVOKE_BROKER_TO_GET_CONSUMER_STATUS 223), as mqadmin asks
            resp = await client.invoke(cluster.broker_addr, RemotingCommand.request(
                RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ext))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            status = GetConsumerStatusBody.from_json(resp.body).consumer_table
            assert status == {c.instance.client_id: dict(zip(mqs, tops))}

            # a reset asked by a C++ admin: the broker pushes the C++ list form of the offsets
            await wait_for(lambda: c.offset_store._read_file() == dict(zip(mqs, tops)))
            rec.gate.clear()
            cmd = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, h.ResetOffsetRequestHeader(
                topic=topic, group=group, timestamp=0, is_force=True).to_ext())
            cmd.language = LanguageCode.CPP
            resp = await client.invoke(cluster.broker_addr, cmd)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            await reset_applied(c, topic, 1)
            # the local offset file holds the reset offsets, and keeps them while nothing is consumed
            zeros = {mq: 0 for mq in mqs}
            assert c.offset_store._read_file() == zeros
            await wait_for(lambda: len(rec.started) > 12)
            await asyncio.sleep(4 * PERSIST)
            assert c.offset_store._read_file() == zeros
            rec.gate.set()
            await wait_for(lambda: len(rec.done) == 24)
            await asyncio.sleep(0.3)
            assert Counter(rec.done[12:]) == Counter(rec.done[:12])
            await wait_for(lambda: [c.offset_table(topic).get(mq) for mq in mqs] == tops)
        finally:
            await c.shutdown()
        assert c.offset_store._read_file() == dict(zip(mqs, tops))
    run(main(), timeout=60)


def test_orderly_reset_discards_the_running_batch_and_keeps_order(cluster, run, client_config):
    topic, group = "RTopic4", "RG4"

    async def main():
        rec = Recorder(open_gate=False)
        async with Producer(ProducerConfig(group="RP4"), client_config()) as p:
            await p.send(Message(topic, b"warmup"))
            await route_ready(p.instance, topic, cluster.broker)
            await asyncio.sleep(0.05)
            t0 = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            sent = [await p.send(Message(topic, b"o%d" % i)) for i in range(24)]
        by_queue = {q: [r.queue_offset for r in sent if r.queue.queue_id == q] for q in range(4)}
        c = PushConsumer(ConsumerConfig(group=group, consume_from_where="FIRST"), rec,
                         client_config(persist_consumer_offset_interval=PERSIST), orderly=True,
                         orderly_config=OrderlyConfig(consume_lock_wait=0.2))
        c.subscribe(topic)
        await c.start()
        try:
            await wait_for(lambda: len({q for q, _, _ in rec.started}) == 4)  # one batch per queue in the listener
            blocked = list(rec.started)
            async with MQAdmin(client_config().namesrv_addrs) as admin:
                table = await admin.reset_offset_by_timestamp(cluster.broker_addr, topic, group, t0, True)
            reset_to = [table[MessageQueue(topic, cluster.broker.broker_name, q)] for q in range(4)]
            assert reset_to == [offs[0] for offs in by_queue.values()]
            await reset_applied(c, topic, 1)
            await hold_still(cluster.broker, group, topic, reset_to, 4 * PERSIST)
            rec.gate.set()
            await wait_for(lambda: len(rec.done) == len(blocked) + 24)
            await asyncio.sleep(0.3)
            assert len(rec.done) == len(blocked) + 24
            for q in range(4):  # the interrupted batch first, then the whole queue again, in order
                done = [o for qid, o, _ in rec.done if qid == q]
                old = [o for qid, o, _ in blocked if qid == q]
                assert done == old + by_queue[q], q
            tops = max_offsets(cluster.broker, topic)
            await wait_for(lambda: committed(cluster.broker, group, topic) == tops)
        finally:
            await c.shutdown()
    run(main(), timeout=60)


def test_reset_offset_table_reads_both_body_forms():
    java = (b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,'
            b'{"brokerName":"b","queueId":1,"topic":"T"}:7}}')
    cpp = b'{"offsetTable":[{"brokerName":"b","offset":3,"queueId":1,"topic":"T"}]}'
    assert reset_offset_table(java) == {MessageQueue("T", "b", 0): 5, MessageQueue("T", "b", 1): 7}
    assert reset_offset_table(cpp) == {MessageQueue("T", "b", 1): 3}
    assert reset_offset_table(None) == {}
    from mq.errors import RemoteProtocolError

    for bad in (b'{"offsetTable":[{"brokerName":"b"}]}', b"[1]", b'{"offsetTable":[3]}', b"nope"):
        try:
            reset_offset_table(bad)
        except RemoteProtocolError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
