"""The put path's tuples and the checks ``CommitLog.prepare`` applies to a message's fields.

``Prepared`` is a message validated and encoded as far as possible outside the put lock; the C writer
(``mq.store._append``) reads its fields by position. ``DispatchRequest`` is what the dispatchers need from one
stored record, built by the writer and by ``log_scan.check_record`` when the log is read back.
"""

from __future__ import annotations

from typing import NamedTuple

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class DispatchRequest(NamedTuple):
    """What the dispatchers need from one stored record (RocketMQ ``DispatchRequest``)."""

    topic: str
    queue_id: int
    queue_offset: int
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    keys: str | None
    uniq_key: str | None
    tran_type: int


class Prepared(NamedTuple):
    """A message validated and encoded as far as possible outside the put lock."""

    topic: str
    queue_id: int
    body: bytes
    tail: bytes  # TOPICLENGTH TOPIC PROPERTIESLENGTH PROPERTIES
    crc: int
    flag: int
    sys_flag: int
    born_ts: int
    born_host: bytes
    reconsume: int
    prepared_tx: int
    total: int
    tran_type: int
    tags_code: int
    delay_ms: int  # >0: tags code is store time + delay (schedule topic)
    keys: str | None
    uniq_key: str | None
    wait: bool


def bad_fields(msg: MessageExtBrokerInner) -> str:
    """Why an integer field of ``msg`` does not fit its place in the record ("" when they all do)."""
    qid = msg.queue_id
    if qid.__class__ is not int or not 0 <= qid <= I32_MAX:
        return f"queue id {qid!r} is not in [0, {I32_MAX}]"
    for name, value, lo, hi in (("flag", msg.flag, I32_MIN, I32_MAX),
                                ("sysFlag", msg.sys_flag, I64_MIN, I64_MAX),
                                ("reconsume times", msg.reconsume_times, I32_MIN, I32_MAX),
                                ("born timestamp", msg.born_timestamp, I64_MIN, I64_MAX),
                                ("prepared transaction offset", msg.prepared_transaction_offset, I64_MIN,
                                 I64_MAX)):
        if value.__class__ is not int or not lo <= value <= hi:
            return f"{name} {value!r} does not fit its field"
    return ""


def waits_for_flush(msg: MessageExtBrokerInner) -> bool:
    """Whether a SYNC_FLUSH put of ``msg`` is answered only after its flush: its WAIT property is not "false"
    (``Prepared.wait``; ``mq.store._append`` reads it the same way)."""
    props = msg.properties
    return not props or props.get(P.WAIT_STORE_MSG_OK) != "false"
