"""`mq dlq list -g GROUP` and `mq dlq resend -g GROUP (-i MSGID... | --all) [--to-topic T | --to-original]`.

Dead letters of a consumer group live in ``%DLQ%<group>`` (one queue per broker). ``list`` reads every one of
them (PULL_MESSAGE from the queue's min offset, nothing committed) and shows its failure count (the
reconsumeTimes it reached), the original topic (RETRY_TOPIC) and a body preview.

``resend`` puts the chosen dead letters back for consumption. By default they go to ``%RETRY%<group>``: only
the group that failed them sees them again (a resend to the original topic would also reach every other group
subscribed to it), the consumer presents them under their original topic (RETRY_TOPIC), and their retry count
starts again from 0 (RECONSUME_TIME=0), so a message that fails again goes back through the full retry
schedule before it returns to the DLQ. ``--to-original`` sends to the RETRY_TOPIC recorded in each message, and
``--to-topic T`` to T. The message keeps its UNIQ_KEY (msgId) and user properties; broker bookkeeping
(REAL_TOPIC, REAL_QID, DELAY, CLUSTER, MIN/MAX_OFFSET, WAIT, transaction and timer properties) is dropped. Dead
letters stay in the DLQ after a resend (it is a log, expired by the store's retention like any topic).
"""

from __future__ import annotations

from typing import Any

import click

from mq.cli.common import json_option, undecodable_reporter

#: Properties that describe where a message was parked or stored, not what it is.
BOOKKEEPING = frozenset({"REAL_TOPIC", "REAL_QID", "DELAY", "CLUSTER", "MIN_OFFSET", "MAX_OFFSET", "WAIT",
                         "TRAN_MSG", "PGROUP", "TRANSACTION_CHECK_TIMES", "TRAN_PREPARED_QUEUE_OFFSET",
                         "__STARTDELIVERTIME", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_OUT_MS",
                         "TIMER_ROLL_TIMES", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME"})
PULL_BATCH = 32


def resend_target(msg: Any, group: str, to_topic: str | None, to_original: bool) -> str:
    from mq.common import properties as P
    from mq.common.topic import retry_topic

    if to_topic:
        return to_topic
    if to_original:
        return msg.properties.get(P.RETRY_TOPIC) or msg.topic
    return retry_topic(group)


def resend_properties(props: dict[str, str], target: str) -> dict[str, str]:
    """The properties a resent dead letter carries to ``target``."""
    from mq.common import properties as P
    from mq.common.topic import is_retry_topic

    out = {k: v for k, v in props.items() if k not in BOOKKEEPING}
    if is_retry_topic(target):
        out[P.RECONSUME_TIME] = "0"  # a fresh retry budget; RETRY_TOPIC kept so consumers see the origin
    else:
        out.pop(P.RETRY_TOPIC, None)
    return out


async def read_dead_letters(admin: Any, group: str) -> list[Any]:
    """Every message of ``%DLQ%<group>`` on every broker (decoded, bodies decompressed; a record that cannot
    be decoded is stepped over and reported to the admin's ``on_undecodable``)."""
    from mq.common.topic import dlq_topic
    from mq.errors import TopicNotExistError
    from mq.protocol import headers as h
    from mq.protocol.codes import RequestCode, ResponseCode

    topic = dlq_topic(group)
    try:
        route = await admin.topic_route(topic)
    except TopicNotExistError:
        return []
    out = []
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        addr = bd.broker_addrs.get(0) or next(iter(bd.broker_addrs.values()), None)
        if addr is None:
            continue
        nq = max((qd.read_queue_nums for qd in route.queue_datas if qd.broker_name == bd.broker_name), default=1)
        for qid in range(nq):
            resp = await admin._broker(addr, RequestCode.GET_MIN_OFFSET,
                                       h.GetMinOffsetRequestHeader(topic=topic, queue_id=qid))
            offset = h.GetMinOffsetResponseHeader.from_ext(resp.ext_fields).offset
            while True:
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
    return out


def dead_letter_dict(m: Any) -> dict[str, Any]:
    from mq.cli.query import body_preview
    from mq.common import properties as P

    return {"msgId": m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or m.msg_id, "offsetMsgId": m.msg_id,
            "originalTopic": m.properties.get(P.RETRY_TOPIC) or "", "failures": m.reconsume_times,
            "broker": m.broker_name, "queueOffset": m.queue_offset, "storeTimestamp": m.store_timestamp,
            "tags": m.properties.get(P.TAGS) or "", "keys": m.properties.get(P.KEYS) or "",
            "originMsgId": m.properties.get(P.ORIGIN_MESSAGE_ID) or "", "body": body_preview(m.body, 80)}


@click.group("dlq")
def dlq() -> None:
    """Dead-letter queues of consumer groups: list and resend."""


@dlq.command("list")
@click.option("-g", "--group", required=True, help="Consumer group.")
@json_option
@click.pass_obj
def dlq_list(obj, group: str, json_mode: bool) -> None:
    """List the dead letters of a group with their failure counts."""
    from mq.cli.common import with_admin
    from mq.cli.console import Console
    from mq.cli.consumer_admin import format_ms

    msgs = with_admin(obj, lambda admin: read_dead_letters(admin, group), timeout=10.0)
    console = Console(json_mode=json_mode)
    rows = [dead_letter_dict(m) for m in msgs]
    if json_mode:
        console.json({"group": group, "count": len(rows), "messages": rows})
        return
    if not rows:
        console.note(f"no dead letter for group {group}")
        return
    console.table(f"Dead letters of {group} ({len(rows)})",
                  ["MsgId", "Original Topic", "Failures", "Broker", "Offset", "Tags", "Stored", "Body"],
                  [(r["msgId"], r["originalTopic"], r["failures"], r["broker"], r["queueOffset"], r["tags"],
                    format_ms(r["storeTimestamp"]), r["body"]) for r in rows])


@dlq.command("resend")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-i", "--msg-id", "msg_ids", multiple=True, help="msgId (UNIQ_KEY) or offsetMsgId; repeatable.")
@click.option("--all", "resend_all", is_flag=True, help="Resend every dead letter of the group.")
@click.option("--to-topic", help="Send to this topic instead of %RETRY%<group>.")
@click.option("--to-original", is_flag=True, help="Send to each message's original topic (RETRY_TOPIC).")
@json_option
@click.pass_obj
def dlq_resend(obj, group: str, msg_ids: tuple[str, ...], resend_all: bool, to_topic: str | None,
               to_original: bool, json_mode: bool) -> None:
    """Put dead letters back for consumption (to %RETRY%<group> unless told otherwise)."""
    from mq.cli.console import Console
    from mq.errors import ConfigError

    if bool(msg_ids) == resend_all:
        raise click.UsageError("give either -i MSGID (one or more) or --all")
    if to_topic and to_original:
        raise click.UsageError("--to-topic and --to-original exclude each other")
    wanted = {i.strip().upper() for i in msg_ids}

    async def main() -> list[dict[str, Any]]:
        from mq.client.admin import MQAdmin
        from mq.client.producer import Producer
        from mq.common import properties as P
        from mq.common.message import Message
        from mq.config import ClientConfig, ProducerConfig

        async with MQAdmin(obj.namesrv_addrs, timeout=10.0, credentials=obj.credentials,
                           on_undecodable=undecodable_reporter()) as admin:
            msgs = await read_dead_letters(admin, group)
        chosen = [m for m in msgs if resend_all or m.msg_id.upper() in wanted or
                  (m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "").upper() in wanted]
        found = {m.msg_id.upper() for m in chosen} | {(m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "")
                                                       .upper() for m in chosen}
        missing = sorted(wanted - found)
        if missing:
            raise ConfigError(f"not in the DLQ of {group}: {', '.join(missing)}")
        done = []
        producer = Producer(ProducerConfig(group="TOOLS_DLQ_RESEND"),
                            ClientConfig(namesrv_addr=";".join(obj.namesrv_addrs), instance_name="mq-dlq",
                                         **obj.credential_options))
        async with producer:
            for m in chosen:
                target = resend_target(m, group, to_topic, to_original)
                props = resend_properties(m.properties, target)
                r = await producer.send(Message(target, m.body, m.flag, props))
                done.append({"msgId": r.msg_id, "to": target, "status": r.status.value,
                             "queueId": r.queue.queue_id, "queueOffset": r.queue_offset})
        return done

    from mq.remoting import run

    done = run(main())
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "resent": done})
        return
    console.table(f"Resent {len(done)} dead letter(s) of {group}", ["MsgId", "To", "Status", "QID", "Offset"],
                  [(d["msgId"], d["to"], d["status"], d["queueId"], d["queueOffset"]) for d in done])
