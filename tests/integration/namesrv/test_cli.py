"""`mq namesrv start|stop` and the first admin commands, run as a user would: as processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..broker_process import free_port


def mq(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mq.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture
def env(tmp_path: Path) -> dict:
    e = dict(os.environ)
    e["MQ_HOME"] = str(tmp_path / "home")
    e.pop("NAMESRV_ADDR", None)
    e.pop("MQ_DEBUG", None)
    return e


@pytest.fixture
def daemon_namesrv(env):
    port = free_port()
    proc = mq("namesrv", "start", "--port", str(port), "--daemon", env=env)
    assert proc.returncode == 0, proc.stderr
    try:
        yield port
    finally:
        mq("namesrv", "stop", env=env)


def test_daemon_start_writes_pid_file_and_stop_waits(env, tmp_path):
    port = free_port()
    proc = mq("namesrv", "start", "--port", str(port), "--daemon", env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"127.0.0.1:{port}" in proc.stdout
    pid_file = tmp_path / "home" / "run" / f"namesrv-{port}.pid"
    pid = int(pid_file.read_text())
    assert (tmp_path / "home" / "logs" / f"namesrv-{port}.log").exists()
    again = mq("namesrv", "start", "--port", str(port), "--daemon", env=env)
    assert again.returncode != 0 and "already running" in again.stderr
    stop = mq("namesrv", "stop", env=env)
    assert stop.returncode == 0, stop.stderr
    assert f"pid {pid}" in stop.stdout
    assert not pid_file.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    stop_again = mq("namesrv", "stop", env=env)
    assert stop_again.returncode == 1
    assert stop_again.stderr.strip().startswith("error: no running name server found")


def test_name_servers_on_two_ports_start_and_stop_one_by_one_or_all(env, tmp_path):
    """Each daemon has its own pid and log file (keyed by port), so a second name server on another port starts;
    ``stop`` picks one by port, refuses to guess between several, and ``--all`` stops every one."""
    ports = [free_port() for _ in range(3)]
    pids = {}
    try:
        for port in ports:
            proc = mq("namesrv", "start", "--port", str(port), "--daemon", env=env)
            assert proc.returncode == 0, proc.stderr
            pids[port] = int((tmp_path / "home" / "run" / f"namesrv-{port}.pid").read_text())
        assert len(set(pids.values())) == 3
        ambiguous = mq("namesrv", "stop", env=env)
        assert ambiguous.returncode == 1 and "3 name servers are running" in ambiguous.stderr
        assert all(f"port {p}" in ambiguous.stderr for p in ports) and "--all" in ambiguous.stderr
        one = mq("namesrv", "stop", "--port", str(ports[1]), env=env)
        assert one.returncode == 0 and f"pid {pids[ports[1]]}" in one.stdout, one.stderr
        assert socket.socket().connect_ex(("127.0.0.1", ports[1])) != 0
        for port in (ports[0], ports[2]):
            with socket.create_connection(("127.0.0.1", port), 2):
                pass
        missing = mq("namesrv", "stop", "--port", str(ports[1]), env=env)
        assert missing.returncode == 1 and f"no running name server found on port {ports[1]}" in missing.stderr
        every = mq("namesrv", "stop", "--all", env=env)
        assert every.returncode == 0, every.stderr
        assert all(f"pid {pids[p]}" in every.stdout for p in (ports[0], ports[2]))
        assert not list((tmp_path / "home" / "run").glob("*.pid"))
    finally:
        mq("namesrv", "stop", "--all", env=env)


def test_port_in_use_is_one_line_and_nonzero(env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = mq("namesrv", "start", "--port", str(port), "--pid-file", str(Path(env["MQ_HOME"]) / "x.pid"),
                  env=env)
    assert proc.returncode == 1
    assert f"error: cannot listen on 127.0.0.1:{port}: address already in use" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_foreground_stops_cleanly_on_sigterm(env, tmp_path):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--port", str(port),
                          "--pid-file", str(tmp_path / "fg.pid")], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "fg.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        p.terminate()
        _, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "stopped" in err
    assert not (tmp_path / "fg.pid").exists()


def test_cluster_list_topic_route_and_errors(env, daemon_namesrv):
    addr = f"127.0.0.1:{daemon_namesrv}"
    out = mq("-n", addr, "clusterList", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["clusters"] == []
    route = mq("-n", addr, "topicRoute", "-t", "NoSuchTopic", env=env)
    assert route.returncode == 1
    assert route.stderr.strip() == f"error: TOPIC_NOT_EXIST (17) from {addr}: no route for topic 'NoSuchTopic'"
    lst = mq("-n", addr, "topicList", "--json", env=env)
    assert lst.returncode == 0 and json.loads(lst.stdout) == {"topics": []}
    # NAMESRV_ADDR is the default; several addresses separated by ';' fall through to a live one
    env2 = dict(env, NAMESRV_ADDR=f"127.0.0.1:{free_port()};{addr}")
    assert mq("topicList", env=env2).returncode == 0


def test_unreachable_name_server_is_one_clear_line(env):
    port = free_port()
    proc = mq("-n", f"127.0.0.1:{port}", "topicList", env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: cannot reach name server 127.0.0.1:{port}: connection refused"


def test_help_is_fast_and_lists_commands(env):
    started = time.monotonic()
    proc = mq("--help", env=env)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0
    for name in ("namesrv", "up", "clusterList", "topicList", "topicRoute"):
        assert name in proc.stdout
    code = ("import sys, mq.cli.main; mods = [m for m in sys.modules if m.startswith(('rich', 'orjson', "
            "'mq.remoting', 'mq.protocol', 'pyspark'))]; print(len(mods))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0", "mq --help must not import heavy modules"
    assert elapsed < 10
