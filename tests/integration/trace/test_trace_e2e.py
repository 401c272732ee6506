"""Message trace end to end over real daemons: traced producer (single + batch send), two traced consumer
groups (one fails once, then succeeds), `mq trace -i` as a tree and as JSON."""

from __future__ import annotations

import asyncio
import json

from click.testing import CliRunner

from mq.cli.main import cli as mq_cli
from mq.client.admin import MQAdmin
from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.common import properties as P
from mq.common.message import Message
from mq.config import ConsumerConfig, ProducerConfig
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand
from mq.trace.context import RMQ_SYS_TRACE_TOPIC
from mq.trace.dispatcher import DispatcherOptions
from mq.trace.enable import enable_trace
from mq.trace.query import query_trace

TOPIC = "TraceE2ETopic"
FAST = DispatcherOptions(poll_interval=0.02, max_batch_age=0.05)


async def wait_for(cond, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} not met in {timeout} s")
        await asyncio.sleep(0.05)


async def route_ready(instance, topic: str, broker, timeout: float = 10.0) -> None:
    from mq.errors import TopicNotExistError

    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await instance.update_route(topic)
            return
        except TopicNotExistError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await broker.register_all(force=True)
            await asyncio.sleep(0.2)


async def broker_has_send_back(admin: MQAdmin, addr: str) -> bool:
    """Whether the broker implements CONSUMER_SEND_MSG_BACK (36): probe with an offset that holds nothing."""
    from mq.protocol import headers as h
    from mq.protocol.codes import RequestCode, ResponseCode
    from mq.protocol.command import RemotingCommand

    hdr = h.ConsumerSendMsgBackRequestHeader(offset=2**40, group="CG_TRACE_PROBE", delay_level=0)
    resp = await admin.client.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, hdr.to_ext()),
                                     timeout=3.0)
    return resp.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def use_local_retry(consumer: PushConsumer) -> None:
    """Stand-in while the broker lacks CONSUMER_SEND_MSG_BACK: the consumer's client-side fallback re-sends the
    message to %RETRY% without its UNIQ_KEY (so the retry is traced under a new id); its last resort, a local
    retry of the same message with reconsumeTimes + 1, keeps the id. Take that path directly."""
    async def no_send_back(msg, delay_level):
        return False
    consumer._send_back = no_send_back


async def traced_path(admin: MQAdmin, msg_id: str, groups: set[str], timeout: float = 15.0):
    """query_trace until every group has a successful attempt and a Pub is there (indexing is asynchronous)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        tr = await query_trace(admin, msg_id)
        done = {g.group for g in tr.groups if g.status == "consumed"}
        if tr.pubs and groups <= done and not any("no SubAfter" in i for i in tr.incomplete):
            return tr
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"incomplete trace of {msg_id}: {tr.to_dict()}")
        await asyncio.sleep(0.2)


def test_trace_end_to_end(run, namesrv, broker_factory, client_config):
    # traceTopicEnable pre-creates RMQ_SYS_TRACE_TOPIC; no delay levels so a retry comes back at once
    broker = broker_factory(trace_topic_enable=True, message_delay_level="")

    async def main():
        producer = Producer(ProducerConfig(group="PG_TRACE"), client_config())
        pdisp = enable_trace(producer, dispatcher_options=FAST)
        await producer.start()
        single = await producer.send(Message(TOPIC, b"fail-once", properties={P.TAGS: "TagA", P.KEYS: "order-1"}))
        batch = await producer.send_batch([Message(TOPIC, b"b%d" % i, properties={P.KEYS: f"bk{i}"})
                                           for i in range(3)])
        await route_ready(producer.instance, TOPIC, broker)
        batch_ids = batch.msg_id.split(",")

        ok_bodies: list[bytes] = []
        flaky_calls: list[tuple[bytes, int]] = []

        async def ok(msgs, ctx):
            await asyncio.sleep(0.03)  # a measurable consume cost
            ok_bodies.extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        def flaky(msgs, ctx):
            flaky_calls.extend((m.body, m.reconsume_times) for m in msgs)
            if any(m.body == b"fail-once" and m.reconsume_times == 0 for m in msgs):
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        async with MQAdmin([namesrv.address]) as admin:
            send_back = await broker_has_send_back(admin, broker.address)
        consumers = []
        for group, listener in (("CG_TRACE_OK", ok), ("CG_TRACE_FLAKY", flaky)):
            c = PushConsumer(ConsumerConfig(group=group, consume_from_where="FIRST", local_retry_delay=0.2),
                             # the %RETRY% route appears a moment after the group does: re-check every second
                             listener, client_config(rebalance_interval=1.0, poll_name_server_interval=1.0))
            c.subscribe(TOPIC)
            enable_trace(c, dispatcher_options=FAST)
            if listener is flaky and not send_back:
                use_local_retry(c)
            consumers.append(c)
            await c.start()
        await wait_for(lambda: len(ok_bodies) >= 4 and (b"fail-once", 1) in flaky_calls
                       and sum(1 for b, _ in flaky_calls if b.startswith(b"b")) >= 3, what="consumption")
        for c in consumers:
            await c.shutdown()
        await producer.shutdown()
        stats = [pdisp.stats()] + [c.trace_dispatcher.stats() for c in consumers]
        async with MQAdmin([namesrv.address]) as admin:
            single_tr = await traced_path(admin, single.msg_id, {"CG_TRACE_OK", "CG_TRACE_FLAKY"})
            batch_trs = [await traced_path(admin, i, {"CG_TRACE_OK", "CG_TRACE_FLAKY"}) for i in batch_ids]
            route = await admin.topic_route(RMQ_SYS_TRACE_TOPIC)
            # a group that knows the topic but has not reached the message, and one that passed it untraced
            for group, offset in (("CG_TRACE_LAGGING", single.queue_offset), ("CG_UNTRACED", single.queue_offset + 1)):
                hdr = h.UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=TOPIC,
                                                          queue_id=single.queue.queue_id, commit_offset=offset)
                await admin.call_broker(broker.address, RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET, hdr.to_ext()))
            notes = (await query_trace(admin, single.msg_id)).notes
        return single, batch_ids, stats, single_tr, batch_trs, route, notes

    single, batch_ids, stats, tr, batch_trs, route, notes = run(main(), timeout=90)

    # the broker pre-created the trace topic with 1 read / 1 write queue
    assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(1, 1)]
    # nothing dropped, everything sent
    for s in stats:
        assert s["dropped"] == 0 and s["pending"] == 0 and s["sent"] == s["offered"] > 0, s
    assert stats[0]["sent"] == 4  # one Pub per message, batch members included

    # the Pub
    (pub,) = tr.pubs
    assert (pub.group, pub.topic, pub.status, pub.tags, pub.keys) == ("PG_TRACE", TOPIC, "success", "TagA", "order-1")
    assert pub.offset_msg_id == single.offset_msg_id and pub.store_host == single.broker_addr
    assert 0 <= pub.cost_ms < 5000 and pub.client_host == "127.0.0.1"
    assert tr.stored is not None and tr.stored.queue_offset == single.queue_offset
    # both groups; the flaky one failed once, then succeeded on retry 1
    groups = {g.group: g for g in tr.groups}
    assert set(groups) == {"CG_TRACE_OK", "CG_TRACE_FLAKY"}
    (ok_attempt,) = groups["CG_TRACE_OK"].attempts
    assert (ok_attempt.status, ok_attempt.retry_times, ok_attempt.return_type) == ("success", 0, "SUCCESS")
    assert 25 <= ok_attempt.cost_ms < 5000 and ok_attempt.end - ok_attempt.begin >= ok_attempt.cost_ms
    flaky = groups["CG_TRACE_FLAKY"].attempts
    assert [(a.status, a.retry_times, a.return_type) for a in flaky] == [("failed", 0, "FAILED"),
                                                                         ("success", 1, "SUCCESS")]
    for g in groups.values():
        assert g.status == "consumed"
        assert 0 <= g.delivery_lag_ms < 20_000 and g.consumed_after_ms is not None
        for a in g.attempts:
            assert 0 <= a.cost_ms < 5000 and a.begin <= a.end and a.client_host == "127.0.0.1"
    assert flaky[0].end <= flaky[1].begin
    assert tr.incomplete == [] and tr.notes == []
    # groups subscribed to the topic that left no record
    assert [n["group"] for n in notes] == ["CG_TRACE_LAGGING", "CG_UNTRACED"]
    assert notes[0]["note"].startswith("stored but not consumed by CG_TRACE_LAGGING")
    assert notes[1]["note"].startswith("passed by CG_UNTRACED without a trace record")
    # batch send: one Pub per member, each with its own id
    for msg_id, btr in zip(batch_ids, batch_trs):
        (bpub,) = btr.pubs
        assert bpub.group == "PG_TRACE" and bpub.body_length == 2 and bpub.keys == f"bk{batch_ids.index(msg_id)}"
        assert {g.group for g in btr.groups} == {"CG_TRACE_OK", "CG_TRACE_FLAKY"}

    # the CLI: tree and JSON
    runner = CliRunner()

    def mq(*args):
        return run(asyncio.to_thread(runner.invoke, mq_cli, ["-n", namesrv.address, *args],
                                     env={"COLUMNS": "250"}))

    res = mq("trace", "-i", single.msg_id)
    assert res.exit_code == 0, (res.output, res.exception)
    out = res.output
    assert "Pub" in out and "PG_TRACE" in out and "CG_TRACE_OK" in out and "CG_TRACE_FLAKY" in out
    assert "retries 1" in out and "failed (FAILED)" in out
    res = mq("trace", "-i", single.msg_id, "--json")
    assert res.exit_code == 0, (res.output, res.exception)
    data = json.loads(res.stdout)
    assert data["found"] and data["msg_id"] == single.msg_id and data["topic"] == TOPIC
    assert [p["group"] for p in data["pubs"]] == ["PG_TRACE"]
    jg = {g["group"]: g for g in data["groups"]}
    assert [(a["status"], a["retry_times"]) for a in jg["CG_TRACE_FLAKY"]["attempts"]] == [("failed", 0),
                                                                                          ("success", 1)]
    assert jg["CG_TRACE_FLAKY"]["attempts"][1]["cost_ms"] == flaky[1].cost_ms
    # a broker offsetMsgId is followed to the message's UNIQ_KEY (traces are indexed by the latter)
    res = mq("trace", "-i", single.offset_msg_id, "--json")
    assert res.exit_code == 0, (res.output, res.exception)
    data = json.loads(res.stdout)
    assert data["msg_id"] == single.msg_id and "is an offsetMsgId" in data["notes"][0]["note"]
    res = mq("trace", "-i", "0" * 32, "--json", "--no-groups")
    assert res.exit_code == 2 and json.loads(res.stdout)["found"] is False


def test_custom_trace_topic_sync_facade_and_send_failures_counted(run, namesrv, broker_factory, client_config):
    """A customized trace topic (auto-created through TBW102) found with --trace-topic; the synchronous facade
    is traced too; a trace topic the broker refuses makes every trace send fail, counted as send_failed."""
    from mq.client.sync import LoopThread, SyncProducer
    from mq.errors import TopicNotExistError

    broker = broker_factory()
    ns = namesrv.address

    def sync_part():
        lt = LoopThread("trace-sync-test")
        try:
            p = SyncProducer(ProducerConfig(group="PG_TRACE_SYNC"), client_config(), loop=lt)
            disp = enable_trace(p, "MY_TRACE_TOPIC", dispatcher_options=FAST)
            p.start()
            r = p.send(Message(TOPIC, b"sync"))
            bad = SyncProducer(ProducerConfig(group="PG_TRACE_BAD"), client_config(), loop=lt)
            # the broker refuses sends to its schedule topic (NO_PERMISSION): every trace send fails
            bad_disp = enable_trace(bad, "SCHEDULE_TOPIC_XXXX", dispatcher_options=FAST)
            bad.start()
            bad.send(Message(TOPIC, b"untraceable"))
            p.shutdown()
            bad.shutdown()
            return r, disp.stats(), bad_disp.stats()
        finally:
            lt.stop()

    async def main():
        r, stats, bad_stats = await asyncio.to_thread(sync_part)
        async with MQAdmin([ns]) as admin:
            deadline = asyncio.get_running_loop().time() + 15
            while True:
                try:
                    tr = await query_trace(admin, r.msg_id, trace_topic="MY_TRACE_TOPIC")
                except TopicNotExistError:  # auto-created: registered with the name server shortly after
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                    await broker.register_all(force=True)
                    continue
                if tr.pubs or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.2)
        return r, stats, bad_stats, tr

    r, stats, bad_stats, tr = run(main(), timeout=60)
    assert stats["sent"] == stats["offered"] == 1 and stats["traceTopic"] == "MY_TRACE_TOPIC"
    assert [p.group for p in tr.pubs] == ["PG_TRACE_SYNC"] and tr.trace_topic == "MY_TRACE_TOPIC"
    assert bad_stats["offered"] == 1 and bad_stats["droppedByReason"] == {"send_failed": 1}
    assert bad_stats["sent"] == 0 and bad_stats["lastError"]


def test_cli_send_and_consume_with_trace_flag(run, namesrv, broker_factory):
    """`mq send --trace` and `mq consume --trace`, then `mq trace -i` shows the Pub and the group."""
    broker = broker_factory(trace_topic_enable=True)
    runner = CliRunner()

    def mq(*args):
        return runner.invoke(mq_cli, ["-n", namesrv.address, *args], env={"COLUMNS": "250"})

    async def main():
        res = await asyncio.to_thread(mq, "send", "-t", "TraceCliTopic", "--body", "hi", "--keys", "cli-k",
                                      "--trace", "--json")
        assert res.exit_code == 0, (res.output, res.exception)
        msg_id = json.loads(res.stdout)["msgId"]
        await broker.register_all(force=True)
        res = await asyncio.to_thread(mq, "consume", "-t", "TraceCliTopic", "-g", "CG_TRACE_CLI", "--from", "first",
                                      "--count", "1", "--timeout", "20", "--trace", "--json")
        assert res.exit_code == 0, (res.output, res.exception)
        deadline = asyncio.get_running_loop().time() + 15
        while True:
            res = await asyncio.to_thread(mq, "trace", "-i", msg_id, "--json")
            data = json.loads(res.stdout) if res.exit_code in (0, 2) else None
            if data and data["pubs"] and [g["status"] for g in data["groups"]] == ["consumed"]:
                alias = await asyncio.to_thread(mq, "queryMsgTraceById", "-i", msg_id, "--json")  # mqadmin's name
                assert alias.exit_code == 0 and json.loads(alias.stdout)["pubs"] == data["pubs"], alias.output
                missing = await asyncio.to_thread(mq, "queryMsgTraceById", "-i", "0" * 32)
                assert missing.exit_code == 2 and "no trace record" in missing.stdout
                return msg_id, data
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError((res.output, res.exception))
            await asyncio.sleep(0.2)

    msg_id, data = run(main(), timeout=60)
    assert data["pubs"][0]["group"] == "MQ_CLI_PRODUCER" and data["pubs"][0]["keys"] == "cli-k"
    assert data["groups"][0]["group"] == "CG_TRACE_CLI" and data["groups"][0]["attempts"][0]["retry_times"] == 0


def test_transaction_producer_traces_its_end_transaction(run, namesrv, broker_factory, client_config):
    """enable_trace=True on a TransactionProducer: the half message's Pub and an EndTransaction record with the
    committed state, found by `mq trace -i`."""
    from mq.client.transaction import LocalTransactionState, TransactionProducer

    broker = broker_factory(trace_topic_enable=True)

    async def main():
        p = TransactionProducer(ProducerConfig(group="PG_TRACE_TX"), client_config(),
                                executor=lambda msg, arg: LocalTransactionState.COMMIT_MESSAGE,
                                checker=lambda msg: LocalTransactionState.COMMIT_MESSAGE, enable_trace=True)
        p.trace_dispatcher.options = FAST
        await p.start()
        res = await p.send_in_transaction(Message("TraceTxTopic", b"tx body", properties={P.KEYS: "tx-key"}))
        await p.shutdown()
        async with MQAdmin([namesrv.address]) as admin:
            deadline = asyncio.get_running_loop().time() + 20
            while True:
                tr = await query_trace(admin, res.msg_id)
                if tr.end_transactions or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.2)
        # the CLI runs in a thread while the daemons keep serving on this loop
        out = await asyncio.to_thread(CliRunner().invoke, mq_cli,
                                      ["-n", namesrv.address, "trace", "-i", res.msg_id, "--json"])
        return res, tr, out

    res, tr, out = run(main(), timeout=60)
    assert res.state is LocalTransactionState.COMMIT_MESSAGE
    assert [e.state for e in tr.end_transactions] == ["COMMIT_MESSAGE"], tr.to_dict()
    assert tr.end_transactions[0].from_check is False
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [e["state"] for e in data["end_transactions"]] == ["COMMIT_MESSAGE"]
