"""`mq queryMsgByKey`, `mq queryMsgById`, `mq queryMsgByOffset`; message ids and message display."""

from __future__ import annotations

from typing import Any

import click

from mq.cli.common import bool_option, json_option, with_admin

# The message views and id lookups live in the client (the web console shows them too); re-exported here.
from mq.client.message_view import (BODY_PREVIEW_CHARS, IdKind, body_preview, classify_msg_id,  # noqa: E402,F401
                                    message_dict)


def _print_message(console: Any, d: dict[str, Any]) -> None:
    from mq.cli.consumer_admin import format_ms

    rows = [("Topic", d["topic"]), ("Broker", d["brokerName"] or "-"), ("Queue ID", d["queueId"]),
            ("Queue Offset", d["queueOffset"]), ("CommitLog Offset", d["commitLogOffset"]),
            ("OffsetMsgId", d["offsetMsgId"]), ("UNIQ_KEY", d["uniqKey"] or "-"), ("Tags", d["tags"] or "-"),
            ("Keys", d["keys"] or "-"), ("Store Size", d["storeSize"]), ("SysFlag", d["sysFlag"]),
            ("Flag", d["flag"]), ("Body CRC", d["bodyCrc"]), ("Reconsume Times", d["reconsumeTimes"]),
            ("Prepared Tx Offset", d["preparedTransactionOffset"]),
            ("Born Timestamp", f"{format_ms(d['bornTimestamp'])} ({d['bornTimestamp']})"),
            ("Born Host", d["bornHost"]),
            ("Store Timestamp", f"{format_ms(d['storeTimestamp'])} ({d['storeTimestamp']})"),
            ("Store Host", d["storeHost"])]
    rows += [(f"Property {k}", v) for k, v in sorted(d["properties"].items())]
    rows.append((f"Body ({d['bodyLength']} bytes)", d["body"]))
    console.table(None, ["Field", "Value"], rows)


@click.command("queryMsgByKey")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-k", "--key", "--msgKey", "key", required=True, help="Message key (one of the KEYS).")
@click.option("--begin", "begin", default="0", show_default=True, help="Stored at or after (epoch ms, ISO, 'now').")
@click.option("--end", "end", default="now", show_default=True, help="Stored at or before.")
@click.option("--max", "max_num", type=click.IntRange(1, 64 * 1024), default=64, show_default=True,
              help="Most messages to show (newest first).")
@json_option
@click.pass_obj
def query_msg_by_key(obj, topic: str, key: str, begin: str, end: str, max_num: int, json_mode: bool) -> None:
    """Find messages by key on every broker of the topic, newest first."""
    import time

    from mq.cli.console import Console
    from mq.cli.consumer_admin import _time_option, format_ms

    now = int(time.time() * 1000)
    begin_ms, end_ms = _time_option(begin, now_ms=now), _time_option(end, now_ms=now)
    msgs = with_admin(obj, lambda admin: admin.query_message_by_key(topic, key, max_num, begin_ms, end_ms))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topic": topic, "key": key, "messages": [message_dict(m) for m in msgs]})
        return
    if not msgs:
        console.note(f"no message with key {key!r} in topic {topic}")
        return
    console.table(f"Messages of {topic} with key {key}",
                  ["OffsetMsgId", "UNIQ_KEY", "Broker", "QID", "Queue Offset", "Tags", "Store Time", "Size"],
                  [(m.msg_id, m.properties.get("UNIQ_KEY", ""), m.broker_name, m.queue_id, m.queue_offset,
                    m.properties.get("TAGS", ""), format_ms(m.store_timestamp), m.store_size) for m in msgs])


def split_msg_ids(text: str) -> list[str]:
    """The ids of mqadmin's ``-i id1,id2``: split on commas, blanks dropped, each checked (ValueError), in order
    and without repeats."""
    ids: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if part and part not in ids:
            classify_msg_id(part)
            ids.append(part)
    if not ids:
        raise ValueError("no message id given")
    return ids


@click.command("queryMsgById")
@click.option("-i", "--msg-id", "--msgId", "msg_id", required=True, metavar="ID[,ID...]",
              help="offsetMsgId, or a UNIQ_KEY (client msgId; needs -t); several separated by commas.")
@click.option("-t", "--topic", help="Topic (needed for a UNIQ_KEY).")
@click.option("-g", "--group", "--consumerGroup", "group", help="With -d: push each message to this group's client.")
@click.option("-d", "--client-id", "--clientId", "client_id",
              help="With -g: the client (its clientId) that consumes each message at once, as mqadmin's -g/-d.")
@bool_option("-s", "--resend", help="Send each message again to its topic (same body, keys, tags, UNIQ_KEY).")
@click.option("-u", "--unitName", "unit_name", help="With -s: the unit name of the producer that sends again "
              "(appended to its client id, as mqadmin's -u).")
@json_option
@click.pass_obj
def query_msg_by_id(obj, msg_id: str, topic: str | None, group: str | None, client_id: str | None, resend: bool,
                    unit_name: str | None, json_mode: bool) -> None:
    """Show messages, by offsetMsgId or by UNIQ_KEY: every field, its properties and a body preview. With -g and
    -d, have that client consume each message now instead (CONSUME_MESSAGE_DIRECTLY) and show its result; with
    -s, send each message again to its topic and show where it went.

    With several ids each is looked up; any not found is named on stderr and makes the exit code 1."""
    query_by_ids(obj, msg_id, topic, group, client_id, resend, unit_name, json_mode)


@click.command("queryMsgByUniqueKey")
@click.option("-i", "--msgId", "--msg-id", "msg_id", required=True, metavar="ID[,ID...]",
              help="The UNIQ_KEY (client msgId); several separated by commas.")
@click.option("-t", "--topic", required=True, help="The topic of the message.")
@click.option("-g", "--consumerGroup", "--group", "group", help="With -d: push each message to this group's client.")
@click.option("-d", "--clientId", "--client-id", "client_id",
              help="With -g: the client (its clientId) that consumes each message at once.")
@click.option("-a", "--showAll", "--show-all", "show_all", is_flag=True,
              help="Every stored copy with that key (at most 32; a retried send can store one twice), not only the "
                   "newest.")
@json_option
@click.pass_obj
def query_msg_by_unique_key(obj, msg_id: str, topic: str, group: str | None, client_id: str | None, show_all: bool,
                            json_mode: bool) -> None:
    """mqadmin's queryMsgByUniqueKey: show the message of a topic whose UNIQ_KEY (the client's msgId) is given, or
    with -g and -d have that client consume it now. Without -a only the newest copy is shown."""
    query_by_ids(obj, msg_id, topic, group, client_id, False, None, json_mode, newest_only=not show_all)


def query_by_ids(obj, msg_id: str, topic: str | None, group: str | None, client_id: str | None, resend: bool,
                 unit_name: str | None, json_mode: bool, *, newest_only: bool = False) -> None:
    """queryMsgById and queryMsgByUniqueKey: look each id up, then print, push (-g/-d) or send again (-s)."""
    import sys

    from mq.cli.console import Console
    from mq.errors import BrokerError, RemoteProtocolError, RemotingError

    try:
        ids = split_msg_ids(msg_id)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="-i/--msg-id") from None
    if bool(group) != bool(client_id):
        raise click.UsageError("-g/--group and -d/--client-id go together")
    if resend and group:
        raise click.UsageError("give -s/--resend or -g/-d, not both")
    if unit_name and not resend:
        raise click.UsageError("-u/--unitName names the producer of -s/--resend: give it with -s")
    kinds = {i: classify_msg_id(i)[0] for i in ids}
    if not topic:
        uniq = [i for i in ids if kinds[i] is IdKind.UNIQ_KEY]
        if uniq:
            raise click.UsageError(f"{', '.join(uniq)} does not decode to a broker address, so it is a UNIQ_KEY "
                                   "(the client's msgId): give its topic with -t")

    async def lookup(admin, one_id: str) -> tuple[str, list]:
        from mq.client.message_view import find_by_id

        kind, msgs = await find_by_id(admin, one_id, topic)
        return kind.value, msgs[:1] if newest_only else msgs

    async def push(admin, m) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY through the broker that stores ``m``."""
        host, port = m.store_host
        res = await admin.consume_message_directly(f"{host}:{port}", group, client_id, m.offset_msg_id)
        return {"offsetMsgId": m.offset_msg_id, "consumeResult": res.consume_result, "remark": res.remark,
                "spentTimeMills": res.spent_time_mills, "order": res.order, "autoCommit": res.auto_commit}

    async def run(admin) -> tuple[dict[str, tuple[str, list]], dict[str, str]]:
        producer = await _resend_producer(obj, unit_name) if resend else None
        found, missing = {}, {}
        try:
            for one_id in ids:
                try:
                    found_as, msgs = await lookup(admin, one_id)
                    if group:
                        msgs = [await push(admin, m) for m in msgs]
                    elif producer is not None:
                        msgs = [await _resend(producer, m) for m in msgs]
                    found[one_id] = (found_as, msgs)
                except (RemotingError, BrokerError, RemoteProtocolError) as exc:
                    missing[one_id] = str(exc)
        finally:
            if producer is not None:
                await producer.shutdown()
        return found, missing

    found, missing = with_admin(obj, run, timeout=20.0)
    console = Console(json_mode=json_mode)
    if resend:
        rows = [{"msgId": i, **r} for i, (_, rs) in found.items() for r in rs]
        if json_mode:
            console.json(rows)
        else:
            console.table("Sent again", ["MsgId", "Status", "Broker", "QID", "Queue Offset", "New OffsetMsgId"],
                          [(r["msgId"], r["status"], r["broker"], r["queueId"], r["queueOffset"], r["offsetMsgId"])
                           for r in rows])
        if missing:
            first, why = next(iter(missing.items()))
            console.error(f"{len(missing)} of {len(ids)} message(s) not sent again: {first}: {why}")
            sys.exit(1)
        return
    if group:
        _print_pushed(console, found, json_mode)
        failed = {i: r["consumeResult"] for i, (_, rs) in found.items() for r in rs
                  if r["consumeResult"] != "CR_SUCCESS"}
        if missing or failed:
            why = missing or {i: f"the client answered {r}" for i, r in failed.items()}
            first, text = next(iter(why.items()))
            console.error(f"{len(why)} of {len(ids)} message(s) not consumed by {client_id}: {first}: {text}")
            sys.exit(1)
        return
    docs = [{"msgId": i, "foundAs": found_as, "messages": [message_dict(m) for m in msgs]}
            for i, (found_as, msgs) in found.items()]
    if json_mode:
        if len(ids) > 1:
            console.json(docs)
        elif docs:  # one id: today's object (nothing on stdout when it is not found)
            console.json(docs[0])
    else:
        for doc in docs:
            if len(ids) > 1:
                console.line(f"Message {doc['msgId']} (found as {doc['foundAs']}):")
            for d in doc["messages"]:
                _print_message(console, d)
    if missing:
        first, why = next(iter(missing.items()))
        if len(ids) == 1:
            console.error(f"message {first} not found: {why}")
        else:
            console.error(f"{len(missing)} of {len(ids)} message ids not found: {', '.join(missing)} "
                          f"({first}: {why})")
        sys.exit(1)


async def _resend_producer(obj, unit_name: str | None):
    from mq.cli.send import client_config
    from mq.client.producer import Producer
    from mq.config import ProducerConfig

    cfg = client_config(obj, unit_name=(unit_name or "").strip())
    return await Producer(ProducerConfig(group="ReSendMsgById"), cfg).start()


async def _resend(producer, m) -> dict[str, Any]:
    """mqadmin's ``queryMsgById -s true``: the stored message sent again as it is (its UNIQ_KEY kept), less the
    CLUSTER property its broker added."""
    from mq.common import properties as P
    from mq.common.message import Message

    props = {k: v for k, v in m.properties.items() if k != P.CLUSTER}
    res = (await producer.send(Message(m.topic, m.body, flag=m.flag, properties=props))).to_dict()
    res["uniqKey"] = res.pop("msgId")
    return {**res, "originalOffsetMsgId": m.offset_msg_id}


def _print_pushed(console, found: dict[str, tuple[str, list]], json_mode: bool) -> None:
    rows = [{"msgId": i, **r} for i, (_, rs) in found.items() for r in rs]
    if json_mode:
        console.json(rows)
        return
    console.table("Consumed directly", ["MsgId", "OffsetMsgId", "Result", "Spent (ms)", "Order", "Auto Commit",
                                        "Remark"],
                  [(r["msgId"], r["offsetMsgId"], r["consumeResult"] or "-", r["spentTimeMills"], r["order"],
                    r["autoCommit"], r["remark"] or "") for r in rows])


@click.command("queryMsgByOffset")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-b", "--broker", "--brokerName", "broker", required=True, help="Broker name (or its ip:port).")
@click.option("-q", "-i", "--queue", "--queueId", "queue_id", type=click.IntRange(0), required=True,
              help="Queue id (-i as mqadmin takes it).")
@click.option("-o", "--offset", type=click.IntRange(0), required=True, help="Queue offset.")
@json_option
@click.pass_obj
def query_msg_by_offset(obj, topic: str, broker: str, queue_id: int, offset: int, json_mode: bool) -> None:
    """Show the message at one queue offset (a single pull, no waiting)."""
    from mq.cli.console import Console
    from mq.errors import BrokerError, RemoteProtocolError
    from mq.protocol.codes import ResponseCode

    async def run(admin):
        if ":" in broker:
            name, addr = "", broker
        else:
            addrs = await admin.topic_master_addrs(topic)
            if broker not in addrs:
                raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"broker {broker!r} is not in the route of {topic} "
                                  f"(brokers: {', '.join(addrs) or 'none'})")
            name, addr = broker, addrs[broker]
        code, msgs, nxt, lo, hi = await admin.pull_message_at(addr, topic, queue_id, offset)
        msgs = [m for m in msgs if m.queue_offset == offset]
        if not msgs and code == ResponseCode.SUCCESS:  # the warning above names the record and says why
            raise RemoteProtocolError(f"offset {offset} of {topic} queue {queue_id} on {addr} holds a record that "
                                      "cannot be decoded")
        if not msgs:
            why = {ResponseCode.PULL_OFFSET_MOVED: "is outside the queue",
                   ResponseCode.PULL_NOT_FOUND: "has no message yet"}.get(code, "has no message")
            raise BrokerError(code, f"offset {offset} of {topic} queue {queue_id} on {addr} {why} "
                              f"(min {lo}, max {hi})", addr)
        msgs[0].broker_name = name
        return msgs[0]

    m = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(message_dict(m))
        return
    _print_message(console, message_dict(m))
