"""Trace analytics integration fixtures: the real name server and broker fixtures of
tests/integration/conftest.py (inherited), a helper that feeds synthetic trace messages into a
broker's trace topic, and one that runs the `mq` CLI as a process while the daemons keep serving."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
MQ = str(Path(sys.executable).parent / "mq")
#: Light local Spark for the CLI runs: one core, small driver, no UI, two shuffle partitions.
SPARK = ("--master", "local[1]", "--conf", "spark.driver.memory=512m", "--conf", "spark.sql.shuffle.partitions=2",
         "--conf", "spark.ui.enabled=false")


def window_cfg(messages: int, seed: int, start_ms: int, **kw: Any) -> Any:
    """Ten minutes of traffic with stuck, unfinished and duplicated pairs planted; no dead letters (their 17
    attempts span hours, beyond a 1 h window)."""
    from mq.trace.synthetic import SyntheticConfig

    return SyntheticConfig(messages=messages, seed=seed, start_ms=start_ms, duration_ms=10 * 60_000, dlq_rate=0.0,
                           stuck_rate=0.01, unfinished_rate=0.01, duplicate_rate=0.01, **kw)


@pytest.fixture
def trace_broker(broker_factory):  # type: ignore[no-untyped-def]
    """A broker with traceTopicEnable (its RMQ_SYS_TRACE_TOPIC registered at the name server)."""
    return broker_factory(trace_topic_enable=True)


def feed(run, broker, cfg, truth) -> Any:  # type: ignore[no-untyped-def]
    """Generate ``cfg`` into ``truth`` and send it to ``broker``'s trace topic; returns the SendStats."""
    from mq.trace.synthetic import generate, send_bodies

    stats = run(send_bodies(broker.address, TRACE_TOPIC, generate(cfg, truth), connections=2, in_flight=16), 120)
    assert stats.messages == truth.bodies
    return stats


@pytest.fixture(scope="session")
def cli_home(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The CLI's private MQ_HOME for the whole session. ``mq trace analyze`` keeps the Spark driver's class-data
    archive under ``$MQ_HOME/cache/spark`` and replaces any other archive there with its own: run with the
    user's ~/.mq, a test interpreter with its own pyspark (CI's virtualenv) would throw away the user's. At
    the end, waits for a finisher still writing the archive there (``mq.trace.archive_finisher``)."""
    from mq.trace.class_archive import wait_for_dumps

    home = tmp_path_factory.mktemp("mq-cli-home")
    yield home
    wait_for_dumps(home / "cache" / "spark", 120.0)


@pytest.fixture
def mq_cli(run, namesrv, cli_home):  # type: ignore[no-untyped-def]
    """mq_cli(*args, env=None, timeout=240) -> (returncode, stdout, stderr), run while the loop serves, with
    ``cli_home`` as its MQ_HOME."""

    def call(*args: str, env: dict[str, str] | None = None, timeout: float = 240.0) -> tuple[int, str, str]:
        async def go() -> tuple[int, str, str]:
            proc = await asyncio.create_subprocess_exec(
                MQ, "-n", namesrv.address, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "MQ_HOME": str(cli_home), **(env or {})})
            try:
                out, err = await asyncio.wait_for(proc.communicate(), timeout)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
                raise
            return proc.returncode or 0, out.decode(), err.decode()

        return run(go(), timeout + 10)

    return call


def report_of(code: int, out: str, err: str) -> dict[str, Any]:
    assert code == 0, f"exit {code}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    return json.loads(out)


def now_ms() -> int:
    return int(time.time() * 1000)
