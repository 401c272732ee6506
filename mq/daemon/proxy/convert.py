"""The 5.x wire ``Message`` and the stored 4.x message, both ways (sans-IO).

SendMessage -> stored (Apache proxy ``SendMessageActivity.buildMessageProperty``)::

    +---------------------------------------------+----------------------------------------------------+
    | gRPC                                        | stored                                             |
    +---------------------------------------------+----------------------------------------------------+
    | topic{resource_namespace, name}             | topic ``ns%name`` (``name`` without a namespace)   |
    | body, body_encoding GZIP                    | body (a GZIP body is stored inflated)              |
    | system_properties.tag                       | TAGS                                               |
    | system_properties.keys[]                    | KEYS (space-joined)                                |
    | system_properties.message_id (required)     | UNIQ_KEY (the 5.x message id)                      |
    | message_type TRANSACTION                    | TRAN_MSG=true (a half message), sysFlag PREPARED   |
    | orphaned_transaction_recovery_duration      | CHECK_IMMUNITY_TIME_IN_SECONDS                     |
    | delivery_timestamp                          | TIMER_DELIVER_MS (epoch ms): the arbitrary-delay   |
    |                                             | timer parks it                                     |
    | message_group                               | __SHARDINGKEY                                      |
    | trace_context                               | TRACE_CONTEXT                                      |
    | born_host, born_timestamp                   | __BORNHOST, BORN_TIMESTAMP (and the record's born  |
    |                                             | timestamp)                                         |
    | (the topic)                                 | PGROUP: the producer group the check-back targets  |
    | user_properties                             | properties as given                                |
    +---------------------------------------------+----------------------------------------------------+

Stored -> ReceiveMessage (Apache ``GrpcConverter.buildMessage``): the reverse, plus ``body_digest`` (MD5,
upper-case hex: every client computes it the same way, whereas CRC32 is zero-padded by some and not by
others), ``message_type`` derived from TRAN_MSG / a deliver time / __SHARDINGKEY, store host and time,
queue id and offset, ``delivery_attempt`` = reconsumeTimes + 1, the receipt handle, and ``dead_letter_queue``
for a message read from a DLQ. Properties the 5.x protocol reserves are not user properties.

Validation follows Apache's GrpcValidator and proxy defaults: a tag without ``|`` or control characters, keys
and message group neither blank nor with control characters (group under 64 bytes), at most 128 user
properties, 16 KiB of user properties with tag and keys, a message id, a delivery time within the timer's
reach.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from typing import Any

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.hosts import format_addr
from mq.common.message import MessageExt
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.status import ProxyError

Code = pb.Code
MessageType = pb.MessageType

# RocketMQ 5 property names (MessageConst) this module reads or writes.
SHARDING_KEY = "__SHARDINGKEY"
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
POP_CK = "POP_CK"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

#: RocketMQ 5's MessageConst.STRING_HASH_SET: a user property may not use these names.
RESERVED_PROPERTIES = frozenset(P.SYSTEM_PROPERTY_NAMES | {
    "MQ2_FLAG", POP_CK, "POP_CK_OFFSET", "1ST_POP_TIME", "DUP_INFO", "EXTEND_UNIQ_INFO", "TIMER_DELAY_MS",
    TIMER_DELAY_SEC, TIMER_DELIVER_MS, "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS",
    "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", BORN_HOST, BORN_TIMESTAMP, DLQ_ORIGIN_TOPIC, DLQ_ORIGIN_MESSAGE_ID,
    "__CRC32#",
})
#: Not shown as user properties: the reserved names and those that have a system-property field.
_HIDDEN = RESERVED_PROPERTIES | {SHARDING_KEY, TRACE_CONTEXT, P.CHECK_IMMUNITY_TIME_IN_SECONDS}

MAX_USER_PROPERTIES = 128
MAX_USER_PROPERTY_BYTES = 16 * 1024
MAX_MESSAGE_GROUP_BYTES = 64
MAX_MESSAGE_ID_LENGTH = 128


def _has_control(s: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in s) if not s.isprintable() else False


def wrap_namespace(namespace: str, name: str) -> str:
    """RocketMQ 5's ``NamespaceUtil.wrapNamespace``: ``ns%name``, or ``name`` without a namespace."""
    if not namespace or name.startswith(namespace + "%"):
        return name
    return f"{namespace}%{name}"


def split_namespace(stored: str) -> tuple[str, str]:
    """(namespace, name) of a stored topic or group name; retry and DLQ prefixes stay on the name."""
    if stored.startswith("%"):
        return "", stored
    ns, sep, name = stored.partition("%")
    return (ns, name) if sep else ("", stored)


def _timestamp_ms(ts: Any) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _check_text(value: str, code: int, what: str) -> None:
    if not value.strip():
        raise ProxyError(code, f"{what} cannot be the char sequence of whitespace")
    if _has_control(value):
        raise ProxyError(code, f"{what} cannot contain control character")


def check_digest(body: bytes, digest: Any) -> None:
    """Compare a sent ``body_digest`` with the body, as the clients compute it (CRC32 with or without
    zero padding, MD5 and SHA1 in hex, any case)."""
    kind, checksum = digest.type, digest.checksum.strip()
    if not checksum:
        return
    if kind == pb.DigestType.CRC32:
        try:
            ok = int(checksum, 16) == zlib.crc32(body) & 0xFFFFFFFF
        except ValueError:
            ok = False
    elif kind == pb.DigestType.MD5:
        ok = checksum.upper() == hashlib.md5(body).hexdigest().upper()
    elif kind == pb.DigestType.SHA1:
        ok = checksum.upper() == hashlib.sha1(body).hexdigest().upper()
    else:
        return
    if not ok:
        raise ProxyError(Code.MESSAGE_CORRUPTED, f"the body digest {checksum} does not match the body")


class Outgoing:
    """One SendMessage message validated and mapped: what the send processor needs."""

    __slots__ = ("topic", "body", "properties", "sys_flag", "born_timestamp", "message_id", "message_group",
                 "message_type", "deliver_ms")

    def __init__(self) -> None:
        self.topic = ""
        self.body = b""
        self.properties: dict[str, str] = {}
        self.sys_flag = 0
        self.born_timestamp = 0
        self.message_id = ""
        self.message_group = ""
        self.message_type = MessageType.NORMAL
        self.deliver_ms = 0


def to_stored(m: Any, *, producer_group: str, peer_host: str, max_body: int, max_delay_ms: int,
              now_ms: int) -> Outgoing:
    """Validate one wire message and map it to what is stored; raises ``ProxyError``."""
    out = Outgoing()
    sp = m.system_properties
    out.topic = wrap_namespace(m.topic.resource_namespace, m.topic.name)
    body = m.body
    if sp.body_encoding == pb.Encoding.GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise ProxyError(Code.MESSAGE_CORRUPTED, f"the GZIP body cannot be inflated: {exc}") from None
    if not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if max_body > 0 and len(body) > max_body:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_body}")
    if sp.HasField("body_digest"):
        check_digest(body, sp.body_digest)
    out.body = body
    user = m.user_properties
    if len(user) > MAX_USER_PROPERTIES:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}")
    size = 0
    props: dict[str, str] = {}
    for k, v in user.items():
        if k in RESERVED_PROPERTIES:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {k}")
        if not k or _has_control(k) or _has_control(v) or P.NAME_VALUE_SEPARATOR in k:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                             "the key and value of a property cannot be empty or contain control characters")
        size += len(k.encode()) + len(v.encode())
        props[k] = v
    if sp.HasField("tag"):
        tag = sp.tag
        if not tag.strip() or "|" in tag or _has_control(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} is blank, holds '|' or a control character")
        props[P.TAGS] = tag
        size += len(tag.encode())
    if sp.keys:
        for key in sp.keys:
            _check_text(key, Code.ILLEGAL_MESSAGE_KEY, "key")
            size += len(key.encode())
        props[P.KEYS] = P.KEY_SEPARATOR.join(sp.keys)
    if size > MAX_USER_PROPERTY_BYTES:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"the total size of user property is too large, max is {MAX_USER_PROPERTY_BYTES}")
    mid = sp.message_id
    if not mid.strip() or len(mid) > MAX_MESSAGE_ID_LENGTH or _has_control(mid) or " " in mid:
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty" if not mid.strip()
                         else f"illegal message id {mid[:40]!r}")
    out.message_id = mid
    props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = mid
    mtype = sp.message_type
    if mtype == MessageType.TRANSACTION:
        props[P.TRANSACTION_PREPARED] = "true"
        out.sys_flag |= SF.TRANSACTION_PREPARED_TYPE
        if sp.HasField("orphaned_transaction_recovery_duration"):
            secs = sp.orphaned_transaction_recovery_duration.seconds
            if secs < 0 or secs > 86_400:
                raise ProxyError(Code.BAD_REQUEST, "the orphaned transaction recovery duration must be 0-86400 s")
            props[P.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(secs)
    if sp.HasField("delivery_timestamp"):
        at = _timestamp_ms(sp.delivery_timestamp)
        if at - now_ms > max_delay_ms:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the max delay time of message is too large, max is {max_delay_ms} ms")
        props[TIMER_DELIVER_MS] = str(at)
        out.deliver_ms = at
        if mtype == MessageType.MESSAGE_TYPE_UNSPECIFIED:
            mtype = MessageType.DELAY
    if sp.delivery_attempt > 0:
        props[P.RECONSUME_TIME] = str(sp.delivery_attempt)
    props[P.PRODUCER_GROUP] = producer_group
    if sp.HasField("message_group") and sp.message_group:
        group = sp.message_group
        _check_text(group, Code.ILLEGAL_MESSAGE_GROUP, "message group")
        if len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {MAX_MESSAGE_GROUP_BYTES}")
        props[SHARDING_KEY] = group
        out.message_group = group
        if mtype == MessageType.MESSAGE_TYPE_UNSPECIFIED:
            mtype = MessageType.FIFO
    if sp.HasField("trace_context") and sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host or peer_host
    if born_host:
        props[BORN_HOST] = born_host
    born = _timestamp_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else 0
    out.born_timestamp = born if born > 0 else now_ms
    props[BORN_TIMESTAMP] = str(out.born_timestamp)
    for k, v in props.items():
        if P.PROPERTY_SEPARATOR in v or P.NAME_VALUE_SEPARATOR in v:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"the value of {k} holds a separator character")
    out.properties = props
    out.message_type = mtype if mtype != MessageType.MESSAGE_TYPE_UNSPECIFIED else MessageType.NORMAL
    return out


# -- stored -> wire ------------------------------------------------------------------------------------------------
def _fill_ts(field: Any, ms: int) -> None:
    """Set a ``Timestamp`` field of a message in place to ``ms`` (epoch milliseconds)."""
    field.seconds = ms // 1000
    field.nanos = ms % 1000 * 1_000_000


def message_type_of(props: dict[str, str]) -> int:
    if props.get(P.TRANSACTION_PREPARED) == "true":
        return MessageType.TRANSACTION
    if P.DELAY_TIME_LEVEL in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props:
        return MessageType.DELAY
    if SHARDING_KEY in props:
        return MessageType.FIFO
    return MessageType.NORMAL


_MD5 = pb.DigestType.MD5
_IDENTITY = pb.Encoding.IDENTITY


def to_wire(msg: MessageExt, *, receipt_handle: str | None = None, topic: str | None = None,
            now_ms: int = 0, into: Any = None) -> Any:
    """The wire ``Message`` of a stored message (its body inflated when stored compressed), filled into
    ``into`` (an empty ``Message`` field of a response: nothing is copied) or a new one.

    Built in place (sub-messages filled through their fields, not made apart and copied in): this runs once
    per message received."""
    props = msg.properties
    get = props.get
    body = msg.body
    if msg.sys_flag & SF.COMPRESSED:
        try:
            body = zlib.decompress(body)
        except zlib.error:
            pass  # sent as stored: the client's digest check shows it
    m = pb.Message() if into is None else into
    m.body = body
    m.user_properties.update({k: v for k, v in props.items() if k not in _HIDDEN})
    ns, name = split_namespace(topic if topic is not None else msg.topic)
    t = m.topic
    t.name = name
    if ns:
        t.resource_namespace = ns
    sp = m.system_properties
    sp.message_id = get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
    d = sp.body_digest
    d.type = _MD5
    d.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = _IDENTITY
    sp.message_type = message_type_of(props)
    _fill_ts(sp.born_timestamp, msg.born_timestamp)
    sp.born_host = get(BORN_HOST) or format_addr(msg.born_host)
    _fill_ts(sp.store_timestamp, msg.store_timestamp)
    sp.store_host = format_addr(msg.store_host)
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    tag = get(P.TAGS)
    if tag is not None:
        sp.tag = tag
    keys = get(P.KEYS)
    if keys:
        sp.keys.extend(k for k in keys.split(P.KEY_SEPARATOR) if k)
    deliver = get(TIMER_DELIVER_MS) or get(P.START_DELIVER_TIME)
    if deliver is not None and deliver.isdigit():
        _fill_ts(sp.delivery_timestamp, int(deliver))
    elif get(TIMER_DELAY_SEC, "").isdigit():
        _fill_ts(sp.delivery_timestamp, (now_ms or msg.store_timestamp) + int(props[TIMER_DELAY_SEC]) * 1000)
    group = get(SHARDING_KEY)
    if group is not None:
        sp.message_group = group
    handle = receipt_handle if receipt_handle is not None else get(POP_CK)
    if handle:
        sp.receipt_handle = handle
    trace = get(TRACE_CONTEXT)
    if trace is not None:
        sp.trace_context = trace
    dlq_topic, dlq_id = get(DLQ_ORIGIN_TOPIC), get(DLQ_ORIGIN_MESSAGE_ID)
    if dlq_topic is not None and dlq_id is not None:
        sp.dead_letter_queue.topic = dlq_topic
        sp.dead_letter_queue.message_id = dlq_id
    return m


# -- FIFO queue choice ---------------------------------------------------------------------------------------------
_LCG_MULT = 2862933555777941757
_MASK64 = (1 << 64) - 1


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)``: the bucket Apache's proxy sends a message group to."""
    state = key & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULT * state + 1) & _MASK64
        r = (state >> 33) & 0xFFFFFFFF
        if r >= 1 << 31:
            r -= 1 << 32
        nxt = int((candidate + 1) / ((r + 1) / 2147483648.0))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate
