"""Request-reply on the client side (RocketMQ ``RequestFutureTable``, ``MessageUtil``, ``receiveReplyMessage``).

A requester's ``Producer.request(msg, timeout)`` stamps the request with

    CORRELATION_ID   a fresh UUID (Java ``CorrelationIdUtil``)
    REPLY_TO_CLIENT  the requester's client id (the broker finds its producer connection by it)
    TTL              the timeout in milliseconds

puts a future in its client instance's ``RequestFutureTable`` under the correlation id and sends the request as
any message. A responder builds the answer with ``create_reply_message(request, body)`` (topic
``<CLUSTER>_REPLY_TOPIC``, ``MSG_TYPE=reply`` and the three properties copied) and sends it; its producer uses
SEND_REPLY_MESSAGE_V2 (325) for such messages. The broker pushes it to the requester as
PUSH_REPLY_MESSAGE_TO_CLIENT (326); ``reply_from_push`` turns that into a ``MessageExt`` (``ARRIVE_TIME`` added,
body decompressed) and the table completes the matching future. Entries left past their deadline plus one second
are dropped by ``scan_expired`` (Java scans every second), so a lost reply never leaks an entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from dataclasses import dataclass

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.hosts import parse_addr
from mq.common.message import Message, MessageExt
from mq.common.properties import decode_properties
from mq.common.topic import reply_topic
from mq.errors import MQError, RequestTimeoutError
from mq.protocol.headers import ReplyMessageRequestHeader

log = logging.getLogger(__name__)

#: ``MixAll.REPLY_MESSAGE_FLAG``: the MSG_TYPE value of a reply message.
REPLY_MESSAGE_FLAG = "reply"
#: Java drops a pending request this long after its own timeout.
EXPIRY_GRACE_S = 1.0


def new_correlation_id() -> str:
    return str(uuid.uuid4())


def is_reply(msg: Message) -> bool:
    return msg.properties.get(P.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


def create_reply_message(request: MessageExt | Message, body: bytes) -> Message:
    """The reply to ``request`` (Java ``MessageUtil.createReplyMessage``): needs the request's CLUSTER property,
    which the broker adds when it stores a message."""
    if request is None:
        raise MQError("create reply message fail, requestMessage cannot be null.")
    props = request.properties
    cluster = props.get(P.CLUSTER)
    if cluster is None:
        raise MQError(f"create reply message fail, requestMessage error, property[{P.CLUSTER}] is null.")
    reply = Message(topic=reply_topic(cluster), body=body)
    reply.properties[P.MESSAGE_TYPE] = REPLY_MESSAGE_FLAG
    for key in (P.CORRELATION_ID, P.MESSAGE_REPLY_TO_CLIENT, P.MESSAGE_TTL):
        value = props.get(key)
        if value is not None:
            reply.properties[key] = value
    return reply


def reply_from_push(hdr: ReplyMessageRequestHeader, body: bytes | None, arrived_ms: int | None = None
                    ) -> MessageExt:
    """The reply message carried by a PUSH_REPLY_MESSAGE_TO_CLIENT (326) request."""
    data = body or b""
    if hdr.sys_flag & SF.COMPRESSED:
        try:
            data = zlib.decompress(data)
        except zlib.error as exc:
            log.warning("reply body marked compressed does not inflate: %s", exc)
    props = decode_properties(hdr.properties)
    props[P.REPLY_MESSAGE_ARRIVE_TIME] = str(int(time.time() * 1000) if arrived_ms is None else arrived_ms)
    return MessageExt(topic=hdr.topic, body=data, flag=hdr.flag, properties=props, queue_id=hdr.queue_id,
                      sys_flag=hdr.sys_flag, born_timestamp=hdr.born_timestamp,
                      born_host=parse_addr(hdr.born_host) if hdr.born_host else ("0.0.0.0", 0),
                      store_timestamp=hdr.store_timestamp,
                      store_host=parse_addr(hdr.store_host) if hdr.store_host else ("0.0.0.0", 0),
                      reconsume_times=hdr.reconsume_times or 0)


@dataclass(slots=True)
class _Pending:
    future: "asyncio.Future[MessageExt]"
    deadline: float  # time.monotonic()


class RequestFutureTable:
    """correlation id -> the future of a pending request (one table per client instance)."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, correlation_id: str) -> bool:
        return correlation_id in self._pending

    def put(self, correlation_id: str, timeout: float) -> "asyncio.Future[MessageExt]":
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = _Pending(fut, time.monotonic() + timeout)
        return fut

    def remove(self, correlation_id: str) -> None:
        self._pending.pop(correlation_id, None)

    def complete(self, reply: MessageExt) -> bool:
        """Hand ``reply`` to the request with its CORRELATION_ID; False when none waits for it."""
        cid = reply.properties.get(P.CORRELATION_ID)
        entry = self._pending.pop(cid, None) if cid is not None else None
        if entry is None:
            log.warning("receive reply message, but not matched any request, CorrelationId: %s , reply from host: "
                        "%s", cid, reply.born_host)
            return False
        if not entry.future.done():
            entry.future.set_result(reply)
        return True

    def scan_expired(self, now: float | None = None) -> list[str]:
        """Drop entries past deadline + ``EXPIRY_GRACE_S``, failing their futures; returns their ids."""
        t = time.monotonic() if now is None else now
        gone = [cid for cid, e in self._pending.items() if e.deadline + EXPIRY_GRACE_S < t]
        for cid in gone:
            entry = self._pending.pop(cid)
            if not entry.future.done():
                entry.future.set_exception(RequestTimeoutError(f"request {cid} expired without a reply"))
        return gone

    async def wait(self, correlation_id: str, fut: "asyncio.Future[MessageExt]", timeout: float,
                   topic: str) -> MessageExt:
        """Wait for the reply; on timeout drop the entry and raise ``RequestTimeoutError``."""
        try:
            return await asyncio.wait_for(asyncio.shield(fut), max(0.0, timeout))
        except asyncio.TimeoutError:
            raise RequestTimeoutError(f"send request message to <{topic}> OK, but wait reply message timeout, "
                                      f"{timeout * 1000:.0f} ms.") from None
        finally:
            self.remove(correlation_id)
