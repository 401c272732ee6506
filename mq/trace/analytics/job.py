"""The spark-submit entry point of ``mq trace analyze`` (and of the trace archive export).

    python job.py --input-format {raw,parquet} --input PATH --since-ms MS --until-ms MS
                  [--grace-ms MS] [--bucket-ms MS] [--max-reconsume-times N] [--top N] [--top-ids N]
                  [--no-compare] [--mode {analyze,export}] --out DIR

Inputs:

- ``parquet``: an archive of decoded records (``schema.FIELDS`` + ``date``/``hour`` partitions), as
  written by ``--mode export``;
- ``raw``: a JSONL file or a directory of ``*.jsonl`` files, one trace message per line:
  ``{"broker", "queue_id", "queue_offset", "store_time", "born_host", "compressed", "body": base64}``.
  Every Spark task turns its lines into rows through ``schema.rows_from_bodies``, the same seam a
  broker PULL reader will feed.

``--mode analyze`` writes one Parquet directory per report table under ``DIR/tables/`` and
``DIR/report.json``; ``--mode export`` writes ``DIR/records/date=.../hour=.../`` and ``DIR/export.json``.
Progress goes to stderr as ``MQTRACE stage=<name> elapsed=<seconds>`` lines.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mq.trace.analytics import transforms as T
from mq.trace.analytics.schema import COLUMNS, PARTITION_COLUMNS, TraceBody, rows_from_bodies, spark_schema
from mq.trace.spark_submit import PROGRESS_PREFIX

REPORT_VERSION = 1
#: Columns the analysis reads (the archive has more).
ANALYSIS_COLUMNS = (
    "trace_type", "timestamp", "group", "topic", "msg_id", "tags", "keys", "store_host", "client_host",
    "cost_time", "msg_type", "success", "retry_times", "request_id", "context_code", "store_time",
    "transaction_state", "broker", "queue_id", "trace_store_time", "error",
)  # fmt: skip


class Progress:
    """Prints ``MQTRACE stage=... elapsed=...`` lines to stderr and keeps the stage timings."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.last = self.t0
        self.timings: dict[str, float] = {}

    def __call__(self, stage: str, detail: str = "") -> None:
        now = time.monotonic()
        self.timings[stage] = round(now - self.last, 3)
        self.last = now
        extra = f" {detail}" if detail else ""
        print(f"{PROGRESS_PREFIX}stage={stage} elapsed={now - self.t0:.2f}{extra}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mq-trace-job", description="RocketMQ trace analytics (Spark)")
    p.add_argument("--mode", choices=("analyze", "export"), default="analyze")
    p.add_argument("--input-format", choices=("raw", "parquet"), required=True)
    p.add_argument("--input", required=True, help="raw JSONL file/dir, or the Parquet archive root")
    p.add_argument("--since-ms", type=int, default=0)
    p.add_argument("--until-ms", type=int, default=2**62)
    p.add_argument("--grace-ms", type=int, default=600_000, help="time a message may take to be consumed")
    p.add_argument("--bucket-ms", type=int, default=600_000, help="time bucket of the ledger and series")
    p.add_argument("--max-reconsume-times", type=int, default=16)
    p.add_argument("--top", type=int, default=20, help="rows of the top-N tables")
    p.add_argument("--top-ids", type=int, default=100, help="ids listed in report.json per anomaly list")
    p.add_argument("--shuffle-partitions", type=int, default=0, help="0: twice the default parallelism")
    p.add_argument("--no-compare", action="store_true", help="skip the previous-window regressions")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.until_ms <= a.since_ms:
        p.error("--until-ms must be greater than --since-ms")
    return a


# ------------------------------------------------------------------------------------------ reading


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


def _rows_of_partition(lines: Iterable[str]) -> Iterator[tuple[Any, ...]]:
    return rows_from_bodies(_parse_lines(lines))


def read_raw(spark: SparkSession, path: str) -> DataFrame:
    """Raw JSONL trace bodies -> record rows (malformed records as rows with ``error`` set)."""
    src = os.path.join(path, "*.jsonl") if os.path.isdir(path) else path
    rdd = spark.sparkContext.textFile(src).mapPartitions(_rows_of_partition)
    return spark.createDataFrame(rdd, spark_schema(), verifySchema=False)


def read_archive(spark: SparkSession, path: str, since_ms: int, until_ms: int) -> DataFrame:
    """The Parquet archive, pruned to the date/hour partitions that can hold [since_ms, until_ms)."""
    df = spark.read.parquet(path)
    lo = time.strftime("%Y-%m-%d", time.gmtime(max(since_ms, 0) / 1000))
    hi = time.strftime("%Y-%m-%d", time.gmtime(min(until_ms, 253402300799000) / 1000))
    return df.where((F.col("date") >= lo) & (F.col("date") <= hi)).select(*ANALYSIS_COLUMNS)


def with_partitions(records: DataFrame) -> DataFrame:
    """Adds ``date`` (UTC yyyy-MM-dd) and ``hour`` of the event time (timestamp, else trace store time)."""
    t = F.timestamp_millis(F.coalesce(F.col("timestamp"), F.col("trace_store_time"), F.lit(0)))
    return records.withColumn("date", F.date_format(t, "yyyy-MM-dd")).withColumn("hour", F.hour(t))


# ------------------------------------------------------------------------------------------ export


def export(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    records = read_raw(spark, args.input) if args.input_format == "raw" else spark.read.parquet(args.input)
    t = F.coalesce(F.col("timestamp"), F.col("trace_store_time"))
    records = records.where((t >= args.since_ms) & (t < args.until_ms) | t.isNull())
    out = os.path.join(args.out, "records")
    # Malformed records are archived too (as rows with ``error`` set, dated by their trace message's store
    # time), so an analysis of the archive still counts them; they are decoded only once.
    tagged = with_partitions(records.select(*COLUMNS))
    tagged.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(out)
    progress("export")
    by_error = {r["error"]: r["count"] for r in _rows(spark.read.parquet(out).groupBy("error").count())}
    written = sum(by_error.values())
    malformed = sorted(({"error": k, "count": v} for k, v in by_error.items() if k is not None),
                       key=lambda m: (-m["count"], m["error"]))  # fmt: skip
    progress("count", f"records={written}")
    return {
        "records": written - sum(m["count"] for m in malformed), "malformed": malformed,
        "malformed_total": sum(m["count"] for m in malformed), "path": out,
    }  # fmt: skip


# ------------------------------------------------------------------------------------------ analysis


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


class _Writer:
    """Collects each table once, writes it as Parquet under tables/ and keeps its rows.

    Report tables are small, so Spark's per-job latency dominates; ``run`` executes many tables'
    jobs concurrently from a thread pool (Spark schedules jobs of different threads side by side).
    """

    def __init__(self, spark: SparkSession, out: str, progress: Progress, threads: int = 4) -> None:
        self.spark = spark
        self.out = out
        self.progress = progress
        self.threads = threads
        self.outputs: dict[str, str] = {}

    def _one(self, name: str, df: DataFrame) -> list[dict[str, Any]]:
        rows = df.collect()
        rel = os.path.join("tables", name)
        self.spark.createDataFrame(rows, df.schema).coalesce(1).write.mode("overwrite").parquet(
            os.path.join(self.out, rel)
        )
        self.outputs[name] = rel
        return [r.asDict(recursive=True) for r in rows]

    def run(self, tables: dict[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        with ThreadPoolExecutor(self.threads, thread_name_prefix="mq-trace-table") as pool:
            futures = {pool.submit(self._one, name, df): name for name, df in tables.items()}
            for fut in as_completed(futures):
                name = futures[fut]
                out[name] = fut.result()
                self.progress(f"table:{name}", f"rows={len(out[name])}")
        return out


def _pipeline(cur: DataFrame, args: argparse.Namespace) -> dict[str, DataFrame]:
    """pubs, dels and facts of one window, cached and materialised (so concurrent jobs share them)."""
    pubs = T.pub_messages(cur, args.bucket_ms).cache()
    dels = T.deliveries(cur).cache()
    facts = T.message_group_facts(pubs, dels, T.dead_letter_marks(cur), args.max_reconsume_times).cache()
    facts.count()
    return {"pubs": pubs, "dels": dels, "facts": facts}


def analyze(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    length = args.until_ms - args.since_ms
    prev_since = args.since_ms - length
    lo = args.since_ms if args.no_compare else prev_since
    if args.input_format == "raw":
        loaded = read_raw(spark, args.input)
    else:
        loaded = read_archive(spark, args.input, lo, args.until_ms)
    event = F.coalesce(F.col("timestamp"), F.col("trace_store_time"))
    loaded = loaded.select(*ANALYSIS_COLUMNS).where((event >= lo) & (event < args.until_ms)).cache()
    cur = T.in_window(loaded, args.since_ms, args.until_ms)
    by_type = {r["trace_type"]: r["count"] for r in _rows(cur.groupBy("trace_type").count())}
    malformed = _rows(T.malformed_counts(loaded.where(event >= args.since_ms)))
    progress("load", f"records={sum(by_type.values())}")

    p = _pipeline(cur, args)
    pubs, dels, facts = p["pubs"], p["dels"], p["facts"]
    progress("prepare")
    until, grace, top = args.until_ms, args.grace_ms, args.top
    lat = {k: T.send_latency(cur, [k]) for k in ("topic", "group", "store_host")}
    lag, cost = T.delivery_lag(facts), T.consume_cost(cur)
    tables: dict[str, DataFrame] = {
        "completeness": T.completeness_ledger(pubs, facts, until, grace),
        "send_latency_by_topic": lat["topic"],
        "send_latency_by_group": lat["group"],
        "send_latency_by_store_host": lat["store_host"],
        "send_latency_series": T.send_latency_series(cur, args.bucket_ms),
        "delivery_lag": lag,
        "delivery_lag_series": T.delivery_lag_series(facts),
        "consume_cost": cost,
        "context_codes": T.context_codes(cur),
        "slowest_hosts": T.slowest_hosts(cur, top),
        "retry_histogram": T.retry_histogram(dels),
        "top_failed_messages": T.top_failed_messages(dels, top),
        "top_failed_keys": T.top_failed_keys(cur, top),
        "stuck_unconsumed": T.stuck_unconsumed(facts, until, grace),
        "stuck_unfinished": T.stuck_unfinished(cur, until, grace),
        "duplicates": T.duplicates(dels),
        "hot_keys": T.hot_keys(pubs, top),
        "hot_tags": T.hot_tags(pubs, top),
        "store_host_skew": T.store_host_skew(pubs),
        "trace_queue_skew": T.trace_queue_skew(cur),
        "trace_health": T.trace_health(pubs, dels, facts),
        "clock_skew_hosts": T.clock_skew_hosts(facts),
    }
    if not args.no_compare:
        prev = T.in_window(loaded, prev_since, args.since_ms)
        pp = _pipeline(prev, args)
        frames = [
            T.regressions(lat["topic"], T.send_latency(prev, ["topic"]), "send_latency", ["topic"],
                          ["cost_p99", "failure_rate"]),
            T.regressions(lag, T.delivery_lag(pp["facts"]), "delivery_lag", ["group"], ["lag_p99", "e2e_p99"]),
            T.regressions(cost, T.consume_cost(prev), "consume_cost", ["group"], ["cost_p99", "failure_rate"]),
        ]  # fmt: skip
        tables["regressions"] = T.order_regressions(frames, top)
        progress("prepare_previous")
    w = _Writer(spark, args.out, progress)
    r = w.run(tables)
    progress("tables")

    unconsumed, unfinished, dups = r["stuck_unconsumed"], r["stuck_unfinished"], r["duplicates"]
    s: dict[str, Any] = {
        "completeness": {"rows": r["completeness"]},
        "send_latency": {
            "by_topic": r["send_latency_by_topic"], "by_group": r["send_latency_by_group"],
            "by_store_host": r["send_latency_by_store_host"], "series": r["send_latency_series"],
        },
        "delivery_lag": {"by_group": r["delivery_lag"], "series": r["delivery_lag_series"]},
        "consume_cost": {"by_group": r["consume_cost"], "context_codes": r["context_codes"],
                         "slowest_hosts": r["slowest_hosts"]},
        "retries": {"histogram": r["retry_histogram"], "top_messages": r["top_failed_messages"],
                    "top_keys": r["top_failed_keys"]},
        "stuck": {
            "unconsumed_total": len(unconsumed), "unconsumed": unconsumed[: args.top_ids],
            "unfinished_total": len(unfinished), "unfinished": unfinished[: args.top_ids],
        },
        "duplicates": {"total": len(dups), "extra_deliveries": sum(d["successes"] - 1 for d in dups),
                       "rows": dups[: args.top_ids]},
        "hot": {"keys": r["hot_keys"], "tags": r["hot_tags"], "store_hosts": r["store_host_skew"],
                "trace_queues": r["trace_queue_skew"]},
        "health": {**r["trace_health"][0], "skewed_hosts": r["clock_skew_hosts"]},
        "regressions": {"previous_since_ms": None if args.no_compare else prev_since,
                        "rows": r.get("regressions", [])},
    }  # fmt: skip
    return {
        "version": REPORT_VERSION,
        "window": {"since_ms": args.since_ms, "until_ms": args.until_ms, "grace_ms": grace,
                   "bucket_ms": args.bucket_ms, "max_reconsume_times": args.max_reconsume_times},
        "input": {"format": args.input_format, "path": args.input},
        "records": {"in_window": sum(by_type.values()), "by_type": by_type,
                    "malformed_total": sum(m["count"] for m in malformed), "malformed": malformed},
        "sections": s,
        "outputs": dict(sorted(w.outputs.items())),
    }  # fmt: skip


def build_session(app_name: str = "mq-trace-analyze") -> SparkSession:
    spark = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    progress = Progress()
    spark = build_session()
    parts = args.shuffle_partitions or 2 * spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    progress("session")
    os.makedirs(args.out, exist_ok=True)
    result = export(spark, args, progress) if args.mode == "export" else analyze(spark, args, progress)
    result["timings"] = progress.timings
    name = "export.json" if args.mode == "export" else "report.json"
    with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=str)
    progress("done")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
