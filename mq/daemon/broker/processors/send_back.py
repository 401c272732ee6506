"""CONSUMER_SEND_MSG_BACK (36): a consumer hands a message it failed to consume back to the broker
(FEATURES.md §3.1, RocketMQ ``SendMessageProcessor.asyncConsumerSendMsgBack``).

Request header (``ConsumerSendMsgBackRequestHeader``): offset (the failed message's commit-log offset), group,
delayLevel, originMsgId, originTopic, unitMode, maxReconsumeTimes. No body; the response has no header.

1. The subscription group must exist or be auto-created (SUBSCRIPTION_GROUP_NOT_EXIST).
2. The broker must be writable (NO_PERMISSION); ``retryQueueNums <= 0`` drops the message with SUCCESS.
3. ``%RETRY%<group>`` is created on demand (retryQueueNums queues, perm 6); not writable -> NO_PERMISSION.
4. The message is loaded by offset (missing -> SYSTEM_ERROR). ``RETRY_TOPIC`` = its topic unless already set.
5. max = the group's retryMaxTimes, or the header's when the request version >= V3_4_9 (121).
   ``reconsumeTimes >= max`` or ``delayLevel < 0`` -> ``%DLQ%<group>`` queue 0 (1 queue, perm
   ``dlq_topic_perm``: 6 as in 4.9.2+), no DELAY. Otherwise DELAY = delayLevel, or 3 + reconsumeTimes when it is 0,
   so the store parks it in SCHEDULE_TOPIC_XXXX and the schedule service re-delivers it to the retry topic.
6. The new record: reconsumeTimes + 1, ``ORIGIN_MESSAGE_ID`` kept or set to the original msgId, everything else
   copied. PUT_OK -> SUCCESS; any other put status -> SYSTEM_ERROR naming it.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from mq.common import properties as P
from mq.common import topic as T
from mq.daemon.broker.requeue import STORED, load, put_async, rebuild
from mq.daemon.broker.topic_config import PERM_WRITE, TopicConfigNotSaved
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import ConsumerSendMsgBackRequestHeader

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

RC = ResponseCode
#: Request version from which the header's maxReconsumeTimes overrides the group's (MQVersion V3_4_9).
VERSION_MAX_RECONSUME_OVERRIDE = 121
#: The first retry's delay level when the client leaves it to the broker (0): 3 + reconsumeTimes.
BASE_RETRY_LEVEL = 3


class SendBackProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    def register(self, server: Any) -> None:
        server.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.handle)

    async def handle(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            return await self._handle(cmd)
        except TopicConfigNotSaved as exc:  # the retry or DLQ topic cannot be made durable: nothing is stored
            return cmd.response(RC.SERVICE_NOT_AVAILABLE, f"service not available now: {exc}")

    async def _handle(self, cmd: RemotingCommand) -> RemotingCommand:
        c = self.c
        h = ConsumerSendMsgBackRequestHeader.from_ext(cmd.ext_fields)
        sgc = c.subscription_groups.find_or_create(h.group)
        if sgc is None:
            return cmd.response(RC.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group} "
                                "https://rocketmq.apache.org/docs/bestPractice/06FAQ")
        if not c.config.broker_permission & PERM_WRITE:
            return cmd.response(RC.NO_PERMISSION, f"the broker[{c.address}] sending message is forbidden")
        if sgc.retry_queue_nums <= 0:
            return cmd.response(RC.SUCCESS)
        retry = T.retry_topic(h.group)
        if not T.is_valid_topic(retry):  # a group name that makes no topic name
            return cmd.response(RC.SYSTEM_ERROR, f"the retry topic of group {h.group[:300]!r} is not a valid topic "
                                "name")
        tc = c.topic_config.create_system(retry, sgc.retry_queue_nums, 6)
        if not tc.perm & PERM_WRITE:
            return cmd.response(RC.NO_PERMISSION, f"the topic[{retry}] sending message is forbidden")
        msg = load(c.store, h.offset)
        if msg is None:
            return cmd.response(RC.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        props = dict(msg.properties)
        props.setdefault(P.RETRY_TOPIC, msg.topic)
        max_times = sgc.retry_max_times
        if cmd.version >= VERSION_MAX_RECONSUME_OVERRIDE and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        delay = h.delay_level
        props.pop(P.DELAY_TIME_LEVEL, None)
        if msg.reconsume_times >= max_times or delay < 0:
            topic = T.dlq_topic(h.group)
            dlq = c.topic_config.create_system(topic, 1, c.config.dlq_topic_perm)
            if not dlq.perm & PERM_WRITE:
                return cmd.response(RC.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
            queue_id = 0
            log.info("message %s of group %s failed %d times: moved to %s", msg.msg_id, h.group,
                     msg.reconsume_times, topic)
        else:
            topic = retry
            queue_id = random.randrange(99_999_999) % tc.write_queue_nums
            props[P.DELAY_TIME_LEVEL] = str(delay or BASE_RETRY_LEVEL + msg.reconsume_times)
        if not props.get(P.ORIGIN_MESSAGE_ID):
            props[P.ORIGIN_MESSAGE_ID] = msg.msg_id or h.origin_msg_id or ""  # the offsetMsgId, as Java
        res = await put_async(c.store, rebuild(msg, topic, queue_id, props,
                                               reconsume_times=msg.reconsume_times + 1))
        if res.status in STORED:
            c.stats.on_put(res.msg_num or 1)
            return cmd.response(RC.SUCCESS)
        return cmd.response(RC.SYSTEM_ERROR, res.status.name)
