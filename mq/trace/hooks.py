"""Trace hooks: build ``TraceContext`` s from client events and hand them to a dispatcher (TRACE.md §6).

+--------------------------+------------------------+-----------------------------------------------------+
| hook                     | event                  | records                                             |
+--------------------------+------------------------+-----------------------------------------------------+
| ``SendTraceHook``        | a send got a result    | Pub, one per message. A batch gives one Pub per     |
|                          | (SendResult)           | member (RocketMQ 4.9 wrote one record carrying the  |
|                          |                        | comma-joined ids, #7651), each with its own UNIQ_KEY|
|                          |                        | and offsetMsgId; costTime is the request's.         |
| ``ConsumeTraceHook``     | before the listener    | SubBefore, one per message, one requestId per call  |
|                          | after the listener     | SubAfter, one per message: same requestId, cost =   |
|                          |                        | elapsed / batch size, contextCode, and (fields 7-8) |
|                          |                        | its own timestamp and the group, so a SubAfter      |
|                          |                        | whose SubBefore was lost still says who and when    |
|                          |                        | (#3137).                                            |
| ``EndTransactionTrace-`` | a transaction decided  | EndTransaction, one                                 |
| ``Hook``                 |                        |                                                     |
+--------------------------+------------------------+-----------------------------------------------------+

All records keep the 4.9.4 layouts (``encoder.py``), so Java 4.9 tools and the dashboard decode them. No
extra fields are needed: the 9-field SubAfter already carries timestamp and group, and a trace's client
host is the trace message's born host (TRACE.md §8.1).

Hooks run inline on the client's event loop: they only build small frozen objects and call the
dispatcher's non-blocking ``append``. Messages of the trace topic itself (any topic starting with its
name) are never traced; nor is a consumed message whose ``TRACE_ON`` property is ``false``, nor a send
whose broker answered ``TRACE_ON=false``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from mq.client.hooks import ConsumeContext, EndTransactionContext, SendContext, SendStatus
from mq.common import properties as P
from mq.common.message import Message, MessageExt
from mq.common.msg_id import UniqKeyGenerator
from mq.trace.context import (
    DEFAULT_REGION,
    ConsumeReturnType,
    LocalTransactionState,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
)

log = logging.getLogger(__name__)

#: Hook property the consumer may set to say how the listener ended (Java ``MixAll.CONSUME_CONTEXT_TYPE``):
#: one of the ``ConsumeReturnType`` names. Without it the hook derives SUCCESS / FAILED / TIME_OUT.
CONSUME_CONTEXT_TYPE = "ConsumeContextType"
#: Java ``consumeTimeout`` default (15 min): a listener slower than this that returned is TIME_OUT.
DEFAULT_CONSUME_TIMEOUT_MS = 15 * 60 * 1000


class TraceSink(Protocol):
    """What the hooks need from a dispatcher."""

    trace_topic: str

    def append(self, ctx: TraceContext) -> bool: ...


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ensure_started(sink: Any) -> None:
    if not getattr(sink, "started", True):
        sink.ensure_started()


def message_type(msg: Message) -> MessageType:
    """Pub ``msgType``: Delay_Msg if DELAY or __STARTDELIVERTIME is set (delay wins), Trans_Msg_Half for a
    prepared transaction message, else Normal_Msg."""
    props = msg.properties
    if props.get(P.DELAY_TIME_LEVEL, "0") not in ("", "0") or props.get(P.START_DELIVER_TIME):
        return MessageType.Delay_Msg
    if props.get(P.TRANSACTION_PREPARED) == "true":
        return MessageType.Trans_Msg_Half
    return MessageType.Normal_Msg


def consumed_msg_id(msg: MessageExt) -> str:
    """The id a consume trace carries: the client unique id (UNIQ_KEY), else the offset msg id."""
    return msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id


@dataclass(slots=True)
class _PubState:
    start_ms: int


@dataclass(slots=True)
class _ConsumeState:
    before: TraceContext
    batch_size: int


def _batch_members(ctx: SendContext) -> list[tuple[Message, str, str]] | None:
    """``(member, msgId, offsetMsgId)`` for each message of a batch send, or None for a single message.

    A batch's wrapper message has no UNIQ_KEY of its own (each member has one) and its body is the batch
    encoding; its SendResult carries the members' ids comma-joined, in order.
    """
    msg, res = ctx.message, ctx.result
    if res is None or P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX in msg.properties:
        return None
    from mq.common.record import decode_batch
    from mq.errors import MQError

    try:
        members = decode_batch(msg.body, msg.topic)
    except (MQError, ValueError):
        return None
    ids = res.msg_id.split(",") if res.msg_id else []
    offs = res.offset_msg_id.split(",") if res.offset_msg_id else []
    if not members or len(ids) != len(members):
        return None
    if len(offs) != len(members):
        offs = [res.offset_msg_id] * len(members)
    return [(m, i, o) for m, i, o in zip(members, ids, offs)]


class SendTraceHook:
    """Pub records (``SendMessageTraceHookImpl``): one per stored message of each send that got a result."""

    def __init__(self, sink: TraceSink, *, clock: Callable[[], int] = _now_ms) -> None:
        self.sink = sink
        self.clock = clock

    def _skip(self, topic: str) -> bool:
        return topic.startswith(self.sink.trace_topic)

    def send_before(self, ctx: SendContext) -> None:
        if self._skip(ctx.message.topic):
            return
        ctx.trace = _PubState(self.clock())
        _ensure_started(self.sink)

    def send_after(self, ctx: SendContext) -> None:
        state = ctx.trace
        if not isinstance(state, _PubState) or self._skip(ctx.message.topic):
            return
        res = ctx.result
        if res is None or res.region_id is None or not res.trace_on:
            return  # exception, timeout, oneway, or the broker switched tracing off: no Pub (as Java)
        cost = max(0, self.clock() - state.start_ms)
        success = res.status is SendStatus.SEND_OK
        members = _batch_members(ctx)
        if members is None:
            members = [(ctx.message, res.msg_id, res.offset_msg_id)]
        for msg, msg_id, offset_msg_id in members:
            bean = TraceBean(
                topic=msg.topic, msg_id=msg_id, offset_msg_id=offset_msg_id, tags=msg.tags, keys=msg.keys,
                store_host=res.broker_addr or ctx.broker_addr, client_host=ctx.born_host or None,
                store_time=state.start_ms + cost // 2, body_length=len(msg.body), msg_type=message_type(msg))
            self.sink.append(TraceContext(
                TraceType.Pub, timestamp=state.start_ms, region_id=res.region_id, group_name=ctx.producer_group,
                cost_time=cost, success=success, beans=(bean,)))


class ConsumeTraceHook:
    """SubBefore / SubAfter records (``ConsumeMessageTraceHookImpl``)."""

    def __init__(self, sink: TraceSink, *, clock: Callable[[], int] = _now_ms, client_ip: str = "127.0.0.1",
                 consume_timeout_ms: int = DEFAULT_CONSUME_TIMEOUT_MS) -> None:
        self.sink = sink
        self.clock = clock
        self.consume_timeout_ms = consume_timeout_ms
        self._ids = UniqKeyGenerator(client_ip if ":" not in client_ip else "127.0.0.1")

    def consume_before(self, ctx: ConsumeContext) -> None:
        beans: list[TraceBean] = []
        region: str | None = None
        trace_topic = self.sink.trace_topic
        for m in ctx.messages:
            if m.properties.get(P.TRACE_SWITCH) == "false" or m.topic.startswith(trace_topic):
                continue
            region = m.properties.get(P.MSG_REGION)
            beans.append(TraceBean(
                topic=m.topic, msg_id=consumed_msg_id(m), tags=m.tags, keys=m.keys, store_time=m.store_timestamp,
                body_length=m.store_size, retry_times=m.reconsume_times))
        if not beans:
            return
        before = TraceContext(TraceType.SubBefore, timestamp=self.clock(), region_id=region,
                              group_name=ctx.consumer_group, request_id=self._ids.next(), beans=tuple(beans))
        ctx.trace = _ConsumeState(before, len(ctx.messages))
        _ensure_started(self.sink)
        self.sink.append(before)

    def consume_after(self, ctx: ConsumeContext) -> None:
        state = ctx.trace
        if not isinstance(state, _ConsumeState):
            return
        now = self.clock()
        before = state.before
        elapsed = max(0, now - (before.timestamp or now))
        code = self.context_code(ctx, elapsed)
        self.sink.append(TraceContext(
            TraceType.SubAfter, timestamp=now, region_id=before.region_id, group_name=before.group_name,
            request_id=before.request_id, cost_time=elapsed // max(1, state.batch_size), success=ctx.success,
            context_code=int(code), beans=before.beans))

    def context_code(self, ctx: ConsumeContext, elapsed_ms: int) -> ConsumeReturnType:
        """How the listener ended: the consumer's ``ConsumeContextType`` hook property when set, else as Java
        derives it from the status (slow but returned -> TIME_OUT; RECONSUME_LATER -> FAILED)."""
        named = ctx.props.get(CONSUME_CONTEXT_TYPE) or ctx.status
        if named in ConsumeReturnType.__members__:
            return ConsumeReturnType[named]
        if not ctx.status:
            return ConsumeReturnType.RETURNNULL
        if elapsed_ms >= self.consume_timeout_ms:
            return ConsumeReturnType.TIME_OUT
        return ConsumeReturnType.SUCCESS if ctx.success else ConsumeReturnType.FAILED


class EndTransactionTraceHook:
    """EndTransaction records (``EndTransactionTraceHookImpl``)."""

    def __init__(self, sink: TraceSink, *, clock: Callable[[], int] = _now_ms) -> None:
        self.sink = sink
        self.clock = clock

    def end_transaction(self, ctx: EndTransactionContext) -> None:
        msg = ctx.message
        if msg.topic.startswith(self.sink.trace_topic):
            return
        state = LocalTransactionState(getattr(ctx.state, "value", ctx.state))  # any enum with the Java names
        bean = TraceBean(
            topic=msg.topic, msg_id=ctx.msg_id, tags=msg.tags, keys=msg.keys, store_host=ctx.broker_addr,
            msg_type=MessageType.Trans_msg_Commit, transaction_id=ctx.transaction_id, transaction_state=state,
            from_transaction_check=ctx.from_transaction_check)
        _ensure_started(self.sink)
        self.sink.append(TraceContext(
            TraceType.EndTransaction, timestamp=self.clock(),
            region_id=msg.properties.get(P.MSG_REGION) or DEFAULT_REGION, group_name=ctx.producer_group,
            beans=(bean,)))
