"""Consumer and producer groups, as an operator sees them: consume progress (lag) per queue and in total, the
list of groups, offset resets, subscription-group deletion and producer connections.

Shared by the admin commands (``mq consumerProgress``, ``resetOffsetByTime``, ``deleteSubGroup``,
``producerConnection``) and the web console; every function takes an ``MQAdmin`` and works against mq and
RocketMQ 4.x brokers alike.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from mq.client.bounded import gather_bounded
from mq.common.topic import RETRY_GROUP_TOPIC_PREFIX, dlq_topic, retry_topic
from mq.errors import BrokerError, ConsumerNotOnlineError, MQError

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------------
# consume progress (lag)
# ---------------------------------------------------------------------------------------------------------
def progress_rows(offset_table: dict) -> list[dict[str, Any]]:
    """ConsumeStats.offsetTable -> rows sorted by (topic, broker, queue) with ``diff`` = broker - consumer and
    ``inflight`` = popped and not yet acked (RocketMQ 5's ``pullOffset`` - consumer offset; 0 for pull groups)."""
    rows = []
    for mq, ow in sorted(offset_table.items()):
        rows.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                     "brokerOffset": ow.broker_offset, "consumerOffset": ow.consumer_offset,
                     "diff": ow.broker_offset - ow.consumer_offset, "lastTimestamp": ow.last_timestamp,
                     "inflight": max(0, (ow.pull_offset or ow.consumer_offset) - ow.consumer_offset)})
    return rows


def progress_totals(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    rows = list(rows)
    return {"queues": len(rows), "brokerOffset": sum(r["brokerOffset"] for r in rows),
            "consumerOffset": sum(r["consumerOffset"] for r in rows), "diff": sum(r["diff"] for r in rows),
            "inflight": sum(r.get("inflight", 0) for r in rows),
            "lastTimestamp": max((r["lastTimestamp"] for r in rows), default=0)}


async def consumer_groups(admin: Any) -> set[str]:
    """Every group with a committed offset on a master, or with a ``%RETRY%`` topic on the name server."""
    groups: set[str] = set()
    for addr in (await admin.master_addrs()).values():
        for key in await admin.get_all_consumer_offset(addr):
            groups.add(key.rpartition("@")[2])
    groups |= {t[len(RETRY_GROUP_TOPIC_PREFIX):] for t in await admin.topic_list()
               if t.startswith(RETRY_GROUP_TOPIC_PREFIX)}
    return groups


def connection_summary(cc: Any | None) -> dict[str, Any]:
    """Clients, versions, consume type and message model of a ConsumerConnection (None: not online)."""
    if cc is None:
        return {"clients": 0, "version": "", "consumeType": "", "messageModel": ""}
    return {"clients": len(cc.connection_set), "version": ",".join(sorted({str(c.version) for c in cc.connection_set})),
            "consumeType": cc.consume_type.name if cc.consume_type else "",
            "messageModel": cc.message_model.name if cc.message_model else ""}


async def online_connection(admin: Any, group: str) -> Any | None:
    """The group's merged ConsumerConnection, or None when no client of it is online."""
    try:
        return await admin.examine_consumer_connection_all(group)
    except ConsumerNotOnlineError:
        return None


async def group_row(admin: Any, group: str) -> dict[str, Any]:
    """One line of ``consumerProgress`` without -g: clients, type, model, TPS and total lag of ``group``."""
    stats = await admin.examine_consume_stats_all(group)
    totals = progress_totals(progress_rows(stats.offset_table))
    return {"group": group, **connection_summary(await online_connection(admin, group)),
            "consumeTps": stats.consume_tps, "diffTotal": totals["diff"], "queues": totals["queues"]}


async def groups_overview(admin: Any, *, limit: int = 32, clients: bool = True
                          ) -> tuple[list[dict[str, Any]], list[str]]:
    """Every subscription group of every master with its lag, TPS and online clients, for a list view, and
    the problems met (a master that did not answer; raised instead when no master answers).

    Two calls per master (GET_ALL_SUBSCRIPTIONGROUP_CONFIG and GET_BROKER_CONSUME_STATS, which answers the
    progress of all groups at once) and, with ``clients``, one connection query per group, at most ``limit`` in
    flight (without: ``clients`` is None in every row)."""
    masters = await admin.master_addrs()
    rows: dict[str, dict[str, Any]] = {}
    failures: list[MQError] = []
    problems: list[str] = []
    for name, addr in sorted(masters.items()):
        try:
            table = (await admin.get_all_subscription_group(addr)).subscription_group_table
            stats = await admin.fetch_consume_stats_in_broker(addr)
        except MQError as exc:
            failures.append(exc)
            problems.append(f"broker {name} ({addr}): {exc}")
            continue
        for group, cfg in table.items():
            row = rows.setdefault(group, {"group": group, "brokers": [], "diffTotal": 0, "consumeTps": 0.0,
                                          "topics": set(), "retryMaxTimes": cfg.retry_max_times,
                                          "consumeEnable": cfg.consume_enable})
            row["brokers"].append(name)
        for entry in stats.consume_stats_list:
            for group, per_topic in entry.items():
                row = rows.get(group)
                if row is None:
                    continue
                for cs in per_topic:
                    row["consumeTps"] += cs.consume_tps
                    for mq, ow in cs.offset_table.items():
                        row["diffTotal"] += max(0, ow.broker_offset - ow.consumer_offset)
                        row["topics"].add(mq.topic)
    if failures and len(failures) == len(masters):
        raise failures[0]

    async def with_clients(row: dict[str, Any]) -> dict[str, Any]:
        row["topics"] = sorted(t for t in row["topics"] if not t.startswith(RETRY_GROUP_TOPIC_PREFIX))
        if not clients:
            row.update(connection_summary(None), clients=None)
            return row
        try:
            cc = await online_connection(admin, row["group"])
        except MQError as exc:
            log.debug("consumer connection of %s failed: %s", row["group"], exc)
            cc = None
        row.update(connection_summary(cc))
        return row

    return await gather_bounded(with_clients, [rows[g] for g in sorted(rows)], limit), problems


# ---------------------------------------------------------------------------------------------------------
# changes
# ---------------------------------------------------------------------------------------------------------
async def reset_offset_by_time(admin: Any, topic: str, group: str, timestamp: int, force: bool = True,
                               cpp: bool = False) -> dict:
    """Reset ``group``'s offsets on ``topic`` on every master of its route to the first message stored at or
    after ``timestamp`` (-1: the end of each queue). Online consumers are told the new offsets; for an offline
    group on a RocketMQ broker (CONSUMER_NOT_ONLINE) the offsets are committed directly, as mqadmin does.
    Returns MessageQueue -> new offset."""
    table: dict = {}
    for addr in (await admin.topic_master_addrs(topic)).values():
        try:
            table.update(await admin.reset_offset_by_timestamp(addr, topic, group, timestamp, force, cpp))
        except ConsumerNotOnlineError:  # a Java broker and an offline group: commit the offsets ourselves
            table.update(await admin.reset_offset_by_time_old(addr, topic, group, timestamp, force))
    return table


async def delete_subscription_group(admin: Any, group: str, addrs: Iterable[str], *, cluster: str | None = None,
                                    remove_offset: bool = False) -> list[str]:
    """Delete ``group`` on each broker of ``addrs`` with its ``%RETRY%``/``%DLQ%`` topics (there and on every
    name server). Returns the addresses."""
    addrs = list(addrs)
    for addr in addrs:
        await admin.delete_subscription_group(addr, group, remove_offset)
        for t in (retry_topic(group), dlq_topic(group)):
            await admin.delete_topic_in_broker(addr, t)
    for t in (retry_topic(group), dlq_topic(group)):
        await admin.delete_topic_in_all_namesrv(t, cluster)
    return addrs


async def producer_connections(admin: Any, group: str, topic: str) -> list:
    """The online clients of producer group ``group``, asked of the masters of ``topic``'s route (a broker
    knows a producer once it has sent there). BrokerError when none knows the group."""
    seen: dict[str, Any] = {}
    errors = []
    for addr in (await admin.topic_master_addrs(topic)).values():
        try:
            pc = await admin.examine_producer_connection_info(addr, group)
        except BrokerError as exc:
            errors.append(exc)
            continue
        for c in pc.connection_set:
            seen.setdefault(c.client_id, c)
    if not seen:
        raise errors[0] if errors else BrokerError(1, f"producer group {group!r}: no broker of {topic}")
    return list(seen.values())
