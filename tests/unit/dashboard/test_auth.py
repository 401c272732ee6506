"""The console's access rules without a browser: password hashes, the users file, where it may bind, the
login throttle, CSRF tokens and the times typed in forms."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the dashboard extra is not installed")

from mq.dashboard import auth  # noqa: E402
from mq.dashboard.views.common import FieldError, parse_when  # noqa: E402
from mq.errors import ConfigError  # noqa: E402


def test_hash_and_verify():
    h = auth.hash_password("pässwörd")
    assert h.startswith("scrypt$16384$8$1$")
    assert auth.verify_password("pässwörd", h)
    assert not auth.verify_password("password", h)
    assert auth.hash_password("x") != auth.hash_password("x")  # salted


@pytest.mark.parametrize("stored", ["", "plain", "scrypt$1$8$1$AAAA$AAAA", "scrypt$16384$8$1$!!$AAAA",
                                    "bcrypt$16384$8$1$AAAA$AAAA", "scrypt$99999999$8$1$AAAAAAAAAAAAAAAAAAAAAA==$"
                                    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
def test_malformed_hashes_never_match(stored):
    assert not auth.verify_password("", stored)


def test_users_file(tmp_path):
    f = tmp_path / "users.yaml"
    f.write_text(f"users:\n  - username: a\n    password: '{auth.hash_password('p')}'\n"
                 f"  - username: v\n    password: '{auth.hash_password('q')}'\n    role: viewer\n")
    accounts = auth.load_accounts(f)
    assert accounts["a"].can_change and not accounts["v"].can_change
    for text, message in [("users: []\n", "users"), ("users:\n  - username: a\n    password: hunter2\n", "not a hash"),
                          (f"users:\n  - username: a\n    password: '{auth.hash_password('p')}'\n    role: root\n",
                           "role"),
                          (f"users:\n  - {{username: a, password: '{auth.hash_password('p')}'}}\n"
                           f"  - {{username: a, password: '{auth.hash_password('p')}'}}\n", "twice")]:
        f.write_text(text)
        with pytest.raises(ConfigError, match=message):
            auth.load_accounts(f)


def test_binding_rules():
    acct = {"a": auth.Account("a", auth.hash_password("p"))}
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        auth.check_binding(host, None, False)
    for host in ("0.0.0.0", "::", "192.0.2.10", "example.org"):
        with pytest.raises(ConfigError, match="without a login"):
            auth.check_binding(host, None, False)
        auth.check_binding(host, acct, False)
    with pytest.raises(ConfigError, match="loginRequired"):
        auth.check_binding("127.0.0.1", None, True)


def test_login_throttle():
    t = auth.LoginThrottle()
    for _ in range(auth.MAX_FAILURES - 1):
        t.failed("c", now=100.0)
    assert t.wait_left("c", now=100.0) == 0
    t.failed("c", now=100.0)
    assert t.wait_left("c", now=101.0) == pytest.approx(auth.LOCKOUT - 1)
    assert t.wait_left("other", now=101.0) == 0
    assert t.wait_left("c", now=100.0 + auth.LOCKOUT + 1) == 0
    t.failed("c", now=100.0 + auth.LOCKOUT + 1)  # the count starts again after the wait
    assert t.wait_left("c", now=100.0 + auth.LOCKOUT + 1) == 0
    t.succeeded("c")
    assert "c" not in t._failures


def test_csrf_tokens():
    session: dict = {}
    token = auth.csrf_token(session)
    assert token == auth.csrf_token(session)
    assert auth.csrf_ok(session, token)
    assert not auth.csrf_ok(session, token + "x") and not auth.csrf_ok(session, None) and not auth.csrf_ok({}, token)


def test_times_typed_in_forms():
    assert parse_when("1700000000000", None, field_name="t") == 1_700_000_000_000
    assert parse_when("2024-05-01T10:00:00", "120", field_name="t") == 1_714_550_400_000  # 08:00 UTC
    assert parse_when("2024-05-01T10:00", "0", field_name="t") == 1_714_557_600_000
    with pytest.raises(FieldError) as err:
        parse_when("yesterday", "0", field_name="begin")
    assert err.value.field == "begin"


def test_hash_password_command_prints_a_hash_the_console_accepts():
    from click.testing import CliRunner

    from mq.cli.main import cli

    res = CliRunner().invoke(cli, ["dashboard", "hash-password", "--password", "open sesame"])
    assert res.exit_code == 0, res.output
    assert auth.verify_password("open sesame", res.output.strip())
    res = CliRunner().invoke(cli, ["dashboard", "hash-password"], input="pw1\npw1\n")
    assert res.exit_code == 0 and auth.verify_password("pw1", res.output.strip().splitlines()[-1])


def test_the_console_refuses_to_start_off_loopback_without_users():
    from click.testing import CliRunner

    from mq.cli.main import cli

    res = CliRunner().invoke(cli, ["-n", "127.0.0.1:1", "dashboard", "--host", "0.0.0.0", "--port", "0"])
    assert res.exit_code != 0
    assert "without a login" in str(res.exception)
