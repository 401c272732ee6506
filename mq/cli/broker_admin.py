"""`mq brokerStatus`, `mq getBrokerConfig`, `mq updateBrokerConfig`; and the runtime-table helpers that
`mq clusterList` uses for its TPS columns."""

from __future__ import annotations

import click

from mq.cli.common import json_option, with_admin


def first_number(text: str | None) -> float:
    """First token of a ``"x y z"`` TPS value as a float (mqadmin clusterList reads it this way); 0 if absent."""
    if not text:
        return 0.0
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return 0.0


def today_counts(kv: dict[str, str]) -> tuple[int, int]:
    """(messages put today, messages got today) from the msgPutTotal*/msgGetTotal* keys."""
    def num(key: str) -> int:
        try:
            return int(kv.get(key) or 0)
        except ValueError:
            return 0
    return (num("msgPutTotalTodayNow") - num("msgPutTotalTodayMorning"),
            num("msgGetTotalTodayNow") - num("msgGetTotalTodayMorning"))


def runtime_summary(kv: dict[str, str]) -> dict[str, object]:
    """What clusterList shows of one broker's GET_BROKER_RUNTIME_INFO table."""
    put_today, get_today = today_counts(kv)
    return {"version": kv.get("brokerVersionDesc", ""), "inTps": first_number(kv.get("putTps")),
            "outTps": first_number(kv.get("getTransferedTps")), "putToday": put_today, "getToday": get_today,
            "commitLogDiskRatio": kv.get("commitLogDiskRatio", "")}


@click.command("brokerStatus")
@click.option("-b", "--broker-addr", "broker", help="Broker address (ip:port).")
@click.option("-c", "--cluster", help="Every master of this cluster.")
@json_option
@click.pass_obj
def broker_status(obj, broker: str | None, cluster: str | None, json_mode: bool) -> None:
    """Show a broker's runtime statistics (the GET_BROKER_RUNTIME_INFO table)."""
    from mq.cli.console import Console

    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -b/--broker-addr and -c/--cluster")

    async def run(admin) -> dict[str, dict[str, str]]:
        addrs = [broker] if broker else list((await admin.master_addrs(cluster)).values())
        return {addr: await admin.fetch_broker_runtime_stats(addr) for addr in addrs}

    tables = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(tables if cluster else tables[broker])
        return
    for addr, kv in tables.items():
        console.table(f"Broker {addr}", ["Key", "Value"], sorted(kv.items()))


@click.command("getBrokerConfig")
@click.option("-b", "--broker-addr", "broker", required=True, help="Broker address (ip:port).")
@json_option
@click.pass_obj
def get_broker_config(obj, broker: str, json_mode: bool) -> None:
    """Show a broker's configuration (key = value)."""
    from mq.cli.console import Console

    cfg = with_admin(obj, lambda admin: admin.get_broker_config(broker))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(cfg)
        return
    console.table(f"Config of {broker}", ["Key", "Value"], sorted(cfg.items()))


@click.command("updateBrokerConfig")
@click.option("-b", "--broker-addr", "broker", required=True, help="Broker address (ip:port).")
@click.option("-k", "--key", required=True, help="Config key (RocketMQ name, e.g. brokerPermission).")
@click.option("-v", "--value", required=True, help="New value.")
@json_option
@click.pass_obj
def update_broker_config(obj, broker: str, key: str, value: str, json_mode: bool) -> None:
    """Change one run-time setting of a broker."""
    from mq.cli.console import Console

    with_admin(obj, lambda admin: admin.update_broker_config(broker, {key: value}))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"broker": broker, "key": key, "value": value})
        return
    console.line(f"update broker config {key}={value} on {broker} success")
