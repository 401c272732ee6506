"""ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and CHANGE_MESSAGE_INVISIBLETIME (200053): RocketMQ 5's
acks of popped messages over remoting, answered through ``controller.pop_service`` (inline when stored at once).

- ACK_MESSAGE: ``AckMessageRequestHeader`` (topic = the message's real topic, extraInfo = its POP_CK, offset =
  its queue offset). SUCCESS; an expired or foreign handle NO_MESSAGE (the Java client reads any other code as
  "not acked"); TOPIC_NOT_EXIST; SYSTEM_ERROR when the ack could not be stored.
- BATCH_ACK_MESSAGE: a ``BatchAckMessageRequestBody`` (one entry per checkpoint: its fields and a bit set of the
  acked offsets); SUCCESS unless one could not be stored (SYSTEM_ERROR); no entries: NO_MESSAGE; more than
  ``MAX_BATCH_ACK`` messages: INVALID_PARAMETER.
- CHANGE_MESSAGE_INVISIBLETIME: answers ``ChangeInvisibleTimeResponseHeader`` (the new pop time, invisible time
  and revive queue, from which the client builds the new handle) with every code, zeros when refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from mq.daemon.broker.pop.contract import AckResult, AckStatus, ChangeInvisibleResult
from mq.protocol import extra_info as X
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import (AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader,
                                 ChangeInvisibleTimeResponseHeader)
from mq.protocol.pop_bodies import BatchAckMessageRequestBody

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

RC = ResponseCode
#: Messages one BATCH_ACK_MESSAGE may ack (a client acks a few pops' worth at a time).
MAX_BATCH_ACK = 4096
CODES = {
    AckStatus.OK: RC.SUCCESS,
    AckStatus.EXPIRED: RC.NO_MESSAGE,
    AckStatus.INVALID: RC.NO_MESSAGE,
    AckStatus.TOPIC_NOT_EXIST: RC.TOPIC_NOT_EXIST,
    AckStatus.UNAVAILABLE: RC.SYSTEM_ERROR,
}


def _answer(conn: Any, cmd: RemotingCommand, start: Callable[[Callable[[RemotingCommand], None]], None]
            ) -> RemotingCommand | None:
    """Run ``start(reply)``; the reply is returned when it came at once, else sent when it comes."""
    answered: list[RemotingCommand] = []
    running = True

    def reply(resp: RemotingCommand) -> None:
        if running:
            answered.append(resp)
        else:
            conn.send_response(resp)
    start(reply)
    running = False
    return answered[0] if answered else None


class AckProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    def register(self, server: Any) -> None:
        server.register(RequestCode.ACK_MESSAGE, self.ack)
        server.register(RequestCode.BATCH_ACK_MESSAGE, self.batch_ack)
        server.register(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible_time)

    def ack(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        h = AckMessageRequestHeader.from_ext(cmd.ext_fields)

        def start(reply: Callable[[RemotingCommand], None]) -> None:
            def done(results: list[AckResult]) -> None:
                r = results[0]
                reply(cmd.response(CODES[r.status], r.remark or None))
            self.c.pop_service.acks.ack_cb(h.consumer_group, h.topic, [h.extra_info], [h.offset], done,
                                           [h.queue_id])
        return _answer(conn, cmd, start)

    def batch_ack(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        body = BatchAckMessageRequestBody.from_json(cmd.body) if cmd.body else BatchAckMessageRequestBody()
        if not body.acks:
            return cmd.response(RC.NO_MESSAGE, "no acks in the request")
        broker = body.broker_name or self.c.broker_name
        jobs = []
        total = 0
        for ba in body.acks:
            offsets = ba.offsets()
            total += len(offsets)
            if total > MAX_BATCH_ACK:
                return cmd.response(RC.INVALID_PARAMETER, f"a batch ack acks at most {MAX_BATCH_ACK} messages")
            if not offsets:
                continue
            handles = [X.build(ba.start_offset, ba.pop_time, ba.invisible_time, ba.revive_queue_id, ba.retry, broker,
                               ba.queue_id, off) for off in offsets]
            jobs.append((ba.consumer_group, ba.topic, handles, offsets))
        if not jobs:
            return cmd.response(RC.NO_MESSAGE, "no acked offsets in the request")

        def start(reply: Callable[[RemotingCommand], None]) -> None:
            left = [len(jobs)]
            failed: list[str] = []

            def done(results: list[AckResult]) -> None:
                failed.extend(r.remark for r in results if r.status is AckStatus.UNAVAILABLE)
                left[0] -= 1
                if not left[0]:
                    reply(cmd.response(RC.SYSTEM_ERROR, failed[0]) if failed else cmd.response(RC.SUCCESS))
            for group, topic, handles, offsets in jobs:
                self.c.pop_service.acks.ack_cb(group, topic, handles, offsets, done)
        return _answer(conn, cmd, start)

    def change_invisible_time(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        h = ChangeInvisibleTimeRequestHeader.from_ext(cmd.ext_fields)

        def start(reply: Callable[[RemotingCommand], None]) -> None:
            def done(r: ChangeInvisibleResult) -> None:
                ext = ChangeInvisibleTimeResponseHeader(r.pop_time, r.invisible_time, r.revive_qid).to_ext()
                reply(cmd.response(CODES[r.status], r.remark or None, ext))
            self.c.pop_service.acks.change_cb(h.consumer_group, h.topic, h.extra_info, h.invisible_time, h.offset,
                                              done, h.queue_id)
        return _answer(conn, cmd, start)
