"""One session-scoped local[1] SparkSession for every Spark test, plus a record-frame builder."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mq.trace.analytics.schema import COLUMNS


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("mq-trace-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "1")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - a JVM that died at start on a loaded machine gets one more try
        if "JAVA_GATEWAY_EXITED" not in str(exc):
            raise
        time.sleep(2.0)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def records(spark: Any):  # type: ignore[no-untyped-def]
    """records(dicts) -> a DataFrame of the flat trace schema; unspecified columns are NULL."""
    from mq.trace.analytics.schema import spark_schema

    def build(rows: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
        for r in rows:
            unknown = set(r) - set(COLUMNS)
            assert not unknown, unknown
        return spark.createDataFrame([tuple(r.get(c) for c in COLUMNS) for r in rows], spark_schema())

    return build
