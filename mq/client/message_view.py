"""Message ids and plain views of messages, shared by the admin commands and the web console.

``classify_msg_id`` tells an offsetMsgId (it decodes to a broker address and a commit-log offset) from a
UNIQ_KEY (the client's msgId); ``find_by_id`` looks a message up by either; ``message_dict`` turns a
``MessageExt`` into plain values; ``body_preview`` shows a body as text, or as hex when it is not text.
"""

from __future__ import annotations

import enum
from typing import Any

from mq.common import properties as P
from mq.common.msg_id import decode_offset_msg_id
from mq.errors import BrokerError, MQError, QueryNotFoundError, RemoteProtocolError, RemotingError

BODY_PREVIEW_CHARS = 512


class IdKind(enum.Enum):
    OFFSET_MSG_ID = "offsetMsgId"
    UNIQ_KEY = "uniqKey"


def classify_msg_id(msg_id: str) -> tuple[IdKind, tuple[str, int] | None]:
    """What a message id is: an offsetMsgId that decodes to a plausible (``ip:port``, offset), or a UNIQ_KEY.

    Both are 32 hex characters for IPv4 (56 for IPv6). A UNIQ_KEY read as an offsetMsgId gives a "port" made of
    the PID and random bytes, almost always above 65535, or a negative offset. A RocketMQ 5.x client's message id
    (34 hex characters, version byte ``01``) is a UNIQ_KEY. ValueError if not an id at all."""
    text = msg_id.strip()
    if len(text) == 34 and text[:2] == "01" and all(c in "0123456789abcdefABCDEF" for c in text):
        return IdKind.UNIQ_KEY, None
    if len(text) not in (32, 56) or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise ValueError(f"{msg_id!r} is not a message id: expected 32 (or 56) hexadecimal characters, or a "
                         "RocketMQ 5.x id (34, starting 01)")
    (ip, port), offset = decode_offset_msg_id(text)
    if 0 < port <= 65535 and offset >= 0 and ip not in ("0.0.0.0", "::"):
        host = f"[{ip}]" if ":" in ip else ip
        return IdKind.OFFSET_MSG_ID, (f"{host}:{port}", offset)
    return IdKind.UNIQ_KEY, None


async def find_by_id(admin: Any, msg_id: str, topic: str | None, *, max_num: int = 32) -> tuple[IdKind, list]:
    """The message(s) with id ``msg_id``: an offsetMsgId is read from the broker it names (and must be of
    ``topic`` when one is given); otherwise, or when that fails and a topic is given, ``msg_id`` is looked up as
    the UNIQ_KEY of ``topic`` (newest first; a retried send can store one twice). ValueError when ``msg_id`` is no
    id, or is a UNIQ_KEY without a topic; QueryNotFoundError (or the broker's error) when nothing is found."""
    kind = classify_msg_id(msg_id)[0]
    failure: MQError | None = None
    if kind is IdKind.OFFSET_MSG_ID:
        try:
            m = await admin.view_message_by_offset_msg_id(msg_id)
            if topic is None or m.topic == topic:
                return IdKind.OFFSET_MSG_ID, [m]
        except (RemotingError, BrokerError, RemoteProtocolError) as exc:
            failure = exc
        if not topic:
            assert failure is not None
            raise failure
    elif not topic:
        raise ValueError(f"{msg_id} does not decode to a broker address, so it is a UNIQ_KEY (the client's msgId): "
                         "give its topic")
    msgs = await admin.query_message_by_key(topic, msg_id, max_num, unique=True)
    if not msgs:
        if failure is not None:
            raise failure
        raise QueryNotFoundError(22, f"no message with id {msg_id} in topic {topic}")
    return IdKind.UNIQ_KEY, msgs


def body_preview(body: bytes, limit: int = BODY_PREVIEW_CHARS) -> str:
    """UTF-8 text of the body (cut to ``limit`` chars), or a hex dump of its start when it is not text."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        head = body[: limit // 2].hex(" ")
        return f"<{len(body)} bytes, not UTF-8> {head}" + (" ..." if len(body) > limit // 2 else "")
    if text and sum(ch.isprintable() or ch in "\r\n\t" for ch in text[:limit]) < 0.9 * len(text[:limit]):
        return f"<{len(body)} bytes, binary> {body[: limit // 2].hex(' ')}"
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text)} chars)"


def message_dict(m: Any) -> dict[str, Any]:
    """Every field of a MessageExt, plain values (for JSON and for the detail view)."""
    return {
        "topic": m.topic, "brokerName": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset, "offsetMsgId": m.msg_id,
        "uniqKey": m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), "tags": m.properties.get(P.TAGS),
        "keys": m.properties.get(P.KEYS), "storeSize": m.store_size, "sysFlag": m.sys_flag, "flag": m.flag,
        "bodyCrc": m.body_crc, "reconsumeTimes": m.reconsume_times,
        "preparedTransactionOffset": m.prepared_transaction_offset, "bornTimestamp": m.born_timestamp,
        "bornHost": f"{m.born_host[0]}:{m.born_host[1]}", "storeTimestamp": m.store_timestamp,
        "storeHost": f"{m.store_host[0]}:{m.store_host[1]}", "properties": dict(m.properties),
        "bodyLength": len(m.body), "body": body_preview(m.body),
    }
