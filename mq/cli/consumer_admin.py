"""`mq consumerProgress`, `consumerConnection`, `producerConnection`, `resetOffsetByTime`, `updateSubGroup`,
`deleteSubGroup`; and the pure helpers they share with `mq/cli/query.py` (time parsing and formatting, table
shaping)."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import click

from mq.cli.common import bool_option, gather_bounded, json_option, with_admin
# consume progress lives in the client (the web console shows it too); re-exported for the other commands
from mq.client.group_admin import progress_rows, progress_totals  # noqa: F401

_MQADMIN_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})$")


# ---------------------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------------------
def parse_time(text: str, *, now_ms: int | None = None) -> int:
    """A point in time as epoch ms.

    Accepts epoch milliseconds, an ISO datetime (``2024-05-01T10:00:00``, ``2024-05-01 10:00``, a ``Z`` or
    ``+02:00`` suffix; no zone = local time), mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS``, and ``now`` or ``-1``:
    -1 ("the latest offset", as mqadmin resetOffsetByTime), or ``now_ms`` when given. ValueError otherwise."""
    t = text.strip()
    if t.lower() in ("now", "-1"):
        return -1 if now_ms is None else now_ms
    if t.isdigit():
        return int(t)
    m = _MQADMIN_TIME.match(t)
    if m:
        y, mo, d, hh, mi, ss, ms = (int(x) for x in m.groups())
        return int(_dt.datetime(y, mo, d, hh, mi, ss, ms * 1000).timestamp() * 1000)
    try:
        when = _dt.datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t)
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a time: give epoch ms, an ISO datetime "
                         "(2024-05-01T10:00:00), yyyy-MM-dd#HH:mm:ss:SSS, or 'now'") from None
    return int(when.timestamp() * 1000)


def format_ms(ms: int | None) -> str:
    """Epoch ms as local ``YYYY-MM-DD HH:MM:SS.mmm``; 0/None/negative as ``-``."""
    if not ms or ms < 0:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


async def queue_owners(admin, group: str) -> dict[tuple[str, str, int], str]:
    """(topic, brokerName, queueId) -> the address of the client consuming it, from each online client's running
    info (mqadmin ``consumerProgress -s``); a client that does not answer is left out."""
    from mq.cli.consumer_status import relay_addrs, running_info
    from mq.errors import ConsumerNotOnlineError, MQError

    try:
        cc = await admin.examine_consumer_connection_all(group)
    except ConsumerNotOnlineError:
        return {}
    addrs = await relay_addrs(admin, None)
    owners: dict[tuple[str, str, int], str] = {}
    for c in cc.connection_set:
        try:
            _addr, info = await running_info(admin, addrs, group, c.client_id, False)
        except MQError:
            continue
        for r in info["mqTable"]:
            owners[(r["topic"], r["brokerName"], r["queueId"])] = c.client_addr
    return owners


def _valid_addr(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from mq.cli.queue_admin import valid_addr

    return valid_addr(ctx, param, value)


def _time_option(value: str, *, now_ms: int | None = None) -> int:
    try:
        return parse_time(value, now_ms=now_ms)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


# ---------------------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------------------
@click.command("consumerProgress")
@click.option("-g", "--group", "--groupName", "group", help="Consumer group (default: every group the brokers know).")
@click.option("-t", "--topic", help="Only this topic (with -g).")
@bool_option("-s", "--show-client-ip", "--showClientIP", "show_client",
             help="With -g: the client consuming each queue (each online client is asked for its running info).")
@json_option
@click.pass_obj
def consumer_progress(obj, group: str | None, topic: str | None, show_client: bool, json_mode: bool) -> None:
    """Show consume progress: per queue broker offset, consumer offset, diff and last time, then totals."""
    from mq.cli.console import Console

    console = Console(json_mode=json_mode)
    if show_client and not group:
        raise click.UsageError("-s/--show-client-ip needs -g/--group")
    if group:
        async def fetch(admin):
            return (await admin.examine_consume_stats_all(group, topic),
                    await queue_owners(admin, group) if show_client else None)

        stats, owners = with_admin(obj, fetch, timeout=15.0)
        rows = progress_rows(stats.offset_table)
        if owners is not None:
            for r in rows:
                r["clientIp"] = owners.get((r["topic"], r["brokerName"], r["queueId"]), "")
        totals = progress_totals(rows)
        if json_mode:
            console.json({"group": group, "consumeTps": stats.consume_tps, "queues": rows, "totals": totals})
            return
        if not rows:
            console.note(f"group {group} has no consume progress on any broker")
        client_col = ["Client"] if owners is not None else []
        pop = totals["inflight"] > 0  # popped messages not yet acked (RocketMQ 5 pop consumers)
        console.table(f"Consume progress of {group}",
                      ["Topic", "Broker", "QID", "Broker Offset", "Consumer Offset", *client_col, "Diff",
                       *(["Inflight"] if pop else []), "Last Time"],
                      [(r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"],
                        *([r["clientIp"] or "-"] if owners is not None else []), r["diff"],
                        *([r["inflight"]] if pop else []), format_ms(r["lastTimestamp"])) for r in rows],
                      justify={c: "right" for c in ("QID", "Broker Offset", "Consumer Offset", "Diff", "Inflight")})
        console.line(f"Consume TPS: {stats.consume_tps:.2f}   Diff Total: {totals['diff']}"
                     + (f"   Inflight Total: {totals['inflight']}" if pop else ""))
        return

    async def every_group(admin) -> list[dict[str, Any]]:
        from mq.client.group_admin import consumer_groups, group_row

        return await gather_bounded(lambda g: group_row(admin, g), sorted(await consumer_groups(admin)), 16)

    rows = with_admin(obj, every_group)
    if json_mode:
        console.json({"groups": rows})
        return
    if not rows:
        console.note("no consumer group has offsets on any broker")
        return
    console.table(None, ["Group", "Clients", "Version", "Type", "Model", "TPS", "Diff Total"],
                  [(r["group"], r["clients"], r["version"], r["consumeType"], r["messageModel"],
                    f"{r['consumeTps']:.2f}", r["diffTotal"]) for r in rows],
                  justify={"Clients": "right", "TPS": "right", "Diff Total": "right"})


@click.command("consumerConnection")
@click.option("-g", "--group", "--consumerGroup", "group", required=True, help="Consumer group.")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", default=None, callback=_valid_addr,
              help="Ask only this broker (ip:port).  [default: every master]")
@json_option
@click.pass_obj
def consumer_connection(obj, group: str, broker: str | None, json_mode: bool) -> None:
    """Show the online clients of a consumer group and its subscriptions."""
    from mq.cli.console import Console

    if broker:
        cc = with_admin(obj, lambda admin: admin.examine_consumer_connection_info(broker, group))
    else:
        cc = with_admin(obj, lambda admin: admin.examine_consumer_connection_all(group))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(cc.to_json_value())
        return
    console.table(f"Clients of {group}" + (f" on {broker}" if broker else ""),
                  ["#", "Client ID", "Client Addr", "Language", "Version"],
                  [(i + 1, c.client_id, c.client_addr, c.language.name, c.version)
                   for i, c in enumerate(cc.connection_set)])
    console.table("Subscriptions", ["Topic", "Expression", "Type", "Sub Version"],
                  [(t, s.sub_string, s.expression_type, s.sub_version) for t, s in sorted(cc.subscription_table.items())])
    console.line(f"ConsumeType: {cc.consume_type.name if cc.consume_type else '-'}   "
                 f"MessageModel: {cc.message_model.name if cc.message_model else '-'}   "
                 f"ConsumeFromWhere: {cc.consume_from_where.name if cc.consume_from_where else '-'}")


@click.command("producerConnection")
@click.option("-g", "--group", "--producerGroup", "group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to (its brokers are asked).")
@json_option
@click.pass_obj
def producer_connection(obj, group: str, topic: str, json_mode: bool) -> None:
    """Show the online clients of a producer group."""
    from mq.cli.console import Console

    async def fetch(admin) -> list:
        from mq.client.group_admin import producer_connections

        return await producer_connections(admin, group, topic)

    conns = with_admin(obj, fetch)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "connectionSet": [c.to_json_value() for c in conns]})
        return
    console.table(f"Producers of {group}", ["#", "Client ID", "Client Addr", "Language", "Version"],
                  [(i + 1, c.client_id, c.client_addr, c.language.name, c.version) for i, c in enumerate(conns)])


@click.command("resetOffsetByTime")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-s", "--timestamp", "when", required=True,
              help="Epoch ms, ISO datetime, yyyy-MM-dd#HH:mm:ss:SSS, or 'now'/-1 for the latest offset.")
@bool_option("-f", "--force", default=True,
             help="Set each queue to the time's offset even if that moves it forward (false: only move back).")
@click.option("--no-force", is_flag=True, help="The same as -f false.")
@click.option("-c", "--cplus", is_flag=True,
              help="The group's online clients are C++ clients: the broker tells them the new offsets in the form "
                   "they read (mqadmin -c).")
@json_option
@click.pass_obj
def reset_offset_by_time(obj, group: str, topic: str, when: str, force: bool, no_force: bool, cplus: bool,
                         json_mode: bool) -> None:
    """Reset a group's offsets on a topic to the first message stored at or after a time.

    Online consumers are told the new offsets at once; an offline group resumes from them."""
    from mq.cli.console import Console

    ts = _time_option(when)
    force = force and not no_force

    async def run(admin) -> dict:
        from mq.client.group_admin import reset_offset_by_time as reset

        return await reset(admin, topic, group, ts, force, cplus)

    table = with_admin(obj, run)
    rows = [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
            for mq, off in sorted(table.items())]
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "topic": topic, "timestamp": ts, "offsets": rows})
        return
    console.table(f"Offsets of {group} on {topic} reset to {'latest' if ts == -1 else format_ms(ts)}",
                  ["Broker", "QID", "New Offset"], [(r["brokerName"], r["queueId"], r["offset"]) for r in rows],
                  justify={"QID": "right", "New Offset": "right"})


@click.command("skipAccumulatedMessage")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic.")
@bool_option("-f", "--force", default=True, help="Move every queue to its end (false: never move an offset back).")
@json_option
@click.pass_context
def skip_accumulated_message(ctx: click.Context, group: str, topic: str, force: bool, json_mode: bool) -> None:
    """Skip a group's backlog on a topic: every queue's offset moves to its max offset (mqadmin's
    skipAccumulatedMessage, resetOffsetByTime to the latest offset). Online consumers are told at once."""
    ctx.invoke(reset_offset_by_time, group=group, topic=topic, when="-1", force=force, no_force=False, cplus=False,
               json_mode=json_mode)


@click.command("getConsumerConfig")
@click.option("-g", "--groupName", "--group", "group", required=True, help="Subscription group name.")
@json_option
@click.pass_obj
def get_consumer_config(obj, group: str, json_mode: bool) -> None:
    """Show a subscription group's config on every broker that has it (mqadmin's getConsumerConfig: each broker's
    master, or a slave when the master is down). Exit code 1 when no broker has the group."""
    import sys

    from mq.cli.console import Console

    async def run(admin) -> list[dict[str, Any]]:
        info = await admin.cluster_info()
        cluster_of = {name: c for c, names in info.cluster_addr_table.items() for name in names}
        found = []
        for name, bd in sorted(info.broker_addr_table.items()):
            addrs = bd.broker_addrs
            addr = addrs.get(0) or next(iter(addrs.values()), None)
            if addr is None:
                continue
            cfg = (await admin.get_all_subscription_group(addr)).subscription_group_table.get(group)
            if cfg is not None:
                found.append({"clusterName": cluster_of.get(name), "brokerName": name, "brokerAddr": addr,
                              "config": cfg.to_json_value()})
        return found

    found = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(found)
    for row in [] if json_mode else found:
        console.table(f"{row['clusterName']}:{row['brokerName']} ({row['brokerAddr']})", ["Key", "Value"],
                      sorted(row["config"].items()))
    if not found:
        console.error(f"no broker has subscription group {group}")
        sys.exit(1)


def _target_addrs(admin, cluster: str | None, broker: str | None):
    if broker:
        async def one() -> dict[str, str]:
            return {broker: broker}
        return one()
    return admin.master_addrs(cluster)


def _require_target(cluster: str | None, broker: str | None) -> None:
    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -c/--cluster and -b/--broker-addr")


def _retry_policy(text: str | None):
    """``--groupRetryPolicy`` JSON as a GroupRetryPolicy (None when not given); BadParameter when it is not one."""
    if text is None:
        return None
    from mq.errors import RemoteProtocolError
    from mq.protocol.bodies import GroupRetryPolicy, retry_policy_problem

    try:
        policy = GroupRetryPolicy.from_json(text.encode())
    except RemoteProtocolError as exc:
        raise click.BadParameter(f"not a group retry policy: {exc}", param_hint="-p/--groupRetryPolicy") from None
    bad = retry_policy_problem(policy)
    if bad:
        raise click.BadParameter(bad, param_hint="-p/--groupRetryPolicy")
    return policy


@click.command("updateSubGroup")
@click.option("-g", "--group", "--groupName", "group", required=True, help="Consumer group name.")
@click.option("-c", "--cluster", "--clusterName", "cluster", help="Create on every master of this cluster.")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", help="Create on this broker (ip:port).")
@click.option("-s", "--consume-enable", "--consumeEnable", "consume_enable", type=bool, default=True,
              show_default=True)
@click.option("-m", "--consume-from-min-enable", "--consumeFromMinEnable", "consume_from_min_enable", type=bool,
              default=True, show_default=True)
@click.option("-d", "--consume-broadcast-enable", "--consumeBroadcastEnable", "consume_broadcast_enable", type=bool,
              default=True, show_default=True)
@click.option("-q", "--retry-queue-nums", "--retryQueueNums", "retry_queue_nums", type=click.IntRange(0), default=1,
              show_default=True)
@click.option("-r", "--retry-max-times", "--retryMaxTimes", "retry_max_times", type=click.IntRange(0), default=16,
              show_default=True)
@click.option("-i", "--broker-id", "--brokerId", "broker_id", type=click.IntRange(0), default=0, show_default=True,
              help="Consume from this broker id.")
@click.option("-w", "--which-broker-when-consume-slowly", "--whichBrokerWhenConsumeSlowly",
              "which_broker_when_consume_slowly", type=click.IntRange(0), default=1, show_default=True)
@click.option("-a", "--notify-consumer-ids-changed", "--notifyConsumerIdsChanged", "notify_consumer_ids_changed",
              type=bool, default=True, show_default=True)
@click.option("-o", "--consume-message-orderly", "--consumeMessageOrderly", "consume_message_orderly", type=bool,
              default=None, help="RocketMQ 5: a FIFO group (5.x consumers receive each queue in order).")
@click.option("-p", "--group-retry-policy", "--groupRetryPolicy", "group_retry_policy",
              help='RocketMQ 5 retry backoff as JSON: {"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":'
                   '1000,"max":60000,"multiplier":2}} or {"type":"CUSTOMIZED","customizedRetryPolicy":'
                   '{"next":[1000,5000]}}.')
@json_option
@click.pass_obj
def update_sub_group(obj, group: str, cluster: str | None, broker: str | None, consume_enable: bool,
                     consume_from_min_enable: bool, consume_broadcast_enable: bool, retry_queue_nums: int,
                     retry_max_times: int, broker_id: int, which_broker_when_consume_slowly: int,
                     notify_consumer_ids_changed: bool, consume_message_orderly: bool | None,
                     group_retry_policy: str | None, json_mode: bool) -> None:
    """Create or update a subscription group on brokers."""
    from mq.cli.console import Console
    from mq.common.topic import validate_group
    from mq.protocol.bodies import SubscriptionGroupConfig

    _require_target(cluster, broker)
    validate_group(group)
    cfg = SubscriptionGroupConfig(group, consume_enable, consume_from_min_enable, consume_broadcast_enable,
                                  retry_queue_nums, retry_max_times, broker_id, which_broker_when_consume_slowly,
                                  notify_consumer_ids_changed, consume_message_orderly or None,
                                  _retry_policy(group_retry_policy))

    async def run(admin) -> list[str]:
        addrs = list((await _target_addrs(admin, cluster, broker)).values())
        for addr in addrs:
            await admin.create_and_update_subscription_group_config(addr, cfg)
        return addrs

    addrs = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "brokers": addrs, "config": cfg.to_json_value()})
        return
    for addr in addrs:
        console.line(f"subscription group {group} updated on {addr}")


@click.command("deleteSubGroup")
@click.option("-g", "--group", "--groupName", "group", required=True, help="Consumer group name.")
@click.option("-c", "--cluster", "--clusterName", "cluster", help="Delete on every master of this cluster.")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", help="Delete on this broker (ip:port).")
@bool_option("-r", "--remove-offset", "--removeOffset", "remove_offset",
             help="Also drop the group's committed offsets.")
@json_option
@click.pass_obj
def delete_sub_group(obj, group: str, cluster: str | None, broker: str | None, remove_offset: bool,
                     json_mode: bool) -> None:
    """Delete a subscription group (and its %RETRY%/%DLQ% topics) from brokers."""
    from mq.cli.console import Console

    _require_target(cluster, broker)

    async def run(admin) -> list[str]:
        from mq.client.group_admin import delete_subscription_group

        addrs = (await _target_addrs(admin, cluster, broker)).values()
        return await delete_subscription_group(admin, group, addrs, cluster=cluster, remove_offset=remove_offset)

    addrs = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "brokers": addrs, "removeOffset": remove_offset})
        return
    for addr in addrs:
        console.line(f"subscription group {group} deleted on {addr}")
