"""`mq clusterList`."""

from __future__ import annotations

import click

from mq.cli.common import json_option, with_admin


@click.command("clusterList")
@json_option
@click.pass_obj
def cluster_list(obj, json_mode: bool) -> None:
    """List clusters, their brokers and addresses."""
    from mq.cli.console import Console

    info = with_admin(obj, lambda admin: admin.cluster_info())
    rows = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                rows.append({"cluster": cluster, "brokerName": name, "brokerId": bid, "address": addr})
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"clusters": rows, "clusterInfo": info.to_json_value()})
        return
    if not rows:
        console.note("no brokers are registered with the name server")
        return
    console.table(None, ["Cluster", "Broker", "BID", "Address"],
                  [(r["cluster"], r["brokerName"], r["brokerId"], r["address"]) for r in rows])
