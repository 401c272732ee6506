"""Pop over remoting, byte for byte: raw POP_MESSAGE / ACK_MESSAGE / BATCH_ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME
commands (RocketMQ 5.3's headers and codes) against a real broker on loopback."""

from __future__ import annotations

import asyncio
import time

import pytest

from mq.common import properties as P
from mq.protocol import extra_info as X
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode, ResponseCode as RC
from mq.protocol.command import RemotingCommand
from mq.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody, encode_bitset

from ..broker.wire import pull_cmd, records, send_cmd
from ..delivery.delivery_helpers import make_topic

FAST = dict(pop_revive_precision_ms=50, pop_revive_margin_ms=50, pop_from_retry_probability=100)


def pop_cmd(topic: str, group: str = "G", *, queue_id: int = -1, n: int = 32, invisible: int = 60_000,
            poll: int = 0, init_mode: int = 1, exp: str | None = None, exp_type: str | None = None,
            order: bool = False, attempt: str | None = None) -> RemotingCommand:
    h = H.PopMessageRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=n,
                                  invisible_time=invisible, poll_time=poll, born_time=int(time.time() * 1000),
                                  init_mode=init_mode, exp_type=exp_type, exp=exp, order=order, attempt_id=attempt)
    return RemotingCommand.request(RequestCode.POP_MESSAGE, h.to_ext())


def handles(resp: RemotingCommand, broker_name: str) -> list[tuple[object, str]]:
    """(message, POP_CK) per popped record, built from the header as the Java client builds it."""
    rh = H.PopMessageResponseHeader.from_ext(resp.ext_fields)
    starts = X.parse_start_offset_info(rh.start_offset_info)
    offs = X.parse_msg_offset_info(rh.msg_offset_info)
    out = []
    for m in records(resp):
        ck = m.properties.get(P.POP_CK)
        if ck is None:
            key = f"{X.retry_flag(m.topic)}@{m.queue_id}"
            assert m.queue_offset in offs[key]
            ck = X.build(starts[key], rh.pop_time, rh.invisible_time, rh.revive_qid, X.retry_flag(m.topic),
                         broker_name, m.queue_id, m.queue_offset)
        out.append((m, ck))
    return out


def ack_cmd(topic: str, ck: str, group: str = "G") -> RemotingCommand:
    ei = X.parse(ck)
    h = H.AckMessageRequestHeader(consumer_group=group, topic=X.real_topic(topic, group, ei.retry),
                                  queue_id=ei.queue_id, extra_info=ck, offset=ei.queue_offset)
    return RemotingCommand.request(RequestCode.ACK_MESSAGE, h.to_ext())


def change_cmd(topic: str, ck: str, invisible: int, group: str = "G") -> RemotingCommand:
    ei = X.parse(ck)
    h = H.ChangeInvisibleTimeRequestHeader(consumer_group=group, topic=X.real_topic(topic, group, ei.retry),
                                           queue_id=ei.queue_id, extra_info=ck, offset=ei.queue_offset,
                                           invisible_time=invisible)
    return RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, h.to_ext())


async def send(client, b, topic: str, bodies: list[bytes], queue_id: int = 0, tags: str | None = None) -> None:
    for body in bodies:
        r = await client.invoke(b.address, send_cmd(topic, body, queue_id=queue_id, tags=tags))
        assert r.code == RC.SUCCESS, r.remark


async def pop_until(client, b, cmd_factory, want: int, timeout: float = 10.0):
    got = []
    end = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < end, f"only {len(got)} of {want} messages came back"
        r = await client.invoke(b.address, cmd_factory())
        if r.code == RC.SUCCESS:
            got += handles(r, b.broker_name)
        else:
            assert r.code == RC.POLLING_TIMEOUT, (r.code, r.remark)
            await asyncio.sleep(0.1)
    return got


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_pop_ack_and_the_response_header(broker_factory, client, run, flush):
    b = broker_factory(flush_disk_type=flush, **FAST)

    async def main():
        await make_topic(b, "PopA", 2)
        await send(client, b, "PopA", [b"a0", b"a1", b"a2"], 0, tags="TA")
        await send(client, b, "PopA", [b"b0"], 1)
        r = await client.invoke(b.address, pop_cmd("PopA", n=3, invisible=30_000))
        assert r.code == RC.SUCCESS and r.remark == "FOUND"
        rh = H.PopMessageResponseHeader.from_ext(r.ext_fields)
        assert rh.invisible_time == 30_000 and rh.revive_qid == 0 and abs(rh.pop_time - time.time() * 1000) < 5000
        assert set(r.ext_fields) >= {"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo",
                                     "msgOffsetInfo"}
        got = handles(r, b.broker_name)
        assert len(got) == 3 and rh.rest_num == 1
        for m, ck in got:
            ei = X.parse(ck)
            assert (ei.pop_time, ei.invisible_time, ei.retry, ei.broker_name) == (rh.pop_time, 30_000, "0",
                                                                                  b.broker_name)
            a = await client.invoke(b.address, ack_cmd("PopA", ck))
            assert a.code == RC.SUCCESS, a.remark
        r = await client.invoke(b.address, pop_cmd("PopA"))
        rest = handles(r, b.broker_name)
        assert len(rest) == 1
        r = await client.invoke(b.address, pop_cmd("PopA"))
        assert r.code == RC.POLLING_TIMEOUT and not r.body
        assert H.PopMessageResponseHeader.from_ext(r.ext_fields).rest_num == 0  # the Java client decodes it too
        # the group's offsets moved with the pops
        assert b.offsets.query("G", "PopA", 0) == 3 and b.offsets.query("G", "PopA", 1) == 1

    run(main())


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_unacked_message_comes_back_through_the_retry_topic(broker_factory, client, run, flush):
    b = broker_factory(flush_disk_type=flush, **FAST)

    async def main():
        await make_topic(b, "PopR", 1)
        await send(client, b, "PopR", [b"x", b"y"], tags="T1")
        r = await client.invoke(b.address, pop_cmd("PopR", invisible=1000))
        (mx, ckx), (my, cky) = handles(r, b.broker_name)
        assert (await client.invoke(b.address, ack_cmd("PopR", cky))).code == RC.SUCCESS
        t0 = time.monotonic()
        back = await pop_until(client, b, lambda: pop_cmd("PopR", invisible=1000), 1)
        assert time.monotonic() - t0 >= 0.5
        m, ck = back[0]
        assert m.body == b"x" and m.topic == "PopR" and m.reconsume_times == 1
        assert m.properties[P.TAGS] == "T1" and m.properties[P.FIRST_POP_TIME]
        ei = X.parse(ck)
        assert ei.retry == "1" and m.properties[P.POP_CK] == ck  # set by the broker, as RocketMQ 5 does
        assert b.topic_config.get("%RETRY%G_PopR") is not None
        # acked with the retry topic as the ack's topic: never again
        assert (await client.invoke(b.address, ack_cmd("PopR", ck))).code == RC.SUCCESS
        await asyncio.sleep(1.5)
        r = await client.invoke(b.address, pop_cmd("PopR"))
        assert r.code == RC.POLLING_TIMEOUT
        # an ack after the invisible time is refused: the message is already on its way back
        late = await client.invoke(b.address, ack_cmd("PopR", ckx))
        assert late.code == RC.NO_MESSAGE and "expired" in late.remark

    run(main())


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_change_invisible_time_gives_a_new_handle_and_the_old_one_dies(broker_factory, client, run, flush):
    b = broker_factory(flush_disk_type=flush, **FAST)

    async def main():
        await make_topic(b, "PopC", 1)
        await send(client, b, "PopC", [b"c"])
        (m, ck), = handles(await client.invoke(b.address, pop_cmd("PopC", invisible=60_000)), b.broker_name)
        r = await client.invoke(b.address, change_cmd("PopC", ck, 800))
        assert r.code == RC.SUCCESS
        rh = H.ChangeInvisibleTimeResponseHeader.from_ext(r.ext_fields)
        assert rh.invisible_time == 800 and rh.revive_qid == 0 and rh.pop_time > X.parse(ck).pop_time - 1
        # the old handle acks nothing now (refused, so a client can tell): the message comes back after the new time
        old = await client.invoke(b.address, ack_cmd("PopC", ck))
        assert old.code == RC.NO_MESSAGE and "replaced" in old.remark
        assert (await client.invoke(b.address, change_cmd("PopC", ck, 60_000))).code == RC.NO_MESSAGE
        back = await pop_until(client, b, lambda: pop_cmd("PopC", invisible=60_000), 1)
        assert back[0][0].body == b"c" and back[0][0].reconsume_times == 1
        # a refused change answers the header with zeros (the Java client decodes it first)
        bad = await client.invoke(b.address, change_cmd("PopC", ck.replace(b.broker_name, "other-broker"), 10))
        assert bad.code == RC.NO_MESSAGE and bad.ext_fields == {"popTime": "0", "invisibleTime": "0",
                                                                "reviveQid": "0"}

    run(main())


def test_batch_ack_body(broker_factory, client, run):
    b = broker_factory(**FAST)

    async def main():
        await make_topic(b, "PopB", 1)
        await send(client, b, "PopB", [b"%d" % i for i in range(5)])
        got = handles(await client.invoke(b.address, pop_cmd("PopB", invisible=1500)), b.broker_name)
        ei = X.parse(got[0][1])
        acked = [X.parse(ck).queue_offset for _, ck in got[:3]]
        ba = BatchAck("G", "PopB", "0", ei.ck_queue_offset, 0, ei.revive_qid, ei.pop_time, ei.invisible_time,
                      encode_bitset([o - ei.ck_queue_offset for o in acked]))
        body = BatchAckMessageRequestBody(b.broker_name, [ba]).to_json()
        assert b'"b":"Bw=="' in body  # BitSet {0,1,2} as fastjson writes a byte[]
        r = await client.invoke(b.address, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body))
        assert r.code == RC.SUCCESS, r.remark
        back = await pop_until(client, b, lambda: pop_cmd("PopB", invisible=60_000), 2)
        assert sorted(m.body for m, _ in back) == [b"3", b"4"]
        r = await client.invoke(b.address, RemotingCommand.request(
            RequestCode.BATCH_ACK_MESSAGE, {}, BatchAckMessageRequestBody(b.broker_name, []).to_json()))
        assert r.code == RC.NO_MESSAGE

    run(main())


def test_dead_letter_after_the_groups_max_attempts(broker_factory, client, run):
    from mq.protocol.bodies import SubscriptionGroupConfig

    b = broker_factory(**FAST)

    async def main():
        b.subscription_groups.put(SubscriptionGroupConfig(group_name="GD", retry_max_times=1))
        await make_topic(b, "PopD", 1)
        await send(client, b, "PopD", [b"dead"])
        attempts = []
        for _ in range(2):
            (m, _ck), = await pop_until(client, b, lambda: pop_cmd("PopD", "GD", invisible=300), 1)
            attempts.append(m.reconsume_times)
        assert attempts == [0, 1]
        for _ in range(30):
            if b.store.get_max_offset("%DLQ%GD", 0) == 1:
                break
            await asyncio.sleep(0.1)
        p = await client.invoke(b.address, pull_cmd("%DLQ%GD", 0, 0, group="x"))
        dlq = records(p)
        assert [d.body for d in dlq] == [b"dead"] and dlq[0].reconsume_times == 2
        assert dlq[0].properties[P.DLQ_ORIGIN_TOPIC] == "PopD"
        r = await client.invoke(b.address, pop_cmd("PopD", "GD"))
        assert r.code == RC.POLLING_TIMEOUT

    run(main())


def test_long_polling_wakes_on_a_new_message(broker_factory, client, run):
    b = broker_factory(**FAST)

    async def main():
        await make_topic(b, "PopL", 2)
        t0 = time.monotonic()
        held = asyncio.ensure_future(client.invoke(b.address, pop_cmd("PopL", poll=5000), timeout=10))
        await asyncio.sleep(0.3)
        assert not held.done()
        await send(client, b, "PopL", [b"late"], 1)
        r = await held
        assert r.code == RC.SUCCESS and records(r)[0].body == b"late"
        assert time.monotonic() - t0 < 3
        # nothing comes: POLLING_TIMEOUT after the poll time
        t0 = time.monotonic()
        r = await client.invoke(b.address, pop_cmd("PopL", queue_id=0, poll=600), timeout=10)
        assert r.code == RC.POLLING_TIMEOUT and 0.5 < time.monotonic() - t0 < 3

    run(main())


def test_polling_full(broker_factory, client, run):
    b = broker_factory(pop_polling_size=1, **FAST)

    async def main():
        await make_topic(b, "PopF", 1)
        first = asyncio.ensure_future(client.invoke(b.address, pop_cmd("PopF", poll=2000), timeout=10))
        await asyncio.sleep(0.2)
        r = await client.invoke(b.address, pop_cmd("PopF", poll=2000))
        assert r.code == RC.POLLING_FULL
        assert (await first).code == RC.POLLING_TIMEOUT

    run(main())


def test_tag_filter_and_bad_requests(broker_factory, client, run):
    b = broker_factory(**FAST)

    async def main():
        await make_topic(b, "PopT", 1)
        await send(client, b, "PopT", [b"a"], tags="A")
        await send(client, b, "PopT", [b"b"], tags="B")
        await send(client, b, "PopT", [b"c"], tags="C")
        r = await client.invoke(b.address, pop_cmd("PopT", exp="A || C", exp_type="TAG"))
        assert sorted(m.body for m, _ in handles(r, b.broker_name)) == [b"a", b"c"]
        r = await client.invoke(b.address, pop_cmd("PopT", n=33))
        assert r.code == RC.INVALID_PARAMETER and "popTime" in r.ext_fields
        r = await client.invoke(b.address, pop_cmd("NoSuchTopic"))
        assert r.code == RC.TOPIC_NOT_EXIST
        r = await client.invoke(b.address, pop_cmd("PopT", queue_id=7))
        assert r.code == RC.INVALID_PARAMETER
        r = await client.invoke(b.address, pop_cmd("PopT", exp="a > 1", exp_type="SQL92"))
        assert r.code == RC.SUBSCRIPTION_PARSE_FAILED  # enablePropertyFilter is off
        r = await client.invoke(b.address, pop_cmd("PopT", invisible=-1))
        assert r.code == RC.INVALID_PARAMETER
        r = await client.invoke(b.address, ack_cmd("PopT", "0 1 2 0 0 broker-a 0 0".replace("broker-a",
                                                                                             b.broker_name)))
        assert r.code == RC.NO_MESSAGE  # offset 0 is valid, but the handle expired long ago
        r = await client.invoke(b.address, RemotingCommand.request(RequestCode.ACK_MESSAGE, {
            "consumerGroup": "G", "topic": "PopT", "queueId": "0", "extraInfo": "garbage", "offset": "0"}))
        assert r.code == RC.NO_MESSAGE

    run(main())


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_fifo_pop_blocks_the_queue_and_attempt_id_repeats_the_batch(broker_factory, client, run, flush):
    b = broker_factory(flush_disk_type=flush, **FAST)

    async def main():
        await make_topic(b, "PopO", 1)
        await send(client, b, "PopO", [b"o0", b"o1", b"o2"])
        r = await client.invoke(b.address, pop_cmd("PopO", n=2, invisible=1000, order=True, attempt="A1"))
        first = handles(r, b.broker_name)
        assert [m.body for m, _ in first] == [b"o0", b"o1"]
        assert H.PopMessageResponseHeader.from_ext(r.ext_fields).revive_qid == X.ORDER_REVIVE_QID
        # blocked: another pop gets nothing, even o2
        r = await client.invoke(b.address, pop_cmd("PopO", n=2, invisible=1000, order=True, attempt="A2"))
        assert r.code == RC.POLLING_TIMEOUT
        # the same attempt id gets the same batch back
        r = await client.invoke(b.address, pop_cmd("PopO", n=2, invisible=1000, order=True, attempt="A1"))
        again = handles(r, b.broker_name)
        assert [m.body for m, _ in again] == [b"o0", b"o1"]
        # ack o0 only; after the invisible time o1 comes back first, its attempt raised
        assert (await client.invoke(b.address, ack_cmd("PopO", again[0][1]))).code == RC.SUCCESS
        t0 = time.monotonic()  # a long-polling pop waits for the queue to free itself
        r = await client.invoke(b.address, pop_cmd("PopO", n=2, invisible=1000, order=True, attempt="A3",
                                                   poll=5000), timeout=10)
        assert 0.3 < time.monotonic() - t0 < 3
        rh = H.PopMessageResponseHeader.from_ext(r.ext_fields)
        counts = X.parse_order_count_info(rh.order_count_info)
        third = handles(r, b.broker_name)
        assert [m.body for m, _ in third] == [b"o1", b"o2"]
        assert counts[f"0@qo0%{third[0][0].queue_offset}"] == 1 and counts["0@0"] == 0
        for _, ck in third:
            assert (await client.invoke(b.address, ack_cmd("PopO", ck))).code == RC.SUCCESS
        assert b.offsets.query("G", "PopO", 0) == 3
        # an old handle of an earlier pop is refused
        assert (await client.invoke(b.address, ack_cmd("PopO", first[1][1]))).code == RC.NO_MESSAGE

    run(main())


def test_acked_messages_stay_acked_across_a_restart(broker_factory, client, run, tmp_path):
    store = str(tmp_path / "restart")
    b = broker_factory(store_dir=store, **FAST)

    async def main():
        await make_topic(b, "PopS", 1)
        await send(client, b, "PopS", [b"keep", b"done"])
        got = handles(await client.invoke(b.address, pop_cmd("PopS", invisible=1500)), b.broker_name)
        assert (await client.invoke(b.address, ack_cmd("PopS", got[1][1]))).code == RC.SUCCESS
        await b.stop()

    run(main())
    b2 = broker_factory(store_dir=store, **FAST)

    async def after():
        back = await pop_until(client, b2, lambda: pop_cmd("PopS", invisible=60_000), 1)
        assert [m.body for m, _ in back] == [b"keep"]
        await asyncio.sleep(2.0)
        r = await client.invoke(b2.address, pop_cmd("PopS"))
        assert r.code == RC.POLLING_TIMEOUT  # "done" never comes back; nothing new in the topic either

    run(after())


def test_fifo_state_survives_a_restart(broker_factory, client, run, tmp_path):
    store = str(tmp_path / "fifo-restart")
    b = broker_factory(store_dir=store, **FAST)

    async def main():
        await make_topic(b, "PopOR", 1)
        await send(client, b, "PopOR", [b"f0", b"f1", b"f2"])
        got = handles(await client.invoke(b.address, pop_cmd("PopOR", n=2, invisible=2500, order=True)),
                      b.broker_name)
        assert [m.body for m, _ in got] == [b"f0", b"f1"]
        assert (await client.invoke(b.address, ack_cmd("PopOR", got[0][1]))).code == RC.SUCCESS
        await b.stop()

    run(main())
    b2 = broker_factory(store_dir=store, **FAST)

    async def after():
        # still blocked after the restart: f1 is in flight until its invisible time passes
        r = await client.invoke(b2.address, pop_cmd("PopOR", n=2, invisible=60_000, order=True))
        assert r.code == RC.POLLING_TIMEOUT
        r = await client.invoke(b2.address, pop_cmd("PopOR", n=2, invisible=60_000, order=True, poll=8000),
                                timeout=12)
        back = handles(r, b2.broker_name)
        assert [m.body for m, _ in back] == [b"f1", b"f2"]  # f0 was acked: never again
        counts = X.parse_order_count_info(H.PopMessageResponseHeader.from_ext(r.ext_fields).order_count_info)
        assert counts[f"0@qo0%{back[0][0].queue_offset}"] == 1

    run(after())


def test_peek_reads_without_popping(broker_factory, client, run):
    b = broker_factory(**FAST)

    async def main():
        await make_topic(b, "PopK", 2)
        await send(client, b, "PopK", [b"k0", b"k1"], 0)
        await send(client, b, "PopK", [b"k2"], 1)
        peek = H.PeekMessageRequestHeader(topic="PopK", queue_id=-1, max_msg_nums=32, consumer_group="G")
        for _ in range(2):  # twice: a peek changes nothing
            r = await client.invoke(b.address, RemotingCommand.request(RequestCode.PEEK_MESSAGE, peek.to_ext()))
            assert r.code == RC.SUCCESS and sorted(m.body for m in records(r)) == [b"k0", b"k1", b"k2"]
        assert len(handles(await client.invoke(b.address, pop_cmd("PopK")), b.broker_name)) == 3
        r = await client.invoke(b.address, RemotingCommand.request(RequestCode.PEEK_MESSAGE, peek.to_ext()))
        assert r.code == RC.POLLING_TIMEOUT  # the group's offsets moved past them
        bad = H.PeekMessageRequestHeader(topic="PopK", queue_id=9, max_msg_nums=1, consumer_group="G")
        r = await client.invoke(b.address, RemotingCommand.request(RequestCode.PEEK_MESSAGE, bad.to_ext()))
        assert r.code == RC.INVALID_PARAMETER

    run(main())


def test_a_fifo_group_pops_fifo_whatever_the_request_says(broker_factory, client, run):
    from mq.protocol.bodies import SubscriptionGroupConfig

    b = broker_factory(**FAST)

    async def main():
        b.subscription_groups.put(SubscriptionGroupConfig(group_name="GF", consume_message_orderly=True))
        await make_topic(b, "PopFG", 1)
        await send(client, b, "PopFG", [b"a", b"b"])
        r = await client.invoke(b.address, pop_cmd("PopFG", "GF", n=1, order=False))
        assert H.PopMessageResponseHeader.from_ext(r.ext_fields).revive_qid == X.ORDER_REVIVE_QID
        assert [m.body for m, _ in handles(r, b.broker_name)] == [b"a"]
        r = await client.invoke(b.address, pop_cmd("PopFG", "GF", n=1, order=False))
        assert r.code == RC.POLLING_TIMEOUT  # the queue is blocked until "a" is acked

    run(main())
