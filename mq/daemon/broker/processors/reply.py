"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): request-reply (RocketMQ ``ReplyMessageProcessor``).

A consumer answers a request with a message built by ``create_reply_message`` (``MSG_TYPE=reply``); its producer
sends it with 325 (the V2 one-letter header) or 324 (the V1 header). The broker:

1. runs the send checks (broker/topic permission, topic name, auto-create, queue id: ``SendProcessor.prepare``);
2. finds the requesting client among the producer connections by the ``REPLY_TO_CLIENT`` property and pushes
   PUSH_REPLY_MESSAGE_TO_CLIENT (326, ``ReplyMessageRequestHeader`` + the body as sent) with ``PUSH_REPLY_TIME``
   added to the properties, waiting for the client's answer;
3. with ``store_reply_message_enable`` also stores the message (in ``<cluster>_REPLY_TOPIC`` for replies built
   by the client helpers) with the properties string exactly as sent (Java stores ``requestHeader.properties``).

The answer follows Java: SUCCESS when the push succeeded, else SYSTEM_ERROR with the push's remark (e.g.
``push reply message fail, channel of <id> not found.``); the header carries ``MSG_REGION`` and ``TRACE_ON``
always, and ``msgId``/``queueId``/``queueOffset`` from the store when it stored the reply, ``0``/queue/``0``
when the push succeeded without storing, nothing more otherwise.

326 request, broker -> client (JSON or ROCKETMQ header, ext fields):

    +-----------------------+---------+-------------------------------------------+
    | key                   | type    | value                                     |
    +-----------------------+---------+-------------------------------------------+
    | producerGroup         | str     | the replying producer's group             |
    | topic                 | str     | the reply's topic                         |
    | defaultTopic          | str     | as sent (TBW102)                          |
    | defaultTopicQueueNums | int     | as sent                                   |
    | queueId               | int     | as sent (may be negative)                 |
    | sysFlag, flag         | int     | as sent                                   |
    | bornTimestamp         | long    | as sent                                   |
    | properties            | str     | as sent + PUSH_REPLY_TIME=<ms>            |
    | reconsumeTimes        | int     | as sent (absent when not sent)            |
    | unitMode              | bool    | as sent                                   |
    | bornHost              | str     | replier's "ip:port"                       |
    | storeHost             | str     | broker's "ip:port"                        |
    | storeTimestamp        | long    | push time, ms                             |
    +-----------------------+---------+-------------------------------------------+
    body: the reply body as sent (compressed when sysFlag has the compressed bit)
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from mq.common import properties as P
from mq.common.properties import encode_properties
from mq.daemon.broker.requeue import STORED
from mq.errors import MQError
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from mq.store.status import PutMessageResult

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

RC = ResponseCode
#: Java ``Broker2Client.callClient`` waits this long for the requesting client's answer to 326.
PUSH_TIMEOUT_S = 3.0


class ReplyProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    def register(self, server: Any) -> None:
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            server.register(code, self.handle)

    async def handle(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        c = self.c
        if cmd.code == RequestCode.SEND_REPLY_MESSAGE_V2:
            h = SendMessageRequestHeaderV2.from_ext(cmd.ext_fields).to_v1()
        else:
            h = SendMessageRequestHeader.from_ext(cmd.ext_fields)
        prepared = c.send_processor.prepare(conn, cmd, h, False)
        if prepared.__class__ is RemotingCommand:
            return prepared
        msgs, queue_id = prepared
        msg = msgs[0]
        # Java stores the reply with the properties string as sent (no CLUSTER appended, WAIT kept).
        msg.properties_string = h.properties or ""
        push_ok, remark = await self._push(conn, h, msg.properties, cmd.body or b"")
        cfg = c.config
        # msgId/queueId/queueOffset stay absent unless the push succeeded or the store took the reply
        resp_hdr = SendMessageResponseHeader(None, None, None, None, cfg.region_id,  # type: ignore[arg-type]
                                             cfg.trace_on)
        if push_ok:
            code, remark_out = RC.SUCCESS, None
            resp_hdr.msg_id, resp_hdr.queue_id, resp_hdr.queue_offset = "0", queue_id, 0
        else:
            code, remark_out = RC.SYSTEM_ERROR, remark
        if cfg.store_reply_message_enable:
            res = await self._store(msg)
            if res is not None and res.status in STORED:
                c.stats.on_topic_put(msg.topic, res.msg_num, res.wrote_bytes)
                resp_hdr.msg_id, resp_hdr.queue_id, resp_hdr.queue_offset = res.msg_id, queue_id, res.queue_offset
            else:
                log.warning("reply to %s not stored: %s", msg.topic, res.status.name if res else "no result")
        return RemotingCommand(code, opaque=cmd.opaque, flag=1, remark=remark_out, ext_fields=resp_hdr.to_ext(),
                               serialize_type=cmd.serialize_type)

    async def _store(self, msg: Any) -> PutMessageResult | None:
        res = self.c.store.put_messages_nowait([msg])
        if res.__class__ is PutMessageResult:
            return res  # type: ignore[return-value]
        return await asyncio.wrap_future(res)  # type: ignore[arg-type]

    async def _push(self, conn: Any, h: SendMessageRequestHeader, props: dict[str, str],
                    body: bytes) -> tuple[bool, str]:
        sender = props.get(P.MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            log.warning("%s is null, can not reply message", P.MESSAGE_REPLY_TO_CLIENT)
            return False, f"reply message properties[{P.MESSAGE_REPLY_TO_CLIENT}] is null"
        target = self.c.producers.find_channel(sender)
        if target is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return False, remark
        now = int(time.time() * 1000)
        pushed = dict(props)
        pushed[P.PUSH_REPLY_TIME] = str(now)
        hdr = ReplyMessageRequestHeader(
            producer_group=h.producer_group, topic=h.topic, default_topic=h.default_topic,
            default_topic_queue_nums=h.default_topic_queue_nums, queue_id=h.queue_id, sys_flag=h.sys_flag,
            born_timestamp=h.born_timestamp, flag=h.flag, born_host=conn.remote_addr, store_host=self.c.address,
            store_timestamp=now, properties=encode_properties(pushed), reconsume_times=h.reconsume_times,
            unit_mode=h.unit_mode)
        req = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, hdr.to_ext(), body)
        try:
            resp = await self.c.call_client(target, req, PUSH_TIMEOUT_S)
        except MQError as exc:
            log.warning("push reply message to <%s> fail: %s", sender, exc)
            return False, f"push reply message to {sender}fail."
        if resp.code != RC.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender, resp.remark)
            return False, f"push reply message to {sender}fail."
        return True, ""
