"""`mq cloneGroupOffset`, `mq queryCq`, `mq cleanExpiredCQ`, `mq cleanUnusedTopic`, `mq deleteExpiredCommitLog`.

Each sends the RocketMQ 4.9 admin request a broker answers (CLONE_GROUP_OFFSET, QUERY_CONSUME_QUEUE,
CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC, DELETE_EXPIRED_COMMITLOG). A broker that fails is an error row
and the exit code is 1 (after every row is printed); bad input is a usage error (exit 2) before any network.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from mq.cli.common import bool_option, json_option, with_admin

def _valid_topic(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from mq.cli.consumer_status import valid_topic

    return valid_topic(ctx, param, value)


def _valid_group(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from mq.cli.consumer_status import valid_group

    return valid_group(ctx, param, value)


def valid_addr(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """click callback: a broker address must be ``host:port`` with a port in 1..65535 (else exit 2)."""
    if value is None:
        return None
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not a broker address (host:port)")
    return value.strip()


def _fail_if_any(console: Any, rows: list[dict]) -> None:
    failed = [r for r in rows if r.get("error")]
    if failed:
        console.error(f"{len(failed)} of {len(rows)} broker(s) failed: {failed[0]['error']}")
        sys.exit(1)


# ---------------------------------------------------------------------------------------------
# cloneGroupOffset
# ---------------------------------------------------------------------------------------------
@click.command("cloneGroupOffset")
@click.option("-s", "--src-group", "--srcGroup", "src_group", required=True, callback=_valid_group,
              help="Group whose offsets are copied.")
@click.option("-d", "--dest-group", "--destGroup", "dest_group", required=True, callback=_valid_group,
              help="Group that receives them.")
@click.option("-t", "--topic", required=True, callback=_valid_topic, help="Topic whose offsets are copied.")
@bool_option("-o", "--offline",
             help="Copy even if the source group is online and does not subscribe to the topic.")
@json_option
@click.pass_obj
def clone_group_offset(obj, src_group: str, dest_group: str, topic: str, offline: bool, json_mode: bool) -> None:
    """Copy a group's committed offsets of a topic to another group, on every broker of the topic's route.

    Each broker answers CLONE_GROUP_OFFSET; both groups' committed offsets are then read back
    (GET_ALL_CONSUMER_OFFSET) and shown side by side. A queue whose destination offset differs from the source's
    (the broker skipped the topic: the source group is online without subscribing to it; see -o) is marked."""
    from mq.cli.console import Console
    from mq.errors import MQError

    if src_group == dest_group:
        raise click.UsageError("-s/--src-group and -d/--dest-group must differ")

    async def run(admin) -> list[dict]:
        rows = []
        for name, addr in (await admin.topic_master_addrs(topic)).items():
            row: dict[str, Any] = {"brokerName": name, "addr": addr, "queues": [], "error": None}
            rows.append(row)
            try:
                await admin.clone_group_offset(addr, src_group, dest_group, topic, offline)
                table = await admin.get_all_consumer_offset(addr)
            except MQError as exc:
                row["error"] = str(exc)
                continue
            src = table.get(f"{topic}@{src_group}") or {}
            dest = table.get(f"{topic}@{dest_group}") or {}
            row["queues"] = [{"queueId": qid, "srcOffset": off, "destOffset": dest.get(qid)}
                             for qid, off in sorted(src.items())]
        return rows

    rows = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"srcGroup": src_group, "destGroup": dest_group, "topic": topic, "offline": offline,
                      "brokers": rows})
    else:
        table = []
        for r in rows:
            if r["error"]:
                table.append((r["brokerName"], r["addr"], "-", "-", "-", r["error"]))
                continue
            for q in r["queues"]:
                table.append((r["brokerName"], r["addr"], q["queueId"], q["srcOffset"],
                              "-" if q["destOffset"] is None else q["destOffset"],
                              "cloned" if q["destOffset"] == q["srcOffset"] else "not cloned"))
            if not r["queues"]:
                table.append((r["brokerName"], r["addr"], "-", "-", "-", f"no offsets of {src_group}"))
        console.table(f"Clone offsets of {src_group} to {dest_group} on {topic}",
                      ["Broker", "Address", "QID", f"{src_group}", f"{dest_group}", "Result"], table,
                      justify={"QID": "right", src_group: "right", dest_group: "right"})
    _fail_if_any(console, rows)


# ---------------------------------------------------------------------------------------------
# queryCq
# ---------------------------------------------------------------------------------------------
def unit_rows(body: Any, index: int, messages: dict[int, Any] | None = None,
              unreadable: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """The units of a QueryConsumeQueueResponseBody numbered from ``index``, with what the message at each
    physical offset says (``messages``: offset -> decoded message, when looked up; ``unreadable``: offset ->
    why the record there could not be decoded)."""
    rows = []
    for i, u in enumerate(body.queue_data):
        row: dict[str, Any] = {"index": index + i, "physicOffset": u.physic_offset, "physicSize": u.physic_size,
                               "tagsCode": u.tags_code, "eval": u.eval}
        msg = (messages or {}).get(u.physic_offset)
        if msg is not None:
            row["message"] = {"topic": msg.topic, "tags": msg.tags, "keys": msg.keys, "msgId": msg.msg_id,
                              "storeTimestamp": msg.store_timestamp, "queueOffset": msg.queue_offset}
        why = (unreadable or {}).get(u.physic_offset)
        if why is not None:
            row["undecodable"] = why
        rows.append(row)
    return rows


@click.command("queryCq")
@click.option("-t", "--topic", required=True, callback=_valid_topic, help="Topic name.")
@click.option("-q", "--queue", "queue_id", required=True, type=click.IntRange(0, 65535), help="Queue id.")
@click.option("-i", "--index", required=True, type=click.IntRange(0), help="First queue offset (index) to show.")
@click.option("-c", "--count", type=click.IntRange(1, 100_000), default=10, show_default=True,
              help="How many units.")
@click.option("-g", "--consumer", "group", callback=_valid_group,
              help="Consumer group: show its subscription and whether each unit matches it.")
@click.option("-b", "--broker", callback=valid_addr,
              help="Broker address (ip:port).  [default: the first broker of the topic's route]")
@click.option("--no-messages", is_flag=True, help="Do not read the message each unit points at.")
@json_option
@click.pass_obj
def query_cq(obj, topic: str, queue_id: int, index: int, count: int, group: str | None, broker: str | None,
             no_messages: bool, json_mode: bool) -> None:
    """Show consume-queue units of one queue (QUERY_CONSUME_QUEUE) and the messages they point at."""
    from mq.cli.console import Console
    from mq.cli.consumer_admin import format_ms
    from mq.errors import BrokerError, MQError, RemoteProtocolError
    from mq.store.consume_queue import FILLER_SIZE

    async def run(admin) -> dict:
        addr = broker
        if addr is None:
            masters = await admin.topic_master_addrs(topic)
            if not masters:
                raise BrokerError(1, f"topic {topic!r} has no master broker in its route")
            addr = next(iter(masters.values()))
        body, remark = await admin.query_consume_queue(addr, topic, queue_id, index, count, group)
        messages: dict[int, Any] = {}
        unreadable: dict[int, str] = {}
        if body is not None and not no_messages:
            for u in body.queue_data:
                if u.physic_size == FILLER_SIZE or u.physic_offset in messages:
                    continue
                try:
                    messages[u.physic_offset] = await admin.view_message(addr, u.physic_offset)
                except RemoteProtocolError as exc:  # stored but undecodable: the unit is shown, and why
                    unreadable[u.physic_offset] = str(exc)
                except MQError:  # expired from the commit log: the unit is still shown
                    continue
        return {"addr": addr, "body": body, "remark": remark, "messages": messages, "unreadable": unreadable}

    out = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    body = out["body"]
    if body is None:
        console.error(out["remark"] or f"Index {index} of {queue_id}@{topic} is not exist!")
        sys.exit(1)
    rows = unit_rows(body, index, out["messages"], out["unreadable"])
    for r in rows:
        if "undecodable" in r:
            console.warn(f"unit {r['index']}: {r['undecodable']}")
    sub = body.subscription_data
    if json_mode:
        console.json({"broker": out["addr"], "topic": topic, "queueId": queue_id, "index": index,
                      "minQueueIndex": body.min_queue_index, "maxQueueIndex": body.max_queue_index,
                      "group": group, "subscriptionData": sub.to_json_value() if sub is not None else None,
                      "filterData": body.filter_data, "units": rows})
        return
    if group is not None:
        if sub is not None:
            console.line(f"Subscription of {group}: {sub.sub_string} ({sub.expression_type}, codes "
                         f"{sorted(sub.code_set) or '*'})")
        else:
            console.line(f"Subscription of {group}: {body.filter_data}")
    cols = ["Index", "Physic Offset", "Size", "Tags Code"] + (["Matches"] if group is not None else []) + [
        "Tags", "Keys", "Store Time"]
    table = []
    for r in rows:
        m = r.get("message") or {}
        table.append([r["index"], r["physicOffset"], r["physicSize"], r["tagsCode"]]
                     + (["yes" if r["eval"] else "no"] if group is not None else [])
                     + [m.get("tags") or "-", m.get("keys") or "-", format_ms(m.get("storeTimestamp"))])
    console.table(f"Consume queue {queue_id}@{topic} on {out['addr']}", cols, table,
                  justify={c: "right" for c in ("Index", "Physic Offset", "Size", "Tags Code")},
                  caption=f"min index {body.min_queue_index}, max index {body.max_queue_index}")


# ---------------------------------------------------------------------------------------------
# cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog: one request to each broker
# ---------------------------------------------------------------------------------------------
def _broker_request(obj, broker: str | None, cluster: str | None, method: str, what: str,
                    json_mode: bool) -> None:
    from mq.cli.console import Console
    from mq.errors import MQError

    if broker and cluster:
        raise click.UsageError("give at most one of -b/--broker-addr and -c/--cluster")

    async def run(admin) -> list[dict]:
        if broker:
            targets = [("-", None, broker)]
        else:
            targets = await admin.cluster_broker_addrs(cluster)
            if not targets:
                raise MQError(f"no broker in {'cluster ' + repr(cluster) if cluster else 'any cluster'}")
        rows = []
        for name, bid, addr in targets:
            row: dict[str, Any] = {"brokerName": name, "brokerId": bid, "addr": addr, "result": "success",
                                   "error": None}
            try:
                await getattr(admin, method)(addr)
            except MQError as exc:
                row["result"], row["error"] = "failed", str(exc)
            rows.append(row)
        return rows

    rows = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"request": what, "brokers": rows})
    else:
        console.table(f"{what}", ["Broker", "ID", "Address", "Result"],
                      [(r["brokerName"], "-" if r["brokerId"] is None else r["brokerId"], r["addr"],
                        r["error"] or r["result"]) for r in rows])
    _fail_if_any(console, rows)


def _target_options(f):
    f = click.option("-c", "--cluster",
                     help="Every broker of this cluster.  [default: every cluster]")(f)
    f = click.option("-b", "--broker-addr", "--brokerAddr", "broker", callback=valid_addr,
                     help="This broker (ip:port).")(f)
    return f


@click.command("cleanExpiredCQ")
@_target_options
@json_option
@click.pass_obj
def clean_expired_cq(obj, broker: str | None, cluster: str | None, json_mode: bool) -> None:
    """Delete consume queues whose messages have all left the commit log (CLEAN_EXPIRED_CONSUMEQUEUE)."""
    _broker_request(obj, broker, cluster, "clean_expired_consume_queue", "cleanExpiredCQ", json_mode)


@click.command("cleanUnusedTopic")
@_target_options
@json_option
@click.pass_obj
def clean_unused_topic(obj, broker: str | None, cluster: str | None, json_mode: bool) -> None:
    """Delete the consume queues of topics the broker no longer configures (CLEAN_UNUSED_TOPIC)."""
    _broker_request(obj, broker, cluster, "clean_unused_topic", "cleanUnusedTopic", json_mode)


@click.command("deleteExpiredCommitLog")
@_target_options
@json_option
@click.pass_obj
def delete_expired_commit_log(obj, broker: str | None, cluster: str | None, json_mode: bool) -> None:
    """Delete commit log files older than fileReservedTime now, whatever deleteWhen says
    (DELETE_EXPIRED_COMMITLOG)."""
    _broker_request(obj, broker, cluster, "delete_expired_commit_log", "deleteExpiredCommitLog", json_mode)
