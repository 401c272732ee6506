"""The newest ``mq trace analyze --html`` report of the configured folder (``traceReportDir``), shown in a
sandboxed frame."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from mq.dashboard.views.common import app_state, render


def latest_report(folder: str) -> Path | None:
    """The most recently written ``*.html`` directly in ``folder`` (None without one)."""
    if not folder:
        return None
    try:
        files = [p for p in Path(folder).glob("*.html") if p.is_file()]
    except OSError:
        return None
    return max(files, key=lambda p: p.stat().st_mtime, default=None)


async def report_page(request: Request) -> Response:
    folder = app_state(request).config.trace_report_dir
    path = latest_report(folder)
    return render(request, "report.html", {"folder": folder, "report": path,
                                           "written": int(path.stat().st_mtime * 1000) if path else 0})


async def report_file(request: Request) -> Response:
    path = latest_report(app_state(request).config.trace_report_dir)
    if path is None:
        return Response("no report", status_code=404)
    return FileResponse(path, media_type="text/html",
                        headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                                            "img-src data:; sandbox"})


ROUTES = [Route("/report", report_page), Route("/report/latest.html", report_file)]
