"""Topics, as an operator manages them: the list with each topic's kind and config, creating or updating a
topic on a cluster or broker, and deleting it everywhere.

Shared by ``mq updateTopic`` / ``deleteTopic`` and the web console; every function takes an ``MQAdmin``.
"""

from __future__ import annotations

from typing import Any

from mq.common.topic import REPLY_TOPIC_POSTFIX, is_dlq_topic, is_retry_topic, is_system_topic
from mq.errors import BrokerError, ConnectError, MQError

#: The kinds a topic list is filtered by.
KINDS = ("normal", "retry", "dlq", "system")


def topic_kind(topic: str, system_names: frozenset[str] | set[str] = frozenset()) -> str:
    """``retry`` (%RETRY%group), ``dlq`` (%DLQ%group), ``system`` (RocketMQ's system topics, rmq_sys_*, the
    per-cluster reply topics and the cluster and broker names a 4.x broker registers as topics) or ``normal``."""
    if is_retry_topic(topic):
        return "retry"
    if is_dlq_topic(topic):
        return "dlq"
    if is_system_topic(topic, system_names) or topic.endswith(REPLY_TOPIC_POSTFIX):
        return "system"
    return "normal"


def order_conf(brokers: dict[str, str], write_queue_nums: int) -> str:
    """ORDER_TOPIC_CONFIG value mqadmin writes: ``brokerName:writeQueueNums`` joined by ``;``."""
    return ";".join(f"{name}:{write_queue_nums}" for name in sorted(brokers))


async def topics_overview(admin: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Every topic of the name server with its kind, brokers and config (from each master's topic table: one
    call per master), and the problems met (a master that did not answer)."""
    topics = await admin.topic_list()
    info = await admin.cluster_info()
    system = set(info.cluster_addr_table) | set(info.broker_addr_table)
    configs: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for name, bd in sorted(info.broker_addr_table.items()):
        addr = bd.broker_addrs.get(0)
        if addr is None:
            continue
        try:
            table = (await admin.get_all_topic_config(addr)).topic_config_table
        except MQError as exc:
            problems.append(f"broker {name} ({addr}): {exc}")
            continue
        for topic, tc in table.items():
            c = configs.setdefault(topic, {"brokers": [], "readQueueNums": 0, "writeQueueNums": 0, "perm": tc.perm,
                                           "order": tc.order})
            c["brokers"].append(name)
            c["readQueueNums"] += tc.read_queue_nums
            c["writeQueueNums"] += tc.write_queue_nums
    rows = []
    for topic in sorted(set(topics)):
        c = configs.get(topic, {"brokers": [], "readQueueNums": 0, "writeQueueNums": 0, "perm": None,
                                "order": False})
        rows.append({"topic": topic, "kind": topic_kind(topic, system), **c})
    return rows, problems


async def topic_targets(admin: Any, cluster: str | None, broker: str | None) -> dict[str, str]:
    """Broker name -> address a topic change goes to: every master of ``cluster`` (none: BrokerError), or the
    broker at address ``broker`` (named after its broker when the name server knows it)."""
    if bool(cluster) == bool(broker):
        raise ValueError("give exactly one of a cluster and a broker address")
    if cluster:
        targets = await admin.master_addrs(cluster)
        if not targets:
            raise BrokerError(1, f"cluster {cluster!r} has no master broker")
        return targets
    info = await admin.cluster_info()
    targets = {name: broker for name, bd in info.broker_addr_table.items() if broker in bd.broker_addrs.values()}
    return targets or {broker: broker}  # type: ignore[dict-item]


async def update_topic(admin: Any, tc: Any, *, cluster: str | None = None, broker: str | None = None,
                       attributes: str | None = None) -> dict[str, Any]:
    """Create or update topic config ``tc`` (a ``bodies.TopicConfig``) on every master of ``cluster`` or on
    ``broker``, with RocketMQ 5's ``attributes`` changes (``+message.type=FIFO``, ``-key``) when given; an
    ordered topic also gets its ORDER_TOPIC_CONFIG on the name server. Returns the brokers (name -> address)
    and the order config written (or None)."""
    targets = await topic_targets(admin, cluster, broker)
    for addr in targets.values():
        await admin.create_and_update_topic_config(addr, tc, attributes)
    conf = None
    if tc.order:
        conf = await admin.create_or_update_order_conf(tc.topic_name, order_conf(targets, tc.write_queue_nums),
                                                       is_cluster=bool(cluster))
    return {"brokers": targets, "orderConf": conf}


async def delete_topic(admin: Any, topic: str, cluster: str) -> dict[str, Any]:
    """Delete ``topic`` from every master of ``cluster``, from every name server and its ORDER_TOPIC_CONFIG.
    Returns the brokers and the name servers that failed (ConnectError when every one did)."""
    targets = await admin.master_addrs(cluster)
    for addr in targets.values():
        await admin.delete_topic_in_broker(addr, topic)
    failures = await admin.delete_topic_in_all_namesrv(topic, cluster)
    if len(failures) == len(admin.namesrv_addrs):
        raise ConnectError("topic deleted on the brokers but on no name server: " + "; ".join(failures))
    try:
        await admin.delete_kv("ORDER_TOPIC_CONFIG", topic)
    except MQError:  # the kv entry is optional; its absence is not a failure
        pass
    return {"brokers": targets, "namesrvFailures": failures}
