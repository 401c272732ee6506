"""Producers: the online clients of a producer group (asked of the brokers of a topic it sends to), and the
producer groups each broker knows (GET_ALL_PRODUCER_INFO, where the broker answers it)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mq.client.group_admin import producer_connections
from mq.dashboard.views.common import app_state, describe, render
from mq.errors import MQError


async def known_producer_groups(admin: Any) -> list[str]:
    groups: set[str] = set()
    for addr in (await admin.master_addrs()).values():
        try:
            groups |= set((await admin.get_all_producer_info(addr)).data)
        except MQError:
            continue  # a broker without GET_ALL_PRODUCER_INFO: only the form
    return sorted(groups)


async def producers_page(request: Request) -> Response:
    admin = app_state(request).backend.admin
    group = request.query_params.get("group", "").strip()
    topic = request.query_params.get("topic", "").strip()
    ctx: dict[str, Any] = {"group": group, "topic": topic, "connections": None, "error": "",
                           "known": await known_producer_groups(admin)}
    if group and topic:
        try:
            ctx["connections"] = await producer_connections(admin, group, topic)
        except MQError as exc:
            ctx["error"] = describe(exc)[1]
    elif group or topic:
        ctx["error"] = "give both the producer group and a topic it sends to"
    return render(request, "producers.html", ctx)


ROUTES = [Route("/producers", producers_page)]
