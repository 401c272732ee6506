"""`mq brokerConsumeStats`, `mq producer`, `mq statsAll`, `mq getConsumerStatus`: mqadmin's statistics commands.

- brokerConsumeStats -b ADDR [-o true|false] [-l LEVEL]: GET_BROKER_CONSUME_STATS of one broker, one row per queue
  of every group/topic whose diff is at least LEVEL, then the broker's ``Diff Total``. (mqadmin also hides the
  queues that have no last consume time yet; we show them, with ``-`` as the time.)
- producer -b ADDR: GET_ALL_PRODUCER_INFO, one row per connected producer instance.
- statsAll [-t TOPIC] [-a]: for each topic of the name server (retry and DLQ topics left out) and each group that
  consumes it: accumulation (the group's total diff), in/out TPS over the last minute and messages in/out over
  the last 24 hours (mqadmin's ``compute24HourSum``: the day window's sum, else the hour's, else the minute's),
  summed over the masters of the topic's route. ``-a``: only topics with traffic in the last 24 hours. A broker
  that has never counted a topic or group answers "stats not exist": that is a zero, not a failure.
- getConsumerStatus -g GROUP -t TOPIC [-i CLIENT_ID]: INVOKE_BROKER_TO_GET_CONSUMER_STATUS on the first master of
  the topic's route that can be reached: the offsets each online client holds for the topic's queues.

Each command exits 1 when a broker could not be asked (after printing what the others answered) and 2 on a usage
error, before any network call.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from mq.cli.common import bool_option, json_option, with_admin

NO_CONSUMER = "NO_CONSUMER"
#: stats names of VIEW_BROKER_STATS_DATA (Java ``Stats``)
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"


# ---------------------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------------------
def check_addr(ctx: Any, param: Any, value: str) -> str:
    """click callback: ``host:port`` with a numeric port, else a usage error."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"must be host:port, got {value!r}")
    return value.strip()


def consume_stats_rows(csl: Any, level: int = 0) -> list[dict[str, Any]]:
    """ConsumeStatsList -> one row per (group, topic queue) with ``diff >= level``, in the broker's group order,
    queues sorted within each ConsumeStats."""
    rows = []
    for entry in csl.consume_stats_list:
        for group, stats_list in entry.items():
            for stats in stats_list:
                for mq, ow in sorted(stats.offset_table.items()):
                    diff = ow.broker_offset - ow.consumer_offset
                    if diff < level:
                        continue
                    rows.append({"topic": mq.topic, "group": group, "brokerName": mq.broker_name,
                                 "queueId": mq.queue_id, "brokerOffset": ow.broker_offset,
                                 "consumerOffset": ow.consumer_offset, "diff": diff,
                                 "lastTimestamp": ow.last_timestamp})
    return rows


def producer_rows(table: Any) -> list[dict[str, Any]]:
    rows = []
    for group in sorted(table.data):
        for p in table.data[group]:
            rows.append({"group": group, "clientId": p.client_id, "remoteIP": p.remote_ip,
                         "language": p.language.name, "version": p.version,
                         "lastUpdateTimestamp": p.last_update_timestamp})
    return rows


def sum_24h(bsd: Any) -> int:
    """mqadmin ``compute24HourSum``: the day window's sum, else the hour's, else the minute's."""
    for item in (bsd.stats_day, bsd.stats_hour, bsd.stats_minute):
        if item.sum != 0:
            return item.sum
    return 0


def consumer_status_rows(table: dict) -> list[dict[str, Any]]:
    rows = []
    for cid in sorted(table):
        for mq, off in sorted(table[cid].items()):
            rows.append({"clientId": cid, "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                         "offset": off})
    return rows


def _no_stats(exc: Exception) -> bool:
    from mq.errors import BrokerError
    from mq.protocol.codes import ResponseCode

    return (isinstance(exc, BrokerError) and exc.code == ResponseCode.SYSTEM_ERROR
            and "not exist" in str(exc))


def _fail(console: Any, failures: list[str]) -> None:
    if failures:
        for f in failures:
            console.error(f)
        sys.exit(1)


# ---------------------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------------------
@click.command("brokerConsumeStats")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", required=True, callback=check_addr,
              help="Broker address (ip:port).")
@bool_option("-o", "--order", "is_order", help="true: order topics only.")
@click.option("-l", "--level", type=int, default=0, show_default=True, help="Only queues whose diff is at least this.")
@click.option("-t", "--timeout-millis", "--timeoutMillis", "timeout_millis", type=click.IntRange(min=1), default=50_000,
              show_default=True, help="Request timeout (ms).")
@json_option
@click.pass_obj
def broker_consume_stats(obj, broker: str, is_order: bool, level: int, timeout_millis: int, json_mode: bool) -> None:
    """Show the consume progress of every subscription group on one broker."""
    from mq.cli.console import Console
    from mq.cli.consumer_admin import format_ms

    timeout = timeout_millis / 1000.0
    csl = with_admin(obj, lambda admin: admin.fetch_consume_stats_in_broker(broker, is_order, timeout),
                     timeout=timeout)
    rows = consume_stats_rows(csl, level)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"brokerAddr": csl.broker_addr or broker, "totalDiff": csl.total_diff, "queues": rows})
        return
    console.table(f"Consume stats of {csl.broker_addr or broker}",
                  ["Topic", "Group", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "Last Time"],
                  [(r["topic"], r["group"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"],
                    r["diff"], format_ms(r["lastTimestamp"])) for r in rows],
                  justify={c: "right" for c in ("QID", "Broker Offset", "Consumer Offset", "Diff")})
    console.line(f"Diff Total: {csl.total_diff}")


@click.command("producer")
@click.option("-b", "--broker-addr", "--broker", "broker", required=True, callback=check_addr,
              help="Broker address (ip:port).")
@json_option
@click.pass_obj
def producer(obj, broker: str, json_mode: bool) -> None:
    """Show the producer instances connected to a broker, by group."""
    from mq.cli.console import Console
    from mq.cli.consumer_admin import format_ms

    table = with_admin(obj, lambda admin: admin.get_all_producer_info(broker))
    rows = producer_rows(table)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"broker": broker, "producers": rows})
        return
    if not rows:
        console.note(f"no producer is connected to {broker}")
        return
    console.table(f"Producers on {broker}", ["Group", "Client ID", "Remote IP", "Language", "Version", "Last Update"],
                  [(r["group"], r["clientId"], r["remoteIP"], r["language"], r["version"],
                    format_ms(r["lastUpdateTimestamp"])) for r in rows], justify={"Version": "right"})


async def _topic_stats(admin: Any, topic: str, active_only: bool, failures: list[str]) -> list[dict[str, Any]]:
    """statsAll rows of one topic (mqadmin ``printTopicDetail``)."""
    from mq.errors import MQError

    masters = await admin.topic_master_addrs(topic)

    async def view(addr: str, name: str, key: str) -> tuple[float, int]:
        try:
            bsd = await admin.view_broker_stats_data(addr, name, key)
        except MQError as exc:
            if not _no_stats(exc):
                failures.append(f"{addr}: {name} {key}: {exc}")
            return 0.0, 0
        return bsd.stats_minute.tps, sum_24h(bsd)

    groups: set[str] = set()
    in_tps, in_24h = 0.0, 0
    for addr in masters.values():
        try:
            groups |= await admin.query_topic_consume_by_who(addr, topic)
        except MQError as exc:
            failures.append(f"{addr}: consumers of {topic}: {exc}")
        tps, n = await view(addr, TOPIC_PUT_NUMS, topic)
        in_tps += tps
        in_24h += n
    rows = []
    if not groups:
        if not active_only or in_24h > 0:
            rows.append({"topic": topic, "group": "", "accumulation": 0, "inTps": in_tps, "outTps": None,
                         "inMsg24Hour": in_24h, "outMsg24Hour": NO_CONSUMER})
        return rows
    for group in sorted(groups):
        out_tps, out_24h, accumulation = 0.0, 0, 0
        for addr in masters.values():
            tps, n = await view(addr, GROUP_GET_NUMS, f"{topic}@{group}")
            out_tps += tps
            out_24h += n
            try:
                stats = await admin.examine_consume_stats(addr, group, topic)
            except MQError as exc:
                failures.append(f"{addr}: consume stats of {group} on {topic}: {exc}")
                continue
            accumulation += sum(ow.broker_offset - ow.consumer_offset for ow in stats.offset_table.values())
        if not active_only or in_24h > 0 or out_24h > 0:
            rows.append({"topic": topic, "group": group, "accumulation": max(accumulation, 0), "inTps": in_tps,
                         "outTps": out_tps, "inMsg24Hour": in_24h, "outMsg24Hour": out_24h})
    return rows


@click.command("statsAll")
@click.option("-t", "--topic", help="Only this topic.")
@click.option("-a", "--active-topic", "--activeTopic", "active_only", is_flag=True,
              help="Only topics with traffic in the last 24 hours.")
@json_option
@click.pass_obj
def stats_all(obj, topic: str | None, active_only: bool, json_mode: bool) -> None:
    """Show in/out TPS and 24-hour message counts of every topic and consumer group."""
    from mq.cli.console import Console
    from mq.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
    from mq.errors import MQError

    failures: list[str] = []

    async def run(admin) -> list[dict[str, Any]]:
        topics = sorted(await admin.topic_list())
        rows: list[dict[str, Any]] = []
        for t in topics:
            if t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)) or (topic and t != topic):
                continue
            try:
                rows += await _topic_stats(admin, t, active_only, failures)
            except MQError as exc:
                failures.append(f"{t}: {exc}")
        if topic and topic not in topics:
            failures.append(f"topic {topic!r} is not known to the name server")
        return rows

    rows = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"rows": rows, "errors": failures})
    else:
        console.table(None, ["Topic", "Consumer Group", "Accumulation", "InTPS", "OutTPS", "InMsg24Hour",
                             "OutMsg24Hour"],
                      [(r["topic"], r["group"], r["accumulation"], f"{r['inTps']:.2f}",
                        "" if r["outTps"] is None else f"{r['outTps']:.2f}", r["inMsg24Hour"], r["outMsg24Hour"])
                       for r in rows],
                      justify={c: "right" for c in ("Accumulation", "InTPS", "OutTPS", "InMsg24Hour",
                                                    "OutMsg24Hour")})
    _fail(console, failures)


@click.command("getConsumerStatus")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-i", "--client-id", "--originClientId", "client_id", default="",
              help="Only this client (its client id).")
@json_option
@click.pass_obj
def get_consumer_status(obj, group: str, topic: str, client_id: str, json_mode: bool) -> None:
    """Show the offsets each online client of a group holds for a topic (asked through a broker)."""
    from mq.cli.console import Console
    from mq.errors import BrokerError, RemotingError

    failures: list[str] = []

    async def run(admin) -> tuple[str | None, dict]:
        masters = await admin.topic_master_addrs(topic)
        if not masters:
            raise BrokerError(1, f"topic {topic!r} has no master broker in its route")
        for addr in masters.values():
            try:
                return addr, await admin.get_consume_status(addr, topic, group, client_id.strip() or None)
            except RemotingError as exc:  # unreachable or timed out: ask the next master
                failures.append(f"{addr}: {exc}")
        return None, {}

    addr, table = with_admin(obj, run)
    rows = consumer_status_rows(table)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "topic": topic, "clientId": client_id, "broker": addr, "queues": rows})
    else:
        console.line(f"get consumer status from client. group={group}, topic={topic}, originClientId={client_id}")
        console.table(None, ["Client ID", "Broker Name", "Queue ID", "Offset"],
                      [(r["clientId"], r["brokerName"], r["queueId"], r["offset"]) for r in rows],
                      justify={"Queue ID": "right", "Offset": "right"})
    if addr is None:
        _fail(console, failures)
