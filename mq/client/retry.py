"""The push consumer's side of retries (FEATURES.md §3.4): what a failed message becomes.

- ``reset_retry_topic``: a message pulled from ``%RETRY%<group>`` is shown to the listener under its real topic
  (its ``RETRY_TOPIC`` property), and every message gets ``CONSUME_START_TIME`` (Java
  ``resetRetryAndNamespace``).
- ``send_back_concurrently``: concurrent consumption. CONSUMER_SEND_MSG_BACK to the message's broker (delay level
  0 = the broker picks ``3 + reconsumeTimes``); if that fails, a normal message to ``%RETRY%<group>`` from the
  client's inner producer with ``RECONSUME_TIME`` = times + 1.
- ``send_back_orderly``: orderly consumption once ``maxReconsumeTimes`` is exceeded
  (``ConsumeMessageOrderlyService.sendMessageBack``). A normal message to ``%RETRY%<group>`` with
  ``RECONSUME_TIME`` = the current times, ``MAX_RECONSUME_TIMES``, ``RETRY_TOPIC`` = the real topic,
  ``ORIGIN_MESSAGE_ID`` and delay level ``3 + times``; the producer moves the first two into the send header
  and the broker's ``handleRetryAndDLQ`` reroutes the message to ``%DLQ%<group>`` (§3.3).
"""

from __future__ import annotations

import enum
import logging
import time
from typing import TYPE_CHECKING, Iterable

from mq.common import properties as P
from mq.common.message import Message, MessageExt, MessageQueue
from mq.common.topic import retry_topic
from mq.errors import MQError
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from mq.client.instance import MQClientInstance

log = logging.getLogger(__name__)


class SendBackResult(enum.Enum):
    #: CONSUMER_SEND_MSG_BACK accepted by the broker
    SENT_BACK = "SENT_BACK"
    #: sent as a normal message to %RETRY%<group> by the inner producer
    RESENT = "RESENT"
    #: both failed: the caller keeps the message and consumes it again locally
    FAILED = "FAILED"


def reset_retry_topic(msgs: Iterable[MessageExt], group: str) -> None:
    group_retry = retry_topic(group)
    now = str(int(time.time() * 1000))
    for m in msgs:
        real = m.properties.get(P.RETRY_TOPIC)
        if real and m.topic == group_retry:
            m.topic = real
        m.properties[P.CONSUME_START_TIMESTAMP] = now


async def send_back_concurrently(instance: "MQClientInstance", group: str, msg: MessageExt, delay_level: int,
                                 max_reconsume: int) -> SendBackResult:
    try:
        addr = await instance.find_broker_addr(MessageQueue(msg.topic, msg.broker_name, msg.queue_id))
        hdr = h.ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=group, delay_level=delay_level, origin_msg_id=msg.msg_id,
            origin_topic=msg.topic, unit_mode=False, max_reconsume_times=max_reconsume)
        await instance.call(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, hdr.to_ext()))
        return SendBackResult.SENT_BACK
    except MQError as exc:
        log.warning("%s: send-back of %s failed (%s); re-sending to the retry topic", group, msg.msg_id, exc)
    try:
        producer = await instance.inner_producer()
        props = dict(msg.properties)
        props.setdefault(P.RETRY_TOPIC, msg.topic)
        props.setdefault(P.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[P.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        props[P.MAX_RECONSUME_TIMES] = str(max_reconsume)
        props[P.DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
        props.pop(P.MIN_OFFSET, None)
        props.pop(P.MAX_OFFSET, None)
        await producer.send(Message(retry_topic(group), msg.body, msg.flag, props))
        return SendBackResult.RESENT
    except MQError as exc:
        log.warning("%s: re-send of %s failed (%s); consuming it again locally", group, msg.msg_id, exc)
        return SendBackResult.FAILED


async def send_back_orderly(instance: "MQClientInstance", group: str, msg: MessageExt,
                            max_reconsume: int) -> SendBackResult:
    props = dict(msg.properties)
    if not props.get(P.ORIGIN_MESSAGE_ID):
        props[P.ORIGIN_MESSAGE_ID] = msg.msg_id
    props[P.RETRY_TOPIC] = msg.topic
    props[P.RECONSUME_TIME] = str(msg.reconsume_times)
    props[P.MAX_RECONSUME_TIMES] = str(max_reconsume)
    props.pop(P.TRANSACTION_PREPARED, None)
    props.pop(P.MIN_OFFSET, None)
    props.pop(P.MAX_OFFSET, None)
    props[P.DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
    try:
        producer = await instance.inner_producer()
        await producer.send(Message(retry_topic(group), msg.body, msg.flag, props))
        return SendBackResult.RESENT
    except MQError as exc:
        log.warning("%s: sending %s back to the retry topic failed: %s", group, msg.msg_id, exc)
        return SendBackResult.FAILED
