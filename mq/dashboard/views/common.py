"""What every view shares: the templates, the application state, how errors become a visible state on the
page, and ``action``, the wrapper of every POST that changes the cluster (CSRF check, role check, the broker's
answer or its error next to the field it concerns)."""

from __future__ import annotations

import datetime as _dt
import functools
import html
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.templating import Jinja2Templates

from mq.dashboard.auth import csrf_ok, csrf_token
from mq.errors import BrokerError, ConnectError, MQError, RemotingError

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def _asset_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mq")
    except PackageNotFoundError:
        return "dev"


#: Appended to asset URLs, so a browser that keeps assets for a day fetches them again after an upgrade.
ASSET_VERSION = _asset_version()


def format_ms(ms: Any) -> str:
    """Epoch ms as local ``YYYY-MM-DD HH:MM:SS.mmm``; 0/None/negative as ``-``."""
    if not ms or not isinstance(ms, (int, float)) or ms < 0:
        return "-"
    ms = int(ms)
    return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def perm_text(perm: Any) -> str:
    if perm is None:
        return "-"
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-")


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["ms"] = format_ms
    env.filters["perm"] = perm_text
    env.filters["num"] = lambda v: f"{v:,}" if isinstance(v, int) else v
    env.filters["tps"] = lambda v: f"{v:,.2f}" if isinstance(v, (int, float)) else v
    return Jinja2Templates(env=env)


templates = _templates()


@dataclass
class Result:
    """The broker's answer to an action: a headline and its details (one line per broker, per message, ...)."""

    message: str
    details: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


class FieldError(Exception):
    """Bad input: ``message`` is shown next to form field ``field``."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


def app_state(request: Request) -> Any:
    return request.app.state.console


def user(request: Request) -> Any:
    """The logged-in account, or None (no accounts configured)."""
    st = app_state(request)
    name = request.session.get("user")
    return st.accounts.get(name) if st.accounts and name else None


def can_change(request: Request) -> bool:
    st = app_state(request)
    if not st.accounts:
        return True
    u = user(request)
    return bool(u and u.can_change)


def render(request: Request, name: str, context: dict[str, Any] | None = None, status: int = 200) -> Response:
    st = app_state(request)
    ctx = {"config": st.config, "namesrv": ";".join(st.backend.namesrv_addrs), "user": user(request),
           "can_change": can_change(request), "csrf": csrf_token(request.session), "path": request.url.path,
           "refresh": st.config.refresh_interval, "has_report": bool(st.config.trace_report_dir),
           "accounts": bool(st.accounts), "v": ASSET_VERSION}
    ctx.update(context or {})
    return templates.TemplateResponse(request, name, ctx, status_code=status)


def describe(exc: BaseException) -> tuple[str, str]:
    """(kind, text) of an error as the page shows it: the cluster's state, never a traceback."""
    if isinstance(exc, ConnectError):
        return "unreachable", str(exc)
    if isinstance(exc, RemotingError):
        return "timeout", f"no answer in time: {exc}"
    if isinstance(exc, BrokerError):
        return "refused", str(exc)
    if isinstance(exc, MQError):
        return "error", str(exc)
    return "error", f"unexpected {type(exc).__name__}: {exc}"


async def error_response(request: Request, exc: Exception) -> Response:
    """A failed page or fragment: the state of the cluster as a banner (503 when it cannot be reached)."""
    kind, text = describe(exc)
    if not isinstance(exc, MQError):
        log.exception("console view %s failed", request.url.path)
    status = 503 if kind in ("unreachable", "timeout") else 502 if isinstance(exc, MQError) else 500
    if request.headers.get("HX-Request"):
        return HTMLResponse(f'<div class="state state-{kind}" role="alert">{html.escape(text)}</div>',
                            status_code=200)
    return render(request, "error.html", {"kind": kind, "text": text}, status=status)


Handler = Callable[[Request, dict[str, str]], Awaitable[Result]]


def action(template: str, *, field_for_errors: str = "_", extra: Callable[[Request], Awaitable[dict]] | None = None):
    """Wrap a POST handler that changes the cluster. The form is re-rendered from ``template`` with the values
    sent, and either the handler's ``Result`` (the broker's answer) or the error next to its field: a
    ``FieldError`` names the field; a broker's refusal goes next to ``field_for_errors``."""
    def wrap(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(fn)
        async def endpoint(request: Request) -> Response:
            form = await request.form()
            values = {k: str(v) for k, v in form.items() if isinstance(v, str)}
            ctx: dict[str, Any] = {"values": values, "errors": {}, "result": None, **request.path_params}
            status = 200
            if not csrf_ok(request.session, values.get("csrf_token") or request.headers.get("X-CSRF-Token")):
                ctx["errors"]["_"] = "the form has expired or did not come from this console: reload the page"
                status = 403
            elif not can_change(request):
                ctx["errors"]["_"] = "your account may only look (role viewer)"
                status = 403
            else:
                try:
                    ctx["result"] = await fn(request, values)
                    app_state(request).backend.invalidate()
                except FieldError as exc:
                    ctx["errors"][exc.field] = exc.message
                except (MQError, ValueError) as exc:
                    ctx["errors"][field_for_errors] = describe(exc)[1] if isinstance(exc, MQError) else str(exc)
            if extra is not None:
                try:
                    ctx.update(await extra(request))
                except MQError as exc:
                    ctx["errors"].setdefault("_", describe(exc)[1])
            return render(request, template, ctx, status=status)
        return endpoint
    return wrap


def list_ttl(request: Request) -> float:
    """How long a list read from the cluster is reused: under one refresh interval, at most 5 s."""
    return min(5.0, max(0.5, app_state(request).config.refresh_interval * 0.8))


def page_of(rows: list, request: Request, size: int = 100) -> tuple[list, dict[str, int]]:
    """One page of ``rows`` (``?page=N``, from 1) and where it lies."""
    try:
        page = max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        page = 1
    pages = max(1, -(-len(rows) // size))
    page = min(page, pages)
    start = (page - 1) * size
    return rows[start:start + size], {"page": page, "pages": pages, "first": start + 1 if rows else 0,
                                      "last": min(start + size, len(rows)), "count": len(rows)}


def int_field(values: dict[str, str], name: str, lo: int, hi: int, default: int | None = None) -> int:
    text = (values.get(name) or "").strip()
    if not text and default is not None:
        return default
    try:
        n = int(text)
    except ValueError:
        raise FieldError(name, f"a whole number from {lo} to {hi}") from None
    if not lo <= n <= hi:
        raise FieldError(name, f"must be from {lo} to {hi}")
    return n


def required(values: dict[str, str], name: str, what: str) -> str:
    text = (values.get(name) or "").strip()
    if not text:
        raise FieldError(name, f"give the {what}")
    return text


def parse_when(text: str, tz_minutes: str | None, *, field_name: str) -> int:
    """A time typed in a form (``datetime-local`` in the browser's zone, given by ``tz_minutes`` east of UTC;
    or epoch ms) as epoch ms."""
    t = text.strip()
    if t.isdigit():
        return int(t)
    try:
        when = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise FieldError(field_name, f"cannot read {t!r} as a time (YYYY-MM-DDTHH:MM or epoch ms)") from None
    if when.tzinfo is None:
        try:
            offset = int(tz_minutes) if tz_minutes not in (None, "") else None
        except ValueError:
            offset = None
        if offset is not None and -16 * 60 <= offset <= 16 * 60:
            when = when.replace(tzinfo=_dt.timezone(_dt.timedelta(minutes=offset)))
    return int(when.timestamp() * 1000)
