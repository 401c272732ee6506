"""Request-reply against the real broker: Producer.request, create_reply_message, 325 -> 326, the reply topic."""

from __future__ import annotations

import asyncio
import time

import pytest

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.client.pull_api import PullConsumer, PullStatus
from mq.client.request_reply import create_reply_message
from mq.common import properties as P
from mq.common.message import Message
from mq.common.topic import reply_topic
from mq.config import ConsumerConfig, ProducerConfig
from mq.errors import MQError, RequestTimeoutError
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from tests.integration.client.test_client_real_broker import route_ready


def test_request_gets_the_reply_and_the_reply_is_stored(cluster, run, client_config):
    async def main():
        seen = []
        async with Producer(ProducerConfig(group="RRResponder"), client_config()) as responder, \
                Producer(ProducerConfig(group="RRRequester"), client_config()) as requester:
            async def listener(msgs, ctx):
                for m in msgs:
                    if P.MESSAGE_REPLY_TO_CLIENT not in m.properties:
                        continue  # the topic-creating send
                    seen.append(m)
                    await responder.send(create_reply_message(m, b"re:" + m.body))
                return ConsumeStatus.CONSUME_SUCCESS

            await requester.send(Message("RRTopic", b"create"))
            await route_ready(requester.instance, "RRTopic", cluster.broker)
            c = PushConsumer(ConsumerConfig(group="RRServer", consume_from_where="LAST"), listener,
                             client_config())
            c.subscribe("RRTopic")
            await c.start()
            try:
                await asyncio.sleep(0.5)  # let the consumer take its queues
                replies = []
                for i in range(3):
                    req = Message("RRTopic", b"ping %d" % i)
                    reply = await requester.request(req, 10.0)
                    replies.append((req, reply))
            finally:
                await c.shutdown()
            for i, (req, reply) in enumerate(replies):
                assert reply.body == b"re:ping %d" % i
                cid = req.properties[P.CORRELATION_ID]
                assert reply.properties[P.CORRELATION_ID] == cid
                assert reply.properties[P.MESSAGE_TYPE] == "reply"
                assert reply.properties[P.MESSAGE_REPLY_TO_CLIENT] == requester.instance.client_id
                assert reply.properties[P.MESSAGE_TTL] == "10000"
                assert P.PUSH_REPLY_TIME in reply.properties and P.REPLY_MESSAGE_ARRIVE_TIME in reply.properties
                assert reply.topic == reply_topic("DefaultCluster")
                assert reply.store_host[1] == int(cluster.broker_addr.rsplit(":", 1)[1])
            assert len(requester.instance.request_futures) == 0
            # the responder saw the request with the broker's CLUSTER and our REPLY_TO_CLIENT
            assert {m.body for m in seen} >= {b"ping 0", b"ping 1", b"ping 2"}
            # the replies are stored in <cluster>_REPLY_TOPIC, properties as sent (no PUSH_REPLY_TIME)
            async with PullConsumer("RRPull", client_config()) as pc:
                topic = reply_topic("DefaultCluster")
                stored = []
                for q in await pc.fetch_subscribe_queues(topic):
                    res = await pc.pull(q, 0, 32)
                    if res.status is PullStatus.FOUND:
                        stored.extend(res.messages)
                by_cid = {m.properties.get(P.CORRELATION_ID): m for m in stored}
                for i, (req, _) in enumerate(replies):
                    m = by_cid[req.properties[P.CORRELATION_ID]]
                    assert m.body == b"re:ping %d" % i
                    assert P.PUSH_REPLY_TIME not in m.properties
    run(main(), timeout=60)


def test_request_nobody_answers_times_out(cluster, run, client_config):
    async def main():
        async with Producer(ProducerConfig(group="RRLonely"), client_config()) as p:
            await p.send(Message("RRQuiet", b"create"))
            await route_ready(p.instance, "RRQuiet", cluster.broker)
            t0 = time.monotonic()
            with pytest.raises(RequestTimeoutError, match="wait reply message timeout, 800 ms"):
                await p.request(Message("RRQuiet", b"anyone?"), 0.8)
            elapsed = time.monotonic() - t0
            assert 0.7 < elapsed < 3.0
            assert len(p.instance.request_futures) == 0
    run(main())


def _raw_reply(cid: str, reply_to: str | None, topic: str) -> RemotingCommand:
    props = {P.MESSAGE_TYPE: "reply", P.CORRELATION_ID: cid}
    if reply_to is not None:
        props[P.MESSAGE_REPLY_TO_CLIENT] = reply_to
    hdr = h.SendMessageRequestHeaderV2(producer_group="RRRaw", topic=topic, default_topic="TBW102",
                                       default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                       born_timestamp=int(time.time() * 1000), flag=0,
                                       properties=P.encode_properties(props))
    return RemotingCommand.request(RequestCode.SEND_REPLY_MESSAGE_V2, hdr.to_ext(), b"raw reply")


def test_raw_reply_for_unknown_client_gets_javas_answer(cluster, run, client):
    topic = reply_topic("DefaultCluster")

    async def main():
        resp = await client.invoke(cluster.broker_addr, _raw_reply("c-1", "10.9.9.9@nobody", topic), timeout=5)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "push reply message fail, channel of <10.9.9.9@nobody> not found."
        ext = resp.ext_fields
        assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
        # storeReplyMessageEnable (default true): stored anyway, and the header says where
        assert ext["queueId"] == "0" and int(ext["queueOffset"]) >= 0 and len(ext["msgId"]) == 32
        resp2 = await client.invoke(cluster.broker_addr, _raw_reply("c-2", None, topic), timeout=5)
        assert resp2.code == ResponseCode.SYSTEM_ERROR
        assert resp2.remark == "reply message properties[REPLY_TO_CLIENT] is null"
        assert int(resp2.ext_fields["queueOffset"]) == int(ext["queueOffset"]) + 1
    run(main())


def test_raw_reply_not_stored_when_disabled(broker_factory, run, client):
    b = broker_factory(store_reply_message_enable=False)
    topic = reply_topic("DefaultCluster")

    async def main():
        resp = await client.invoke(b.address, _raw_reply("c-3", "10.9.9.9@nobody", topic), timeout=5)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert set(resp.ext_fields) == {"MSG_REGION", "TRACE_ON"}
        assert b.store.get_max_offset(topic, 0) == 0
    run(main())


def test_create_reply_message_needs_cluster():
    from mq.common.message import MessageExt

    with pytest.raises(MQError, match=r"property\[CLUSTER\] is null"):
        create_reply_message(MessageExt(topic="T", body=b"x"), b"y")
    req = MessageExt(topic="T", body=b"x", properties={P.CLUSTER: "C1", P.CORRELATION_ID: "id",
                                                       P.MESSAGE_REPLY_TO_CLIENT: "1.2.3.4@a", P.MESSAGE_TTL: "3000",
                                                       P.TAGS: "ignored"})
    reply = create_reply_message(req, b"y")
    assert reply.topic == "C1_REPLY_TOPIC" and reply.body == b"y"
    assert reply.properties == {P.MESSAGE_TYPE: "reply", P.CORRELATION_ID: "id",
                                P.MESSAGE_REPLY_TO_CLIENT: "1.2.3.4@a", P.MESSAGE_TTL: "3000"}
