"""The job's three inputs as record DataFrames, and the archive's cursor file.

- ``read_live``: the trace topic pulled from the brokers, one Spark task per group of ``Chunk`` s of a
  ``live_reader.ReadPlan`` (missing ranges come back as marker rows, see ``live_reader``); ``read_in_driver``
  the same for a small plan on a local master, pulled by the driver;
- ``read_archive``: the Parquet archive (``schema.FIELDS`` + ``date``/``hour`` partitions);
- ``read_raw``: JSONL trace bodies (``{"broker", "queue_id", "queue_offset", "store_time", "born_host",
  "compressed", "body": base64}`` per line), used by tests and the offline benchmark.

The cursor file ``<archive>/_mq_cursors.json`` (``{"version": 1, "topic": ..., "cursors": {"broker/topic/qid":
next offset}}``) lives with the archive and is read and written through Hadoop's FileSystem, so the archive
may be a local directory, ``hdfs://`` or ``s3a://``. Spark's Parquet reader skips ``_``-prefixed files.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mq.trace.analytics.schema import TraceBody, spark_schema
from mq.trace.analytics.sql_decode import BODY_FIELDS, body_rows, body_schema, decode_bodies, marker_body_row
from mq.trace.live_reader import (
    MISSING_PREFIX, Chunk, MissingRange, ReadPlan, missing_marker_row, parse_missing, read_chunk,
)

CURSOR_FILE = "_mq_cursors.json"
CURSOR_VERSION = 1


def _parse_lines(lines: Iterable[str]) -> Iterator[TraceBody]:
    try:
        import orjson

        loads = orjson.loads
    except ImportError:  # executors of a cluster may not have orjson
        loads = json.loads
    for line in lines:
        if not line.strip():
            continue
        d = loads(line)
        yield TraceBody(
            d.get("broker"), d.get("queue_id"), d.get("queue_offset"), d.get("store_time"),
            base64.b64decode(d["body"]), d.get("compressed"), d.get("born_host"),
        )  # fmt: skip


def _bodies_of_partition(lines: Iterable[str]) -> Iterator[tuple[Any, ...]]:
    return body_rows(_parse_lines(lines))


def read_raw(spark: SparkSession, path: str) -> DataFrame:
    """Raw JSONL trace bodies -> record rows (malformed records as rows with ``error`` set). Python parses
    and inflates each body; Spark SQL splits and decodes its records (``sql_decode``)."""
    src = os.path.join(path, "*.jsonl") if os.path.isdir(path) else path
    rdd = spark.sparkContext.textFile(src).mapPartitions(_bodies_of_partition)
    return decode_bodies(spark.createDataFrame(rdd, body_schema(), verifySchema=False))


def bodies_of_chunks(chunks: Iterable[Chunk]) -> Iterator[tuple[Any, ...]]:
    """Executor side of ``read_live`` (``mapPartitions``): one body row per trace message of each chunk,
    then one marker body row per range of it that could not be read."""
    for chunk in chunks:
        missing: list[MissingRange] = []

        def bodies(c: Chunk = chunk) -> Iterator[tuple[Any, ...]]:
            for item in read_chunk(c):
                if isinstance(item, MissingRange):
                    missing.append(item)
                else:
                    yield item

        yield from body_rows(bodies())
        for m in missing:
            yield marker_body_row(missing_marker_row(m, 1)[0])


def read_live(spark: SparkSession, plan: ReadPlan, partitions: int = 0) -> DataFrame:
    """Pull ``plan.chunks`` on the executors: one partition per chunk (at most ``partitions`` when > 0,
    chunks of one queue spread round-robin so consecutive ranges are read in parallel). Only whole trace
    messages cross from Python into Spark (about a hundred records each); records are decoded in SQL."""
    chunks = list(plan.chunks)
    n = len(chunks) if partitions <= 0 else max(1, min(partitions, len(chunks)))
    if not chunks:
        return spark.createDataFrame([], spark_schema())
    slices = [chunks[i::n] for i in range(n)]
    rdd = spark.sparkContext.parallelize(slices, n).flatMap(lambda s: s).mapPartitions(bodies_of_chunks)
    return decode_bodies(spark.createDataFrame(rdd, body_schema(), verifySchema=False))


def read_in_driver(spark: SparkSession, plan: ReadPlan, path: str) -> DataFrame:
    """``read_live`` of a small plan on a local master, with no Spark task: the driver pulls the chunks itself
    (``bodies_of_chunks``, as the tasks would) and hands the body rows to Spark as a JSON-lines file at
    ``path``, which the JVM reads without starting a Python worker. Records are decoded in SQL as in
    ``read_live``."""
    names = [name for name, _ in BODY_FIELDS]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in bodies_of_chunks(plan.chunks):
            f.write(json.dumps(dict(zip(names, row)), ensure_ascii=False))
            f.write("\n")
    return decode_bodies(spark.read.schema(body_schema()).option("mode", "FAILFAST").json(path))


def read_archive(spark: SparkSession, path: str, since_ms: int, until_ms: int) -> DataFrame:
    """The Parquet archive, pruned to the date partitions that can hold [since_ms, until_ms)."""
    df = spark.read.schema(archive_schema()).parquet(path)
    lo = time.strftime("%Y-%m-%d", time.gmtime(max(since_ms, 0) / 1000))
    hi = time.strftime("%Y-%m-%d", time.gmtime(min(until_ms, 253402300799000) / 1000))
    return df.where((F.col("date") >= lo) & (F.col("date") <= hi))


def archive_schema():  # type: ignore[no-untyped-def]
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    return StructType([*spark_schema().fields, StructField("date", StringType(), True),
                       StructField("hour", IntegerType(), True)])


def with_partitions(records: DataFrame) -> DataFrame:
    """Adds ``date`` (UTC yyyy-MM-dd) and ``hour`` of the event time (timestamp, else trace store time)."""
    t = F.timestamp_millis(F.coalesce(F.col("timestamp"), F.col("trace_store_time"), F.lit(0)))
    return records.withColumn("date", F.date_format(t, "yyyy-MM-dd")).withColumn("hour", F.hour(t))


# ------------------------------------------------------------------------------- live plans and gaps


def namesrv_list(text: str) -> list[str]:
    """Name server addresses of a ``;``-separated list."""
    return [x.strip() for x in text.split(";") if x.strip()]


def missing_of(df: DataFrame) -> list[MissingRange]:
    """The marker rows of a live read, as ranges."""
    return [parse_missing(r["error"]) for r in df.where(F.col("error").startswith(MISSING_PREFIX)).select("error")
            .collect()]


def plan_json(plan: ReadPlan) -> dict[str, Any]:
    """A read plan as the report and export.json show it."""
    return {"topic": plan.topic, "brokers": plan.brokers, "messages": plan.messages, "chunks": len(plan.chunks),
            "queues": [{"broker": q.broker, "addr": q.addr, "queue_id": q.queue_id, "start": q.start, "end": q.end,
                        "min_offset": q.min_offset, "max_offset": q.max_offset} for q in plan.queues]}


# ------------------------------------------------------------------------------- Hadoop FS text files


def _fs_path(spark: SparkSession, uri: str):  # type: ignore[no-untyped-def]
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[attr-defined]


def read_text(spark: SparkSession, uri: str) -> str | None:
    """The text of ``uri`` (any Hadoop file system), or None if it does not exist."""
    path, fs = _fs_path(spark, uri)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Write ``uri`` through a temporary sibling and a rename (replacing an existing file)."""
    path, fs = _fs_path(spark, uri)
    tmp, _ = _fs_path(spark, uri + ".tmp")
    out = fs.create(tmp, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()
    if fs.exists(path):
        fs.delete(path, False)
    if not fs.rename(tmp, path):
        raise OSError(f"cannot rename {uri}.tmp to {uri}")


def load_cursors(spark: SparkSession, archive: str) -> dict[str, int]:
    text = read_text(spark, archive.rstrip("/") + "/" + CURSOR_FILE)
    if not text:
        return {}
    return {k: int(v) for k, v in json.loads(text).get("cursors", {}).items()}


def save_cursors(spark: SparkSession, archive: str, topic: str, cursors: dict[str, int]) -> None:
    doc = {"version": CURSOR_VERSION, "topic": topic, "updated_ms": int(time.time() * 1000),
           "cursors": dict(sorted(cursors.items()))}
    write_text(spark, archive.rstrip("/") + "/" + CURSOR_FILE, json.dumps(doc, indent=1))
