"""Messages: query a topic by time range, by key (within a time range) or by id; a message's detail (every
field, its properties, the body as text, pretty JSON or hex, store info) and its resend to a consumer group
(the group's client consumes it at once: CONSUME_MESSAGE_DIRECTLY)."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mq.client.group_admin import online_connection
from mq.client.message_view import classify_msg_id, find_by_id, message_dict
from mq.client.message_window import TimeRange, newest_in_range
from mq.common import properties as P
from mq.dashboard.views.common import FieldError, Result, action, app_state, parse_when, render, required
from mq.errors import MQError

#: Bodies larger than this are shown cut (the whole body is a download).
SHOWN_BODY = 256 * 1024
HOUR_MS = 3_600_000


def _row(m: Any) -> dict[str, Any]:
    return {"offsetMsgId": m.msg_id, "uniqKey": m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "",
            "topic": m.topic, "tags": m.properties.get(P.TAGS) or "", "keys": m.properties.get(P.KEYS) or "",
            "broker": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "storeTimestamp": m.store_timestamp, "size": m.store_size}


def _range(q: dict[str, str]) -> tuple[int, int]:
    now = int(time.time() * 1000)
    begin = parse_when(q["begin"], q.get("tz"), field_name="begin") if q.get("begin", "").strip() else now - HOUR_MS
    end_text = q.get("end", "").strip()
    end = parse_when(end_text, q.get("tz"), field_name="end") if end_text else now
    if end_text and not end_text.isdigit():
        end += 999  # a time typed to the second covers that whole second
    if begin > end:
        raise FieldError("begin", "the begin is after the end")
    return begin, end


async def _search(request: Request, by: str, q: dict[str, str]) -> dict[str, Any]:
    backend = app_state(request).backend
    limit = backend.config.max_query_messages
    if by == "id":
        msg_id = required(q, "id", "message id")
        topic = q.get("topic", "").strip() or None
        try:
            _kind, msgs = await find_by_id(backend.admin, msg_id, topic)
        except ValueError as exc:
            raise FieldError("id", str(exc)) from None
        return {"rows": [_row(m) for m in msgs], "note": ""}
    topic = required(q, "topic", "topic")
    begin, end = _range(q)
    if by == "key":
        key = required(q, "key", "key")
        msgs = await backend.admin.query_message_by_key(topic, key, limit, begin, end)
        return {"rows": [_row(m) for m in msgs], "note": f"stored {_fmt(begin)} to {_fmt(end)}"}
    pc = await backend.pull_consumer()
    msgs, span = await newest_in_range(pc, topic, TimeRange(begin, end + 1), limit)
    note = f"stored {_fmt(begin)} to {_fmt(end)}"
    if span > len(msgs) and len(msgs) >= limit:
        note += f"; the newest {limit} of up to {span} shown: narrow the time range to see older ones"
    return {"rows": [_row(m) for m in msgs], "note": note}


def _fmt(ms: int) -> str:
    from mq.dashboard.views.common import format_ms

    return format_ms(ms)


async def messages_page(request: Request) -> Response:
    q = dict(request.query_params)
    by = q.get("by", "topic") if q.get("by") in ("topic", "key", "id") else "topic"
    ctx: dict[str, Any] = {"by": by, "q": q, "errors": {}, "rows": None, "note": ""}
    if q.get("go"):
        try:
            ctx.update(await _search(request, by, q))
        except FieldError as exc:
            ctx["errors"][exc.field] = exc.message
        except MQError as exc:
            from mq.dashboard.views.common import describe

            ctx["errors"]["topic" if by != "id" else "id"] = describe(exc)[1]
    return render(request, "messages.html", ctx)


def body_views(body: bytes) -> dict[str, Any]:
    """The body as text (None when it is not UTF-8), pretty JSON (None when not JSON) and hex, cut to
    SHOWN_BODY bytes."""
    cut = body[:SHOWN_BODY]
    try:
        text: str | None = cut.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    pretty = None
    if text is not None and len(body) <= SHOWN_BODY:
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=False)
        except ValueError:
            pretty = None
    hex_lines = [f"{i:08x}  {cut[i:i + 16].hex(' '):<47}  " + "".join(chr(b) if 32 <= b < 127 else "."
                                                                         for b in cut[i:i + 16])
                 for i in range(0, min(len(cut), 64 * 1024), 16)]
    return {"text": text, "json": pretty, "hex": "\n".join(hex_lines), "length": len(body),
            "cut": len(body) > SHOWN_BODY or len(cut) > 64 * 1024}


async def _lookup(request: Request, msg_id: str, topic: str | None) -> Any:
    try:
        _kind, msgs = await find_by_id(app_state(request).backend.admin, msg_id, topic)
    except ValueError as exc:
        raise MQError(str(exc)) from None
    return msgs[0]


async def detail_context(request: Request, msg_id: str, topic: str | None) -> dict[str, Any]:
    admin = app_state(request).backend.admin
    m = await _lookup(request, msg_id, topic)
    d = message_dict(m)
    groups: list[str] = []
    try:
        for addr in (await admin.topic_master_addrs(m.topic)).values():
            groups = sorted(set(groups) | await admin.query_topic_consume_by_who(addr, m.topic))
    except MQError:
        pass
    return {"m": d, "body": body_views(m.body), "groups": groups, "id": msg_id, "topic": m.topic}


async def message_detail(request: Request) -> Response:
    msg_id = request.query_params.get("id", "").strip()
    topic = request.query_params.get("topic", "").strip() or None
    try:
        classify_msg_id(msg_id)
    except ValueError as exc:
        return render(request, "error.html", {"kind": "error", "text": str(exc)}, status=400)
    ctx = await detail_context(request, msg_id, topic)
    return render(request, "message.html", {**ctx, "values": {}, "errors": {}, "result": None})


async def message_body(request: Request) -> Response:
    m = await _lookup(request, request.query_params.get("id", "").strip(),
                      request.query_params.get("topic", "").strip() or None)
    return Response(m.body, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{m.msg_id}.bin"'})


async def _resend_extra(request: Request) -> dict[str, Any]:
    form = await request.form()
    return await detail_context(request, str(form.get("id") or ""), str(form.get("topic") or "") or None)


@action("_message_resend.html", field_for_errors="group", extra=_resend_extra)
async def message_resend(request: Request, values: dict[str, str]) -> Result:
    admin = app_state(request).backend.admin
    group = required(values, "group", "consumer group")
    m = await _lookup(request, required(values, "id", "message id"), values.get("topic") or None)
    client = (values.get("client") or "").strip()
    if not client:
        cc = await online_connection(admin, group)
        if cc is None or not cc.connection_set:
            raise FieldError("group", f"no client of {group} is online to consume the message")
        client = cc.connection_set[0].client_id
    host, port = m.store_host
    res = await admin.consume_message_directly(f"{host}:{port}", group, client, m.msg_id)
    return Result(f"{client} of {group} answered {res.consume_result or '-'}",
                  [f"spent {res.spent_time_mills} ms", *([f"remark: {res.remark}"] if res.remark else [])])


ROUTES = [
    Route("/messages", messages_page, methods=["GET"]),
    Route("/messages/detail", message_detail, methods=["GET"]),
    Route("/messages/body", message_body, methods=["GET"]),
    Route("/messages/resend", message_resend, methods=["POST"]),
]
