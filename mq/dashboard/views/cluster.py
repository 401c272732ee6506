"""Cluster: every broker (cluster, name, id, role, address, version, in/out TPS, today's counts, disk use)
and every name server with whether it answers; refreshed live."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mq.client.broker_runtime import broker_rows, cluster_overview, runtime_summary
from mq.dashboard.views.common import app_state, describe, render
from mq.errors import MQError


async def namesrv_states(admin: Any) -> list[dict[str, Any]]:
    """Each name server with ``ok`` and, when it does not answer, why."""
    from mq.protocol.codes import RequestCode
    from mq.protocol.command import RemotingCommand

    out = []
    for addr in admin.namesrv_addrs:
        try:
            await admin.client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO),
                                      timeout=admin.timeout)
            out.append({"addr": addr, "ok": True, "error": ""})
        except MQError as exc:
            out.append({"addr": addr, "ok": False, "error": describe(exc)[1]})
    return out


async def cluster_context(request: Request) -> dict[str, Any]:
    admin = app_state(request).backend.admin
    namesrvs = await namesrv_states(admin)
    if not any(n["ok"] for n in namesrvs):
        return {"namesrvs": namesrvs, "brokers": [], "down": True}
    info, runtime = await cluster_overview(admin)
    rows = []
    for base, rt in broker_rows(info, runtime):
        row: dict[str, Any] = {"cluster": base["cluster"], "name": base["brokerName"], "id": base["brokerId"],
                               "addr": base["address"], "role": "MASTER" if base["brokerId"] == 0 else "SLAVE",
                               "error": ""}
        if isinstance(rt, dict):
            row.update(runtime_summary(rt))
            row["role"] = rt.get("brokerRole") or row["role"]
        else:
            row["error"] = rt or "no answer"
        rows.append(row)
    return {"namesrvs": namesrvs, "brokers": rows, "down": False}


async def cluster_page(request: Request) -> Response:
    return render(request, "cluster.html", await cluster_context(request))


async def cluster_live(request: Request) -> Response:
    return render(request, "_cluster_live.html", await cluster_context(request))


ROUTES = [Route("/cluster", cluster_page), Route("/cluster/live", cluster_live)]
