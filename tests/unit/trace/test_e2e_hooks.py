"""Trace hooks: the records they build, checked against Java 4.9-format records written by hand from TRACE.md
§3 (byte-identical), plus batch sends (one Pub per member), SubBefore/SubAfter pairing and context codes."""

from __future__ import annotations

import zlib

from mq.client.hooks import CommunicationMode, ConsumeContext, SendContext, SendResult, SendStatus
from mq.common import properties as P
from mq.common.message import Message, MessageExt, MessageQueue
from mq.common.record import encode_batch
from mq.trace.context import LocalTransactionState, TraceContext, TraceType
from mq.trace.encoder import decode_text, encode_context, encode_contexts, trace_message_keys
from mq.trace.hooks import (
    ConsumeTraceHook,
    EndTransactionContext,
    EndTransactionTraceHook,
    SendTraceHook,
    consumed_msg_id,
)

S, T = "\x01", "\x02"
BROKER = "192.168.0.1:10911"
MID = "AC110001000018B4AAC2176F22A60000"
OFF = "C0A8000100002A9F0000000000000F10"


class Sink:
    trace_topic = "RMQ_SYS_TRACE_TOPIC"

    def __init__(self) -> None:
        self.contexts: list[TraceContext] = []

    def append(self, ctx: TraceContext) -> bool:
        self.contexts.append(ctx)
        return True


class Clock:
    def __init__(self, t: int) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def send_ctx(msg: Message, result: SendResult | None, topic: str = "TopicTest") -> SendContext:
    return SendContext("PG", msg, MessageQueue(topic, "broker-a", 0), BROKER, CommunicationMode.SYNC,
                       born_host="10.0.0.5", result=result)


def result(msg_id: str = MID, off: str = OFF, status: SendStatus = SendStatus.SEND_OK, **kw) -> SendResult:
    return SendResult(status=status, msg_id=msg_id, offset_msg_id=off, queue=MessageQueue("TopicTest", "broker-a", 0),
                      queue_offset=7, broker_addr=BROKER, **kw)


def run_send(hook: SendTraceHook, clock: Clock, msg: Message, res: SendResult | None, cost: int = 15) -> None:
    ctx = send_ctx(msg, None)
    hook.send_before(ctx)
    clock.t += cost
    ctx.result = res
    hook.send_after(ctx)


def test_pub_record_is_byte_identical_to_java() -> None:
    sink, clock = Sink(), Clock(1660000000000)
    hook = SendTraceHook(sink, clock=clock)
    msg = Message("TopicTest", b"x" * 120, properties={P.TAGS: "TagA", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: MID})
    run_send(hook, clock, msg, result())
    (ctx,) = sink.contexts
    java = S.join(["Pub", "1660000000000", "DefaultRegion", "PG", "TopicTest", MID, "TagA", "null", BROKER, "120",
                   "15", "0", OFF, "true"]) + T
    assert encode_context(ctx) == java
    assert ctx.bean.store_time == 1660000000000 + 7  # Java's estimate ts + cost/2, not encoded
    assert decode_text(java)[0].bean.msg_id == MID


def test_pub_types_status_and_skips() -> None:
    sink, clock = Sink(), Clock(1000)
    hook = SendTraceHook(sink, clock=clock)
    uniq = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: MID}
    run_send(hook, clock, Message("TopicTest", b"a", properties={**uniq, P.DELAY_TIME_LEVEL: "3",
                                                               P.TRANSACTION_PREPARED: "true"}), result())
    run_send(hook, clock, Message("TopicTest", b"a", properties={**uniq, P.TRANSACTION_PREPARED: "true"}), result())
    run_send(hook, clock, Message("TopicTest", b"a", properties={**uniq, P.START_DELIVER_TIME: "5"}),
             result(status=SendStatus.FLUSH_DISK_TIMEOUT))
    assert [int(c.bean.msg_type) for c in sink.contexts] == [3, 1, 3]
    assert [c.success for c in sink.contexts] == [True, True, False]
    # no SendResult (exception/timeout/oneway), broker TRACE_ON=false, and the trace topic: no Pub
    run_send(hook, clock, Message("TopicTest", b"a", properties=dict(uniq)), None)
    run_send(hook, clock, Message("TopicTest", b"a", properties=dict(uniq)), result(trace_on=False))
    run_send(hook, clock, Message("RMQ_SYS_TRACE_TOPIC", b"a", properties=dict(uniq)), result())
    assert len(sink.contexts) == 3


def test_batch_send_gives_one_pub_per_message() -> None:
    sink, clock = Sink(), Clock(5000)
    hook = SendTraceHook(sink, clock=clock)
    ids = [f"AC110001000018B4AAC2176F22A6000{i}" for i in range(3)]
    offs = [f"C0A8000100002A9F000000000000{i:04X}" for i in range(3)]
    members = [Message("TopicTest", b"m" * (i + 1), properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: ids[i],
                                                                P.KEYS: f"k{i} shared", P.TAGS: "T"})
               for i in range(3)]
    wrapper = Message("TopicTest", encode_batch(members))  # what Producer.send_batch hands the hooks
    run_send(hook, clock, wrapper, result(",".join(ids), ",".join(offs)), cost=9)
    assert [c.bean.msg_id for c in sink.contexts] == ids
    assert [c.bean.offset_msg_id for c in sink.contexts] == offs
    assert [c.bean.body_length for c in sink.contexts] == [1, 2, 3]
    assert [c.bean.keys for c in sink.contexts] == ["k0 shared", "k1 shared", "k2 shared"]
    assert all(c.cost_time == 9 and c.timestamp == 5000 and c.trace_type is TraceType.Pub for c in sink.contexts)
    assert trace_message_keys(sink.contexts).split(" ") == [ids[0], "k0", "shared", ids[1], "k1", ids[2], "k2"]


def consumed(uniq: str | None, reconsume: int = 0, **props: str) -> MessageExt:
    p = dict(props)
    if uniq:
        p[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
    return MessageExt(topic="TopicTest", body=b"body", properties=p, store_size=150, store_timestamp=1,
                      reconsume_times=reconsume, msg_id=OFF)


def test_consume_records_are_java_format_one_per_message_sharing_request_id() -> None:
    sink, clock = Sink(), Clock(1660000000200)
    hook = ConsumeTraceHook(sink, clock=clock)
    msgs = [consumed("ID0"), consumed("ID1", 2, KEYS="a b"), consumed(None), consumed("ID3", TRACE_ON="false")]
    ctx = ConsumeContext("CG", msgs, MessageQueue("TopicTest", "broker-a", 1))
    hook.consume_before(ctx)
    clock.t += 13
    ctx.success, ctx.status = True, "CONSUME_SUCCESS"
    hook.consume_after(ctx)
    before, after = sink.contexts
    rid = before.request_id
    assert len(rid) == 32 and after.request_id == rid
    assert [b.msg_id for b in before.beans] == ["ID0", "ID1", OFF]  # TRACE_ON=false skipped; no UNIQ_KEY -> offset id
    assert encode_context(before) == "".join(
        S.join(["SubBefore", "1660000000200", "null", "CG", rid, mid, rt, keys]) + T
        for mid, rt, keys in (("ID0", "0", "null"), ("ID1", "2", "a b"), (OFF, "0", "null")))
    # cost divided by the batch size (4, including the skipped message, as Java); group and timestamp included
    assert encode_context(after) == "".join(
        S.join(["SubAfter", rid, mid, "3", "true", keys, "0", "1660000000213", "CG"]) + T
        for mid, keys in (("ID0", "null"), ("ID1", "a b"), (OFF, "null")))


def test_sub_after_context_codes() -> None:
    sink, clock = Sink(), Clock(0)
    hook = ConsumeTraceHook(sink, clock=clock, consume_timeout_ms=1000)
    cases = [(True, "CONSUME_SUCCESS", {}, 5, 0), (False, "RECONSUME_LATER", {}, 5, 4),
             (False, "RECONSUME_LATER", {"ConsumeContextType": "EXCEPTION"}, 5, 2),
             (False, "", {}, 5, 3), (True, "CONSUME_SUCCESS", {}, 1500, 1)]
    for success, status, props, took, code in cases:
        ctx = ConsumeContext("CG", [consumed("ID")], MessageQueue("TopicTest", "b", 0), props=dict(props))
        hook.consume_before(ctx)
        clock.t += took
        ctx.success, ctx.status = success, status
        hook.consume_after(ctx)
        after = sink.contexts[-1]
        assert (after.context_code, after.success) == (code, success), (status, props)
    # a message of the trace topic is never traced, and nothing is appended for an empty SubBefore
    n = len(sink.contexts)
    ctx = ConsumeContext("CG", [MessageExt(topic="RMQ_SYS_TRACE_TOPIC", body=b"x")], MessageQueue("x", "b", 0))
    hook.consume_before(ctx)
    hook.consume_after(ctx)
    assert len(sink.contexts) == n


def test_end_transaction_record_is_java_format() -> None:
    sink = Sink()
    hook = EndTransactionTraceHook(sink, clock=Clock(1660000000100))
    msg = Message("TopicTest", b"x", properties={P.KEYS: "k1 k2"})
    hook.end_transaction(EndTransactionContext("PG", msg, BROKER, MID, "TX-1", LocalTransactionState.COMMIT_MESSAGE))
    (ctx,) = sink.contexts
    java = S.join(["EndTransaction", "1660000000100", "DefaultRegion", "PG", "TopicTest", MID, "null", "k1 k2",
                   BROKER, "2", "TX-1", "COMMIT_MESSAGE", "false"]) + T
    assert encode_context(ctx) == java
    assert decode_text(java) == [ctx.__class__(
        TraceType.EndTransaction, timestamp=1660000000100, region_id="DefaultRegion", group_name="PG",
        beans=(ctx.bean.__class__(topic="TopicTest", msg_id=MID, tags=None, keys="k1 k2", store_host=BROKER,
                                  msg_type=ctx.bean.msg_type, transaction_id="TX-1",
                                  transaction_state=LocalTransactionState.COMMIT_MESSAGE),))]


def test_java_body_with_every_type_decodes_and_our_encoding_matches() -> None:
    """A Java 4.9 trace message body (records of all four types, zlib as the trace producer stores it)."""
    java = (S.join(["Pub", "1660000000000", "DefaultRegion", "PG", "TopicTest", MID, "TagA", "null", BROKER, "120",
                    "15", "0", OFF, "true"]) + T
            + S.join(["SubBefore", "1660000000200", "null", "CG", "REQ", MID, "1", "null"]) + T
            + S.join(["SubAfter", "REQ", MID, "3", "false", "null", "4", "1660000000203", "CG"]) + T
            + S.join(["EndTransaction", "1660000000100", "DefaultRegion", "PG", "TopicTest", MID, "null", "null",
                      BROKER, "2", "TX", "ROLLBACK_MESSAGE", "true"]) + T)
    from mq.trace.encoder import decode_body

    ctxs = decode_body(zlib.compress(java.encode()), compressed=True)
    assert [c.trace_type for c in ctxs] == list(TraceType)
    assert encode_contexts(ctxs) == java
    assert ctxs[2].context_code == 4 and ctxs[2].group_name == "CG" and not ctxs[2].success


def test_consumed_msg_id_prefers_unique_key() -> None:
    assert consumed_msg_id(consumed("U1")) == "U1"
    assert consumed_msg_id(consumed(None)) == OFF


def test_end_transaction_accepts_the_clients_own_context_and_state_enum() -> None:
    from types import SimpleNamespace

    from mq.client.transaction import LocalTransactionState as ClientState

    sink = Sink()
    hook = EndTransactionTraceHook(sink, clock=Clock(5))
    ctx = SimpleNamespace(producer_group="PG", message=Message("TopicTest", b"x"), broker_addr=BROKER, msg_id=MID,
                          transaction_id=MID, state=ClientState.UNKNOW, from_transaction_check=True)
    hook.end_transaction(ctx)
    (c,) = sink.contexts
    assert c.bean.transaction_state is LocalTransactionState.UNKNOW and c.bean.from_transaction_check
    assert encode_context(c).split(S)[11:] == ["UNKNOW", "true" + T]
