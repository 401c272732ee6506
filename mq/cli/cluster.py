"""`mq clusterList`."""

from __future__ import annotations

import click

from mq.cli.common import json_option, with_admin


@click.command("clusterList")
@json_option
@click.pass_obj
def cluster_list(obj, json_mode: bool) -> None:
    """List clusters, their brokers and addresses, with each broker's version and in/out TPS."""
    from mq.cli.broker_admin import runtime_summary
    from mq.cli.console import Console
    from mq.errors import MQError

    async def fetch(admin):
        info = await admin.cluster_info()
        runtime: dict[str, dict | str] = {}
        for bd in info.broker_addr_table.values():
            for addr in bd.broker_addrs.values():
                try:
                    runtime[addr] = runtime_summary(await admin.fetch_broker_runtime_stats(addr))
                except MQError as exc:
                    runtime[addr] = str(exc)
        return info, runtime

    info, runtime = with_admin(obj, fetch)
    rows = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                rt = runtime.get(addr)
                row = {"cluster": cluster, "brokerName": name, "brokerId": bid, "address": addr}
                if isinstance(rt, dict):
                    row.update(rt)
                else:
                    row["error"] = rt
                rows.append(row)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"clusters": rows, "clusterInfo": info.to_json_value()})
        return
    if not rows:
        console.note("no brokers are registered with the name server")
        return
    console.table(None, ["Cluster", "Broker", "BID", "Address", "Version", "InTPS", "OutTPS", "In Today",
                         "Out Today", "Disk"],
                  [(r["cluster"], r["brokerName"], r["brokerId"], r["address"], r.get("version", "?"),
                    f"{r['inTps']:.2f}" if "inTps" in r else "-", f"{r['outTps']:.2f}" if "outTps" in r else "-",
                    r.get("putToday", "-"), r.get("getToday", "-"), r.get("commitLogDiskRatio", "-"))
                   for r in rows],
                  justify={c: "right" for c in ("BID", "InTPS", "OutTPS", "In Today", "Out Today")})
    for r in rows:
        if "error" in r:
            console.warn(f"{r['address']}: {r['error']}")
