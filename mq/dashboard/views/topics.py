"""Topics: the list (filtered by name and kind: normal, retry, DLQ, system), a topic's route, per-queue
min/max offsets, the groups consuming it and its config; create, update, delete, and send a test message."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mq.client.topic_admin import KINDS, delete_topic, topic_kind, topics_overview, update_topic
from mq.common.message import Message
from mq.common.topic import validate_topic
from mq.dashboard.views.common import (FieldError, Result, action, app_state, int_field, list_ttl, page_of, render,
                                       required)
from mq.errors import InvalidTopicError, MQError
from mq.protocol.bodies import TopicConfig


def _filter(rows: list[dict[str, Any]], q: str, kind: str) -> list[dict[str, Any]]:
    q = q.strip().lower()
    return [r for r in rows if (kind == "all" or r["kind"] == kind) and (not q or q in r["topic"].lower())]


async def _list_context(request: Request) -> dict[str, Any]:
    q = request.query_params.get("q", "")
    kind = request.query_params.get("kind", "normal")
    kind = kind if kind in KINDS or kind == "all" else "normal"
    backend = app_state(request).backend
    rows, problems = await backend.cached("topics", lambda: topics_overview(backend.admin), list_ttl(request))
    counts = {k: sum(1 for r in rows if r["kind"] == k) for k in KINDS}
    shown, paging = page_of(_filter(rows, q, kind), request)
    return {"rows": shown, "paging": paging, "q": q, "kind": kind, "kinds": KINDS, "counts": counts,
            "total": len(rows), "problems": problems}


async def _clusters(request: Request) -> dict[str, Any]:
    info = await app_state(request).backend.admin.cluster_info()
    return {"clusters": sorted(info.cluster_addr_table)}


async def topic_list(request: Request) -> Response:
    ctx = await _list_context(request)
    ctx.update(await _clusters(request), values={"read": "8", "write": "8", "perm": "6"}, errors={}, result=None)
    return render(request, "topics.html", ctx)


async def topic_rows(request: Request) -> Response:
    return render(request, "_topic_rows.html", await _list_context(request))


def _topic_config(values: dict[str, str], topic: str) -> TopicConfig:
    read = int_field(values, "read", 1, 1024)
    write = int_field(values, "write", 1, 1024)
    perm = int_field(values, "perm", 2, 6)
    if perm not in (2, 4, 6):
        raise FieldError("perm", "2 (write), 4 (read) or 6 (read and write)")
    return TopicConfig(topic_name=topic, read_queue_nums=read, write_queue_nums=write, perm=perm,
                       order=values.get("order") in ("on", "true", "1"))


def _target(values: dict[str, str]) -> tuple[str | None, str | None]:
    cluster, broker = (values.get("cluster") or "").strip(), (values.get("broker") or "").strip()
    if broker:
        return None, broker
    if not cluster:
        raise FieldError("cluster", "choose a cluster (or give a broker address)")
    return cluster, None


async def _apply_topic(request: Request, values: dict[str, str], topic: str, verb: str) -> Result:
    tc = _topic_config(values, topic)
    cluster, broker = _target(values)
    try:
        out = await update_topic(app_state(request).backend.admin, tc, cluster=cluster, broker=broker)
    except MQError as exc:
        raise FieldError("topic", str(exc)) from None
    details = [f"{name} ({addr}): SUCCESS, {tc.read_queue_nums} read / {tc.write_queue_nums} write queues, "
               f"perm {tc.perm}" for name, addr in sorted(out["brokers"].items())]
    if out["orderConf"]:
        details.append(f"ORDER_TOPIC_CONFIG {topic} = {out['orderConf']}")
    return Result(f"topic {topic} {verb} on {len(out['brokers'])} broker(s)", details)


@action("_topic_create.html", field_for_errors="topic", extra=_clusters)
async def topic_create(request: Request, values: dict[str, str]) -> Result:
    topic = required(values, "topic", "topic name")
    try:
        validate_topic(topic)
    except InvalidTopicError as exc:
        raise FieldError("topic", str(exc)) from None
    return await _apply_topic(request, values, topic, "created")


async def _detail_extra(request: Request) -> dict[str, Any]:
    return await topic_context(request, request.path_params["topic"])


async def topic_context(request: Request, topic: str) -> dict[str, Any]:
    admin = app_state(request).backend.admin
    route = await admin.topic_route(topic)
    masters = {bd.broker_name: bd.broker_addrs[0] for bd in route.broker_datas if 0 in bd.broker_addrs}
    problems: list[str] = []
    queues: list[dict[str, Any]] = []
    groups: set[str] = set()
    for name, addr in sorted(masters.items()):
        try:
            stats = await admin.examine_topic_stats(addr, topic)
            queues += [{"broker": mq.broker_name, "queueId": mq.queue_id, "min": o.min_offset, "max": o.max_offset,
                        "last": o.last_update_timestamp} for mq, o in stats.offset_table.items()]
            groups |= await admin.query_topic_consume_by_who(addr, topic)
        except MQError as exc:
            problems.append(f"broker {name} ({addr}): {exc}")
    queues.sort(key=lambda r: (r["broker"], r["queueId"]))
    info = await admin.cluster_info()
    qd = route.queue_datas[0] if route.queue_datas else None
    return {"topic": topic, "route": route, "queues": queues, "groups": sorted(groups), "problems": problems,
            "kind": topic_kind(topic, set(info.cluster_addr_table) | set(info.broker_addr_table)),
            "clusters": sorted({bd.cluster for bd in route.broker_datas} or set(info.cluster_addr_table)),
            "stored": sum(q["max"] - q["min"] for q in queues),
            "current": {"read": str(qd.read_queue_nums if qd else 8), "write": str(qd.write_queue_nums if qd else 8),
                        "perm": str(qd.perm if qd else 6), "order": bool(route.order_topic_conf)}}


async def topic_detail(request: Request) -> Response:
    topic = request.path_params["topic"]
    ctx = await topic_context(request, topic)
    blank = {"values": dict(ctx["current"]), "errors": {}, "result": None}
    return render(request, "topic.html", {**ctx, "forms": {"update": blank, "delete": {**blank, "values": {}},
                                                           "send": {**blank, "values": {"body": "Hello mq"}}}})


async def topic_status_live(request: Request) -> Response:
    return render(request, "_topic_queues.html", await topic_context(request, request.path_params["topic"]))


@action("_topic_update.html", field_for_errors="topic", extra=_detail_extra)
async def topic_update(request: Request, values: dict[str, str]) -> Result:
    return await _apply_topic(request, values, request.path_params["topic"], "updated")


@action("_topic_delete.html", field_for_errors="cluster", extra=_clusters)
async def topic_delete(request: Request, values: dict[str, str]) -> Result:
    topic = request.path_params["topic"]
    cluster = required(values, "cluster", "cluster")
    out = await delete_topic(app_state(request).backend.admin, topic, cluster)
    details = [f"{name} ({addr}): deleted" for name, addr in sorted(out["brokers"].items())]
    details += [f"name server: {f}" for f in out["namesrvFailures"]]
    return Result(f"topic {topic} deleted from cluster {cluster} and the name server(s)", details)


@action("_topic_send.html", field_for_errors="body", extra=_detail_extra)
async def topic_send(request: Request, values: dict[str, str]) -> Result:
    topic = request.path_params["topic"]
    body = values.get("body") or ""
    if len(body.encode()) > 4 * 1024 * 1024:
        raise FieldError("body", "at most 4 MiB")
    props: dict[str, str] = {}
    if (values.get("tag") or "").strip():
        props["TAGS"] = values["tag"].strip()
    if (values.get("keys") or "").strip():
        props["KEYS"] = " ".join(k.strip() for k in values["keys"].replace(",", " ").split() if k.strip())
    producer = await app_state(request).backend.producer()
    r = await producer.send(Message(topic, body.encode(), properties=props))
    return Result(f"sent to {topic}: {r.status.value}", [
        f"msgId {r.msg_id}", f"offsetMsgId {r.offset_msg_id}",
        f"broker {r.queue.broker_name}, queue {r.queue.queue_id}, offset {r.queue_offset}"],
        rows=[{"msgId": r.msg_id, "topic": topic}])


ROUTES = [
    Route("/topics", topic_list, methods=["GET"]),
    Route("/topics/rows", topic_rows, methods=["GET"]),
    Route("/topics/create", topic_create, methods=["POST"]),
    Route("/topics/{topic:str}", topic_detail, methods=["GET"]),
    Route("/topics/{topic:str}/queues", topic_status_live, methods=["GET"]),
    Route("/topics/{topic:str}/update", topic_update, methods=["POST"]),
    Route("/topics/{topic:str}/delete", topic_delete, methods=["POST"]),
    Route("/topics/{topic:str}/send", topic_send, methods=["POST"]),
]
