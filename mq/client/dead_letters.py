"""Dead letters of a consumer group: read them from ``%DLQ%<group>`` and put them back for consumption.

Shared by ``mq dlq list/resend`` and the web console. Reading pulls every DLQ queue from its min offset (nothing
committed). A resend goes by default to ``%RETRY%<group>``: only the group that failed the message sees it again
(a resend to the original topic would also reach every other group subscribed to it), the consumer presents it
under its original topic (RETRY_TOPIC), and its retry count starts again from 0 (RECONSUME_TIME=0), so a message
that fails again goes back through the full retry schedule before it returns to the DLQ. ``to_original`` sends
to the RETRY_TOPIC recorded in each message, ``to_topic`` to that topic. The message keeps its UNIQ_KEY (msgId)
and user properties; broker bookkeeping (REAL_TOPIC, REAL_QID, DELAY, CLUSTER, MIN/MAX_OFFSET, WAIT, transaction
and timer properties) is dropped. Dead letters stay in the DLQ after a resend (it is a log, expired by the
store's retention like any topic).
"""

from __future__ import annotations

from typing import Any, Iterable

from mq.client.message_view import body_preview
from mq.common import properties as P
from mq.common.message import Message
from mq.common.topic import dlq_topic, is_retry_topic, retry_topic
from mq.errors import ConfigError, TopicNotExistError
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode

#: Properties that describe where a message was parked or stored, not what it is.
BOOKKEEPING = frozenset({"REAL_TOPIC", "REAL_QID", "DELAY", "CLUSTER", "MIN_OFFSET", "MAX_OFFSET", "WAIT",
                         "TRAN_MSG", "PGROUP", "TRANSACTION_CHECK_TIMES", "TRAN_PREPARED_QUEUE_OFFSET",
                         "__STARTDELIVERTIME", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_OUT_MS",
                         "TIMER_ROLL_TIMES", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME"})
PULL_BATCH = 32
#: The producer group that resends dead letters.
RESEND_GROUP = "TOOLS_DLQ_RESEND"


def resend_target(msg: Any, group: str, to_topic: str | None, to_original: bool) -> str:
    if to_topic:
        return to_topic
    if to_original:
        return msg.properties.get(P.RETRY_TOPIC) or msg.topic
    return retry_topic(group)


def resend_properties(props: dict[str, str], target: str) -> dict[str, str]:
    """The properties a resent dead letter carries to ``target``."""
    out = {k: v for k, v in props.items() if k not in BOOKKEEPING}
    if is_retry_topic(target):
        out[P.RECONSUME_TIME] = "0"  # a fresh retry budget; RETRY_TOPIC kept so consumers see the origin
    else:
        out.pop(P.RETRY_TOPIC, None)
    return out


async def read_dead_letters(admin: Any, group: str, *, limit: int | None = None) -> list[Any]:
    """The messages of ``%DLQ%<group>`` on every broker (decoded, bodies decompressed), oldest first per queue;
    at most ``limit`` when given. A record that cannot be decoded is stepped over and reported to the admin's
    ``on_undecodable``."""
    topic = dlq_topic(group)
    try:
        route = await admin.topic_route(topic)
    except TopicNotExistError:
        return []
    out: list[Any] = []
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        addr = bd.broker_addrs.get(0) or next(iter(bd.broker_addrs.values()), None)
        if addr is None:
            continue
        nq = max((qd.read_queue_nums for qd in route.queue_datas if qd.broker_name == bd.broker_name), default=1)
        for qid in range(nq):
            resp = await admin.call_broker(addr, _request(RequestCode.GET_MIN_OFFSET,
                                                          h.GetMinOffsetRequestHeader(topic=topic, queue_id=qid)))
            offset = h.GetMinOffsetResponseHeader.from_ext(resp.ext_fields).offset
            while limit is None or len(out) < limit:
                code, msgs, nxt, _lo, _hi = await admin.pull_messages(addr, topic, qid, offset, PULL_BATCH)
                if code != ResponseCode.SUCCESS:
                    if code == ResponseCode.PULL_OFFSET_MOVED and nxt > offset:
                        offset = nxt
                        continue
                    break
                for m in msgs:
                    m.broker_name = bd.broker_name
                    out.append(m)
                if nxt <= offset:
                    break
                offset = nxt
    return out if limit is None else out[:limit]


def _request(code: int, header: Any) -> Any:
    from mq.protocol.command import RemotingCommand

    return RemotingCommand.request(code, header.to_ext())


def dead_letter_dict(m: Any) -> dict[str, Any]:
    return {"msgId": m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or m.msg_id, "offsetMsgId": m.msg_id,
            "originalTopic": m.properties.get(P.RETRY_TOPIC) or "", "failures": m.reconsume_times,
            "broker": m.broker_name, "queueOffset": m.queue_offset, "storeTimestamp": m.store_timestamp,
            "tags": m.properties.get(P.TAGS) or "", "keys": m.properties.get(P.KEYS) or "",
            "originMsgId": m.properties.get(P.ORIGIN_MESSAGE_ID) or "", "body": body_preview(m.body, 80)}


def choose(msgs: Iterable[Any], group: str, ids: Iterable[str] | None) -> list[Any]:
    """The dead letters whose msgId (UNIQ_KEY) or offsetMsgId is in ``ids`` (None: all of them); ConfigError
    naming the ids that are not in the DLQ."""
    msgs = list(msgs)
    if ids is None:
        return msgs
    wanted = {i.strip().upper() for i in ids if i.strip()}
    chosen = [m for m in msgs if m.msg_id.upper() in wanted or
              (m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "").upper() in wanted]
    found = {m.msg_id.upper() for m in chosen} | {(m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "").upper()
                                                   for m in chosen}
    missing = sorted(wanted - found)
    if missing:
        raise ConfigError(f"not in the DLQ of {group}: {', '.join(missing)}")
    return chosen


async def resend(producer: Any, msgs: Iterable[Any], group: str, *, to_topic: str | None = None,
                 to_original: bool = False) -> list[dict[str, Any]]:
    """Send each dead letter of ``msgs`` with a started ``Producer``; one result row per message."""
    done = []
    for m in msgs:
        target = resend_target(m, group, to_topic, to_original)
        r = await producer.send(Message(target, m.body, m.flag, resend_properties(m.properties, target)))
        done.append({"msgId": r.msg_id, "to": target, "status": r.status.value, "queueId": r.queue.queue_id,
                     "queueOffset": r.queue_offset})
    return done
