"""Message properties: well-known names and the ``name\\x01value\\x02...`` string (MESSAGE.md §4).

Writer: the Java form (pairs joined by ``\\x02``, no trailing separator, ``None`` values skipped).
Reader: Java rules, tolerant of the C/Node trailing separator: a segment is kept only if it has a non-empty
name, a ``\\x01`` and a non-empty value; the first ``\\x01`` splits name from value.
"""

from __future__ import annotations

from typing import Mapping

from mq.common import native

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

# Well-known property names (RocketMQ MessageConst).
KEYS = "KEYS"
TAGS = "TAGS"
WAIT_STORE_MSG_OK = "WAIT"
DELAY_TIME_LEVEL = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
BUYER_ID = "BUYER_ID"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
TRANSFER_FLAG = "TRANSFER_FLAG"
CORRECTION_FLAG = "CORRECTION_FLAG"
MQ2_FLAG = "MQ2_FLAG"
RECONSUME_TIME = "RECONSUME_TIME"
MSG_REGION = "MSG_REGION"
TRACE_SWITCH = "TRACE_ON"
UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
INSTANCE_ID = "INSTANCE_ID"
CORRELATION_ID = "CORRELATION_ID"
MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
MESSAGE_TTL = "TTL"
REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
CLUSTER = "CLUSTER"
MESSAGE_TYPE = "MSG_TYPE"
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
TRANSACTION_ID = "__transactionId__"
START_DELIVER_TIME = "__STARTDELIVERTIME"
SHARDING_KEY = "__SHARDING_KEY"
# RocketMQ 5 pop consumption
POP_CK = "POP_CK"
FIRST_POP_TIME = "1ST_POP_TIME"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

#: Names a user may not set through the client API (RocketMQ MessageConst.STRING_HASH_SET).
SYSTEM_PROPERTY_NAMES = frozenset({
    TRACE_SWITCH, MSG_REGION, KEYS, TAGS, WAIT_STORE_MSG_OK, DELAY_TIME_LEVEL, RETRY_TOPIC, REAL_TOPIC,
    REAL_QUEUE_ID, TRANSACTION_PREPARED, PRODUCER_GROUP, MIN_OFFSET, MAX_OFFSET, BUYER_ID, ORIGIN_MESSAGE_ID,
    TRANSFER_FLAG, CORRECTION_FLAG, MQ2_FLAG, RECONSUME_TIME, UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MAX_RECONSUME_TIMES, CONSUME_START_TIMESTAMP, TRANSACTION_PREPARED_QUEUE_OFFSET, TRANSACTION_CHECK_TIMES,
    CHECK_IMMUNITY_TIME_IN_SECONDS, INSTANCE_ID, CORRELATION_ID, MESSAGE_REPLY_TO_CLIENT, MESSAGE_TTL,
    REPLY_MESSAGE_ARRIVE_TIME, PUSH_REPLY_TIME, CLUSTER, MESSAGE_TYPE, INNER_MULTI_DISPATCH,
    INNER_MULTI_QUEUE_OFFSET, POP_CK, FIRST_POP_TIME, DLQ_ORIGIN_TOPIC, DLQ_ORIGIN_MESSAGE_ID,
})

#: Largest properties string RocketMQ stores (signed short length field).
MAX_PROPERTIES_LENGTH = 32767


def encode_properties(props: Mapping[str, str | None] | None) -> str:
    """Java ``messageProperties2String``: pairs joined by 0x02, no trailing separator, None skipped."""
    if not props:
        return ""
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )


def py_decode_properties(text: str | None) -> dict[str, str]:
    """Java ``string2messageProperties``, tolerant of a trailing separator; empty values are dropped."""
    out: dict[str, str] = {}
    if not text:
        return out
    for seg in text.split(PROPERTY_SEPARATOR):
        i = seg.find(NAME_VALUE_SEPARATOR)
        if i > 0 and i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1:]
    return out


def py_splice_properties(text: str | None, name: str, pair: str) -> str:
    """``text`` without its first ``name`` pair, with ``pair`` (``name2\x01value``) as the last one.

    The rest stays as sent, in its order, separators and all; a separator goes before ``pair`` unless what is
    kept is empty or already ends with one. The broker stores a send's properties this way (WAIT out, CLUSTER
    in) without decoding and re-encoding them."""
    s = text or ""
    seg = name + NAME_VALUE_SEPARATOR
    i = s.find(seg) if name else -1
    while i > 0 and s[i - 1] != PROPERTY_SEPARATOR:
        i = s.find(seg, i + 1)
    if i >= 0:
        j = s.find(PROPERTY_SEPARATOR, i)
        s = s[:i] + s[j + 1:] if j >= 0 else s[:i]
    if s and not s.endswith(PROPERTY_SEPARATOR):
        s += PROPERTY_SEPARATOR
    return s + pair


(_c_decode, _c_splice) = native.load("mq.common._properties", "decode", "splice")
if _c_decode is None:
    decode_properties = py_decode_properties
else:
    def decode_properties(text: str | None) -> dict[str, str]:
        """Java ``string2messageProperties``, tolerant of a trailing separator; empty values are dropped
        (``py_decode_properties``, in C: ``mq/common/_properties.c``)."""
        return _c_decode(text) if text else {}

if _c_splice is None:
    splice_properties = py_splice_properties
else:
    def splice_properties(text: str | None, name: str, pair: str) -> str:
        """``text`` without its first ``name`` pair, with ``pair`` as the last one (``py_splice_properties``,
        in C: ``mq/common/_properties.c``)."""
        return _c_splice(text or "", name + NAME_VALUE_SEPARATOR if name else "", pair)


def decode_properties_bytes(raw: bytes | memoryview) -> dict[str, str]:
    """``decode_properties`` for the UTF-8 bytes stored in a record (invalid UTF-8 is replaced)."""
    if not raw:
        return {}
    return decode_properties(bytes(raw).decode("utf-8", "replace"))


def split_keys(keys: str | None) -> list[str]:
    """The KEYS property split on single spaces, empty tokens dropped (MESSAGE.md §4.2)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]
