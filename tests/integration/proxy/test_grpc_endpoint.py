"""The broker's gRPC endpoint over real gRPC calls (grpc.aio client in this process, mq's own descriptors):
status codes as the 5.x clients map them, sessions, ACL signatures, the client tables the admin commands read,
and pop over gRPC (receive, ack, change invisible duration, the stream's shape)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time

import pytest

grpc = pytest.importorskip("grpc")

from mq.daemon.proxy.proto import messages as pb  # noqa: E402

Code = pb.Code
SVC = "/apache.rocketmq.v2.MessagingService/"


class Client:
    def __init__(self, port: int, client_id: str = "it-client", creds: tuple[str, str] | None = None) -> None:
        self.ch = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.client_id = client_id
        self.creds = creds

    def md(self) -> tuple:
        md = [("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"), ("x-mq-namespace", "")]
        if self.client_id:
            md.append(("x-mq-client-id", self.client_id))
        if self.creds:
            dt = time.strftime("%Y%m%dT%H%M%SZ")
            sig = hmac.new(self.creds[1].encode(), dt.encode(), hashlib.sha1).hexdigest()
            md += [("x-mq-date-time", dt), ("authorization",
                                            f"MQv2-HMAC-SHA1 Credential={self.creds[0]}, "
                                            f"SignedHeaders=x-mq-date-time, Signature={sig}")]
        return tuple(md)

    async def unary(self, method: str, req, resp_cls):
        call = self.ch.unary_unary(SVC + method, request_serializer=type(req).SerializeToString,
                                   response_deserializer=resp_cls.FromString)
        return await call(req, metadata=self.md(), timeout=30)

    async def receive(self, req) -> list:
        call = self.ch.unary_stream(SVC + "ReceiveMessage", request_serializer=type(req).SerializeToString,
                                    response_deserializer=pb.ReceiveMessageResponse.FromString)
        return [r async for r in call(req, metadata=self.md(), timeout=30)]

    async def telemetry(self, settings):
        call = self.ch.stream_stream(SVC + "Telemetry", request_serializer=pb.TelemetryCommand.SerializeToString,
                                     response_deserializer=pb.TelemetryCommand.FromString)
        stream = call(metadata=self.md())
        await stream.write(pb.TelemetryCommand(settings=settings))
        reply = await stream.read()
        return stream, reply

    async def send(self, topic: str, n: int, tag: str = "TagA", prefix: str = "m"):
        out = []
        for i in range(n):
            m = pb.Message(topic=pb.Resource(name=topic), body=f"{prefix}-{i}".encode(),
                           system_properties=pb.SystemProperties(message_id=f"01{prefix.upper()}{i:030X}"[:34],
                                                                 tag=tag, keys=[f"k{i}"]))
            out.append(await self.unary("SendMessage", pb.SendMessageRequest(messages=[m]), pb.SendMessageResponse))
        return out


@pytest.fixture
def grpc_broker(broker_factory):
    return broker_factory(grpc_server_port=0)


def test_send_receive_ack_change_invisible(grpc_broker, run):
    c = Client(grpc_broker.grpc_port)

    async def go():
        route = await c.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="GT")), pb.QueryRouteResponse)
        assert route.status.code == Code.OK and route.message_queues
        assert route.message_queues[0].broker.endpoints.addresses[0].port == grpc_broker.grpc_port
        sent = await c.send("GT", 3)
        assert all(r.status.code == Code.OK and r.entries[0].message_id for r in sent)
        req = pb.ReceiveMessageRequest(group=pb.Resource(name="GG"), message_queue=pb.MessageQueue(
            topic=pb.Resource(name="GT")), filter_expression=pb.FilterExpression(type=pb.FilterType.TAG,
                                                                               expression="*"),
            batch_size=32, invisible_duration=pb.Duration(seconds=10), long_polling_timeout=pb.Duration(seconds=5))
        stream = await c.receive(req)
        kinds = [r.WhichOneof("content") for r in stream]
        assert kinds == ["status", "message", "message", "message", "delivery_timestamp"]
        assert stream[0].status.code == Code.OK
        msgs = [r.message for r in stream[1:-1]]
        assert sorted(m.body for m in msgs) == [b"m-0", b"m-1", b"m-2"]
        first = msgs[0]
        changed = await c.unary("ChangeInvisibleDuration", pb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="GG"), topic=pb.Resource(name="GT"),
            receipt_handle=first.system_properties.receipt_handle, invisible_duration=pb.Duration(seconds=20),
            message_id=first.system_properties.message_id), pb.ChangeInvisibleDurationResponse)
        assert changed.status.code == Code.OK and changed.receipt_handle != first.system_properties.receipt_handle
        for m, handle in [(first, changed.receipt_handle)] + [(m, m.system_properties.receipt_handle)
                                                             for m in msgs[1:]]:
            ack = await c.unary("AckMessage", pb.AckMessageRequest(
                group=pb.Resource(name="GG"), topic=pb.Resource(name="GT"),
                entries=[pb.message_class("AckMessageEntry")(message_id=m.system_properties.message_id,
                                                             receipt_handle=handle)]), pb.AckMessageResponse)
            assert ack.status.code == Code.OK
        req.invisible_duration.seconds = 10
        empty = await c.receive(req)
        assert [r.WhichOneof("content") for r in empty] == ["status", "delivery_timestamp"]
        assert empty[0].status.code == Code.MESSAGE_NOT_FOUND
        await c.ch.close()

    run(go(), timeout=60)


def test_status_codes_the_clients_map(grpc_broker, run):
    async def go():
        anon = Client(grpc_broker.grpc_port, client_id="")
        r = await anon.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="GT")), pb.QueryRouteResponse)
        assert r.status.code == Code.CLIENT_ID_REQUIRED
        c = Client(grpc_broker.grpc_port)
        r = await c.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="bad topic!")),
                          pb.QueryRouteResponse)
        assert r.status.code == Code.ILLEGAL_TOPIC
        r = await c.unary("Heartbeat", pb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), pb.HeartbeatResponse)
        assert r.status.code == Code.UNRECOGNIZED_CLIENT_TYPE
        m = pb.Message(topic=pb.Resource(name="GT"), body=b"x", user_properties={"UNIQ_KEY": "x"},
                       system_properties=pb.SystemProperties(message_id="ID"))
        r = await c.unary("SendMessage", pb.SendMessageRequest(messages=[m]), pb.SendMessageResponse)
        assert r.status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
        r = await c.unary("AckMessage", pb.AckMessageRequest(group=pb.Resource(name="GG"), topic=pb.Resource(
            name="GT"), entries=[pb.message_class("AckMessageEntry")(message_id="x", receipt_handle="junk")]),
            pb.AckMessageResponse)
        assert r.status.code == Code.INVALID_RECEIPT_HANDLE
        r = await c.unary("EndTransaction", pb.EndTransactionRequest(topic=pb.Resource(name="GT"), message_id="x",
                                                                      transaction_id="junk"),
                          pb.EndTransactionResponse)
        assert r.status.code == Code.INVALID_TRANSACTION_ID
        req = pb.ReceiveMessageRequest(group=pb.Resource(name="GG"), message_queue=pb.MessageQueue(
            topic=pb.Resource(name="GT")), batch_size=1, invisible_duration=pb.Duration(seconds=1))
        stream = await c.receive(req)
        assert stream[0].status.code == Code.ILLEGAL_INVISIBLE_TIME
        await anon.ch.close()
        await c.ch.close()

    run(go(), timeout=60)


def test_settings_register_the_client_for_the_admin_commands(grpc_broker, run):
    from mq.protocol.codes import LanguageCode

    async def go():
        c = Client(grpc_broker.grpc_port, client_id="sc-1")
        settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=pb.message_class(
            "Subscription")(group=pb.Resource(name="AdminG"), subscriptions=[pb.message_class("SubscriptionEntry")(
                topic=pb.Resource(name="GT"), expression=pb.FilterExpression(type=pb.FilterType.TAG,
                                                                           expression="TagA"))]))
        stream, reply = await c.telemetry(settings)
        assert reply.status.code == Code.OK and reply.settings.subscription.receive_batch_size == 32
        assert reply.settings.backoff_policy.max_attempts == 17
        info = grpc_broker.consumers.get("AdminG")
        ch = next(iter(info.channels.values()))
        assert (ch.client_id, ch.language) == ("sc-1", LanguageCode.PYTHON)
        assert info.subscriptions["GT"].sub_string == "TagA"
        hb = await c.unary("Heartbeat", pb.HeartbeatRequest(client_type=pb.ClientType.SIMPLE_CONSUMER,
                                                             group=pb.Resource(name="AdminG")), pb.HeartbeatResponse)
        assert hb.status.code == Code.OK
        await c.unary("NotifyClientTermination", pb.NotifyClientTerminationRequest(group=pb.Resource(name="AdminG")),
                      pb.NotifyClientTerminationResponse)
        assert grpc_broker.consumers.get("AdminG") is None
        stream.cancel()
        await c.ch.close()

    run(go(), timeout=60)


ACL = """\
accounts:
  - accessKey: appkey5
    secretKey: appsecret5
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
"""


def test_acl_signatures_and_permissions(broker_factory, tmp_path, run):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    b = broker_factory(grpc_server_port=0, acl_enable=True, acl_file=str(path))

    async def go():
        async def send(client, topic):
            return (await client.send(topic, 1))[0].status.code

        assert await send(Client(b.grpc_port), "AclTopic") == Code.UNAUTHORIZED
        assert await send(Client(b.grpc_port, creds=("appkey5", "wrongsecret")), "AclTopic") == Code.UNAUTHORIZED
        good = Client(b.grpc_port, creds=("appkey5", "appsecret5"))
        assert await send(good, "AclTopic") == Code.OK
        assert await send(good, "OtherTopic") == Code.FORBIDDEN

    run(go(), timeout=60)


def test_a_busy_grpc_port_stops_the_start_with_a_clear_message(broker_factory, grpc_broker):
    from mq.daemon.runtime import DaemonError

    with pytest.raises(DaemonError, match="grpcServerPort"):
        broker_factory(grpc_server_port=grpc_broker.grpc_port)


def _receive_req(group: str, topic: str, **kw):
    return pb.ReceiveMessageRequest(group=pb.Resource(name=group), message_queue=pb.MessageQueue(
        topic=pb.Resource(name=topic)), filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=32, long_polling_timeout=pb.Duration(seconds=5), **kw)


def _ack(c, group, topic, msg, handle=None):
    return c.unary("AckMessage", pb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                                      entries=[pb.message_class("AckMessageEntry")(
                                                          message_id=msg.system_properties.message_id,
                                                          receipt_handle=handle or msg.system_properties.receipt_handle)]),
                   pb.AckMessageResponse)


def test_auto_renew_keeps_a_held_message_invisible_and_the_first_handle_acks_it(broker_factory, run):
    b = broker_factory(grpc_server_port=0, grpc_default_invisible_time_ms=3000, grpc_renew_ahead_ms=2000)

    async def go():
        push = Client(b.grpc_port, client_id="push-1")
        other = Client(b.grpc_port, client_id="simple-1")
        await push.send("RenewT", 1)
        got = [r.message for r in await push.receive(_receive_req("RenewG", "RenewT", auto_renew=True))
               if r.HasField("message")]
        assert len(got) == 1
        await asyncio.sleep(5)  # past the first invisible time: renewed meanwhile, so not back
        again = await other.receive(_receive_req("RenewG", "RenewT", invisible_duration=pb.Duration(seconds=10)))
        assert again[0].status.code == Code.MESSAGE_NOT_FOUND
        assert b.grpc.consumer.renew.renewed >= 1
        ack = await _ack(push, "RenewG", "RenewT", got[0])  # the handle the client got first
        assert ack.status.code == Code.OK
        await asyncio.sleep(4)
        after = await other.receive(_receive_req("RenewG", "RenewT", invisible_duration=pb.Duration(seconds=10)))
        assert after[0].status.code == Code.MESSAGE_NOT_FOUND

    run(go(), timeout=60)


def test_forward_to_dead_letter_queue(grpc_broker, run):
    from mq.daemon.broker.requeue import load

    async def go():
        c = Client(grpc_broker.grpc_port)
        await c.send("DlqT", 1)
        got = [r.message for r in await c.receive(_receive_req("DlqG", "DlqT",
                                                               invisible_duration=pb.Duration(seconds=10)))
               if r.HasField("message")]
        m = got[0]
        r = await c.unary("ForwardMessageToDeadLetterQueue", pb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name="DlqG"), topic=pb.Resource(name="DlqT"),
            receipt_handle=m.system_properties.receipt_handle, message_id=m.system_properties.message_id,
            delivery_attempt=1, max_delivery_attempts=1), pb.ForwardMessageToDeadLetterQueueResponse)
        assert r.status.code == Code.OK
        cq = grpc_broker.store.cq_table.find("%DLQ%DlqG", 0, create=False)
        unit = cq.get_unit(0)
        dead = load(grpc_broker.store, unit[0], unit[1])
        assert dead.properties["UNIQ_KEY"] == m.system_properties.message_id

    run(go(), timeout=60)
