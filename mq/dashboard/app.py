"""The console as an ASGI application: routes of every view, static files, sessions, the login guard,
security headers, and the backend's lifetime (opened at start-up, closed at shutdown)."""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.datastructures import URL
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from mq.config import DashboardConfig
from mq.dashboard.auth import Account, LoginThrottle, is_loopback
from mq.dashboard.backend import Backend
from mq.errors import MQError

STATIC = Path(__file__).resolve().parent / "static"
#: Paths anyone may load: the login page and the assets it needs.
PUBLIC = ("/login", "/static/")
#: Scripts and styles come only from the console itself (htmx, uPlot and the console's own code are vendored).
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "frame-src 'self'; frame-ancestors 'self'; form-action 'self'; base-uri 'none'; object-src 'none'")


@dataclass
class ConsoleState:
    config: DashboardConfig
    backend: Backend
    accounts: dict[str, Account]
    throttle: LoginThrottle


class Guard:
    """Security headers on every answer; with accounts, every path but the login page needs a session."""

    def __init__(self, app: ASGIApp, login: bool) -> None:
        self.app = app
        self.login = login

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if self.login and not path.startswith(PUBLIC) and not scope["session"].get("user"):
            headers = dict(scope["headers"])
            if b"hx-request" in headers:  # a live refresh after the session ended: send the page to the login
                response: Response = Response(status_code=401, headers={"HX-Redirect": "/login"})
            else:
                target = URL(scope=scope)
                nxt = target.path + (f"?{target.query}" if target.query else "")
                response = RedirectResponse(f"/login?next={_quote(nxt)}", status_code=303)
            await response(scope, receive, send)
            return

        static = path.startswith("/static/")

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                # assets are linked with the package version in their URL: a browser keeps them for a day
                cache = b"public, max-age=86400" if static else b"no-store"
                extra = [(b"cache-control", cache), (b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                         (b"x-frame-options", b"SAMEORIGIN"), (b"referrer-policy", b"same-origin")]
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def routes() -> list[Any]:
    from mq.dashboard.views import cluster, groups, login, messages, producers, report, topics, trace

    out: list[Any] = [Route("/", lambda request: RedirectResponse("/cluster", status_code=303))]
    for module in (login, cluster, topics, groups, messages, trace, producers, report):
        out += module.ROUTES
    out.append(Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"))
    return out


def create_app(config: DashboardConfig, namesrv_addrs: list[str], accounts: dict[str, Account] | None = None
               ) -> Starlette:
    """The console for the cluster behind ``namesrv_addrs``; ``accounts`` (a users file) switch the login on."""
    from mq.dashboard.views.common import error_response

    accounts = accounts or {}
    backend = Backend(config, namesrv_addrs)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await backend.close()

    middleware = []
    if is_loopback(config.host) and not accounts:
        # no login: only a browser that asked for a loopback name may use it (no DNS rebinding from a web page)
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "::1"]))
    middleware += [
        Middleware(SessionMiddleware, secret_key=config.session_secret or secrets.token_urlsafe(32),
                   session_cookie="mq_dashboard", max_age=config.session_max_age, same_site="lax",
                   https_only=config.secure_cookies),
        Middleware(Guard, login=bool(accounts)),
    ]
    app = Starlette(routes=routes(), middleware=middleware, lifespan=lifespan,
                    exception_handlers={MQError: error_response, Exception: error_response})
    app.state.console = ConsoleState(config, backend, accounts, LoginThrottle())
    return app
