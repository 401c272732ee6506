"""SendMessage, EndTransaction and RecallMessage on the broker's own send path.

SendMessage: each message is validated and mapped (``convert.to_stored``), then goes through the send
processor's ``prepare`` -- the same checks, topic auto-creation, half-message rewrite for TRANSACTION and timer
interception for DELAY as a remoting send -- with a typed header built here (no RemotingCommand is encoded),
and is put into the store. Under ASYNC_FLUSH the put answers at once; under SYNC_FLUSH (and SYNC_MASTER's
replication) the handler awaits the flush. The queue: ``consistentHash(messageGroup.hashCode(), writeQueues)``
for a FIFO message (what Apache's proxy computes, so one message group keeps one queue), else one chosen at
random among the writable ones.

The entry's ``message_id`` is the client's id (UNIQ_KEY). A TRANSACTION message's ``transaction_id`` names
the half message (``<id> <half queue offset> <half commit-log offset>``), so EndTransaction needs no
server-side table and survives a broker restart. A DELAY message's ``recall_handle`` is RocketMQ 5.3's
(base64url of ``v1 <topic> <broker> <deliver ms> <id>``); RecallMessage hands it to the timer, which drops
the message when its time comes.

A message whose type does not match its topic's ``+message.type`` (when the topic has one) is refused with
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from mq.common import sysflag as SF
from mq.common import topic as T
from mq.common.properties import encode_properties
from mq.common.tags import java_hash_code
from mq.daemon.proxy.convert import consistent_hash, to_stored, wrap_namespace
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.route import MESSAGE_TYPE_ATTRIBUTE, topic_attribute
from mq.daemon.proxy.sessions import decode_transaction_id, encode_transaction_id
from mq.daemon.proxy.status import OK_STATUS, ProxyError, error_from_response, status
from mq.errors import InvalidTopicError
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import EndTransactionRequestHeader, SendMessageRequestHeaderV2
from mq.store.status import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from mq.daemon.proxy.server import GrpcEndpoint
    from mq.config import StoreConfig

log = logging.getLogger(__name__)

Code = pb.Code
MessageType = pb.MessageType
_S = PutMessageStatus
_PUT_CODES = {_S.PUT_OK: Code.OK, _S.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
              _S.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT, _S.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE}
_TYPE_NAMES = {"NORMAL": MessageType.NORMAL, "FIFO": MessageType.FIFO, "DELAY": MessageType.DELAY,
               "TRANSACTION": MessageType.TRANSACTION}


def recall_handle(topic: str, broker_name: str, deliver_ms: int, message_id: str) -> str:
    raw = " ".join(("v1", topic, broker_name, str(deliver_ms), message_id))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def parse_recall_handle(handle: str) -> tuple[str, str, int, str]:
    """(topic, broker name, deliver ms, message id); raises ILLEGAL... BAD_REQUEST when malformed."""
    try:
        raw = base64.urlsafe_b64decode(handle.encode() + b"=" * (-len(handle) % 4)).decode()
        parts = raw.split(" ")
        if parts[0] == "v1" and len(parts) >= 5:
            return parts[1], parts[2], int(parts[3]), parts[4]
    except (binascii.Error, UnicodeDecodeError, ValueError, IndexError):
        pass
    raise ProxyError(Code.BAD_REQUEST, "recall handle is invalid")


class ProducerService:
    def __init__(self, endpoint: "GrpcEndpoint") -> None:
        self.e = endpoint
        self.c = endpoint.c

    # -- SendMessage -----------------------------------------------------------------------------------------
    async def send_message(self, req: Any, ctx: Any) -> Any:
        msgs = req.messages
        if not msgs:
            raise ProxyError(Code.BAD_REQUEST, "no message to send")
        session = self.e.sessions.session(ctx)
        entries = []
        codes = set()
        for m in msgs:
            try:
                entry = await self._send_one(m, ctx, session)
            except ProxyError as exc:
                entry = pb.SendResultEntry(status=exc.status())
            entries.append(entry)
            codes.add(entry.status.code)
        if len(codes) == 1:
            code = codes.pop()
            st = OK_STATUS if code == Code.OK else entries[0].status
        else:
            st = status(Code.MULTIPLE_RESULTS)
        return pb.SendMessageResponse(status=st, entries=entries)

    async def _send_one(self, m: Any, ctx: Any, session: Any) -> Any:
        c = self.c
        try:
            T.validate_topic(m.topic.name)
        except InvalidTopicError as exc:
            raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from None
        topic = wrap_namespace(m.topic.resource_namespace, m.topic.name)
        if self.e.acl is not None:
            self.e.authorize(ctx, {topic: "PUB"})
        now = int(time.time() * 1000)
        timer = c.timer_service
        max_delay = c.config.timer_max_delay_sec * 1000 if timer is not None else 0
        out = to_stored(m, producer_group=topic, peer_host=ctx.peer_host, max_body=c.store_config.max_message_size,
                        max_delay_ms=max_delay, now_ms=now)
        tc = c.topic_config.get(topic)
        self._check_type(tc, out.message_type, topic)
        queue_id = -1
        if out.message_group and tc is not None and tc.write_queue_nums > 0:
            queue_id = consistent_hash(java_hash_code(out.message_group), tc.write_queue_nums)
        elif tc is not None and tc.write_queue_nums > 0:
            queue_id = random.randrange(tc.write_queue_nums)
        h = SendMessageRequestHeaderV2(
            producer_group=topic, topic=topic, default_topic=T.AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_topic_queue_nums=c.config.default_topic_queue_nums, queue_id=queue_id, sys_flag=out.sys_flag,
            born_timestamp=out.born_timestamp, flag=0, properties=encode_properties(out.properties))
        cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, body=out.body)
        sp = c.send_processor
        prepared = sp.prepare(session.channel, cmd, h, False, out.properties)
        if prepared.__class__ is RemotingCommand:
            if "busy" in (prepared.remark or ""):
                raise ProxyError(Code.TOO_MANY_REQUESTS, prepared.remark)
            raise error_from_response(prepared.code, prepared.remark)
        stored, queue_id = prepared
        res = c.store.put_messages_nowait(stored)
        if res.__class__ is not PutMessageResult:
            res = await asyncio.wrap_future(res)
        if sp.sync_master and res.status in (_S.PUT_OK, _S.FLUSH_DISK_TIMEOUT):
            st = await c.ha.wait_replicated(res.wrote_offset + res.wrote_bytes, sp.replica_timeout)
            if st is not _S.PUT_OK:
                res.status = st
        code = _PUT_CODES.get(res.status)
        if code is None:
            raise _put_error(res, c.store.config)
        c.stats.on_topic_put(res.topic or topic, res.msg_num, res.wrote_bytes)
        if code != Code.OK:
            return pb.SendResultEntry(status=status(code, f"send message failed, sendStatus={res.status.name}"))
        entry = pb.SendResultEntry(status=OK_STATUS, message_id=out.message_id, offset=res.queue_offset)
        if out.sys_flag & SF.TRANSACTION_PREPARED_TYPE:
            phy = res.phy_offsets[0] if res.phy_offsets else res.wrote_offset
            entry.transaction_id = encode_transaction_id(out.message_id, f"{res.queue_offset} {phy}")
        elif out.deliver_ms:
            entry.recall_handle = recall_handle(topic, c.broker_name, out.deliver_ms, out.message_id)
        return entry

    def _check_type(self, tc: Any, mtype: int, topic: str) -> None:
        value = topic_attribute(tc, MESSAGE_TYPE_ATTRIBUTE)
        if not value or value.upper() in ("MIXED", "UNSPECIFIED"):
            return
        want = _TYPE_NAMES.get(value.upper())
        if want is not None and want != mtype:
            raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                             f"topic {topic} takes {value} messages, not {MessageType.name(mtype)} ones")

    # -- EndTransaction --------------------------------------------------------------------------------------
    async def end_transaction(self, req: Any, ctx: Any) -> Any:
        topic = wrap_namespace(req.topic.resource_namespace, req.topic.name)
        self.e.authorize(ctx, {topic: "PUB"})
        self.e.sessions.session(ctx)
        msg_id, qoff, phy = decode_transaction_id(req.transaction_id)
        res = req.resolution
        if res == pb.TransactionResolution.COMMIT:
            kind = SF.TRANSACTION_COMMIT_TYPE
        elif res == pb.TransactionResolution.ROLLBACK:
            kind = SF.TRANSACTION_ROLLBACK_TYPE
        else:
            raise ProxyError(Code.BAD_REQUEST, "the transaction resolution must be COMMIT or ROLLBACK")
        hdr = EndTransactionRequestHeader(
            producer_group=topic, tran_state_table_offset=qoff, commit_log_offset=phy, commit_or_rollback=kind,
            from_transaction_check=req.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=req.message_id or msg_id, transaction_id=msg_id)
        cmd = RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=hdr.to_ext())
        resp = await self.c.end_transaction_processor._process(self.e.sessions.session(ctx).channel, cmd)
        if resp is None or resp.code == ResponseCode.SUCCESS:
            return pb.EndTransactionResponse(status=OK_STATUS)
        if resp.code == ResponseCode.SYSTEM_ERROR and "prepared transaction" in (resp.remark or ""):
            raise ProxyError(Code.INVALID_TRANSACTION_ID, resp.remark)
        raise error_from_response(resp.code, resp.remark)

    # -- RecallMessage ---------------------------------------------------------------------------------------
    async def recall_message(self, req: Any, ctx: Any) -> Any:
        topic = wrap_namespace(req.topic.resource_namespace, req.topic.name)
        self.e.authorize(ctx, {topic: "PUB"})
        h_topic, broker, deliver_ms, msg_id = parse_recall_handle(req.recall_handle)
        if h_topic != topic:
            raise ProxyError(Code.BAD_REQUEST, "the recall handle is of another topic")
        if broker != self.c.broker_name:
            raise ProxyError(Code.BAD_REQUEST, f"the recall handle is of broker {broker}, not {self.c.broker_name}")
        timer = self.c.timer_service
        if timer is None or not hasattr(timer, "recall"):
            raise ProxyError(Code.UNSUPPORTED, "this broker has no timer to recall messages from")
        err = await timer.recall(topic, msg_id, deliver_ms)
        if err is not None:
            raise ProxyError(Code.BAD_REQUEST, err)
        return pb.RecallMessageResponse(status=OK_STATUS, message_id=msg_id)


def _put_error(res: PutMessageResult, store_config: "StoreConfig") -> ProxyError:
    from mq.daemon.broker.processors.put_status import put_status_response

    resp = put_status_response(RemotingCommand(RequestCode.SEND_MESSAGE_V2), res, store_config)
    if res.status in (_S.MESSAGE_ILLEGAL, _S.PROPERTIES_SIZE_EXCEEDED):
        return ProxyError(Code.MESSAGE_BODY_TOO_LARGE if res.status is _S.MESSAGE_ILLEGAL
                          else Code.MESSAGE_PROPERTIES_TOO_LARGE, resp.remark if resp else res.status.name)
    if resp is None:
        return ProxyError(Code.INTERNAL_SERVER_ERROR, res.status.name)
    if res.status is _S.OS_PAGECACHE_BUSY:
        return ProxyError(Code.TOO_MANY_REQUESTS, resp.remark)
    return error_from_response(resp.code, resp.remark)
