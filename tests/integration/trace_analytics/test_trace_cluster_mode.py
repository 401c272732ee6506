"""`mq trace export` incremental, on local Spark and on a Spark STANDALONE master and worker (pyspark's own
spark-class, bound to 127.0.0.1 with small memory, always stopped), then `mq trace analyze` of the archive.

One flow, three spark-submits: export #1 (local) -> export #2 on the cluster, which must fetch only the
trace messages sent since (its executors pull from the broker with the `mq` package shipped through
--py-files: --master spark://... works with no code change) -> analyze the archive (local)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mq.trace.spark_submit import find_spark_submit
from mq.trace.synthetic import GroundTruth

from ..broker_process import free_port as _free_port
from .conftest import SPARK, TRACE_TOPIC, feed, now_ms, report_of, window_cfg

pytestmark = [pytest.mark.spark, pytest.mark.slow]


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


def test_export_is_incremental_on_a_standalone_cluster_and_the_archive_analyzes(
    run, trace_broker, mq_cli, standalone, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    url, worker_log = standalone
    t1, t2 = GroundTruth(), GroundTruth()
    feed(run, trace_broker, window_cfg(300, 1, now_ms() - 50 * 60_000), t1)
    archive = tmp_path / "archive"
    e1 = report_of(*mq_cli("trace", "export", "--to", str(archive), "--since", "2h", "--json", *SPARK))
    assert e1["records"] == t1.records and e1["malformed_total"] == t1.malformed
    assert e1["missing"] == []
    cursors = json.loads((archive / "_mq_cursors.json").read_text())["cursors"]
    assert cursors == {f"broker-a/{TRACE_TOPIC}/0": t1.bodies}
    assert any(p.name.startswith("date=") for p in archive.iterdir())

    feed(run, trace_broker, window_cfg(200, 2, now_ms() - 30 * 60_000), t2)
    e2 = report_of(*mq_cli("trace", "export", "--to", str(archive), "--json", "--master", url,
                           "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1",
                           "--conf", "spark.driver.memory=512m", "--conf", "spark.driver.host=127.0.0.1",
                           "--conf", "spark.ui.enabled=false"))  # fmt: skip
    assert e2["previous_cursors"] == cursors
    assert e2["plan"]["messages"] == t2.bodies  # only the new trace messages were fetched
    assert e2["records"] == t2.records and e2["malformed_total"] == t2.malformed
    assert e2["cursors"] == {f"broker-a/{TRACE_TOPIC}/0": t1.bodies + t2.bodies}
    assert e2["missing"] == []
    # The pulls ran on the worker's executor, which was given the shipped package.
    assert "Asked to launch executor" in worker_log.read_text()
    app_dirs = list((worker_log.parent / "work").glob("app-*/*"))
    assert app_dirs and any((d / "stderr").exists() for d in app_dirs)

    r = report_of(*mq_cli("trace", "analyze", "--input", str(archive), "--since", "1h", "--no-compare", "--json",
                          "--top-ids", "1000", "--out", str(tmp_path / "out"), *SPARK))
    assert r["records"]["in_window"] == t1.records + t2.records
    assert r["records"]["malformed_total"] == t1.malformed + t2.malformed
    stuck = t1.stuck | t2.stuck
    assert {(x["msg_id"], x["group"]) for x in r["sections"]["stuck"]["unconsumed"]} == stuck and stuck
    assert r["missing"] == []
    assert (tmp_path / "out" / "csv" / "stuck_unconsumed.csv").read_text().count("\n") == len(stuck) + 1
    assert (tmp_path / "out" / "tables" / "completeness").is_dir()
