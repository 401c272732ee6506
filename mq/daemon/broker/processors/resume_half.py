"""RESUME_CHECK_HALF_MESSAGE (323): an operator restarts the transaction checks of one half message
(RocketMQ ``AdminBrokerProcessor.resumeCheckHalfMessage``, ``MQAdminExt.resumeCheckHalfMessage``).

The check service gives up on a half message after ``transactionCheckMax`` checks (or once it is older than
``fileReservedTime``) and moves it to TRANS_CHECK_MAX_TIME_TOPIC. Given the offsetMsgId of that copy, or of the
half message itself, the broker appends it to RMQ_SYS_TRANS_HALF_TOPIC queue 0 again with
``TRANSACTION_CHECK_TIMES=0`` (body, flag, properties, sysflag, born host and time kept), so the next check pass
asks its producer group about it once more.

Stricter than Java, which re-puts whatever record the id points at: the record must be a half message (in the
half topic or in TRANS_CHECK_MAX_TIME_TOPIC, with REAL_TOPIC), so a mistyped id cannot turn an ordinary message
into a half message. Every refusal is SYSTEM_ERROR with a remark that says why.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mq.common import properties as P
from mq.common import topic as T
from mq.common.msg_id import decode_offset_msg_id
from mq.daemon.broker.requeue import STORED, load, put_async, rebuild
from mq.daemon.broker.schedule import is_master
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import ResumeCheckHalfMessageRequestHeader

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

RC = ResponseCode
HALF_QUEUE = 0
_RESUMABLE = (T.TRANS_HALF_TOPIC, T.TRANS_CHECK_MAX_TIME_TOPIC)


class ResumeHalfProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.resumed = 0

    def register(self, server: Any) -> None:
        server.register(RequestCode.RESUME_CHECK_HALF_MESSAGE, self.handle, group="admin")

    async def handle(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        c = self.c
        if not is_master(c):
            return cmd.response(RC.SYSTEM_ERROR, f"the broker[{c.address}] is a slave: resume the check of a half "
                                "message on its master")
        msg_id = (ResumeCheckHalfMessageRequestHeader.from_ext(cmd.ext_fields).msg_id or "").strip()
        try:
            _store, phy = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            return cmd.response(RC.SYSTEM_ERROR, f"resume check of half message: {exc} (give its offsetMsgId)")
        msg = load(c.store, phy)
        if msg is None:
            return cmd.response(RC.SYSTEM_ERROR, f"no message at commit-log offset {phy} of this broker ({msg_id})")
        if msg.topic not in _RESUMABLE or not msg.properties.get(P.REAL_TOPIC):
            return cmd.response(RC.SYSTEM_ERROR, f"message {msg_id} is in topic {msg.topic}, not a half message: only "
                                f"messages of {T.TRANS_HALF_TOPIC} or {T.TRANS_CHECK_MAX_TIME_TOPIC} can be resumed")
        props = dict(msg.properties)
        props[P.TRANSACTION_CHECK_TIMES] = "0"
        props.pop(P.WAIT_STORE_MSG_OK, None)
        c.topic_config.create_system(T.TRANS_HALF_TOPIC, 1, 6)
        res = await put_async(c.store, rebuild(msg, T.TRANS_HALF_TOPIC, HALF_QUEUE, props))
        if res.status not in STORED:
            log.error("half message %s not put back to %s: %s", msg_id, T.TRANS_HALF_TOPIC, res.status.name)
            return cmd.response(RC.SYSTEM_ERROR, f"Put message back to {T.TRANS_HALF_TOPIC} failed: "
                                f"{res.status.name} {res.remark or ''}".rstrip())
        self.resumed += 1
        log.info("half message %s (transaction %s, real topic %s) put back to %s by %s: checks start again",
                 msg_id, props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), props.get(P.REAL_TOPIC), T.TRANS_HALF_TOPIC,
                 getattr(conn, "remote_addr", conn))
        return cmd.response(RC.SUCCESS)
