"""Who may use the console, and how it shows a cluster that is down: bound to a non-loopback address it needs a
users file and refuses to start without one; with one, a browser must log in (wrong passwords are refused and
throttled, a viewer may only look), every POST needs the session's CSRF token, and a name server that does not
answer is a visible state on the page, never a stack trace."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from mq.dashboard.auth import hash_password
from tests.dashboard.conftest import REPO, Console, mq_cluster
from tests.integration.broker_process import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def users_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("users") / "users.yaml"
    path.write_text(f"users:\n  - username: alice\n    password: \"{hash_password('s3cret!')}\"\n    role: admin\n"
                    f"  - username: bob\n    password: \"{hash_password('look-only')}\"\n    role: viewer\n")
    return str(path)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """Access rules do not depend on the cluster: they are checked against mq's daemons only."""
    with mq_cluster(tmp_path_factory.mktemp("cluster-access")) as t:
        yield t


@pytest.fixture(scope="module")
def mq_target(target):
    return target


def test_a_non_loopback_binding_without_users_is_refused(mq_target, tmp_path):
    port = free_port()
    proc = subprocess.run([sys.executable, "-m", "mq.cli.main", "-n", mq_target.namesrv, "dashboard",
                           "--host", "0.0.0.0", "--port", str(port)], capture_output=True, text=True, timeout=60,
                          cwd=str(REPO))
    assert proc.returncode != 0
    assert "without a login" in proc.stderr and "users file" in proc.stderr


def test_plain_text_passwords_are_refused(mq_target, tmp_path):
    users = tmp_path / "users.yaml"
    users.write_text("users:\n  - username: alice\n    password: hunter2\n")
    proc = subprocess.run([sys.executable, "-m", "mq.cli.main", "-n", mq_target.namesrv, "dashboard",
                           "--host", "0.0.0.0", "--port", str(free_port()), "--users", str(users)],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert proc.returncode != 0 and "is not a hash" in proc.stderr


@pytest.fixture(scope="module")
def guarded(mq_target, users_file, tmp_path_factory):
    c = Console(tmp_path_factory.mktemp("guarded"), mq_target.namesrv, host="0.0.0.0", users=users_file).start()
    yield c
    c.stop()


def test_bound_to_every_address_the_console_needs_a_login(guarded, page, shot):
    page.goto(f"{guarded.url}/topics")
    assert page.url.startswith(f"{guarded.url}/login")
    shot(page, "login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    assert "wrong user name or password" in page.locator(".state").inner_text()
    assert "/login" in page.url
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "s3cret!")
    page.click("button[type=submit]")
    page.wait_for_url(f"{guarded.url}/topics")
    assert page.locator("#topics-table").count() == 1
    page.click("text=Log out")
    page.wait_for_url(f"{guarded.url}/login")
    page.goto(f"{guarded.url}/cluster")
    assert "/login" in page.url


def test_without_a_session_nothing_is_served_and_posts_are_refused(guarded):
    with urllib.request.urlopen(f"{guarded.url}/cluster") as resp:  # redirected to the login page
        assert resp.url.endswith("/login?next=%2Fcluster")
    req = urllib.request.Request(f"{guarded.url}/topics/create", data=b"topic=Evil&cluster=DefaultCluster",
                                 method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.build_opener(NoRedirect).open(req)
    assert err.value.code == 303 and "/login" in err.value.headers["Location"]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_a_viewer_may_look_but_not_change(guarded, page):
    page.goto(f"{guarded.url}/login")
    page.fill("input[name=username]", "bob")
    page.fill("input[name=password]", "look-only")
    page.click("button[type=submit]")
    page.wait_for_url(f"{guarded.url}/cluster")
    page.goto(f"{guarded.url}/topics")
    assert page.locator("text=Create a topic").count() == 0
    # a POST made by hand with the session's own token is still refused
    status = page.evaluate("""async () => {
        const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token'];
        const body = new URLSearchParams({topic: 'ViewerTopic', cluster: 'DefaultCluster', read: '1', write: '1',
                                          perm: '6', csrf_token: token});
        const r = await fetch('/topics/create', {method: 'POST', body});
        return [r.status, await r.text()];
    }""")
    assert status[0] == 403 and "may only look" in status[1]


def test_a_post_without_the_csrf_token_is_refused(mq_target, console, page):
    page.goto(f"{console.url}/topics")
    status = page.evaluate("""async () => {
        const body = new URLSearchParams({topic: 'CsrfTopic', cluster: 'DefaultCluster', read: '1', write: '1',
                                          perm: '6'});
        const r = await fetch('/topics/create', {method: 'POST', body});
        return [r.status, await r.text()];
    }""")
    assert status[0] == 403 and "did not come from this console" in status[1]


def test_a_name_server_that_is_down_is_a_visible_state(tmp_path, page, shot):
    dead = f"127.0.0.1:{free_port()}"
    c = Console(tmp_path, dead).start()
    try:
        page.goto(f"{c.url}/cluster")
        assert page.locator('[data-state="unreachable"]').count() >= 1
        assert "Traceback" not in page.content()
        resp = page.goto(f"{c.url}/topics")
        assert resp.status == 503
        state = page.locator("[data-state=unreachable]").inner_text()
        assert "cannot reach name server" in state and dead in state
        shot(page, "down")
    finally:
        c.stop()


def test_a_loopback_console_refuses_foreign_host_names(console):
    req = urllib.request.Request(f"{console.url}/cluster", headers={"Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == 400


def test_the_newest_trace_report_of_the_folder_is_shown(mq_target, tmp_path, page, shot):
    import os
    import time

    from mq.trace.report import write_html
    from tests.unit.trace.test_trace_report import _report

    folder = tmp_path / "reports"
    folder.mkdir()
    old = folder / "old.html"
    old.write_text("<html><body>an old report</body></html>")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    write_html(_report(), folder / "today.html")
    c = Console(tmp_path, mq_target.namesrv, config={"traceReportDir": str(folder)}).start()
    try:
        page.goto(f"{c.url}/report")
        assert "today.html" in page.locator("main").inner_text()
        frame = page.frame_locator("iframe.report")
        assert frame.locator("svg").first.is_visible()
        assert "an old report" not in frame.locator("body").inner_text()
        shot(page, "report")
    finally:
        c.stop()


ACL = """\
accounts:
  - accessKey: consolekey
    secretKey: consolesecret
    admin: true
"""


def test_a_cluster_with_acl_is_read_with_the_configured_keys(tmp_path, page):
    from tests.dashboard.conftest import MqDaemons, wait_registered

    (tmp_path / "plain_acl.yml").write_text(ACL)
    daemons = MqDaemons(tmp_path)
    daemons.broker.config.update(aclEnable="true", aclFile=str(tmp_path / "plain_acl.yml"))
    daemons.start()
    signed = unsigned = None
    try:
        wait_registered(daemons.namesrv)
        signed = Console(tmp_path, daemons.namesrv, config={"accessKey": "consolekey",
                                                            "secretKey": "consolesecret"}).start()
        unsigned = Console(tmp_path, daemons.namesrv).start()
        resp = page.goto(f"{signed.url}/topics?kind=all")
        assert resp.status == 200 and page.locator('#topics-table tr[data-topic="TBW102"]').count() == 1
        assert "No accessKey" not in page.content()
        # unsigned, the broker refuses: the page says so (the name server's topic list still shows)
        page.goto(f"{unsigned.url}/topics?kind=all")
        assert "No accessKey is configured" in page.locator(".state-warn").first.inner_text()
        resp = page.goto(f"{unsigned.url}/groups/AnyGroup")
        assert resp.status == 502
        assert "No accessKey is configured" in page.locator("[data-state=refused]").inner_text()
    finally:
        for c in (signed, unsigned):
            if c is not None:
                c.stop()
        daemons.stop()
