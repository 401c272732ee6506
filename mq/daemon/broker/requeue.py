"""Re-putting a stored message under another topic: what send-back, the schedule service, the timer and the
transaction services share.

Every one of them reads a record from the commit log, changes its topic / queue / a few properties, and puts a
new record; the body (compressed or not), flag, sysflag, born time/host and reconsume count are carried over.
``put_async`` never blocks the event loop: under ASYNC_FLUSH the store's future is already done; under
SYNC_FLUSH it is awaited through ``asyncio.wrap_future``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mq.common import properties as P
from mq.common import topic as T
from mq.common.message import MessageExt, MessageExtBrokerInner
from mq.common.properties import encode_properties
from mq.common.record import decode_record
from mq.errors import RemoteProtocolError
from mq.store.status import PutMessageResult, PutMessageStatus

#: Put statuses that mean "stored" (flush/slave timeouts store the message too).
STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                    PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})
#: Put statuses that the same message gets again however often it is retried (the store refuses the message
#: itself, not for want of room): a delivery that gets one sets the message aside (RocketMQ 5's timer:
#: PUT_NO_RETRY).
REFUSED = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})
QUEUE_ID_MAX = 0x7FFFFFFF


def load(store: Any, phy_offset: int, size: int | None = None) -> MessageExt | None:
    """The decoded record at ``phy_offset`` (body as stored), or None when it is gone or unreadable."""
    raw = store.select_one_message_by_offset(phy_offset, size)
    if raw is None:
        return None
    try:
        return decode_record(raw)
    except RemoteProtocolError:
        return None


def rebuild(msg: MessageExt, topic: str, queue_id: int, props: dict[str, str], *,
            reconsume_times: int | None = None, sys_flag: int | None = None, tags_code: int | None = None,
            prepared_transaction_offset: int = 0) -> MessageExtBrokerInner:
    """A new store input carrying ``msg``'s body and origin under ``topic``/``queue_id`` with ``props``."""
    return MessageExtBrokerInner(
        topic=topic, body=msg.body, flag=msg.flag, properties=props, queue_id=queue_id,
        sys_flag=msg.sys_flag if sys_flag is None else sys_flag, born_timestamp=msg.born_timestamp,
        born_host=msg.born_host, reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset, properties_string=encode_properties(props),
        tags_code=tags_code)


def restore_real(msg: MessageExt, drop: tuple[str, ...] = ()) -> tuple[str, int, dict[str, str]] | None:
    """(REAL_TOPIC, REAL_QID, properties without ``drop``) of a redirected message; None without REAL_TOPIC."""
    props = dict(msg.properties)
    topic = props.get(P.REAL_TOPIC)
    if not topic:
        return None
    try:
        qid = int(props.get(P.REAL_QUEUE_ID) or 0)
    except ValueError:
        qid = 0
    for name in drop:
        props.pop(name, None)
    return topic, qid, props


def real_target(msg: MessageExt, drop: tuple[str, ...] = ()) -> tuple[str, int, dict[str, str]] | str:
    """``restore_real`` for a delivery (the timer's, the schedule service's), or why the message cannot be
    delivered: no REAL_TOPIC, a name that is no valid topic, a topic no client may send to (an internal one:
    the timer or schedule topic, a transaction topic), a REAL_QID that is no queue id. Such a message is set aside
    by its caller: retrying it would block every message behind it, for ever."""
    props = msg.properties
    topic = props.get(P.REAL_TOPIC)
    if not topic:
        return "it has no REAL_TOPIC"
    if not T.is_valid_topic(topic):
        return f"its REAL_TOPIC {topic[:200]!r} is not a valid topic name"
    if T.is_not_allowed_send_topic(topic):
        return f"its REAL_TOPIC {topic} is an internal topic"
    raw = props.get(P.REAL_QUEUE_ID) or "0"
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 10) or int(raw) > QUEUE_ID_MAX:
        return f"its REAL_QID {raw[:40]!r} is not a queue id"
    return restore_real(msg, drop)  # type: ignore[return-value]


async def put_async(store: Any, msg: MessageExtBrokerInner) -> PutMessageResult:
    fut = store.put_message_async(msg)
    if fut.done():
        return fut.result()
    return await asyncio.wrap_future(fut)
