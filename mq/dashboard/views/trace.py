"""Message trace: one message's path from the trace topic (``mq trace -i``'s data, ``mq.trace.query``) as a
timeline: the send, each group's attempts (SubBefore/SubAfter with costs and retry counts), transaction ends,
and the groups that have the message stored but not consumed."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mq.client.message_view import classify_msg_id
from mq.dashboard.views.common import app_state, describe, render
from mq.errors import MQError
from mq.trace.query import query_trace


def timeline(tr: Any) -> dict[str, Any]:
    """Bars of the path: (label, detail, start and width as % of the whole span, status) per event."""
    events: list[dict[str, Any]] = []
    for p in tr.pubs:
        events.append({"lane": f"send ({p.group})", "start": p.send_time, "cost": p.cost_ms, "status": p.status,
                       "detail": f"{p.client_host} -> {p.store_host}, {p.msg_type}, {p.body_length} bytes"})
    for e in tr.end_transactions:
        events.append({"lane": f"end transaction ({e.group})", "start": e.time, "cost": 0, "status": "success",
                       "detail": f"{e.state}{' (from check)' if e.from_check else ''}"})
    for g in tr.groups:
        for n, a in enumerate(g.attempts, 1):
            events.append({"lane": f"{g.group or '%UNKNOWN_GROUP%'}", "start": a.start, "cost": a.cost_ms or 0,
                           "status": a.status, "detail": f"attempt {n}, retry {'-' if a.retry_times is None else a.retry_times}, "
                                                          f"{a.client_host}, {a.return_type or a.status}"})
    events = [e for e in events if e["start"]]
    if not events:
        return {"events": [], "span": 0}
    t0 = min(e["start"] for e in events)
    t1 = max(e["start"] + e["cost"] for e in events)
    span = max(t1 - t0, 1)
    for e in events:
        e["offset_ms"] = e["start"] - t0
        e["left"] = round(100.0 * (e["start"] - t0) / span, 2)
        e["width"] = max(round(100.0 * e["cost"] / span, 2), 0.6)
    events.sort(key=lambda e: e["start"])
    return {"events": events, "span": span}


async def trace_page(request: Request) -> Response:
    msg_id = request.query_params.get("id", "").strip()
    topic = request.query_params.get("topic", "").strip() or None
    ctx: dict[str, Any] = {"id": msg_id, "topic": topic or "", "trace": None, "error": "", "timeline": None}
    if msg_id:
        try:
            classify_msg_id(msg_id)
            st = app_state(request)
            tr = await query_trace(st.backend.admin, msg_id, topic=topic, trace_topic=st.config.trace_topic)
            ctx.update(trace=tr, timeline=timeline(tr))
        except ValueError as exc:
            ctx["error"] = str(exc)
        except MQError as exc:
            ctx["error"] = describe(exc)[1]
    return render(request, "trace.html", ctx)


ROUTES = [Route("/trace", trace_page)]
