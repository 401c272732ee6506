"""Login and logout (only when the console has accounts)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mq.dashboard.auth import csrf_ok, verify_password
from mq.dashboard.views.common import app_state, render


def _safe_next(target: str | None) -> str:
    """Only a path of this console (no scheme, no host, no ``//``) may be the page after the login."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/cluster"
    return target


async def login_page(request: Request) -> Response:
    st = app_state(request)
    if not st.accounts:
        return RedirectResponse("/cluster", status_code=303)
    return render(request, "login.html", {"error": None, "username": "",
                                          "next": _safe_next(request.query_params.get("next"))})


async def login_submit(request: Request) -> Response:
    st = app_state(request)
    if not st.accounts:
        return RedirectResponse("/cluster", status_code=303)
    form = await request.form()
    username, password = str(form.get("username") or ""), str(form.get("password") or "")
    nxt = _safe_next(str(form.get("next") or ""))
    client = request.client.host if request.client else "?"
    ctx = {"username": username, "next": nxt}
    if not csrf_ok(request.session, str(form.get("csrf_token") or "")):
        return render(request, "login.html", {**ctx, "error": "the form has expired: try again"}, status=403)
    wait = st.throttle.wait_left(client)
    if wait > 0:
        return render(request, "login.html", {**ctx, "error": f"too many failed logins: wait {wait:.0f} s"},
                      status=429)
    account = st.accounts.get(username)
    if account is None or not verify_password(password, account.password_hash):
        st.throttle.failed(client)
        return render(request, "login.html", {**ctx, "error": "wrong user name or password"}, status=401)
    st.throttle.succeeded(client)
    request.session.clear()  # a new session for the new login (no fixation)
    request.session["user"] = account.username
    return RedirectResponse(nxt, status_code=303)


async def logout(request: Request) -> Response:
    form = await request.form()
    if csrf_ok(request.session, str(form.get("csrf_token") or "")):
        request.session.clear()
    return RedirectResponse("/login", status_code=303)


ROUTES = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login_submit, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
