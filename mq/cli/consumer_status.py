"""`mq consumerStatus` (a consumer group's clients as they see themselves) and `mq allocateMQ` (how a topic's
queues would be split over given client ids); and the pure helpers that shape their output.

consumerStatus asks each online client of the group for its running info: GET_CONSUMER_RUNNING_INFO (307) is
sent to a broker, which relays it to the client over the client's own connection (PROTOCOL.md §4.5). The answer
is the JSON of Java's ``ConsumerRunningInfo``::

    +------------------+----------------------------------------------------------------------------------+
    | member           | content                                                                          |
    +------------------+----------------------------------------------------------------------------------+
    | properties       | string -> string: PROP_CONSUME_TYPE, PROP_CONSUMEORDERLY, messageModel, ...      |
    | subscriptionSet  | [SubscriptionData]: topic, subString, classFilterMode, tagsSet, subVersion, ...  |
    | mqTable          | {MessageQueue object key: ProcessQueueInfo}: commitOffset, cachedMsgCount, ...   |
    | statusTable      | topic -> ConsumeStatus: pullRT, pullTPS, consumeRT, consumeOKTPS, ...            |
    | jstack           | optional text (a Java client's thread dump when asked with jstackEnable)         |
    +------------------+----------------------------------------------------------------------------------+
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

import click

from mq.cli.common import json_option, with_admin
from mq.protocol.versions import version_desc

#: A push consumer whose queue holds messages but consumed nothing for this long is reported (as mqadmin).
BLOCKED_AFTER_MS = 60_000


# ---------------------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------------------
def _queue_of(key: Any) -> dict[str, Any]:
    """An ``mqTable`` key (fastjson object key, a dict, or text) as {topic, brokerName, queueId}."""
    if hasattr(key, "as_dict"):
        key = key.as_dict()
    if isinstance(key, dict):
        qid = key.get("queueId", 0)
        return {"topic": str(key.get("topic", "")), "brokerName": str(key.get("brokerName", "")),
                "queueId": int(qid) if str(qid).lstrip("-").isdigit() else qid}
    return {"topic": str(key), "brokerName": "", "queueId": 0}


def normalize_running_info(raw: dict[str, Any]) -> dict[str, Any]:
    """A decoded ConsumerRunningInfo as plain JSON data: properties as text, subscriptions sorted by topic,
    ``mqTable`` as a list of rows (queue fields + ProcessQueueInfo fields) sorted by queue."""
    props = {str(k): "" if v is None else str(v) for k, v in (raw.get("properties") or {}).items()}
    subs = sorted((dict(s) for s in raw.get("subscriptionSet") or [] if isinstance(s, dict)),
                  key=lambda s: (str(s.get("topic", "")), str(s.get("subString", ""))))
    for s in subs:
        for k in ("tagsSet", "codeSet"):
            if isinstance(s.get(k), (list, tuple, set)):
                s[k] = sorted(s[k], key=str)
    mq_rows = []
    for key, pq in (raw.get("mqTable") or {}).items():
        mq_rows.append({**_queue_of(key), **(pq if isinstance(pq, dict) else {})})
    mq_rows.sort(key=lambda r: (r["topic"], r["brokerName"], str(r["queueId"]).zfill(8)))
    status = {str(t): dict(v) for t, v in (raw.get("statusTable") or {}).items() if isinstance(v, dict)}
    return {"properties": dict(sorted(props.items())), "subscriptionSet": subs, "mqTable": mq_rows,
            "statusTable": dict(sorted(status.items())), "jstack": raw.get("jstack")}


def subscription_key(info: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(s.get("topic", "")), str(s.get("subString", ""))) for s in info["subscriptionSet"])


def client_summary(info: dict[str, Any]) -> dict[str, Any]:
    """The columns consumerStatus shows per client, from its normalized running info."""
    p = info["properties"]
    return {"subscriptions": [f"{t}({e})" for t, e in subscription_key(info)],
            "consumeType": p.get("PROP_CONSUME_TYPE", ""), "messageModel": p.get("messageModel", ""),
            "consumeOrderly": p.get("PROP_CONSUMEORDERLY", "false").lower() == "true",
            "clientVersion": p.get("PROP_CLIENT_VERSION", ""), "processQueues": len(info["mqTable"]),
            "cachedMsgCount": sum(int(r.get("cachedMsgCount") or 0) for r in info["mqTable"])}


def analyze(infos: dict[str, dict[str, Any]], *, now_ms: int | None = None) -> list[str]:
    """mqadmin's checks over the clients' running infos: different subscriptions in one group; per push queue,
    an orderly queue that is not locked, or a queue holding messages that consumed nothing for a minute."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    warnings = []
    if len({subscription_key(i) for i in infos.values()}) > 1:
        warnings.append("different subscriptions in the same consumer group")
    for cid, info in sorted(infos.items()):
        p = info["properties"]
        if p.get("PROP_CONSUME_TYPE") != "CONSUME_PASSIVELY":
            continue
        orderly = p.get("PROP_CONSUMEORDERLY", "false").lower() == "true"
        for r in info["mqTable"]:
            q = f"{r['topic']}/{r['brokerName']}/{r['queueId']}"
            if orderly and not r.get("locked", True):
                since = now_ms - int(r.get("lastLockTimestamp") or 0)
                warnings.append(f"{cid} {q} can't lock for a while, {since}ms")
            elif orderly and r.get("droped") and int(r.get("tryUnlockTimes") or 0) > 0:
                warnings.append(f"{cid} {q} unlock {r['tryUnlockTimes']} times, still failed")
            elif not orderly and int(r.get("cachedMsgCount") or 0) > 0:
                since = now_ms - int(r.get("lastConsumeTimestamp") or 0)
                if since > BLOCKED_AFTER_MS:
                    warnings.append(f"{cid} {q} can't consume for a while, maybe blocked, {since}ms")
    return warnings


def valid_topic(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """click callback: a topic (or broker) name breaking RocketMQ's rules is a usage error (exit 2)."""
    return _valid(value, "validate_topic")


def valid_group(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """click callback: a bad group name is a usage error (exit 2)."""
    return _valid(value, "validate_group")


def _valid(value: str | None, check: str) -> str | None:
    from mq.common import topic as T
    from mq.errors import InvalidTopicError

    if value is None:
        return None
    try:
        return getattr(T, check)(value)
    except InvalidTopicError as exc:
        raise click.BadParameter(str(exc)) from None


def parse_client_list(text: str) -> list[str]:
    """allocateMQ's -i: comma-separated client ids (or IPs), no empty or repeated entry; ValueError else."""
    ids = [p.strip() for p in text.split(",")]
    if not ids or any(not p for p in ids):
        raise ValueError(f"{text!r}: give comma-separated client ids without empty entries")
    dup = sorted({p for p in ids if ids.count(p) > 1})
    if dup:
        raise ValueError(f"client id(s) given twice: {', '.join(dup)}")
    return ids


def allocation(topic_queues: Sequence[Any], clients: Iterable[str]) -> dict[str, list[Any]]:
    """AllocateMessageQueueAveragely over the sorted queues and the sorted client ids, as every consumer of a
    group computes it: client id -> its queues."""
    from mq.client.rebalance import allocate_averagely

    queues = sorted(topic_queues)
    cids = sorted(clients)
    return {cid: allocate_averagely("", cid, queues, cids) for cid in cids}


def _ms(ms: Any) -> str:
    from mq.cli.consumer_admin import format_ms

    try:
        return format_ms(int(ms))
    except (TypeError, ValueError):
        return "-"


# ---------------------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------------------
async def running_info(admin, addrs: Sequence[str], group: str, client_id: str, jstack: bool
                        ) -> tuple[str, dict[str, Any]]:
    """Ask the brokers in turn to relay GET_CONSUMER_RUNNING_INFO to ``client_id`` (a broker the client is not
    connected to answers "not online"); the first answer wins, else the last error is raised."""
    from mq.errors import MQError

    last: MQError | None = None
    for addr in addrs:
        try:
            return addr, normalize_running_info(await admin.get_consumer_running_info(addr, group, client_id, jstack))
        except MQError as exc:
            last = exc
    assert last is not None
    raise last


async def relay_addrs(admin, broker: str | None) -> list[str]:
    """The brokers to ask to relay a running-info request: ``broker``, else every master."""
    if broker:
        return [broker]
    addrs = list((await admin.master_addrs()).values())
    if not addrs:
        from mq.errors import BrokerError

        raise BrokerError(1, "no master broker is registered on the name server")
    return addrs


@click.command("consumerStatus")
@click.option("-g", "--group", "--consumerGroup", "group", required=True, callback=valid_group, help="Consumer group.")
@click.option("-i", "--client-id", "--clientId", "client_id", default=None,
              help="Show the full running info of this client.")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", default=None,
              help="Ask only this broker (ip:port) for the clients and to relay (default: every master).")
@click.option("-s", "--jstack", is_flag=True, help="Ask the clients for a thread dump (Java clients send one).")
@json_option
@click.pass_obj
def consumer_status(obj, group: str, client_id: str | None, broker: str | None, jstack: bool,
                    json_mode: bool) -> None:
    """Show the running state of a consumer group's online clients (GET_CONSUMER_RUNNING_INFO through a broker).

    Without -i: one row per client (version, subscriptions, consume type, model, process queues, ok/error) and
    mqadmin's checks (same subscription, blocked or unlocked queues); exit 1 if a client did not answer. With -i:
    that client's properties, subscriptions, process queues and consume status."""
    import sys

    from mq.cli.console import Console

    console = Console(json_mode=json_mode)
    if client_id is not None:
        if not client_id.strip():
            raise click.BadParameter("must not be empty", param_hint="-i/--client-id")

        async def one(admin) -> tuple[str, dict[str, Any]]:
            return await running_info(admin, await relay_addrs(admin, broker), group, client_id, jstack)

        addr, info = with_admin(obj, one, timeout=15.0)
        _print_running_info(console, group, client_id, addr, info, jstack)
        return

    async def every(admin) -> dict[str, Any]:
        from mq.errors import MQError

        addrs = await relay_addrs(admin, broker)
        cc = (await admin.examine_consumer_connection_info(broker, group) if broker
              else await admin.examine_consumer_connection_all(group))
        clients, infos = [], {}
        for c in sorted(cc.connection_set, key=lambda c: c.client_id):
            row: dict[str, Any] = {"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language.name,
                                   "version": c.version, "versionDesc": version_desc(c.version), "broker": None,
                                   "ok": False, "error": None}
            try:
                row["broker"], info = await running_info(admin, addrs, group, c.client_id, jstack)
            except MQError as exc:
                row["error"] = str(exc)
            else:
                infos[c.client_id] = info
                row.update(ok=True, **client_summary(info))
                if jstack:
                    row["jstack"] = info["jstack"]
            clients.append(row)
        return {"group": group, "consumeType": cc.consume_type.name if cc.consume_type else None,
                "messageModel": cc.message_model.name if cc.message_model else None, "clients": clients,
                "sameSubscription": len({subscription_key(i) for i in infos.values()}) <= 1,
                "warnings": analyze(infos)}

    out = with_admin(obj, every, timeout=15.0)
    failed = [c for c in out["clients"] if not c["ok"]]
    if json_mode:
        console.json(out)
    else:
        console.table(f"Clients of {group}", ["#", "Client ID", "Version", "Subscriptions", "Type", "Model",
                                              "Queues", "Cached", "Status"],
                      [(i + 1, c["clientId"], c["versionDesc"], " ".join(c.get("subscriptions", [])),
                        c.get("consumeType") or out["consumeType"] or "", c.get("messageModel")
                        or out["messageModel"] or "", c.get("processQueues", ""), c.get("cachedMsgCount", ""),
                        "ok" if c["ok"] else f"error: {c['error']}") for i, c in enumerate(out["clients"])],
                      justify={"Queues": "right", "Cached": "right"})
        if len(out["clients"]) - len(failed) > 1:
            console.line("Same subscription in the group" if out["sameSubscription"]
                         else "WARN: different subscriptions in the same consumer group")
        for w in out["warnings"]:
            console.warn(w)
        if jstack:
            for c in out["clients"]:
                if c["ok"]:
                    console.line(f"jstack of {c['clientId']}:\n{c['jstack']}" if c.get("jstack")
                                 else f"jstack of {c['clientId']}: the client sent none")
    if failed:
        console.error(f"{len(failed)} of {len(out['clients'])} client(s) did not answer: {failed[0]['error']}")
        sys.exit(1)


def _print_running_info(console, group: str, client_id: str, addr: str, info: dict[str, Any], jstack: bool) -> None:
    if console.json_mode:
        console.json({"group": group, "clientId": client_id, "broker": addr, **info})
        return
    console.table(f"Properties of {client_id}", ["Key", "Value"], sorted(info["properties"].items()))
    console.table("Subscriptions", ["#", "Topic", "Expression", "Type", "Class Filter", "Sub Version"],
                  [(i + 1, s.get("topic"), s.get("subString"), s.get("expressionType", "TAG"),
                    s.get("classFilterMode", False), s.get("subVersion"))
                   for i, s in enumerate(info["subscriptionSet"])])

    def cached(r: dict[str, Any]) -> str:
        n = int(r.get("cachedMsgCount") or 0)
        return f"{n} ({r.get('cachedMsgMinOffset')}-{r.get('cachedMsgMaxOffset')})" if n else "0"

    console.table("Process queues", ["Topic", "Broker", "QID", "Commit Offset", "Cached (offsets)", "Locked",
                                     "Dropped", "Last Pull", "Last Consume"],
                  [(r["topic"], r["brokerName"], r["queueId"], r.get("commitOffset", ""), cached(r),
                    r.get("locked", ""), r.get("droped", ""), _ms(r.get("lastPullTimestamp")),
                    _ms(r.get("lastConsumeTimestamp"))) for r in info["mqTable"]],
                  justify={c: "right" for c in ("QID", "Commit Offset", "Cached (offsets)")})

    def num(v: Any, fmt: str = ".2f") -> str:
        try:
            return format(float(v), fmt)
        except (TypeError, ValueError):
            return "-"

    if info["statusTable"]:
        console.table("Consume status", ["Topic", "Pull RT", "Pull TPS", "Consume RT", "OK TPS", "Failed TPS",
                                         "Failed Msgs/h"],
                      [(t, num(s.get("pullRT")), num(s.get("pullTPS")), num(s.get("consumeRT")),
                        num(s.get("consumeOKTPS")), num(s.get("consumeFailedTPS")),
                        num(s.get("consumeFailedMsgs"), ".0f")) for t, s in info["statusTable"].items()],
                      justify={c: "right" for c in ("Pull RT", "Pull TPS", "Consume RT", "OK TPS", "Failed TPS",
                                                    "Failed Msgs/h")})
    else:
        console.note("the client reports no consume status (pull/consume RT and TPS)")
    console.line(f"running info of {client_id} ({group}) relayed by {addr}: {len(info['mqTable'])} process queue(s)")
    if jstack:
        console.line(f"jstack:\n{info['jstack']}" if info.get("jstack") else "jstack: the client sent none")


@click.command("allocateMQ")
@click.option("-t", "--topic", required=True, callback=valid_topic, help="Topic whose readable queues are split.")
@click.option("-i", "--ip-list", "--ipList", "ip_list", required=True, metavar="ID[,ID...]",
              help="Comma-separated client ids (or IPs) to split the queues over.")
@json_option
@click.pass_obj
def allocate_mq(obj, topic: str, ip_list: str, json_mode: bool) -> None:
    """Show how the topic's queues are split over the given client ids by AllocateMessageQueueAveragely.

    Only the route is read; like every consumer of a group, the queues and the ids are sorted first (mqadmin
    keeps the ids in the given order), so the result is what consumers with these ids would take."""
    from mq.cli.console import Console
    from mq.client.route_cache import subscribe_queues

    try:
        clients = parse_client_list(ip_list)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="-i/--ip-list") from None

    route = with_admin(obj, lambda admin: admin.topic_route(topic))
    queues = subscribe_queues(topic, route)
    if not queues:
        from mq.errors import BrokerError

        raise BrokerError(1, f"topic {topic!r} has no readable queue in its route")
    table = allocation(queues, clients)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"topic": topic, "queues": len(queues),
                      "result": {cid: [q.to_json_value() for q in qs] for cid, qs in table.items()}})
        return
    console.table(f"Allocation of {topic} ({len(queues)} queues, AVG)", ["Client ID", "Count", "Queues"],
                  [(cid, len(qs), " ".join(f"{q.broker_name}:{q.queue_id}" for q in qs)) for cid, qs in table.items()],
                  justify={"Count": "right"})
