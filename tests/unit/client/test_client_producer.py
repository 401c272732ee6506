"""Producer against the fake broker: sends, retries to another broker, batch, compression, UNIQ_KEY, hooks."""

from __future__ import annotations

import re
import zlib
from collections import Counter

import pytest

from mq.client.hooks import SendStatus
from mq.client.producer import Producer, select_by_hash
from mq.common import properties as P
from mq.common.message import Message, MessageQueue
from mq.common.msg_id import uniq_key_ip
from mq.common.record import iter_batch
from mq.config import ProducerConfig
from mq.errors import BrokerError, InvalidTopicError, MessageTooLargeError, TopicNotExistError
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode


async def started(client_config, ns, **pkw) -> Producer:
    return await Producer(ProducerConfig(group="PG", **pkw), client_config(ns.addr)).start()


async def test_send_returns_stored_result_and_round_robins(fake2, client_config):
    ns, (a, b) = fake2
    p = await started(client_config, ns)
    try:
        results = [await p.send(Message("TopicTest", b"hello %d" % i, properties={P.TAGS: "TagA"}))
                   for i in range(16)]
    finally:
        await p.shutdown()
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert Counter((r.queue.broker_name, r.queue.queue_id) for r in results) == {
        (bn, q): 2 for bn in ("broker-a", "broker-b") for q in range(4)}
    # every OK result is really stored, at the offset reported, with the UNIQ_KEY as msgId
    for r in results:
        broker = a if r.queue.broker_name == "broker-a" else b
        stored = broker.stored("TopicTest", r.queue.queue_id)[r.queue_offset]
        assert stored.uniq_key == r.msg_id and stored.msg_id == r.offset_msg_id
        assert stored.tags == "TagA"
    req = a.requests[0]
    assert req.code == RequestCode.SEND_MESSAGE_V2 and set("abcdefgh") <= set(req.ext_fields)
    hdr = h.SendMessageRequestHeaderV2.from_ext(req.ext_fields)
    assert (hdr.producer_group, hdr.default_topic, hdr.default_topic_queue_nums) == ("PG", "TBW102", 4)


async def test_uniq_key_layout(fake1, client_config):
    ns, _ = fake1
    p = await started(client_config, ns)
    try:
        ids = [(await p.send(Message("TopicTest", b"x"))).msg_id for _ in range(3)]
    finally:
        await p.shutdown()
    for i in ids:
        assert re.fullmatch(r"[0-9A-F]{32}", i)
        assert uniq_key_ip(i) == "127.0.0.1"
    # same prefix (ip + pid + salt), counter increments
    assert len({i[:20] for i in ids}) == 1
    counters = [int(i[-4:], 16) for i in ids]
    assert counters[1] == (counters[0] + 1) & 0xFFFF and counters[2] == (counters[1] + 1) & 0xFFFF


async def test_retry_moves_to_another_broker(fake2, client_config):
    ns, (a, b) = fake2
    p = await started(client_config, ns)
    try:
        await p.fetch_publish_queues("TopicTest")
        p.instance.publish["TopicTest"].counter.value = 0  # first pick: broker-a queue 0
        a.fail_next_sends, b.fail_next_sends = [14], []  # SERVICE_NOT_AVAILABLE: retriable
        r = await p.send(Message("TopicTest", b"retry me"))
        assert r.queue.broker_name == "broker-b" and len(a.requests) == 1 and len(b.requests) == 1
        # three attempts at most, alternating brokers, then the last error is raised
        a.fail_next_sends, b.fail_next_sends = [1] * 5, [1] * 5
        before = len(a.requests) + len(b.requests)
        with pytest.raises(BrokerError) as ei:
            await p.send(Message("TopicTest", b"doomed"))
        assert ei.value.code == 1 and "after 3 attempts" in str(ei.value)
        assert len(a.requests) + len(b.requests) - before == 3
        # a non-retriable code (MESSAGE_ILLEGAL) is raised at once
        a.fail_next_sends, b.fail_next_sends = [13], [13]
        before = len(a.requests) + len(b.requests)
        with pytest.raises(BrokerError) as ei:
            await p.send(Message("TopicTest", b"bad"))
        assert ei.value.code == 13 and len(a.requests) + len(b.requests) - before == 1
    finally:
        await p.shutdown()


async def test_unreachable_broker_isolated_with_latency_fault(fake2, client_config):
    ns, (a, b) = fake2
    p = await started(client_config, ns, send_latency_fault_enable=True)
    try:
        await p.send(Message("TopicTest", b"warm"))
        await a.stop()
        results = [await p.send(Message("TopicTest", b"m%d" % i)) for i in range(10)]
        assert {r.queue.broker_name for r in results} == {"broker-b"}
        assert not p.fault.tolerance.is_available("broker-a")
    finally:
        await p.shutdown()


async def test_compression_over_4k_sets_sysflag(fake1, client_config):
    ns, a = fake1
    p = await started(client_config, ns)
    body = b"0123456789abcdef" * 512  # 8 KiB
    try:
        await p.send(Message("TopicTest", body))
        await p.send(Message("TopicTest", b"small"))
    finally:
        await p.shutdown()
    big, small = (h.SendMessageRequestHeaderV2.from_ext(r.ext_fields) for r in a.requests[:2])
    assert big.sys_flag == 0x301 and zlib.decompress(bytes(a.requests[0].body)) == body
    assert small.sys_flag == 0 and bytes(a.requests[1].body) == b"small"


async def test_batch_encoding_and_ids(fake1, client_config):
    ns, a = fake1
    p = await started(client_config, ns)
    msgs = [Message("TopicTest", b"b%d" % i, properties={P.KEYS: f"k{i}"}) for i in range(5)]
    try:
        r = await p.send_batch(msgs)
    finally:
        await p.shutdown()
    req = a.requests[-1]
    assert req.code == RequestCode.SEND_BATCH_MESSAGE and req.ext_fields["m"] == "true"
    entries = list(iter_batch(bytes(req.body)))
    assert [e[1] for e in entries] == [m.body for m in msgs]
    assert r.msg_id.split(",") == [m.uniq_key for m in msgs] and len(set(r.msg_id.split(","))) == 5
    stored = a.stored("TopicTest", r.queue.queue_id)
    assert [m.body for m in stored] == [m.body for m in msgs]
    assert [m.keys for m in stored] == [f"k{i}" for i in range(5)]


async def test_oneway_async_and_ordered(fake2, client_config):
    ns, (a, b) = fake2
    p = await started(client_config, ns)
    try:
        fut = p.send_async(Message("TopicTest", b"async"))
        r = await fut
        assert r.status is SendStatus.SEND_OK
        got = []
        await (p.send_async(Message("TopicTest", b"cb"), lambda res, exc: got.append((res, exc))))
        assert got and got[0][1] is None
        await p.send_oneway(Message("TopicTest", b"oneway"), queue=MessageQueue("TopicTest", "broker-b", 3))
        import asyncio
        import time

        deadline = time.monotonic() + 10  # oneway: nothing to await; poll (generously: CI machines are slow)
        while (b"oneway" not in [m.body for m in b.stored("TopicTest", 3)]
               and time.monotonic() < deadline):
            await asyncio.sleep(0.01)
        assert [m.body for m in b.stored("TopicTest", 3)][-1] == b"oneway"
        ordered = [await p.send(Message("TopicTest", b"o%d" % i), selector=select_by_hash, arg="order-42")
                   for i in range(5)]
        assert len({(r.queue.broker_name, r.queue.queue_id) for r in ordered}) == 1
    finally:
        await p.shutdown()


async def test_hooks_see_before_and_after(fake1, client_config):
    ns, a = fake1
    seen = []

    class Hook:
        def send_before(self, ctx):
            seen.append(("before", ctx.message.topic, ctx.broker_addr))

        def send_after(self, ctx):
            seen.append(("after", ctx.result.status if ctx.result else None, type(ctx.exception).__name__))

    p = await started(client_config, ns)
    p.register_hook(Hook())
    try:
        await p.send(Message("TopicTest", b"x"))
        a.fail_next_sends = [13]
        with pytest.raises(BrokerError):
            await p.send(Message("TopicTest", b"y"))
    finally:
        await p.shutdown()
    assert seen == [("before", "TopicTest", a.addr), ("after", SendStatus.SEND_OK, "NoneType"),
                    ("before", "TopicTest", a.addr), ("after", None, "MessageIllegalError")]


async def test_client_side_validation_and_no_route(fake1, client_config):
    ns, _ = fake1
    p = await started(client_config, ns, max_message_size=1024)
    try:
        with pytest.raises(InvalidTopicError, match="illegal characters"):
            await p.send(Message("bad topic!", b"x"))
        with pytest.raises(MessageTooLargeError, match="1024"):
            await p.send(Message("TopicTest", b"x" * 2000))
        with pytest.raises(TopicNotExistError, match="no route for topic 'Nope'"):
            await p.send(Message("Nope", b"x"))
    finally:
        await p.shutdown()


async def test_retry_topic_properties_move_into_header(fake1, client_config):
    ns, a = fake1
    p = await started(client_config, ns)
    try:
        a.topics["%RETRY%G"] = 1
        await p.send(Message("%RETRY%G", b"x", properties={P.RECONSUME_TIME: "3", P.MAX_RECONSUME_TIMES: "16"}))
    finally:
        await p.shutdown()
    hdr = h.SendMessageRequestHeaderV2.from_ext(a.requests[-1].ext_fields)
    assert (hdr.reconsume_times, hdr.max_reconsume_times) == (3, 16)
    assert P.RECONSUME_TIME not in P.decode_properties(hdr.properties)
