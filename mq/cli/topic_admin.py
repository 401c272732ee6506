"""`mq topicStatus`, `mq updateTopic`, `mq deleteTopic`."""

from __future__ import annotations

import click

from mq.cli.common import bool_option, json_option, with_admin


# order_conf lives with the topic operations in the client; re-exported for the other commands.
from mq.client.topic_admin import order_conf  # noqa: E402,F401


@click.command("topicStatus")
@click.option("-t", "--topic", required=True, help="Topic name.")
@json_option
@click.pass_obj
def topic_status(obj, topic: str, json_mode: bool) -> None:
    """Show each queue of a topic: broker, queue id, min/max offset, last update time."""
    from mq.cli.console import Console
    from mq.cli.consumer_admin import format_ms

    stats = with_admin(obj, lambda admin: admin.examine_topic_stats_all(topic))
    rows = [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": o.min_offset,
             "maxOffset": o.max_offset, "lastUpdateTimestamp": o.last_update_timestamp}
            for mq, o in sorted(stats.offset_table.items())]
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topic": topic, "queues": rows})
        return
    console.table(f"Status of {topic}", ["Broker", "QID", "Min Offset", "Max Offset", "Last Updated"],
                  [(r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"],
                    format_ms(r["lastUpdateTimestamp"])) for r in rows],
                  justify={"QID": "right", "Min Offset": "right", "Max Offset": "right"})
    console.line(f"{len(rows)} queue(s), {sum(r['maxOffset'] - r['minOffset'] for r in rows)} message(s) stored")


@click.command("updateTopic")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-c", "--cluster", "--clusterName", "cluster", help="Create on every master of this cluster.")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", help="Create on this broker (ip:port).")
@click.option("-r", "--read-queue-nums", "--readQueueNums", "read_queue_nums",
              type=click.IntRange(0, 1024), default=8, show_default=True)
@click.option("-w", "--write-queue-nums", "--writeQueueNums", "write_queue_nums",
              type=click.IntRange(0, 1024), default=8, show_default=True)
@click.option("-p", "--perm", type=click.IntRange(0, 7), default=6, show_default=True,
              help="2 = write, 4 = read, 6 = read+write.")
@bool_option("-o", "--order", help="Ordered topic: also set ORDER_TOPIC_CONFIG on the name server.")
@bool_option("-u", "--unit", hidden=True, help="Unit topic (topicSysFlag bit 1).")
@bool_option("-s", "--has-unit-sub", "--hasUnitSub", hidden=True, help="Has unit subscriptions (topicSysFlag bit 2).")
@click.option("--filter-type", type=click.Choice(["SINGLE_TAG", "MULTI_TAG"]), default="SINGLE_TAG",
              show_default=True)
@click.option("-a", "--attributes", help="RocketMQ 5 attribute changes: +key=value to set, -key to remove "
              "(e.g. +message.type=FIFO; NORMAL, FIFO, DELAY, TRANSACTION or MIXED).")
@json_option
@click.pass_obj
def update_topic(obj, topic: str, cluster: str | None, broker: str | None, read_queue_nums: int,
                 write_queue_nums: int, perm: int, order: bool, unit: bool, has_unit_sub: bool, filter_type: str,
                 attributes: str | None, json_mode: bool) -> None:
    """Create or update a topic on one broker or on every master of a cluster."""
    from mq.cli.console import Console
    from mq.common.attributes import parse_to_map
    from mq.common.topic import validate_topic
    from mq.errors import TopicAttributeError
    from mq.protocol.bodies import TopicConfig

    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -c/--cluster and -b/--broker-addr")
    validate_topic(topic)
    try:
        parse_to_map(attributes)
    except TopicAttributeError as exc:
        raise click.BadParameter(str(exc), param_hint="-a/--attributes") from None
    tc = TopicConfig(topic_name=topic, read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums,
                     perm=perm, topic_filter_type=filter_type, topic_sys_flag=(1 if unit else 0) | (2 if has_unit_sub else 0), order=order)

    async def run(admin) -> dict:
        from mq.client.topic_admin import update_topic as update

        return await update(admin, tc, cluster=cluster, broker=broker, attributes=attributes)

    out = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topic": topic, "config": tc.to_json_value(), "attributes": attributes or "", **out})
        return
    extra = f" attributes={attributes}" if attributes else ""
    for name, addr in sorted(out["brokers"].items()):
        console.line(f"create topic {topic} to {addr} ({name}) success: r={read_queue_nums} w={write_queue_nums} "
                     f"perm={perm}{extra}")
    if out["orderConf"]:
        console.line(f"set ORDER_TOPIC_CONFIG {topic} = {out['orderConf']}")


@click.command("deleteTopic")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-c", "--cluster", "--clusterName", "cluster", required=True,
              help="Delete from every master of this cluster.")
@json_option
@click.pass_obj
def delete_topic(obj, topic: str, cluster: str, json_mode: bool) -> None:
    """Delete a topic from the masters of a cluster and from every name server."""
    from mq.cli.console import Console

    async def run(admin) -> dict:
        from mq.client.topic_admin import delete_topic as delete

        return await delete(admin, topic, cluster)

    out = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topic": topic, "cluster": cluster, **out})
        return
    for name, addr in sorted(out["brokers"].items()):
        console.line(f"delete topic {topic} from {addr} ({name}) success")
    for failure in out["namesrvFailures"]:
        console.warn(f"name server: {failure}")
    console.line(f"delete topic {topic} from the name server(s) success")


def perm_text(perm: int) -> str:
    """A topic permission as mqadmin's letters: 6 -> ``RW``, 4 -> ``R``, 2 -> ``W``, 0 -> ``-``."""
    letters = ("R" if perm & 4 else "") + ("W" if perm & 2 else "")
    return f"{perm} ({letters or '-'})"


def _valid_topic(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from mq.cli.consumer_status import valid_topic

    return valid_topic(ctx, param, value)


@click.command("updateTopicPerm")
@click.option("-t", "--topic", required=True, callback=_valid_topic, help="Topic name.")
@click.option("-p", "--perm", required=True, type=click.Choice(["2", "4", "6"]),
              help="New permission: 2 = write, 4 = read, 6 = read+write.")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", help="Change it on this broker (ip:port).")
@click.option("-c", "--cluster", "--clusterName", "cluster", help="Change it on every master of this cluster.")
@json_option
@click.pass_obj
def update_topic_perm(obj, topic: str, perm: str, broker: str | None, cluster: str | None, json_mode: bool) -> None:
    """Change only the permission of a topic on one broker or on every master of a cluster.

    Each broker's current config of the topic (GET_ALL_TOPIC_CONFIG) is written back with the new perm. A broker
    that does not hold the topic, or cannot be reached, is an error row and the exit code is 1."""
    import dataclasses
    import sys

    from mq.cli.console import Console
    from mq.errors import MQError

    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -c/--cluster and -b/--broker-addr")
    new_perm = int(perm)

    async def run(admin) -> list[dict]:
        if cluster:
            targets = await admin.master_addrs(cluster)
            if not targets:
                from mq.errors import BrokerError

                raise BrokerError(1, f"cluster {cluster!r} has no master broker")
        else:
            info = await admin.cluster_info()
            targets = {name: broker for name, bd in info.broker_addr_table.items()
                       if bd.broker_addrs.get(0) == broker} or {broker: broker}
        rows = []
        for name, addr in sorted(targets.items()):
            row = {"brokerName": name, "addr": addr, "oldPerm": None, "newPerm": new_perm, "status": "error",
                   "error": None}
            rows.append(row)
            try:
                table = (await admin.get_all_topic_config(addr)).topic_config_table
            except MQError as exc:
                if "No topic in this broker" not in str(exc):
                    row["error"] = str(exc)
                    continue
                table = {}
            tc = table.get(topic)
            if tc is None:
                row["error"] = f"topic {topic!r} does not exist on broker {name} ({addr})"
                continue
            row["oldPerm"] = tc.perm
            if tc.perm == new_perm:
                row["status"] = "unchanged"
                continue
            try:
                await admin.create_and_update_topic_config(addr, dataclasses.replace(tc, perm=new_perm))
            except MQError as exc:
                row["error"] = str(exc)
                continue
            row["status"] = "updated"
        return rows

    rows = with_admin(obj, run)
    failed = [r for r in rows if r["status"] == "error"]
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topic": topic, "perm": new_perm, "brokers": rows})
    else:
        console.table(f"Permission of {topic}", ["Broker", "Address", "Old Perm", "New Perm", "Result"],
                      [(r["brokerName"], r["addr"], "-" if r["oldPerm"] is None else perm_text(r["oldPerm"]),
                        perm_text(r["newPerm"]), r["error"] or r["status"]) for r in rows])
    if failed:
        console.error(f"{len(failed)} of {len(rows)} broker(s) failed: {failed[0]['error']}")
        sys.exit(1)
