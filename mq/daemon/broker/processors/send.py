"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320): PROTOCOL.md §4.1.1-4.1.2, FEATURES.md §1.5.

Checks, in RocketMQ's order: broker write permission; topic name (SYSTEM_ERROR); forbidden system topics
(NO_PERMISSION); unknown topic -> auto-create from ``defaultTopic`` (TBW102) when it has the INHERIT bit, or
``%RETRY%`` topics with one queue, else TOPIC_NOT_EXIST; queue id range (SYSTEM_ERROR; negative picks a random
writable queue); topic write permission. ``%RETRY%<group>`` sends are routed to ``%DLQ%<group>`` once
``reconsumeTimes >= maxReconsumeTimes`` (``handleRetryAndDLQ``); ``TRAN_MSG=true`` messages are stored as half
messages in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC/REAL_QID; DELAY is handled by the store.

sysFlag: only the bits a producer chooses are kept (``sysflag.sent_sys_flag``: compression, tag filter type);
the store sets the layout bits (host address families) from what it writes, and TRAN_MSG, not the flag, makes a
half message. RocketMQ takes the flag as sent, so a client could describe a layout the record does not have.

Properties: the string is stored as sent, except that ``WAIT`` is cut out and ``CLUSTER=<cluster>`` appended
(what a 4.9.4 broker stores); it is parsed once into a dict for the store's own needs.

Batches: the ``m`` flag (``true`` or the C++ client's ``1``: our choice, so C++ batches work) or code 320.

The put never blocks the event loop: ``put_messages_nowait`` appends at once; under ASYNC_FLUSH it returns the
result and the response is written in the same step; under SYNC_FLUSH the store calls back from its flush
thread when the group commit returns and the response is sent through ``LoopPoster`` (one loop wake-up per
burst), so the worker is free for the next send. Past ``maxPendingFlushAcks`` such sends the worker awaits the
flush instead (backpressure).

SYNC_MASTER (STORE.md §13.5): a send whose ``WAIT`` property is not ``false`` is answered only after the put
(and its flush) and then ``controller.ha.wait_replicated(end offset, slaveTimeout)``: SUCCESS once a slave
acked it, FLUSH_SLAVE_TIMEOUT (12) or SLAVE_NOT_AVAILABLE (11) otherwise, both still "stored" (msgId and queue
offset in the header). The wait runs in a task (counted in the flush-ack backlog); other roles pay one
attribute check. A SLAVE refuses sends with SERVICE_NOT_AVAILABLE before touching its topic table.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common import topic as T
from mq.common.hosts import pack_host
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import decode_properties, encode_properties, splice_properties
from mq.common.record import iter_batch
from mq.daemon.broker.flow_control import SEND_GROUP, os_page_cache_busy
from mq.daemon.broker.processors.put_status import STATUS_CODES, put_status_response
from mq.daemon.broker.topic_config import PERM_WRITE, TopicConfigNotSaved
from mq.daemon.broker.timer.service import TimerMessageService
from mq.errors import InvalidTopicError, RemoteProtocolError
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol import remarks
from mq.protocol.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from mq.remoting import DEFER, TIMEOUT_CLEAN_PREFIX, RejectRequest, request_context
from mq.store.status import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

RC = ResponseCode
_S = PutMessageStatus
_V2_CODE = RequestCode.SEND_MESSAGE_V2
#: C++ clients (version >= V3_4_9 = 121) may override the group's retryMaxTimes.
VERSION_MAX_RECONSUME_OVERRIDE = 121


def born_host_of(conn: Any) -> bytes:
    """The packed BORNHOST of a connection's peer (cached on the connection)."""
    b = conn.attrs.get("born_host")
    if b is None:
        host, _, port = conn.remote_addr.rpartition(":")
        try:
            b = pack_host(host.strip("[]"), int(port))
        except ValueError:
            b = pack_host("127.0.0.1", 0)
        conn.attrs["born_host"] = b
    return b


def _ignore(_res: PutMessageResult) -> None:
    """Completion of a oneway send under SYNC_FLUSH: nobody waits for it."""


class _Wait:
    """The store accepted the put but the answer must wait for its flush (backpressure)."""

    __slots__ = ("fut", "queue_id")

    def __init__(self, fut: Any, queue_id: int) -> None:
        self.fut = fut
        self.queue_id = queue_id


class _Replicate:
    """SYNC_MASTER with a full backlog: the caller awaits the replication wait itself."""

    __slots__ = ("res", "queue_id")

    def __init__(self, res: Any, queue_id: int) -> None:
        self.res = res
        self.queue_id = queue_id


class SendProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        cfg = controller.config
        self.cluster_pair = P.CLUSTER + P.NAME_VALUE_SEPARATOR + cfg.broker_cluster_name
        self.region = cfg.region_id
        self.trace_on = cfg.trace_on
        self.wait_limit_s = cfg.wait_time_mills_in_send_queue / 1000.0
        self.fast_failure = cfg.broker_fast_failure_enable
        self.max_pending = cfg.max_pending_flush_acks
        self.pending_acks = 0
        role = controller.store_config.broker_role.upper()
        #: SYNC_MASTER: answers wait for a slave's ack (``_replicated``)
        self.sync_master = role == "SYNC_MASTER"
        self.slave = role == "SLAVE"
        self._replica_tasks: set[asyncio.Task] = set()
        #: topic names that passed validate_topic and are not forbidden system topics
        self._sendable: set[str] = set()
        #: SendMessageResponseHeader's TRACE_ON as it is written (``_response``)
        self.trace_on_text = "true" if self.trace_on else "false"
        #: ``_send_direct`` applies: the put's result is the answer (ASYNC_FLUSH) and no slave is waited for
        self._direct = not self.sync_master and not self.slave and controller.store.acks_on_append

    @property
    def replica_timeout(self) -> float:
        """SYNC_MASTER: seconds a send waits for a slave's ack (slaveTimeout, changeable at run time)."""
        return max(0.001, self.c.store_config.slave_timeout / 1000.0)

    def register(self, server: Any) -> None:
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            server.register(code, self.handle, group=SEND_GROUP, inline=self.handle_inline)

    def handle_inline(self, conn: Any, cmd: RemotingCommand) -> Any:
        """The fast path, run in the read that delivered the request while the send group is idle: no task,
        and under ASYNC_FLUSH the answer leaves with the same write. Defers to the group (``handle``) only
        when the flush-ack backlog is full, where the send must wait."""
        if self.pending_acks >= self.max_pending:
            return DEFER
        if self._direct and cmd.code == _V2_CODE and not cmd.flag & 2:
            resp = self._send_direct(conn, cmd)
            if resp is not None:
                return resp
        return self._handle(conn, cmd)

    def _send_direct(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        """The common send, checked and stored in one frame (0.4-1.6 µs less of the loop's 10-14 per send,
        in-process) and answered by ``_response`` like every stored send: SEND_MESSAGE_V2 on an ASYNC_FLUSH
        master, one message to a topic that passed ``_prepare``'s name checks before, by queue id, with write
        permission; no retry topic, transaction or timer property. Anything else returns None before the store
        is touched, and ``_handle`` takes the send with every check. The checks made here are ``_prepare``'s
        and answer the same way."""
        c = self.c
        store = c.store
        if self.fast_failure and os_page_cache_busy(store):
            return None
        h = SendMessageRequestHeaderV2.from_ext(cmd.ext_fields)
        topic = h.topic
        if h.batch or topic not in self._sendable or topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX):
            return None
        tc = c.topic_config.get(topic)
        queue_id = h.queue_id
        if (tc is None or not tc.perm & PERM_WRITE or not c.config.broker_permission & PERM_WRITE
                or not 0 <= queue_id < max(tc.read_queue_nums, tc.write_queue_nums)):
            return None
        props_s = h.properties
        props = decode_properties(props_s)
        timer = c.timer_service
        if props.get(P.TRANSACTION_PREPARED) == "true" or (timer is not None and timer.wants(props)):
            return None
        born = conn.attrs.get("born_host") or born_host_of(conn)
        msg = MessageExtBrokerInner(topic=topic, body=cmd.body or b"", flag=h.flag, properties=props,
                                    queue_id=queue_id, sys_flag=h.sys_flag & SF.SENT_BITS,
                                    born_timestamp=h.born_timestamp, born_host=born,
                                    reconsume_times=h.reconsume_times or 0,
                                    properties_string=splice_properties(props_s, P.WAIT_STORE_MSG_OK,
                                                                        self.cluster_pair))
        return self._response(cmd, store.put_message(msg), queue_id)

    async def handle(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        if self.fast_failure:
            ctx = request_context()
            if ctx is not None and ctx.queue_wait > self.wait_limit_s:
                return cmd.response(RC.SYSTEM_BUSY, f"{TIMEOUT_CLEAN_PREFIX}broker busy, start flow control for a "
                                    f"while, period in queue: {ctx.queue_wait * 1000:.0f}ms, size of queue: "
                                    f"{self.c.server.registry.group(SEND_GROUP).queued}")
        resp = self._handle(conn, cmd)
        if resp.__class__ is _Wait:
            res = await asyncio.wrap_future(resp.fut)
            return self._response(cmd, res, resp.queue_id)
        if resp.__class__ is _Replicate:
            return await self._replicate(cmd, resp.res, resp.queue_id)
        return resp

    def _handle(self, conn: Any, cmd: RemotingCommand) -> Any:
        """Check, store and answer one send; returns the response, None (answered later or oneway), or a
        ``_Wait`` when the flush-ack backlog is full and the caller must await the flush."""
        if self.fast_failure and os_page_cache_busy(self.c.store):
            raise RejectRequest("system busy, start flow control for a while")
        if cmd.code == RequestCode.SEND_MESSAGE:
            h = SendMessageRequestHeader.from_ext(cmd.ext_fields)
        else:
            h = SendMessageRequestHeaderV2.from_ext(cmd.ext_fields)
        batch = h.batch or cmd.code == RequestCode.SEND_BATCH_MESSAGE
        prepared = self.prepare(conn, cmd, h, batch)
        if prepared.__class__ is RemotingCommand:
            return prepared
        msgs, queue_id = prepared  # type: ignore[misc]
        if self.sync_master:
            return self._replicated(conn, cmd, h, msgs, queue_id)
        store = self.c.store
        # put_messages_nowait: the result itself when the answer is known now (ASYNC_FLUSH), else the store
        # calls back from its flush thread when the group commit covering the put completes (no Future).
        if cmd.flag & 2:  # oneway: nobody waits for the answer
            res = store.put_messages_nowait(msgs, _ignore)
            return self._response(cmd, res, queue_id) if res is not None else None
        if store.acks_on_append:  # ASYNC_FLUSH: the put's result is the answer, nothing waits for a flush
            return self._response(cmd, store.put_message(msgs[0]) if len(msgs) == 1 else store.put_messages(msgs),
                                  queue_id)
        if self.pending_acks < self.max_pending:
            poster = self.c.poster
            res = store.put_messages_nowait(
                msgs, lambda r: poster.post(self._late_reply, conn, cmd, r, queue_id))
            if res is None:
                self.pending_acks += 1  # the reply is posted to this (the loop) thread: it runs after this
                return None
            return self._response(cmd, res, queue_id)
        res = store.put_messages_nowait(msgs)
        if res.__class__ is PutMessageResult:
            return self._response(cmd, res, queue_id)
        return _Wait(res, queue_id)

    # -- SYNC_MASTER ---------------------------------------------------------------------------------------
    def _replicated(self, conn: Any, cmd: RemotingCommand, h: Any, msgs: list, queue_id: int) -> Any:
        """Put, then wait for a slave (SYNC_MASTER) in a task that answers; ``_Replicate`` when the backlog is
        full and the caller must await it; the plain answer when the put failed or nobody waits."""
        res = self.c.store.put_messages_nowait(msgs)
        oneway = cmd.flag & 2
        if oneway or decode_properties(h.properties).get(P.WAIT_STORE_MSG_OK) == "false":
            if res.__class__ is PutMessageResult:
                return None if oneway else self._response(cmd, res, queue_id)
            return None if oneway else _Wait(res, queue_id)
        if res.__class__ is PutMessageResult and not res.status.stored:
            return self._response(cmd, res, queue_id)
        if self.pending_acks >= self.max_pending:
            return _Replicate(res, queue_id)
        self.pending_acks += 1
        task = asyncio.get_running_loop().create_task(self._replicate_and_reply(conn, cmd, res, queue_id))
        self._replica_tasks.add(task)
        task.add_done_callback(self._replica_tasks.discard)
        return None

    async def _replicate(self, cmd: RemotingCommand, res: Any, queue_id: int) -> RemotingCommand:
        if res.__class__ is not PutMessageResult:
            res = await asyncio.wrap_future(res)
        if res.status is _S.PUT_OK or res.status is _S.FLUSH_DISK_TIMEOUT:
            st = await self.c.ha.wait_replicated(res.wrote_offset + res.wrote_bytes, self.replica_timeout)
            if st is not _S.PUT_OK:
                res.status = st
        return self._response(cmd, res, queue_id)

    async def _replicate_and_reply(self, conn: Any, cmd: RemotingCommand, res: Any, queue_id: int) -> None:
        try:
            resp = await self._replicate(cmd, res, queue_id)
        except Exception as exc:
            log.exception("SYNC_MASTER send completion failed")
            resp = cmd.response(RC.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            self.pending_acks -= 1
        conn.send_response(resp)

    def _late_reply(self, conn: Any, cmd: RemotingCommand, res: PutMessageResult, queue_id: int) -> None:
        self.pending_acks -= 1
        try:
            resp = self._response(cmd, res, queue_id)
        except Exception as exc:  # pragma: no cover - the store resolves futures with results
            log.exception("send completion failed")
            resp = cmd.response(RC.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        conn.send_response(resp)

    def _response(self, cmd: RemotingCommand, res: PutMessageResult, queue_id: int) -> RemotingCommand:
        code = STATUS_CODES.get(res.status)
        if code is None:
            return put_status_response(cmd, res, self.c.store.config)  # type: ignore[return-value]
        # counted under the topic stored (the half topic, the schedule topic or a DLQ), as Java does
        self.c.stats.on_topic_put(res.topic or cmd.ext_fields.get("b") or cmd.ext_fields.get("topic"),
                                  res.msg_num, res.wrote_bytes)
        # SendMessageResponseHeader(msg_id, queue_id, queue_offset, None, region, trace_on).to_ext(), written
        # out: this runs for every stored send
        ext = {"msgId": res.msg_id, "queueId": str(queue_id), "queueOffset": str(res.queue_offset)}
        if self.region is not None:
            ext["MSG_REGION"] = self.region
        ext["TRACE_ON"] = self.trace_on_text
        return RemotingCommand(code, opaque=cmd.opaque, flag=1, ext_fields=ext,
                               serialize_type=cmd.serialize_type)

    # -- checks ------------------------------------------------------------------------------------------
    def prepare(self, conn: Any, cmd: RemotingCommand, h: Any, batch: bool, props: dict[str, str] | None = None):
        """Check one send and build its store inputs: ``(messages, queue id)``, or the error response.

        ``props``: the properties of ``h.properties`` already as a dict, when the caller has them (the gRPC
        endpoint builds the string from one): they are not decoded again, and the dict becomes the stored
        message's (it may be changed)."""
        try:
            return self._prepare(conn, cmd, h, batch, props)
        except TopicConfigNotSaved as exc:  # a topic the message needs cannot be made durable: nothing is stored
            return cmd.response(RC.SERVICE_NOT_AVAILABLE, f"service not available now: {exc}")

    def _prepare(self, conn: Any, cmd: RemotingCommand, h: Any, batch: bool, props: dict[str, str] | None = None):
        c = self.c
        topic = h.topic
        if self.slave:
            return cmd.response(RC.SERVICE_NOT_AVAILABLE,
                                f"service not available now: the broker[{c.address}] is a SLAVE of "
                                f"{c.broker_name}; messages are sent to its master (brokerId 0)")
        if not c.config.broker_permission & PERM_WRITE:
            return cmd.response(RC.NO_PERMISSION,
                                f"the broker[{c.config.advertised_host}] sending message is forbidden")
        if topic not in self._sendable:  # checked once per topic name
            try:
                T.validate_topic(topic)
            except InvalidTopicError as exc:
                return cmd.response(RC.SYSTEM_ERROR, str(exc))
            if T.is_not_allowed_send_topic(topic):
                return cmd.response(RC.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
            if len(self._sendable) < 100_000:
                self._sendable.add(topic)
        tcm = c.topic_config
        tc = tcm.get(topic)
        if tc is None:
            if T.is_retry_topic(topic):
                tc = tcm.create_system(topic, 1, 6)
            else:
                tc = tcm.create_in_send(topic, h.default_topic, h.default_topic_queue_nums,
                                        getattr(h, "topic_sys_flag", 0) or 0)
            if tc is None:
                return cmd.response(RC.TOPIC_NOT_EXIST, remarks.topic_not_exist(topic))
        queue_id = h.queue_id
        limit = max(tc.read_queue_nums, tc.write_queue_nums)
        if queue_id >= limit:
            return cmd.response(RC.SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, "
                                f"{remarks.topic_config_string(tc)} Producer: {conn.remote_addr}")
        if queue_id < 0:
            queue_id = random.randrange(99_999_999) % max(1, tc.write_queue_nums)
        if not tc.perm & PERM_WRITE:
            return cmd.response(RC.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        body = cmd.body or b""
        born = born_host_of(conn)
        reconsume = h.reconsume_times or 0
        if batch:
            return self._batch(cmd, h, topic, queue_id, body, born, reconsume)
        props_s = h.properties
        if props is None:
            props = decode_properties(props_s)
        sys_flag = SF.sent_sys_flag(h.sys_flag)  # the broker decides the layout bits and the transaction type
        if T.is_retry_topic(topic):
            routed = self._retry_or_dlq(cmd, h, topic, reconsume)
            if routed.__class__ is RemotingCommand:
                return routed
            if routed is not None:
                topic, queue_id = routed  # type: ignore[misc]
                if P.DELAY_TIME_LEVEL in props:
                    del props[P.DELAY_TIME_LEVEL]
                    props_s = encode_properties(props)
        stored_s = splice_properties(props_s, P.WAIT_STORE_MSG_OK, self.cluster_pair)
        if props.get(P.TRANSACTION_PREPARED) == "true":
            if c.config.reject_transaction_message:
                return cmd.response(RC.NO_PERMISSION,
                                    f"the broker[{c.address}] sending transaction message is forbidden")
            stored_s, topic, queue_id, sys_flag = self._half(stored_s, props, topic, queue_id, sys_flag)
        msg = MessageExtBrokerInner(topic=topic, body=body, flag=h.flag, properties=props, queue_id=queue_id,
                                    sys_flag=sys_flag, born_timestamp=h.born_timestamp, born_host=born,
                                    reconsume_times=reconsume, properties_string=stored_s)
        # arbitrary-delay hook (mq/daemon/broker/timer): park a future deliver time in the timer
        timer = c.timer_service
        if timer is not None and topic != T.TRANS_HALF_TOPIC and timer.wants(props):
            err = timer.intercept(msg)
            if err is not None:
                return cmd.response(RC.MESSAGE_ILLEGAL, err)
        return [msg], queue_id

    def _batch(self, cmd: RemotingCommand, h: Any, topic: str, queue_id: int, body: bytes, born: bytes,
               reconsume: int):
        if T.is_retry_topic(topic):
            return cmd.response(RC.MESSAGE_ILLEGAL, f"Retry group topic[{topic}] does not support batch message")
        max_size = self.c.store.config.max_message_size
        if len(body) > max_size:  # RocketMQ checks the whole batch body against maxMessageSize (checkMessages)
            return put_status_response(cmd, PutMessageResult(_S.MESSAGE_ILLEGAL, remark=f"the batch body of "
                                       f"{len(body)} bytes is over maxMessageSize"), self.c.store.config)
        try:
            entries = list(iter_batch(body))
        except RemoteProtocolError as exc:
            return cmd.response(RC.MESSAGE_ILLEGAL, f"the batch body is malformed: {exc}")
        if not entries:
            return cmd.response(RC.MESSAGE_ILLEGAL, "the batch holds no message")
        pair = self.cluster_pair
        sys_flag = SF.sent_sys_flag(h.sys_flag)
        msgs = []
        for flag, mbody, props_s in entries:
            props = decode_properties(props_s)
            if props.get(P.DELAY_TIME_LEVEL, "0") not in ("", "0"):
                return cmd.response(RC.MESSAGE_ILLEGAL, "Delay message is not supported in a batch")
            if TimerMessageService.wants(props):  # a batch is stored as it is: never deliver a timed message early
                return cmd.response(RC.MESSAGE_ILLEGAL, "Timed delivery (__STARTDELIVERTIME, TIMER_DELIVER_MS, "
                                    "TIMER_DELAY_SEC) is not supported in a batch; send those messages singly")
            msgs.append(MessageExtBrokerInner(
                topic=topic, body=mbody, flag=flag, properties=props, queue_id=queue_id, sys_flag=sys_flag,
                born_timestamp=h.born_timestamp, born_host=born, reconsume_times=reconsume,
                properties_string=splice_properties(props_s, P.WAIT_STORE_MSG_OK, pair)))
        return msgs, queue_id

    def _retry_or_dlq(self, cmd: RemotingCommand, h: Any, topic: str, reconsume: int):
        c = self.c
        group = topic[len(T.RETRY_GROUP_TOPIC_PREFIX):]
        sgc = c.subscription_groups.find_or_create(group)
        if sgc is None:
            return cmd.response(RC.SUBSCRIPTION_GROUP_NOT_EXIST, remarks.subscription_group_not_exist(group))
        max_times = sgc.retry_max_times
        if cmd.version >= VERSION_MAX_RECONSUME_OVERRIDE and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        if reconsume < max_times:
            return None
        dlq = T.dlq_topic(group)
        tc = c.topic_config.create_system(dlq, 1, 6)
        if not tc.perm & PERM_WRITE:
            return cmd.response(RC.NO_PERMISSION, f"the topic[{dlq}] sending message is forbidden")
        log.info("message to %s reached %d reconsume times: stored in %s", topic, reconsume, dlq)
        return dlq, 0

    def _half(self, stored_s: str, props: dict, topic: str, queue_id: int, sys_flag: int):
        tc = self.c.topic_config.create_system(T.TRANS_HALF_TOPIC, 1, 6)
        props[P.REAL_TOPIC] = topic
        props[P.REAL_QUEUE_ID] = str(queue_id)
        stored_s = (f"{stored_s}{P.PROPERTY_SEPARATOR}{P.REAL_TOPIC}{P.NAME_VALUE_SEPARATOR}{topic}"
                    f"{P.PROPERTY_SEPARATOR}{P.REAL_QUEUE_ID}{P.NAME_VALUE_SEPARATOR}{queue_id}")
        return stored_s, tc.topic_name, 0, SF.reset_transaction_type(sys_flag, SF.TRANSACTION_NOT_TYPE)
