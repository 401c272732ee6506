"""`mq brokerStatus`, `mq getBrokerConfig`, `mq updateBrokerConfig`; and the runtime-table helpers that
`mq clusterList` uses for its TPS columns."""

from __future__ import annotations

import click

from mq.cli.common import json_option, with_admin


# The runtime-table helpers live in the client (mq.client.broker_runtime), shared with the web console.
from mq.client.broker_runtime import first_number, runtime_summary, today_counts, yesterday_counts  # noqa: E402,F401


def _require_one_target(broker: str | None, cluster: str | None) -> None:
    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -b/--broker-addr and -c/--cluster")


async def broker_addrs(admin, broker: str | None, cluster: str | None) -> list[str]:
    """``[broker]``, or the address of every master of ``cluster`` (unknown or without masters: BrokerError)."""
    if broker:
        return [broker]
    addrs = list((await admin.master_addrs(cluster)).values())
    if not addrs:
        from mq.errors import BrokerError

        raise BrokerError(1, f"cluster {cluster!r} has no master broker")
    return addrs


_broker_option = click.option("-b", "--broker-addr", "--brokerAddr", "broker", help="Broker address (ip:port).")
_cluster_option = click.option("-c", "--cluster", "--clusterName", "cluster", help="Every master of this cluster.")


@click.command("brokerStatus")
@_broker_option
@_cluster_option
@json_option
@click.pass_obj
def broker_status(obj, broker: str | None, cluster: str | None, json_mode: bool) -> None:
    """Show a broker's runtime statistics (the GET_BROKER_RUNTIME_INFO table)."""
    from mq.cli.console import Console

    _require_one_target(broker, cluster)

    async def run(admin) -> dict[str, dict[str, str]]:
        addrs = await broker_addrs(admin, broker, cluster)
        return {addr: await admin.fetch_broker_runtime_stats(addr) for addr in addrs}

    tables = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(tables if cluster else tables[broker])
        return
    for addr, kv in tables.items():
        console.table(f"Broker {addr}", ["Key", "Value"], sorted(kv.items()))


@click.command("getBrokerConfig")
@_broker_option
@_cluster_option
@json_option
@click.pass_obj
def get_broker_config(obj, broker: str | None, cluster: str | None, json_mode: bool) -> None:
    """Show the configuration (key = value) of a broker, or of every master of a cluster."""
    from mq.cli.console import Console

    _require_one_target(broker, cluster)

    async def run(admin) -> dict[str, dict[str, str]]:
        return {addr: await admin.get_broker_config(addr) for addr in await broker_addrs(admin, broker, cluster)}

    configs = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(configs if cluster else configs[broker])
        return
    for addr, cfg in configs.items():
        console.table(f"Config of {addr}", ["Key", "Value"], sorted(cfg.items()))


@click.command("updateBrokerConfig")
@_broker_option
@_cluster_option
@click.option("-k", "--key", required=True, help="Config key (RocketMQ name, e.g. brokerPermission).")
@click.option("-v", "--value", required=True, help="New value.")
@json_option
@click.pass_obj
def update_broker_config(obj, broker: str | None, cluster: str | None, key: str, value: str, json_mode: bool) -> None:
    """Change one run-time setting of a broker, or of every master of a cluster.

    With -c every master is tried; one that refuses the change or cannot be reached makes the exit code 1."""
    import sys

    from mq.cli.console import Console
    from mq.errors import MQError

    _require_one_target(broker, cluster)

    async def run(admin) -> dict[str, str | None]:
        if broker:
            await admin.update_broker_config(broker, {key: value})
            return {broker: None}
        results: dict[str, str | None] = {}
        for addr in await broker_addrs(admin, None, cluster):
            try:
                await admin.update_broker_config(addr, {key: value})
                results[addr] = None
            except MQError as exc:
                results[addr] = str(exc)
        return results

    results = with_admin(obj, run)
    failed = {addr: err for addr, err in results.items() if err is not None}
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"cluster": cluster, "key": key, "value": value,
                      "brokers": [a for a in results if a not in failed], "failed": failed}
                     if cluster else {"broker": broker, "key": key, "value": value})
    else:
        for addr, err in results.items():
            if err is None:
                console.line(f"update broker config {key}={value} on {addr} success")
    if failed:
        addr, err = next(iter(failed.items()))
        console.error(f"{len(failed)} of {len(results)} broker(s) failed; first: {addr}: {err}")
        sys.exit(1)
