"""`mq broker start --daemon` / `mq broker stop` and a config-file error, run as processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..broker_process import free_port


def mq(*args: str, env: dict, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mq.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture
def env(tmp_path: Path) -> dict:
    e = dict(os.environ, MQ_HOME=str(tmp_path / "home"))
    e.pop("NAMESRV_ADDR", None)
    return e


def test_broker_daemon_registers_and_stops(env, tmp_path):
    ns_port, br_port = free_port(), free_port()
    ns = mq("namesrv", "start", "--port", str(ns_port), "--daemon", env=env)
    assert ns.returncode == 0, ns.stderr
    try:
        conf = tmp_path / "broker.yaml"
        conf.write_text("haListenPort: 0\ngrpcServerPort: -1\n")  # listenPort + 1 and 8081 (the defaults) may be taken
        br = mq("broker", "start", "--namesrv", f"127.0.0.1:{ns_port}", "--port", str(br_port), "--store",
                str(tmp_path / "store"), "--broker-name", "broker-x", "--config", str(conf), "--daemon", env=env)
        assert br.returncode == 0, br.stderr
        assert f"broker broker-x started: 127.0.0.1:{br_port}" in br.stdout
        try:
            out = mq("-n", f"127.0.0.1:{ns_port}", "clusterList", "--json", env=env)
            assert out.returncode == 0, out.stderr
            rows = json.loads(out.stdout)["clusters"]
            assert [(r["brokerName"], r["address"]) for r in rows] == [("broker-x", f"127.0.0.1:{br_port}")]
        finally:
            stop = mq("broker", "stop", env=env)
        assert stop.returncode == 0, stop.stderr
        assert not (tmp_path / "home" / "run" / "broker.pid").exists()
        # a clean stop leaves no abort file behind
        assert not (tmp_path / "store" / "abort").exists()
    finally:
        mq("namesrv", "stop", env=env)


def test_unknown_config_key_is_a_clear_error(env, tmp_path):
    conf = tmp_path / "broker.yaml"
    conf.write_text("brokerName: b\nnoSuchKey: 1\n")
    proc = mq("broker", "start", "--config", str(conf), "--store", str(tmp_path / "s"), env=env)
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert "noSuchKey" in line and line.startswith("error:")
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/PID/limits")
def test_daemons_raise_their_open_file_limit_to_the_hard_limit(env):
    """As the JVM does for RocketMQ: a broker holds a file per segment, so a soft limit of 256 (or the usual
    1,024) must not be what it runs with when the hard limit allows more."""
    import resource
    import socket
    import time

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"the hard open-file limit here is {hard}")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--port", str(port)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the name server did not start"
                time.sleep(0.1)
        row = next(line for line in Path(f"/proc/{proc.pid}/limits").read_text().splitlines()
                   if line.startswith("Max open files"))
        got_soft, got_hard = row.split()[3:5]
        assert got_soft == got_hard != "256"
    finally:
        proc.terminate()
        proc.wait(30)
