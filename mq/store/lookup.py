"""Message lookup on a running store: by physical offset (offsetMsgId, VIEW_MESSAGE_BY_ID) and by key
(QUERY_MESSAGE; RocketMQ ``DefaultMessageStore.queryMessage``).

The index matches on a 31-bit hash of ``topic#key`` only, so different keys (and topics) collide: every
candidate is read back from the commit log and its topic and keys re-checked before it is returned
(RocketMQ #3613 returned another topic's message).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq.common import properties as P
from mq.common.message import MessageExt
from mq.common.record import decode_record
from mq.store.status import QueryMessageResult

if TYPE_CHECKING:
    from mq.store.message_store import MessageStore


def look_message_by_offset(store: "MessageStore", phy_offset: int) -> MessageExt | None:
    """The decoded record at a physical offset; None when none is readable there."""
    raw = store.commit_log.read_record(phy_offset)
    if raw is None:
        return None
    try:
        return decode_record(raw)
    except Exception:
        return None


def _topic_and_keys(store: "MessageStore", phy: int) -> tuple[str, list[str]] | None:
    """What a candidate's re-check reads back: its topic, and its KEYS tokens plus its UNIQ_KEY."""
    msg = look_message_by_offset(store, phy)
    if msg is None:
        return None
    keys = P.split_keys(msg.properties.get(P.KEYS))
    uniq = msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq:
        keys.append(uniq)
    return msg.topic, keys


def query_message(store: "MessageStore", topic: str, key: str, max_num: int, begin_ms: int,
                  end_ms: int) -> QueryMessageResult:
    """Messages of ``topic`` carrying ``key`` (a KEYS token or the UNIQ_KEY) stored in [begin, end], oldest
    first, at most ``maxMsgsNumBatch``; waits up to a second for the index passes to catch up."""
    index = store.index
    if index is None or not store.loaded:
        return QueryMessageResult([], [])
    if store.index_dispatcher is not None:
        store.index_dispatcher.wait_idle(1.0)
    max_num = min(max_num, store.config.max_msgs_num_batch)
    phys = index.query_verified(topic, key, max_num, begin_ms, end_ms, lambda phy: _topic_and_keys(store, phy))
    phys.sort()
    bufs, kept = [], []
    for phy in phys:
        raw = store.commit_log.read_record(phy)
        if raw is not None:
            bufs.append(raw)
            kept.append(phy)
    files = index.files
    last = files[-1] if files else None
    return QueryMessageResult(bufs, kept, getattr(last, "end_timestamp", 0), getattr(last, "end_phy_offset", 0))
