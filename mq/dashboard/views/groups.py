"""Consumer groups: the list with each group's lag, TPS and online clients; a group's lag per queue and in
total (live, with a chart), its clients and subscriptions, consume mode and subscription-group config; reset
its offsets by time, skip its backlog, delete it, change its config; its dead letters and their resend."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mq.client import dead_letters
from mq.client.group_admin import (delete_subscription_group, groups_overview, online_connection, progress_rows,
                                   progress_totals, reset_offset_by_time)
from mq.common.topic import validate_group
from mq.dashboard.views.common import (FieldError, Result, action, app_state, int_field, list_ttl, page_of,
                                       parse_when, render, required)
from mq.errors import InvalidTopicError, MQError
from mq.protocol.bodies import SubscriptionGroupConfig

#: Groups of RocketMQ's own tools and system services, hidden from the list unless asked for.
SYSTEM_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER",
                           "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
                           "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS", "SCHEDULE_CONSUMER"})
#: Dead letters shown on a group's page (the resend of "all" reads every one).
DLQ_SHOWN = 100


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith("CID_RMQ_SYS_")


async def _clusters(request: Request) -> dict[str, Any]:
    info = await app_state(request).backend.admin.cluster_info()
    return {"clusters": sorted(info.cluster_addr_table)}


async def _list_context(request: Request, *, clients: bool) -> dict[str, Any]:
    """The group list; without ``clients`` the online clients are left out (the page shows at once and its
    rows, with clients, follow at once through htmx)."""
    q = request.query_params.get("q", "").strip().lower()
    show_system = request.query_params.get("system") in ("1", "on", "true")
    backend = app_state(request).backend
    rows, problems = await backend.cached(f"groups:{clients}", lambda: groups_overview(backend.admin, clients=clients),
                                          list_ttl(request))
    shown = [r for r in rows if (show_system or not is_system_group(r["group"])) and (not q or q in r["group"].lower())]
    shown, paging = page_of(shown, request)
    return {"rows": shown, "paging": paging, "q": q, "system": show_system, "total": len(rows),
            "problems": problems, "clients": clients}


async def group_list(request: Request) -> Response:
    ctx = await _list_context(request, clients=False)
    ctx.update(await _clusters(request), values=_config_values(SubscriptionGroupConfig()), errors={}, result=None)
    return render(request, "groups.html", ctx)


async def group_rows(request: Request) -> Response:
    return render(request, "_group_rows.html", await _list_context(request, clients=True))


def _config_values(cfg: SubscriptionGroupConfig) -> dict[str, str]:
    return {"retryMaxTimes": str(cfg.retry_max_times), "retryQueueNums": str(cfg.retry_queue_nums),
            "brokerId": str(cfg.broker_id), "whichBrokerWhenConsumeSlowly": str(cfg.which_broker_when_consume_slowly),
            "consumeEnable": "on" if cfg.consume_enable else "", "consumeBroadcastEnable":
            "on" if cfg.consume_broadcast_enable else "", "consumeFromMinEnable":
            "on" if cfg.consume_from_min_enable else "", "notifyConsumerIdsChangedEnable":
            "on" if cfg.notify_consumer_ids_changed_enable else ""}


def _config_from(values: dict[str, str], group: str) -> SubscriptionGroupConfig:
    on = lambda k: values.get(k) in ("on", "true", "1")  # noqa: E731
    return SubscriptionGroupConfig(
        group_name=group, consume_enable=on("consumeEnable"), consume_from_min_enable=on("consumeFromMinEnable"),
        consume_broadcast_enable=on("consumeBroadcastEnable"),
        retry_queue_nums=int_field(values, "retryQueueNums", 0, 64), retry_max_times=int_field(values, "retryMaxTimes", 0, 64),
        broker_id=int_field(values, "brokerId", 0, 1024),
        which_broker_when_consume_slowly=int_field(values, "whichBrokerWhenConsumeSlowly", 0, 1024),
        notify_consumer_ids_changed_enable=on("notifyConsumerIdsChangedEnable"))


async def _write_config(request: Request, cfg: SubscriptionGroupConfig, cluster: str) -> Result:
    admin = app_state(request).backend.admin
    targets = await admin.master_addrs(cluster)
    if not targets:
        raise FieldError("cluster", f"cluster {cluster!r} has no master broker")
    for addr in targets.values():
        await admin.create_and_update_subscription_group_config(addr, cfg)
    return Result(f"subscription group {cfg.group_name} written to {len(targets)} broker(s)",
                  [f"{name} ({addr}): SUCCESS" for name, addr in sorted(targets.items())])


@action("_group_create.html", field_for_errors="group", extra=_clusters)
async def group_create(request: Request, values: dict[str, str]) -> Result:
    group = required(values, "group", "group name")
    try:
        validate_group(group)
    except InvalidTopicError as exc:
        raise FieldError("group", str(exc)) from None
    return await _write_config(request, _config_from(values, group), required(values, "cluster", "cluster"))


async def lag_context(request: Request, group: str) -> dict[str, Any]:
    admin = app_state(request).backend.admin
    stats = await admin.examine_consume_stats_all(group)
    rows = progress_rows(stats.offset_table)
    return {"group": group, "lag_rows": rows, "totals": progress_totals(rows), "tps": stats.consume_tps,
            "now": int(time.time() * 1000)}


async def group_context(request: Request, group: str) -> dict[str, Any]:
    admin = app_state(request).backend.admin
    ctx = await lag_context(request, group)
    cc = await online_connection(admin, group)
    info = await admin.cluster_info()
    configs = []
    for name, addr in sorted((await admin.master_addrs()).items()):
        try:
            cfg = (await admin.get_all_subscription_group(addr)).subscription_group_table.get(group)
        except MQError as exc:
            configs.append({"broker": name, "addr": addr, "error": str(exc), "config": None})
            continue
        if cfg is not None:
            configs.append({"broker": name, "addr": addr, "error": "", "config": cfg})
    topics = sorted({r["topic"] for r in ctx["lag_rows"] if not r["topic"].startswith("%RETRY%")}
                    | set(cc.subscription_table if cc else ()))
    try:
        dlq = await dead_letters.read_dead_letters(admin, group, limit=DLQ_SHOWN)
    except MQError as exc:
        dlq, ctx["dlq_error"] = [], str(exc)
    ctx.update(connection=cc, configs=configs, topics=[t for t in topics if not t.startswith("%")],
               clusters=sorted(info.cluster_addr_table), dead=[dead_letters.dead_letter_dict(m) for m in dlq])
    ctx.setdefault("dlq_error", "")
    return ctx


async def group_detail(request: Request) -> Response:
    group = request.path_params["group"]
    ctx = await group_context(request, group)
    first = next((c["config"] for c in ctx["configs"] if c["config"] is not None), None)
    blank = {"values": {}, "errors": {}, "result": None}
    cfg_values = _config_values(first or SubscriptionGroupConfig(group_name=group))
    cfg_values["cluster"] = ctx["clusters"][0] if ctx["clusters"] else ""
    forms = {"reset": {**blank, "values": {"topic": ctx["topics"][0] if ctx["topics"] else ""}},
             "skip": {**blank, "values": {"topic": ctx["topics"][0] if ctx["topics"] else ""}},
             "delete": {**blank, "values": {"cluster": cfg_values["cluster"]}},
             "config": {**blank, "values": cfg_values}, "dlq": blank}
    return render(request, "group.html", {**ctx, "forms": forms})


async def group_lag(request: Request) -> Response:
    return render(request, "_group_lag.html", await lag_context(request, request.path_params["group"]))


async def _detail_extra(request: Request) -> dict[str, Any]:
    return await group_context(request, request.path_params["group"])


def _topic(values: dict[str, str]) -> str:
    return required(values, "topic", "topic")


def _offsets_result(group: str, topic: str, table: dict, what: str) -> Result:
    rows = sorted(table.items())
    return Result(f"offsets of {group} on {topic} {what}: {len(rows)} queue(s)",
                  [f"{mq.broker_name} queue {mq.queue_id}: offset {off}" for mq, off in rows])


@action("_group_reset.html", field_for_errors="topic", extra=_detail_extra)
async def group_reset(request: Request, values: dict[str, str]) -> Result:
    group, topic = request.path_params["group"], _topic(values)
    when = parse_when(required(values, "time", "time"), values.get("tz"), field_name="time")
    table = await reset_offset_by_time(app_state(request).backend.admin, topic, group, when,
                                       force=values.get("force", "on") in ("on", "true", "1"))
    return _offsets_result(group, topic, table, "reset")


@action("_group_skip.html", field_for_errors="topic", extra=_detail_extra)
async def group_skip(request: Request, values: dict[str, str]) -> Result:
    group, topic = request.path_params["group"], _topic(values)
    table = await reset_offset_by_time(app_state(request).backend.admin, topic, group, -1, force=True)
    return _offsets_result(group, topic, table, "moved to the end (backlog skipped)")


@action("_group_delete.html", field_for_errors="cluster", extra=_clusters)
async def group_delete(request: Request, values: dict[str, str]) -> Result:
    group = request.path_params["group"]
    cluster = required(values, "cluster", "cluster")
    admin = app_state(request).backend.admin
    addrs = await delete_subscription_group(admin, group, (await admin.master_addrs(cluster)).values(),
                                            cluster=cluster, remove_offset=values.get("removeOffset") == "on")
    return Result(f"subscription group {group} deleted from {len(addrs)} broker(s) of {cluster}",
                  [f"{a}: deleted, with %RETRY%{group} and %DLQ%{group}" for a in addrs])


@action("_group_config.html", field_for_errors="_", extra=_detail_extra)
async def group_config(request: Request, values: dict[str, str]) -> Result:
    group = request.path_params["group"]
    return await _write_config(request, _config_from(values, group), required(values, "cluster", "cluster"))


@action("_group_dlq.html", field_for_errors="_", extra=_detail_extra)
async def group_dlq_resend(request: Request, values: dict[str, str]) -> Result:
    group = request.path_params["group"]
    backend = app_state(request).backend
    ids = None if values.get("all") == "on" else [v for k, v in values.items() if k.startswith("id_")]
    if ids is not None and not ids:
        raise FieldError("_", "tick the dead letters to resend, or resend all")
    chosen = dead_letters.choose(await dead_letters.read_dead_letters(backend.admin, group), group, ids)
    if not chosen:
        raise FieldError("_", f"the DLQ of {group} is empty")
    to_topic = (values.get("toTopic") or "").strip() or None
    done = await dead_letters.resend(await backend.producer(), chosen, group, to_topic=to_topic,
                                     to_original=values.get("toOriginal") == "on")
    return Result(f"{len(done)} dead letter(s) of {group} resent",
                  [f"{d['msgId']} -> {d['to']}: {d['status']} (queue {d['queueId']}, offset {d['queueOffset']})"
                   for d in done])


ROUTES = [
    Route("/groups", group_list, methods=["GET"]),
    Route("/groups/rows", group_rows, methods=["GET"]),
    Route("/groups/create", group_create, methods=["POST"]),
    Route("/groups/{group:str}", group_detail, methods=["GET"]),
    Route("/groups/{group:str}/lag", group_lag, methods=["GET"]),
    Route("/groups/{group:str}/reset", group_reset, methods=["POST"]),
    Route("/groups/{group:str}/skip", group_skip, methods=["POST"]),
    Route("/groups/{group:str}/delete", group_delete, methods=["POST"]),
    Route("/groups/{group:str}/config", group_config, methods=["POST"]),
    Route("/groups/{group:str}/dlq/resend", group_dlq_resend, methods=["POST"]),
]
