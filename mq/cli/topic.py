"""`mq topicList`, `mq topicRoute`."""

from __future__ import annotations

import click

from mq.cli.common import gather_bounded, json_option, with_admin


def _perm_text(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


@click.command("topicList")
@click.option("-c", "--cluster-detail", "--clusterModel", "cluster_detail", is_flag=True,
              help="Also show the cluster, brokers and consumer groups of each topic (retry and dead-letter topics "
                   "left out, as mqadmin does).")
@json_option
@click.pass_obj
def topic_list(obj, cluster_detail: bool, json_mode: bool) -> None:
    """List the topics known to the name server."""
    from mq.cli.console import Console
    from mq.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

    async def fetch(admin):
        topics = await admin.topic_list()
        if not cluster_detail:
            return [{"topic": t} for t in topics]
        info = await admin.cluster_info()
        cluster_of = {name: c for c, names in info.cluster_addr_table.items() for name in names}

        async def row(t: str) -> dict:
            try:
                route = await admin.topic_route(t)
            except Exception:
                return {"topic": t, "clusters": [], "brokers": [], "consumerGroups": []}
            brokers = sorted(q.broker_name for q in route.queue_datas)
            groups: set[str] = set()
            for bd in route.broker_datas:  # mqadmin's queryTopicConsumeByWho: the first broker that answers
                addr = bd.broker_addrs.get(0) or next(iter(bd.broker_addrs.values()), None)
                if addr is None:
                    continue
                try:
                    groups = await admin.query_topic_consume_by_who(addr, t)
                    break
                except Exception:
                    continue
            return {"topic": t, "clusters": sorted({cluster_of.get(b, "?") for b in brokers}), "brokers": brokers,
                    "consumerGroups": sorted(groups)}

        shown = [t for t in topics if not t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))]
        return await gather_bounded(row, shown, 32)

    rows = with_admin(obj, fetch)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topics": rows})
        return
    if cluster_detail:  # mqadmin's rows: one per consumer group of each topic (one with none when it has none)
        console.table(None, ["Cluster", "Topic", "Consumer Group", "Brokers"],
                      [(",".join(r["clusters"]), r["topic"], group, ",".join(r["brokers"]))
                       for r in rows for group in (r["consumerGroups"] or [""])])
    else:
        console.table(None, ["Topic"], [(r["topic"],) for r in rows])


@click.command("topicRoute")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-l", "--list", "list_format", is_flag=True,
              help="mqadmin's list format: one row per broker, sorted by name, and a total row (with --json: "
                   "those rows instead of the route data).")
@json_option
@click.pass_obj
def topic_route(obj, topic: str, list_format: bool, json_mode: bool) -> None:
    """Show the route of a topic: its queues per broker and the brokers' addresses."""
    from mq.cli.console import Console

    route = with_admin(obj, lambda admin: admin.topic_route(topic))
    console = Console(json_mode=json_mode)
    if list_format:
        _print_route_list(console, route, json_mode)
        return
    if json_mode:
        console.json(route.to_json_value())
        return
    addrs = {bd.broker_name: bd for bd in route.broker_datas}
    console.table(f"Route of {topic}", ["Broker", "Cluster", "Read Q", "Write Q", "Perm", "SysFlag", "Addresses"],
                  [(q.broker_name, addrs[q.broker_name].cluster if q.broker_name in addrs else "",
                    q.read_queue_nums, q.write_queue_nums, _perm_text(q.perm), q.topic_sys_flag,
                    ", ".join(f"{bid}={a}" for bid, a in sorted(addrs[q.broker_name].broker_addrs.items()))
                    if q.broker_name in addrs else "")
                   for q in route.queue_datas])
    if route.order_topic_conf:
        console.line(f"orderTopicConf: {route.order_topic_conf}")


def _print_route_list(console, route, json_mode: bool) -> None:
    """mqadmin ``topicRoute -l``: cluster, broker, addresses, read/write queues and perm per broker, then totals."""
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(bd.broker_name)
        rows.append({"clusterName": bd.cluster, "brokerName": bd.broker_name,
                     "brokerAddrs": {str(k): v for k, v in sorted(bd.broker_addrs.items())},
                     "readQueueNums": q.read_queue_nums if q else 0, "writeQueueNums": q.write_queue_nums if q else 0,
                     "perm": q.perm if q else 0})
    total = {"brokers": len(queues), "readQueueNums": sum(r["readQueueNums"] for r in rows),
             "writeQueueNums": sum(r["writeQueueNums"] for r in rows)}
    if json_mode:
        console.json({"brokers": rows, "total": total})
        return
    console.table(None, ["Cluster", "Broker", "Addresses", "Read Q", "Write Q", "Perm"],
                  [(r["clusterName"], r["brokerName"], ", ".join(f"{k}={v}" for k, v in r["brokerAddrs"].items()),
                    r["readQueueNums"], r["writeQueueNums"], r["perm"]) for r in rows]
                  + [("Total:", total["brokers"], "", total["readQueueNums"], total["writeQueueNums"], "")],
                  justify={"Read Q": "right", "Write Q": "right", "Perm": "right"})
