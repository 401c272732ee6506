"""Name-server admin: `mq wipeWritePerm`, `addWritePerm`, `updateKvConfig`, `deleteKvConfig`, `getNamesrvConfig`,
`updateNamesrvConfig`, `topicClusterList`, `updateOrderConf` (mqadmin's namesrv/ commands, same short options).

Like mqadmin (MQClientAPIImpl), the writes go to EVERY name server given with ``-n``, not just the first one
that answers: WIPE_/ADD_WRITE_PERM_OF_BROKER, PUT_KV_CONFIG, DELETE_KV_CONFIG, UPDATE_NAMESRV_CONFIG, and
GET_NAMESRV_CONFIG reads each one. Every name server gets one row (its result or its error); the command exits 1
when any of them failed, after printing all rows. Reads of shared state (GET_KV_CONFIG, the topic route, the
cluster info) go to the first reachable name server, as mqadmin's do.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

import click

from mq.cli.common import json_option, with_admin

#: NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG: topic -> "brokerName:queueNums;..." read by producers for ordered topics.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


@dataclass(frozen=True, slots=True)
class NamesrvOutcome:
    """What one name server answered: ``value`` on success, else ``error`` (one line)."""

    namesrv: str
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


# -------------------------------------------------------------------------------------------------------------
# pure checks (run before any network, so bad input is a usage error)
# -------------------------------------------------------------------------------------------------------------
def parse_order_conf(text: str) -> dict[str, int]:
    """``"brokerA:4;brokerB:4"`` -> {"brokerA": 4, "brokerB": 4}; ValueError naming the bad entry.

    The Java producer splits the value on ``;`` then ``:`` and Integer.parseInt's the count, so anything else
    would break every producer of the topic."""
    out: dict[str, int] = {}
    entries = [e.strip() for e in text.strip().split(";")]
    if entries and entries[-1] == "" and len(entries) > 1:  # one trailing ';' is harmless
        entries.pop()
    for entry in entries:
        name, sep, num = (p.strip() for p in entry.partition(":"))
        if not sep or not name or ":" in num:
            raise ValueError(f"bad order conf entry {entry!r}: expected brokerName:queueNums")
        if not num.isdigit() or int(num) < 1:
            raise ValueError(f"bad queue count in {entry!r}: expected a positive integer")
        if name in out:
            raise ValueError(f"broker {name!r} appears twice in the order conf")
        out[name] = int(num)
    return out


def format_order_conf(conf: dict[str, int]) -> str:
    return ";".join(f"{name}:{n}" for name, n in conf.items())


def _strip_required(value: str, option: str) -> str:
    """mqadmin trims every option value; a blank one is a usage error here."""
    value = value.strip()
    if not value:
        raise click.UsageError(f"{option} must not be blank")
    return value


def _one_line(value: str, option: str) -> str:
    if "\n" in value or "\r" in value:
        raise click.UsageError(f"{option} must be a single line")
    return value


def _config_key(key: str) -> str:
    key = _one_line(_strip_required(key, "-k/--key"), "-k/--key")
    if any(c in key for c in "=:# \t!"):
        raise click.UsageError(f"-k/--key {key!r} is not a properties key (no '=', ':', '#', '!' or spaces)")
    return key


def _topic(topic: str) -> str:
    from mq.common.topic import validate_topic
    from mq.errors import InvalidTopicError

    try:
        return validate_topic(topic.strip())
    except InvalidTopicError as exc:
        raise click.UsageError(f"-t/--topic: {exc}") from None


# -------------------------------------------------------------------------------------------------------------
# talking to every name server
# -------------------------------------------------------------------------------------------------------------
def _unique(addrs: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(addrs))


async def each_namesrv(admin, call: Callable[[str], Awaitable[Any]]) -> list[NamesrvOutcome]:
    """Run ``call(addr)`` against every name server of ``admin`` at once; errors become outcomes, in -n order."""
    from mq.errors import MQError

    async def one(addr: str) -> NamesrvOutcome:
        try:
            return NamesrvOutcome(addr, value=await call(addr))
        except MQError as exc:
            return NamesrvOutcome(addr, error=str(exc))

    return list(await asyncio.gather(*(one(a) for a in _unique(admin.namesrv_addrs))))


async def invoke_namesrv(admin, addr: str, code: int, header: Any):
    """One request to one name server; a non-success answer raises ``BrokerError.from_response``."""
    from mq.errors import BrokerError, ConnectError
    from mq.protocol.codes import ResponseCode
    from mq.protocol.command import RemotingCommand

    cmd = RemotingCommand.request(code, header.to_ext())
    try:
        resp = await admin.client.invoke(addr, cmd, timeout=admin.timeout)
    except ConnectError as exc:
        raise ConnectError(f"cannot reach name server {addr}: {str(exc).split(': ', 1)[-1]}", addr=addr) from None
    if resp.code != ResponseCode.SUCCESS:
        raise BrokerError.from_response(resp.code, resp.remark, addr)
    return resp


def _results_json(outcomes: list[NamesrvOutcome], value_key: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for o in outcomes:
        row: dict[str, Any] = {"namesrv": o.namesrv, "ok": o.ok, "error": o.error}
        if value_key is not None:
            row[value_key] = o.value
        rows.append(row)
    return rows


def _finish(what: str, outcomes: list[NamesrvOutcome]) -> None:
    """After the rows are printed: when any name server failed, an MQError that mq.cli.main shows as one
    ``error:`` line with exit code 1."""
    from mq.errors import MQError

    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise MQError(f"{what} failed on {len(failed)} of {len(outcomes)} name server(s): "
                      + "; ".join(o.error or "" for o in failed))


def _status_table(console, title: str, outcomes: list[NamesrvOutcome], what: dict[str, Any]) -> None:
    """One row per name server: the address, what was asked (``what``: column -> value), OK or the error."""
    console.table(title, ["Name Server", *what, "Result"],
                  [(o.namesrv, *what.values(), "OK" if o.ok else o.error) for o in outcomes])


# -------------------------------------------------------------------------------------------------------------
# write permission of a broker
# -------------------------------------------------------------------------------------------------------------
def _write_perm_command(name: str, *, wipe: bool):
    verb = "wipe" if wipe else "add"
    count_key = "wipeTopicCount" if wipe else "addTopicCount"

    @click.command(name)
    @click.option("-b", "--broker-name", "--brokerName", "broker_name", required=True,
                  help="Broker name (not address).")
    @json_option
    @click.pass_obj
    def command(obj, broker_name: str, json_mode: bool) -> None:
        from mq.cli.console import Console
        from mq.protocol import headers as h
        from mq.protocol.codes import RequestCode

        broker_name = _strip_required(broker_name, "-b/--broker-name")
        if wipe:
            code = RequestCode.WIPE_WRITE_PERM_OF_BROKER
            header: Any = h.WipeWritePermOfBrokerRequestHeader(broker_name=broker_name)

            def count(resp) -> int:
                return h.WipeWritePermOfBrokerResponseHeader.from_ext(resp.ext_fields).wipe_topic_count
        else:
            code = RequestCode.ADD_WRITE_PERM_OF_BROKER
            header = h.AddWritePermOfBrokerRequestHeader(broker_name=broker_name)

            def count(resp) -> int:
                return h.AddWritePermOfBrokerResponseHeader.from_ext(resp.ext_fields).add_topic_count

        async def run(admin) -> list[NamesrvOutcome]:
            async def call(addr: str) -> int:
                return count(await invoke_namesrv(admin, addr, code, header))
            return await each_namesrv(admin, call)

        outcomes = with_admin(obj, run)
        console = Console(json_mode=json_mode)
        if json_mode:
            console.json({"broker": broker_name, "results": _results_json(outcomes, count_key)})
        else:
            console.table(f"{verb.capitalize()} write perm",
                          ["Name Server", "Broker", "Topics Affected", "Result"],
                          [(o.namesrv, broker_name, o.value if o.ok else "", "OK" if o.ok else o.error)
                           for o in outcomes], justify={"Topics Affected": "right"})
        _finish(f"{verb} write perm of broker {broker_name}", outcomes)

    command.__doc__ = (f"{verb.capitalize()} the write permission of a broker's topics on every name server of -n "
                       f"({'producers stop sending to it' if wipe else 'producers may send to it again'}).")
    command.help = command.__doc__
    return command


wipe_write_perm = _write_perm_command("wipeWritePerm", wipe=True)
add_write_perm = _write_perm_command("addWritePerm", wipe=False)


# -------------------------------------------------------------------------------------------------------------
# KV config
# -------------------------------------------------------------------------------------------------------------
async def put_kv_everywhere(admin, namespace: str, key: str, value: str) -> list[NamesrvOutcome]:
    from mq.protocol import headers as h
    from mq.protocol.codes import RequestCode

    header = h.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value)
    return await each_namesrv(admin, lambda addr: invoke_namesrv(admin, addr, RequestCode.PUT_KV_CONFIG, header))


async def delete_kv_everywhere(admin, namespace: str, key: str) -> list[NamesrvOutcome]:
    from mq.protocol import headers as h
    from mq.protocol.codes import RequestCode

    header = h.DeleteKVConfigRequestHeader(namespace=namespace, key=key)
    return await each_namesrv(admin, lambda addr: invoke_namesrv(admin, addr, RequestCode.DELETE_KV_CONFIG, header))


@click.command("updateKvConfig")
@click.option("-s", "--namespace", required=True, help="KV namespace (e.g. ORDER_TOPIC_CONFIG).")
@click.option("-k", "--key", required=True, help="Key name.")
@click.option("-v", "--value", required=True, help="Value.")
@json_option
@click.pass_obj
def update_kv_config(obj, namespace: str, key: str, value: str, json_mode: bool) -> None:
    """Create or update a KV config entry on every name server of -n."""
    from mq.cli.console import Console

    namespace = _strip_required(namespace, "-s/--namespace")
    key = _strip_required(key, "-k/--key")
    value = value.strip()
    outcomes = with_admin(obj, lambda admin: put_kv_everywhere(admin, namespace, key, value))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"namespace": namespace, "key": key, "value": value, "results": _results_json(outcomes)})
    else:
        _status_table(console, "Put KV config", outcomes, {"Namespace": namespace, "Key": key, "Value": value})
    _finish(f"update kv config {namespace}/{key}", outcomes)


@click.command("deleteKvConfig")
@click.option("-s", "--namespace", required=True, help="KV namespace.")
@click.option("-k", "--key", required=True, help="Key name.")
@json_option
@click.pass_obj
def delete_kv_config(obj, namespace: str, key: str, json_mode: bool) -> None:
    """Delete a KV config entry from every name server of -n."""
    from mq.cli.console import Console

    namespace = _strip_required(namespace, "-s/--namespace")
    key = _strip_required(key, "-k/--key")
    outcomes = with_admin(obj, lambda admin: delete_kv_everywhere(admin, namespace, key))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"namespace": namespace, "key": key, "results": _results_json(outcomes)})
    else:
        _status_table(console, "Delete KV config", outcomes, {"Namespace": namespace, "Key": key})
    _finish(f"delete kv config {namespace}/{key}", outcomes)


# -------------------------------------------------------------------------------------------------------------
# name server configuration
# -------------------------------------------------------------------------------------------------------------
@click.command("getNamesrvConfig")
@json_option
@click.pass_obj
def get_namesrv_config(obj, json_mode: bool) -> None:
    """Show the configuration of every name server of -n (one key/value table each)."""
    from mq.cli.console import Console

    outcomes = with_admin(obj, lambda admin: each_namesrv(admin, admin.get_namesrv_config))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"results": _results_json(outcomes, "config")})
    else:
        for o in outcomes:
            if o.ok:
                console.table(f"Name server {o.namesrv}", ["Key", "Value"], sorted(o.value.items()))
            else:
                console.table(f"Name server {o.namesrv}", ["Error"], [(o.error,)])
    _finish("get name server config", outcomes)


@click.command("updateNamesrvConfig")
@click.option("-k", "--key", required=True, help="Config key (RocketMQ name, e.g. orderMessageEnable).")
@click.option("-v", "--value", required=True, help="New value.")
@json_option
@click.pass_obj
def update_namesrv_config(obj, key: str, value: str, json_mode: bool) -> None:
    """Change one run-time setting on every name server of -n (the server names the keys it accepts)."""
    from mq.cli.console import Console

    key = _config_key(key)
    value = _one_line(value.strip(), "-v/--value")
    outcomes = with_admin(obj, lambda admin: each_namesrv(
        admin, lambda addr: admin.update_namesrv_config(addr, {key: value})))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"key": key, "value": value, "results": _results_json(outcomes)})
    else:
        _status_table(console, "Update name server config", outcomes, {"Key": key, "Value": value})
    _finish(f"update name server config {key}", outcomes)


# -------------------------------------------------------------------------------------------------------------
# topics
# -------------------------------------------------------------------------------------------------------------
@click.command("topicClusterList")
@click.option("-t", "--topic", required=True, help="Topic name.")
@json_option
@click.pass_obj
def topic_cluster_list(obj, topic: str, json_mode: bool) -> None:
    """List the clusters whose brokers hold a topic (the route's brokers looked up in the cluster info)."""
    from mq.cli.console import Console

    topic = _topic(topic)

    async def run(admin) -> tuple[list[str], dict[str, set[str]]]:
        route = await admin.topic_route(topic)
        info = await admin.cluster_info()
        return (sorted({bd.broker_name for bd in route.broker_datas} | {q.broker_name for q in route.queue_datas}),
                {c: set(names) for c, names in info.cluster_addr_table.items()})

    brokers, clusters = with_admin(obj, run)
    held = {c: sorted(names.intersection(brokers)) for c, names in sorted(clusters.items())
            if names.intersection(brokers)}
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topic": topic, "clusters": sorted(held), "brokers": held})
    else:
        console.table(f"Clusters of {topic}", ["Cluster", "Brokers"], [(c, ", ".join(b)) for c, b in held.items()])
    if not held:
        from mq.errors import MQError

        raise MQError(f"the brokers of topic {topic} ({', '.join(brokers) or 'none'}) are in no cluster known to "
                      "the name server")


@click.command("updateOrderConf")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-m", "--method", required=True, type=click.Choice(["get", "put", "delete"]),
              help="get, put or delete the topic's ORDER_TOPIC_CONFIG entry.")
@click.option("-v", "--order-conf", "--orderConf", "order_conf", default=None,
              help="With -m put: brokerName:queueNums entries joined by ';' (e.g. 'broker-a:4;broker-b:4').")
@json_option
@click.pass_obj
def update_order_conf(obj, topic: str, method: str, order_conf: str | None, json_mode: bool) -> None:
    """Show, set or delete a topic's order config (the ORDER_TOPIC_CONFIG KV entry producers read)."""
    from mq.cli.console import Console

    topic = _topic(topic)
    conf: dict[str, int] = {}
    if method == "put":
        if order_conf is None or not order_conf.strip():
            raise click.UsageError("-m put needs the order conf: -v 'brokerName:queueNums;...'")
        try:
            conf = parse_order_conf(order_conf)
        except ValueError as exc:
            raise click.UsageError(f"-v/--order-conf: {exc}") from None
    elif order_conf is not None:
        raise click.UsageError(f"-v/--order-conf is only used with -m put, not -m {method}")
    console = Console(json_mode=json_mode)

    if method == "get":
        value = with_admin(obj, lambda admin: admin.get_kv(ORDER_TOPIC_CONFIG, topic))
        if value is None:
            if json_mode:
                console.json({"topic": topic, "orderConf": None})
            from mq.errors import MQError

            raise MQError(f"topic {topic} has no order conf ({ORDER_TOPIC_CONFIG} entry) on the name server")
        try:
            brokers: dict[str, int] | None = parse_order_conf(value)
        except ValueError:
            brokers = None  # stored by hand (updateKvConfig) in a shape producers cannot read; show it raw
        if json_mode:
            console.json({"topic": topic, "orderConf": value, "brokers": brokers})
            return
        if brokers is not None:
            console.table(f"Order conf of {topic}", ["Broker", "Queues"], sorted(brokers.items()),
                          justify={"Queues": "right"})
        console.line(f"orderConf of {topic}: {value}")
        if brokers is None:
            console.warn("this value is not brokerName:queueNums;... and producers of the topic cannot parse it")
        return

    if method == "put":
        value = format_order_conf(conf)
        outcomes = with_admin(obj, lambda admin: put_kv_everywhere(admin, ORDER_TOPIC_CONFIG, topic, value))
        title, what = "Put order conf", f"update order conf of {topic}"
    else:
        value = None
        outcomes = with_admin(obj, lambda admin: delete_kv_everywhere(admin, ORDER_TOPIC_CONFIG, topic))
        title, what = "Delete order conf", f"delete order conf of {topic}"
    if json_mode:
        console.json({"topic": topic, "method": method, "orderConf": value, "results": _results_json(outcomes)})
    else:
        _status_table(console, title, outcomes, {"Topic": topic, "Order Conf": value or ""})
    _finish(what, outcomes)
