"""The same `mq trace analyze` against a Spark STANDALONE master and worker (pyspark's own spark-class),
bound to 127.0.0.1 with small memory and always stopped: --master spark://... works with no code change
(the executors get the `mq` package through --py-files)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from mq.trace.spark_submit import find_spark_submit
from mq.trace.synthetic import GroundTruth, SyntheticConfig

from .conftest import feed, now_ms, report_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"{text!r} not in {path}:\n{path.read_text(errors='replace')[-3000:] if path.exists() else ''}")


@pytest.fixture
def standalone(tmp_path: Path):  # type: ignore[no-untyped-def]
    """(master URL, worker log): a Master and one Worker (1 core, 1 GiB) on loopback."""
    spark_class = find_spark_submit().parent / "spark-class"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
           "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(tmp_path), "SPARK_WORKER_DIR": str(tmp_path / "work")}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    logs = {}
    try:
        for name, args in (
            ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                        "--webui-port", str(_free_port())]),
            ("worker", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                        "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / "work")]),
        ):
            logs[name] = tmp_path / f"{name}.log"
            f = open(logs[name], "w")
            procs.append(subprocess.Popen([str(spark_class), *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True))
            f.close()
            _wait_for(logs[name], "Starting Spark master" if name == "master" else "Successfully registered",
                      procs[-1])
        yield url, logs["worker"]
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)


def test_analyze_runs_on_a_standalone_cluster(run, trace_broker, mq_cli, standalone) -> None:
    url, worker_log = standalone
    truth = GroundTruth()
    feed(run, trace_broker, SyntheticConfig(messages=200, seed=21, start_ms=now_ms() - 40 * 60_000,
                                            duration_ms=5 * 60_000, dlq_rate=0.0, stuck_rate=0.02), truth)
    r = report_of(*mq_cli("trace", "analyze", "--since", "1h", "--no-compare", "--json", "--top-ids", "1000",
                          "--master", url, "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1",
                          "--conf", "spark.driver.memory=512m", "--conf", "spark.driver.host=127.0.0.1"))
    assert r["records"]["in_window"] == truth.records
    assert {(x["msg_id"], x["group"]) for x in r["sections"]["stuck"]["unconsumed"]} == truth.stuck
    assert r["missing"] == []
    # The work ran on the worker's executor, which was given the shipped package.
    assert "Asked to launch executor" in worker_log.read_text()
    app_dirs = list((worker_log.parent / "work").glob("app-*/*"))
    assert app_dirs and any((d / "stderr").exists() for d in app_dirs)
