"""Who may use the console: accounts from a YAML file with scrypt-hashed passwords, signed session cookies,
the login and logout pages, CSRF tokens for every POST, and the rule for where the console may bind.

The accounts file::

    users:
      - username: alice
        password: "scrypt$16384$8$1$<salt>$<hash>"   # from `mq dashboard hash-password`
        role: admin                                   # admin (may change the cluster) or viewer (read only)

Passwords are hashed with ``hashlib.scrypt`` (N=2^14, r=8, p=1, 16-byte salt, 32-byte key) and compared in
constant time. A client that fails to log in five times in a row waits 30 s before it may try again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mq.errors import ConfigError

ROLES = ("admin", "viewer")
_SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1}
_KEY_LEN = 32
#: Failed logins in a row before a client must wait, and how long it waits, seconds.
MAX_FAILURES, LOCKOUT = 5, 30.0
_TRACKED_CLIENTS = 10_000


@dataclass(frozen=True)
class Account:
    username: str
    password_hash: str
    role: str = "admin"

    @property
    def can_change(self) -> bool:
        return self.role == "admin"


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$salt$key`` (salt and key base64) for ``password``."""
    salt = salt or secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode(), salt=salt, dklen=_KEY_LEN, maxmem=64 * 1024 * 1024, **_SCRYPT)
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${b64(salt)}${b64(key)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a hash made by ``hash_password`` (any other form: False)."""
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(key, validate=True)
        n_, r_, p_ = int(n), int(r), int(p)
        if not (2 <= n_ <= 2 ** 20 and 1 <= r_ <= 32 and 1 <= p_ <= 16 and 16 <= len(expected) <= 64):
            return False
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt, validate=True), n=n_, r=r_, p=p_,
                             dklen=len(expected), maxmem=256 * 1024 * 1024)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def load_accounts(path: str | Path) -> dict[str, Account]:
    """The accounts of a users file; ConfigError naming what is wrong (a plain-text password among them)."""
    from mq.config import load_yaml

    data = load_yaml(path)
    users = data.get("users")
    if not isinstance(users, list) or not users:
        raise ConfigError(f"{path}: expected a 'users' list of {{username, password, role}} entries")
    out: dict[str, Account] = {}
    for i, u in enumerate(users):
        if not isinstance(u, dict) or not u.get("username") or not u.get("password"):
            raise ConfigError(f"{path}: users[{i}] needs a username and a password")
        name, pw, role = str(u["username"]), str(u["password"]), str(u.get("role") or "admin")
        if not pw.startswith("scrypt$") or pw.count("$") != 5:
            raise ConfigError(f"{path}: the password of {name!r} is not a hash: write the line that "
                              "`mq dashboard hash-password` prints")
        if role not in ROLES:
            raise ConfigError(f"{path}: role of {name!r} must be one of {', '.join(ROLES)}, not {role!r}")
        if name in out:
            raise ConfigError(f"{path}: user {name!r} appears twice")
        out[name] = Account(name, pw, role)
    return out


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the console on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, accounts: dict[str, Account] | None, login_required: bool) -> None:
    """ConfigError unless the console may start: off loopback (or with loginRequired) it needs accounts."""
    if accounts:
        return
    if not is_loopback(host):
        raise ConfigError(f"the console would listen on {host}, which is reachable from other machines, without "
                          "a login: give a users file (--users FILE or usersFile; `mq dashboard hash-password` "
                          "makes the password hashes), or bind to 127.0.0.1")
    if login_required:
        raise ConfigError("loginRequired is set but no users file is given (--users FILE or usersFile)")


class LoginThrottle:
    """Failed logins per client address (bounded): after MAX_FAILURES in a row the client waits LOCKOUT s."""

    def __init__(self) -> None:
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def wait_left(self, client: str, now: float | None = None) -> float:
        count, until = self._failures.get(client, (0, 0.0))
        left = until - (time.monotonic() if now is None else now)
        return left if count >= MAX_FAILURES and left > 0 else 0.0

    def failed(self, client: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        count, until = self._failures.pop(client, (0, 0.0))
        if count >= MAX_FAILURES and until <= now:
            count = 0
        count += 1
        self._failures[client] = (count, now + LOCKOUT if count >= MAX_FAILURES else 0.0)
        while len(self._failures) > _TRACKED_CLIENTS:
            self._failures.popitem(last=False)

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)


def csrf_token(session: dict[str, Any]) -> str:
    """The session's CSRF token (made on first use)."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def csrf_ok(session: dict[str, Any], sent: str | None) -> bool:
    token = session.get("csrf")
    return bool(token and sent and hmac.compare_digest(str(token), str(sent)))
