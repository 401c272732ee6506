"""`mq clusterList`."""

from __future__ import annotations

import click

from mq.cli.common import json_option, with_admin


@click.command("clusterList")
@click.option("-m", "--more-stats", "--moreStats", "more", is_flag=True,
              help="Messages in and out yesterday and today per broker, instead of versions and TPS.")
@click.option("-i", "--interval", type=click.FloatRange(min=0.1), default=None,
              help="Print again every INTERVAL seconds until Ctrl-C, as mqadmin does.")
@json_option
@click.pass_obj
def cluster_list(obj, more: bool, interval: float | None, json_mode: bool) -> None:
    """List clusters, their brokers and addresses, with each broker's version and in/out TPS (-m: message counts
    of yesterday and today). With --json and -i, one JSON document per round."""
    import sys
    import time

    from mq.cli.console import Console

    console = Console(json_mode=json_mode)
    try:
        while True:
            _print_cluster(console, *with_admin(obj, _fetch), more)
            if interval is None:
                return
            time.sleep(interval)
    except KeyboardInterrupt:  # -i ends with Ctrl-C; every finished round was printed
        sys.exit(130)


async def _fetch(admin):
    from mq.client.broker_runtime import cluster_overview

    return await cluster_overview(admin)


def _counts(kv: dict[str, str]) -> dict[str, int]:
    """mqadmin's ``clusterList -m`` columns from the runtime table."""
    from mq.client.broker_runtime import today_counts, yesterday_counts

    (in_y, out_y), (in_t, out_t) = yesterday_counts(kv), today_counts(kv)
    return {"inTotalYest": in_y, "outTotalYest": out_y, "inTotalToday": in_t, "outTotalToday": out_t}


def _print_cluster(console, info, runtime: dict, more: bool) -> None:
    from mq.client.broker_runtime import broker_rows, runtime_summary

    rows = []
    for row, rt in broker_rows(info, runtime):
        if isinstance(rt, dict):
            row.update(_counts(rt) if more else runtime_summary(rt))
        else:
            row["error"] = rt
        rows.append(row)
    if console.json_mode:
        console.json({"clusters": rows, "clusterInfo": info.to_json_value()})
        return
    if not rows:
        console.note("no brokers are registered with the name server")
        return
    if more:
        cols = ("inTotalYest", "outTotalYest", "inTotalToday", "outTotalToday")
        console.table(None, ["Cluster", "Broker", "BID", "Address", "In Yesterday", "Out Yesterday", "In Today",
                             "Out Today"],
                      [(r["cluster"], r["brokerName"], r["brokerId"], r["address"], *(r.get(c, "-") for c in cols))
                       for r in rows],
                      justify={c: "right" for c in ("BID", "In Yesterday", "Out Yesterday", "In Today", "Out Today")})
    else:
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
