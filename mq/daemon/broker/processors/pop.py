"""POP_MESSAGE (200050) and PEEK_MESSAGE (200052): RocketMQ 5 pop consumption over remoting.

POP_MESSAGE runs inline: it hands the request to ``controller.pop_service`` and answers in the same write when
the pop completes at once (ASYNC_FLUSH, or nothing found without long polling); a held or flush-waiting pop is
answered later with ``conn.send_response``. Every answer carries a ``PopMessageResponseHeader`` (the Java client
decodes it whatever the code)::

    FOUND                 SUCCESS; body = the records (a retried message re-encoded with its topic and POP_CK)
    NO_NEW_MSG            POLLING_TIMEOUT (210)    (nothing found, long polling over or not asked)
    POLLING_FULL          POLLING_FULL (209)
    TOPIC_NOT_EXIST       TOPIC_NOT_EXIST;  GROUP_NOT_EXIST  SUBSCRIPTION_GROUP_NOT_EXIST
    NO_PERMISSION         NO_PERMISSION;    INVALID_PARAMETER INVALID_PARAMETER (29)
    FILTER_ERROR          SUBSCRIPTION_PARSE_FAILED;  UNAVAILABLE  SERVICE_NOT_AVAILABLE

PEEK_MESSAGE reads up to maxMsgNums messages of one queue (or each queue in turn, queueId -1) from the group's
pop offset and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mq.daemon.broker.pop.contract import InitMode, PopRequest, PopResult, PopStatus
from mq.daemon.broker.topic_config import PERM_READ
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import PeekMessageRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader
from mq.store.status import GetMessageStatus

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

RC = ResponseCode
CODES = {
    PopStatus.FOUND: RC.SUCCESS,
    PopStatus.NO_NEW_MSG: RC.POLLING_TIMEOUT,
    PopStatus.POLLING_FULL: RC.POLLING_FULL,
    PopStatus.TOPIC_NOT_EXIST: RC.TOPIC_NOT_EXIST,
    PopStatus.GROUP_NOT_EXIST: RC.SUBSCRIPTION_GROUP_NOT_EXIST,
    PopStatus.NO_PERMISSION: RC.NO_PERMISSION,
    PopStatus.INVALID_PARAMETER: RC.INVALID_PARAMETER,
    PopStatus.FILTER_ERROR: RC.SUBSCRIPTION_PARSE_FAILED,
    PopStatus.UNAVAILABLE: RC.SERVICE_NOT_AVAILABLE,
}
#: Messages one PEEK_MESSAGE returns at most.
MAX_PEEK = 32


def pop_request(h: PopMessageRequestHeader, client_host: str) -> PopRequest:
    return PopRequest(group=h.consumer_group, topic=h.topic, queue_id=-1 if h.queue_id < 0 else h.queue_id,
                      max_messages=h.max_msg_nums, invisible_time_ms=h.invisible_time, poll_time_ms=h.poll_time,
                      init_mode=InitMode.MIN if h.init_mode == InitMode.MIN else InitMode.MAX,
                      expression_type=h.exp_type or "TAG", expression=h.exp or "*", order=bool(h.order),
                      attempt_id=h.attempt_id, client_host=client_host, born_time_ms=h.born_time)


def pop_response(cmd: RemotingCommand, res: PopResult) -> RemotingCommand:
    ext = PopMessageResponseHeader(res.pop_time, res.invisible_time, res.revive_qid, res.rest_num,
                                   res.start_offset_info, res.msg_offset_info,
                                   res.order_count_info or None).to_ext()
    code = CODES[res.status]
    if code == RC.SUCCESS:
        body = b"".join(m.record for m in res.messages)
        return cmd.response(code, GetMessageStatus.FOUND.name, ext, body)
    return cmd.response(code, res.remark or GetMessageStatus.NO_MESSAGE_IN_QUEUE.name, ext)


class PopProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    def register(self, server: Any) -> None:
        server.register(RequestCode.POP_MESSAGE, self.handle)
        server.register(RequestCode.PEEK_MESSAGE, self.peek)

    def handle(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        req = pop_request(PopMessageRequestHeader.from_ext(cmd.ext_fields), conn.remote_addr)
        answered: list[RemotingCommand] = []
        running = True

        def done(res: PopResult) -> None:
            resp = pop_response(cmd, res)
            if running:
                answered.append(resp)
            else:
                conn.send_response(resp)
        self.c.pop_service.pop_cb(req, done, conn)
        running = False
        return answered[0] if answered else None

    def peek(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = PeekMessageRequestHeader.from_ext(cmd.ext_fields)
        c = self.c
        tc = c.topic_config.get(h.topic)
        ext = PopMessageResponseHeader(0, 0, 0, 0).to_ext()
        if tc is None:
            return cmd.response(RC.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!", ext)
        if not tc.perm & PERM_READ or not c.config.broker_permission & PERM_READ:
            return cmd.response(RC.NO_PERMISSION, f"the topic[{h.topic}] peeking message is forbidden", ext)
        if h.queue_id >= tc.read_queue_nums or not 0 < h.max_msg_nums <= MAX_PEEK:
            return cmd.response(RC.INVALID_PARAMETER, f"queueId[{h.queue_id}] or maxMsgNums[{h.max_msg_nums}] is "
                                f"illegal, topic:[{h.topic}] readQueueNums:[{tc.read_queue_nums}]", ext)
        store = c.store
        queues = [h.queue_id] if h.queue_id >= 0 else list(range(tc.read_queue_nums))
        bufs: list[bytes] = []
        rest = 0
        for qid in queues:
            off = c.offsets.query(h.consumer_group, h.topic, qid)
            if off < 0:
                off = max(store.get_min_offset(h.topic, qid), 0)
            want = h.max_msg_nums - len(bufs)
            if want <= 0:
                rest += max(0, store.get_max_offset(h.topic, qid) - off)
                continue
            r = store.get_message(h.consumer_group, h.topic, qid, off, want)
            bufs += r.buffers
            rest += max(0, r.max_offset - r.next_begin_offset)
        ext = PopMessageResponseHeader(0, 0, 0, rest).to_ext()
        if not bufs:
            return cmd.response(RC.POLLING_TIMEOUT, GetMessageStatus.NO_MESSAGE_IN_QUEUE.name, ext)
        return cmd.response(RC.SUCCESS, GetMessageStatus.FOUND.name, ext, b"".join(bufs))
