"""Pop consumption from a client (RocketMQ 5 remoting: ``MQClientAPIImpl`` pop, ack and change-invisible calls),
and ``PopConsumer``, a simple consumer on top of them (receive, ack, change invisible duration).

A pop answers the records plus, per queue read, the start offset and the message offsets
(``PopMessageResponseHeader``); each message's ``POP_CK`` (its receipt handle, ``mq.protocol.extra_info``) is
built from them, as the Java client does: ``startOffset popTime invisibleTime reviveQid retryFlag brokerName
queueId queueOffset``. A retried message arrives with its POP_CK set by the broker (retry flag 1) and its topic
set back to the consumed topic; a FIFO pop's ``orderCountInfo`` gives each message's delivery count
(``reconsume_times``). Acks and changes go to the broker named in the handle, with the handle's real topic
(``%RETRY%{group}_{topic}`` for a retried message).

Codes: SUCCESS -> FOUND; POLLING_FULL (209) -> POLLING_FULL; POLLING_TIMEOUT (210) and PULL_NOT_FOUND ->
POLLING_NOT_FOUND; anything else raises ``BrokerError``.
"""

from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass, field

from mq.client.instance import MQClientInstance
from mq.common import properties as P
from mq.common.message import MessageExt, MessageQueue
from mq.common.record import iter_records
from mq.common.topic import validate_group, validate_topic
from mq.config import ClientConfig
from mq.errors import BrokerError, MQError
from mq.protocol import bodies
from mq.protocol import extra_info as X
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody, encode_bitset

#: ConsumeInitMode
INIT_MIN, INIT_MAX = 0, 1


class PopStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


_STATUS = {ResponseCode.SUCCESS: PopStatus.FOUND, ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
           ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
           ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND}


@dataclass(slots=True)
class PopResult:
    status: PopStatus
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0


def receipt(msg: MessageExt) -> str:
    """A popped message's receipt handle (its POP_CK); MQError when it was not popped."""
    ck = msg.properties.get(P.POP_CK)
    if not ck:
        raise MQError(f"message {msg.msg_id} has no POP_CK: it was not received with pop")
    return ck


def decode_pop_response(resp: RemotingCommand, broker_name: str, topic: str, order: bool = False,
                        addr: str | None = None) -> PopResult:
    """Java ``processPopResponse``: messages with POP_CK, 1ST_POP_TIME, delivery counts; BrokerError otherwise."""
    status = _STATUS.get(resp.code)
    if status is None:
        raise BrokerError.from_response(resp.code, resp.remark, addr)
    rh = h.PopMessageResponseHeader.from_ext(resp.ext_fields)
    result = PopResult(status, pop_time=rh.pop_time, invisible_time=rh.invisible_time, rest_num=rh.rest_num)
    if status is not PopStatus.FOUND:
        return result
    msgs = list(iter_records(resp.body or b"", decompress=True))
    starts = X.parse_start_offset_info(rh.start_offset_info)
    offsets = X.parse_msg_offset_info(rh.msg_offset_info)
    counts = X.parse_order_count_info(rh.order_count_info) if order else {}
    sorted_offsets: dict[str, list[int]] = {}
    for m in msgs:
        flag = X.retry_flag(m.topic) if P.POP_CK not in m.properties else X.parse(m.properties[P.POP_CK]).retry
        sorted_offsets.setdefault(f"{flag}@{m.queue_id}", []).append(m.queue_offset)
    for v in sorted_offsets.values():
        v.sort()
    for m in msgs:
        if P.POP_CK not in m.properties:
            flag = X.retry_flag(m.topic)
            qkey = f"{flag}@{m.queue_id}"
            if qkey not in starts:
                raise MQError(f"pop answer without start offset info for queue {m.queue_id} of {m.topic}")
            qoff = offsets[qkey][sorted_offsets[qkey].index(m.queue_offset)]
            m.properties[P.POP_CK] = X.build(starts[qkey], rh.pop_time, rh.invisible_time, rh.revive_qid, flag,
                                             broker_name, m.queue_id, qoff)
            if order:
                n = counts.get(f"{flag}@qo{m.queue_id}%{m.queue_offset}", counts.get(qkey))
                if n:
                    m.reconsume_times = n
        m.properties.setdefault(P.FIRST_POP_TIME, str(rh.pop_time))
        m.broker_name = broker_name
        m.topic = topic
        uniq = m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            m.msg_id = uniq
        result.messages.append(m)
    return result


class PopAPI:
    """POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME through one client instance."""

    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance

    async def _addr(self, topic: str, broker_name: str) -> str:
        return await self.instance.find_broker_addr(MessageQueue(topic, broker_name, 0), master=True)

    async def pop(self, broker_name: str, group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32,
                  invisible_ms: int = 60_000, poll_ms: int = 0, init_mode: int = INIT_MAX, expression: str = "*",
                  expression_type: str = "TAG", order: bool = False, attempt_id: str | None = None,
                  timeout: float = 10.0) -> PopResult:
        addr = await self._addr(topic, broker_name)
        hdr = h.PopMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=max_nums, invisible_time=invisible_ms,
            poll_time=poll_ms, born_time=int(time.time() * 1000), init_mode=init_mode, exp_type=expression_type,
            exp=expression, order=order, attempt_id=attempt_id)
        resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.POP_MESSAGE,
                                                                                 hdr.to_ext()),
                                                   timeout=max(timeout, poll_ms / 1000.0 + 5.0))
        return decode_pop_response(resp, broker_name, topic, order, addr)

    async def ack(self, group: str, topic: str, msg: MessageExt) -> bool:
        """ACK_MESSAGE; False when the broker no longer holds the message for this handle (NO_MESSAGE)."""
        ei = X.parse(receipt(msg))
        addr = await self._addr(topic, ei.broker_name)
        hdr = h.AckMessageRequestHeader(consumer_group=group, topic=X.real_topic(topic, group, ei.retry),
                                        queue_id=ei.queue_id, extra_info=receipt(msg), offset=ei.queue_offset)
        resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE,
                                                                                 hdr.to_ext()))
        if resp.code == ResponseCode.NO_MESSAGE:
            return False
        if resp.code != ResponseCode.SUCCESS:
            raise BrokerError.from_response(resp.code, resp.remark, addr)
        return True

    async def batch_ack(self, group: str, topic: str, msgs: list[MessageExt]) -> None:
        """BATCH_ACK_MESSAGE: the messages grouped by checkpoint, one request per broker."""
        groups: dict[tuple[str, str, int, int, int], tuple[X.ExtraInfo, set[int]]] = {}
        for m in msgs:
            ei = X.parse(receipt(m))
            key = (ei.broker_name, ei.retry, ei.queue_id, ei.ck_queue_offset, ei.pop_time)
            groups.setdefault(key, (ei, set()))[1].add(ei.queue_offset - ei.ck_queue_offset)
        by_broker: dict[str, list[BatchAck]] = {}
        for (broker, *_), (ei, idx) in groups.items():
            by_broker.setdefault(broker, []).append(BatchAck(
                group, topic, ei.retry, ei.ck_queue_offset, ei.queue_id, ei.revive_qid, ei.pop_time,
                ei.invisible_time, encode_bitset(idx)))
        for broker, acks in by_broker.items():
            addr = await self._addr(topic, broker)
            body = BatchAckMessageRequestBody(broker, acks).to_json()
            await self.instance.call(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body))

    async def change_invisible_time(self, group: str, topic: str, msg: MessageExt, invisible_ms: int) -> str:
        """CHANGE_MESSAGE_INVISIBLETIME; returns (and sets on ``msg``) the new POP_CK."""
        ei = X.parse(receipt(msg))
        addr = await self._addr(topic, ei.broker_name)
        real = X.real_topic(topic, group, ei.retry)
        hdr = h.ChangeInvisibleTimeRequestHeader(consumer_group=group, topic=real, queue_id=ei.queue_id,
                                                 extra_info=receipt(msg), offset=ei.queue_offset,
                                                 invisible_time=invisible_ms)
        resp = await self.instance.call(addr, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
                                                                      hdr.to_ext()))
        rh = h.ChangeInvisibleTimeResponseHeader.from_ext(resp.ext_fields)
        new = X.build(ei.queue_offset, rh.pop_time, rh.invisible_time, rh.revive_qid, ei.retry, ei.broker_name,
                      ei.queue_id, ei.queue_offset)
        msg.properties[P.POP_CK] = new
        return new


class PopConsumer:
    """A simple pop consumer (what RocketMQ 5's SimpleConsumer does over gRPC, here over remoting): ``receive``
    pops from the topic's brokers in turn; each message must be ``ack``ed before its invisible time is up, or it
    comes back (with ``reconsume_times`` raised) until the group's retryMaxTimes sends it to ``%DLQ%{group}``."""

    def __init__(self, group: str, topic: str, client_config: ClientConfig | None = None, *,
                 expression: str = "*", expression_type: str = "TAG", order: bool = False,
                 init_mode: int = INIT_MAX, instance: MQClientInstance | None = None) -> None:
        self.group = validate_group(group)
        self.topic = validate_topic(topic)
        self.client_config = client_config or ClientConfig()
        self.expression = expression
        self.expression_type = expression_type
        self.order = order
        self.init_mode = init_mode
        self.instance = instance
        self._own = instance is None
        self.api: PopAPI | None = None
        self._turn = itertools.count()
        self._start_ms = 0

    async def start(self) -> "PopConsumer":
        """Connect; the group is then in this client's heartbeats as a CONSUME_POP consumer of the topic."""
        if self.api is None:
            if self.instance is None:
                self.instance = await MQClientInstance.acquire(self.client_config)
            self.api = PopAPI(self.instance)
            self.instance.register_consumer(self)
            self._start_ms = int(time.time() * 1000)
            await self.instance.update_route(self.topic)
            await self.instance.heartbeat_all()
        return self

    async def shutdown(self) -> None:
        if self.api is not None and self.instance is not None:
            await self.instance.unregister(consumer_group=self.group)
            if self._own:
                await self.instance.release()
        self.api = None

    # -- what the client instance asks of its consumers (heartbeats, running info) ---------------------------
    def topics(self) -> set[str]:
        return {self.topic}

    def consumer_data(self) -> bodies.ConsumerData:
        sub = bodies.SubscriptionData(topic=self.topic, sub_string=self.expression or "*",
                                      sub_version=self._start_ms, expression_type=self.expression_type)
        return bodies.ConsumerData(group_name=self.group, consume_type=bodies.ConsumeType.CONSUME_POP,
                                   message_model=bodies.MessageModel.CLUSTERING,
                                   consume_from_where=bodies.ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                                   subscription_data_set=[sub])

    async def rebalance(self) -> None:
        """Nothing to balance: every pop may read any queue (the broker hands each message to one consumer)."""

    async def persist_offsets(self) -> None:
        """Nothing to persist: the broker keeps a pop group's offsets."""

    def running_info(self) -> dict:
        props = {"PROP_CONSUME_TYPE": "CONSUME_POP", "PROP_CONSUMER_START_TIMESTAMP": str(self._start_ms),
                 "messageModel": "CLUSTERING", "PROP_CONSUMEORDERLY": "true" if self.order else "false",
                 "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET" if self.init_mode == INIT_MAX
                 else "CONSUME_FROM_FIRST_OFFSET"}
        return {"properties": props, "subscriptionSet": [self.consumer_data().subscription_data_set[0]
                                                          .to_json_value()], "mqTable": {}, "statusTable": {}}

    async def __aenter__(self) -> "PopConsumer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _api(self) -> PopAPI:
        if self.api is None:
            raise MQError("the pop consumer is not started (call start() first)")
        return self.api

    async def brokers(self) -> list[str]:
        queues = await self._api().instance.subscribe_queues(self.topic)
        return sorted({q.broker_name for q in queues})

    async def receive(self, max_nums: int = 32, invisible_ms: int = 60_000, wait_ms: int = 0) -> PopResult:
        """Pop up to ``max_nums`` messages from the next broker of the topic (waiting up to ``wait_ms`` there)."""
        api = self._api()
        brokers = await self.brokers()
        if not brokers:
            raise MQError(f"topic {self.topic} has no readable queue")
        broker = brokers[next(self._turn) % len(brokers)]
        return await api.pop(broker, self.group, self.topic, max_nums=max_nums, invisible_ms=invisible_ms,
                             poll_ms=wait_ms, init_mode=self.init_mode, expression=self.expression,
                             expression_type=self.expression_type, order=self.order)

    async def ack(self, msg: MessageExt) -> bool:
        return await self._api().ack(self.group, self.topic, msg)

    async def ack_all(self, msgs: list[MessageExt]) -> None:
        if msgs:
            await self._api().batch_ack(self.group, self.topic, msgs)

    async def change_invisible_duration(self, msg: MessageExt, invisible_ms: int) -> str:
        return await self._api().change_invisible_time(self.group, self.topic, msg, invisible_ms)
