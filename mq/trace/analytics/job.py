"""The spark-submit entry point of ``mq trace analyze`` and ``mq trace export``.

    python job.py --input-format {live,parquet,raw} [--input PATH] [--namesrv ADDRS --trace-topic T]
                  --since-ms MS --until-ms MS [--grace-ms MS] [--bucket-ms MS] [--max-reconsume-times N]
                  [--top N] [--top-ids N] [--no-compare] [--chunk-messages N]
                  [--mode {analyze,export}] [--archive URI] --out DIR

Inputs (``readers.py``): ``live`` pulls the trace topic from the brokers (``live_reader``: the driver
plans per-queue offset ranges, each task pulls its chunks); ``parquet`` is an archive written by
``--mode export``; ``raw`` is JSONL trace bodies (tests, offline benchmark).

``--mode analyze`` writes every report table under ``DIR/tables/<name>/`` (Parquet) and ``DIR/csv/<name>.csv``,
and ``DIR/report.json``. ``--mode export`` appends decoded records to ``--archive`` partitioned by
``date``/``hour`` and advances the per-queue cursors stored with it (``_mq_cursors.json``), so a re-run
fetches only what is new; it writes ``DIR/export.json``. Ranges that could not be read are listed under
``missing`` in both, never skipped silently. Progress goes to stderr as ``MQTRACE stage=<name>
elapsed=<seconds>`` lines.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import cache
from typing import Any

from mq.trace.analytics.pyspark_path import prefer_installed_pyspark

prefer_installed_pyspark(sys.path)  # before pyspark is imported

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from mq.trace.analytics import readers as R  # noqa: E402
from mq.trace.analytics import summary as S  # noqa: E402
from mq.trace.analytics import transforms as T  # noqa: E402
from mq.trace.analytics.schema import COLUMNS, PARTITION_COLUMNS  # noqa: E402
from mq.trace.live_reader import (  # noqa: E402
    MISSING_PREFIX, MissingRange, ReadPlan, cursor_key, parse_missing, plan_read,
)
from mq.trace.spark_submit import PROGRESS_PREFIX, SMALL_INPUT_BYTES, SMALL_INPUT_MESSAGES  # noqa: E402

REPORT_VERSION = 2
#: Columns the analysis reads (the archive has more).
ANALYSIS_COLUMNS = (
    "trace_type", "timestamp", "group", "topic", "msg_id", "tags", "keys", "store_host", "client_host",
    "cost_time", "msg_type", "success", "retry_times", "request_id", "context_code", "store_time",
    "transaction_state", "broker", "queue_id", "trace_store_time", "error",
)  # fmt: skip
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: Scratch copy of the decoded records of a live or raw input, under --out, removed when the job ends.
SCRATCH_DIR = "_records"


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
    p.add_argument("--input-format", choices=("live", "raw", "parquet"), required=True)
    p.add_argument("--input", default=None, help="raw JSONL file/dir, or the Parquet archive root")
    p.add_argument("--namesrv", default=None, help="name server addresses, ';'-separated (live input)")
    p.add_argument("--trace-topic", default=DEFAULT_TRACE_TOPIC)
    p.add_argument("--chunk-messages", type=int, default=4000, help="trace messages per live read task")
    p.add_argument("--slack-ms", type=int, default=60_000, help="store time slack around the window (live)")
    p.add_argument("--archive", default=None, help="export destination (dir, hdfs://..., s3a://...)")
    p.add_argument("--since-ms", type=int, default=None)
    p.add_argument("--until-ms", type=int, default=None)
    p.add_argument("--grace-ms", type=int, default=600_000, help="time a message may take to be consumed")
    p.add_argument("--bucket-ms", type=int, default=600_000, help="time bucket of the ledger and series")
    p.add_argument("--max-reconsume-times", type=int, default=16)
    p.add_argument("--top", type=int, default=20, help="rows of the top-N tables")
    p.add_argument("--top-ids", type=int, default=100, help="ids listed in report.json per anomaly list")
    p.add_argument("--shuffle-partitions", type=int, default=0, help="0: the default parallelism (at least 2)")
    p.add_argument("--no-compare", action="store_true", help="skip the previous-window regressions")
    p.add_argument("--no-tables", action="store_true", help="only report.json (no Parquet/CSV per section)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.input_format == "live" and not a.namesrv:
        p.error("--input-format live needs --namesrv")
    if a.input_format != "live" and not a.input:
        p.error(f"--input-format {a.input_format} needs --input")
    if a.mode == "export" and not a.archive:
        p.error("--mode export needs --archive")
    if a.mode == "analyze":
        if a.until_ms is None:
            a.until_ms = int(time.time() * 1000)
        if a.since_ms is None:
            a.since_ms = a.until_ms - 86_400_000
        if a.until_ms <= a.since_ms:
            p.error("--until-ms must be greater than --since-ms")
    return a


def _namesrv_addrs(args: argparse.Namespace) -> list[str]:
    return [x.strip() for x in args.namesrv.split(";") if x.strip()]


def _missing_of(df: DataFrame) -> list[MissingRange]:
    """The marker rows of a live read, as ranges."""
    return [parse_missing(r["error"]) for r in df.where(F.col("error").startswith(MISSING_PREFIX)).select("error")
            .collect()]


def _plan_json(plan: ReadPlan) -> dict[str, Any]:
    return {"topic": plan.topic, "brokers": plan.brokers, "messages": plan.messages, "chunks": len(plan.chunks),
            "queues": [{"broker": q.broker, "addr": q.addr, "queue_id": q.queue_id, "start": q.start, "end": q.end,
                        "min_offset": q.min_offset, "max_offset": q.max_offset} for q in plan.queues]}


# ------------------------------------------------------------------------------------------ export


def export(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    """Append records to the archive. Live: from each queue's cursor (else ``--since-ms``) to its max
    offset, then advance the cursors up to the first range not read."""
    archive = args.archive
    if args.input_format != "live":
        records = R.read_raw(spark, args.input) if args.input_format == "raw" else spark.read.parquet(args.input)
        if args.since_ms is not None or args.until_ms is not None:
            t = F.coalesce(F.col("timestamp"), F.col("trace_store_time"))
            lo, hi = args.since_ms or 0, args.until_ms or 2**62
            records = records.where((t >= lo) & (t < hi) | t.isNull())
        R.with_partitions(records.select(*COLUMNS)).write.mode("append").partitionBy(*PARTITION_COLUMNS).parquet(archive)
        progress("export")
        by_error = {r["error"]: r["count"] for r in _rows(spark.read.parquet(archive).groupBy("error").count())}
        malformed = sorted(({"error": k, "count": v} for k, v in by_error.items() if k is not None),
                           key=lambda m: (-m["count"], m["error"]))  # fmt: skip
        progress("count")
        return {"records": sum(by_error.values()) - sum(m["count"] for m in malformed), "malformed": malformed,
                "malformed_total": sum(m["count"] for m in malformed), "path": archive, "missing": []}  # fmt: skip
    old = R.load_cursors(spark, archive)
    plan = plan_read(_namesrv_addrs(args), args.trace_topic, args.since_ms, None, cursors=old,
                     chunk_messages=args.chunk_messages, slack_ms=args.slack_ms)
    progress("plan", f"messages={plan.messages} chunks={len(plan.chunks)}")
    df = R.read_live(spark, plan).cache()
    marker = F.col("error").startswith(MISSING_PREFIX)
    counts = {(r["k"], r["error"]): r["count"] for r in _rows(
        df.groupBy(F.when(marker, "missing").when(F.col("error").isNotNull(), "malformed").otherwise("ok").alias("k"),
                   F.when(~marker, F.col("error")).alias("error")).count())}  # fmt: skip
    progress("read", f"records={counts.get(('ok', None), 0)}")
    missing = plan.missing + (_missing_of(df) if any(k == "missing" for k, _ in counts) else [])
    data = df.where(~marker | F.col("error").isNull())
    if any(k != "missing" for k, _ in counts):
        R.with_partitions(data).write.mode("append").partitionBy(*PARTITION_COLUMNS).parquet(archive)
    progress("export")
    cursors = dict(old)
    for q in plan.queues:
        gaps = [m.start for m in missing if m.broker == q.broker and m.queue_id == q.queue_id
                and m.start is not None and m.start >= q.start and not m.reason.startswith("expired")]
        cursors[cursor_key(q.broker, plan.topic, q.queue_id)] = min(gaps) if gaps else q.end
    R.save_cursors(spark, archive, plan.topic, cursors)
    df.unpersist()
    progress("cursors")
    malformed = sorted(({"error": e, "count": c} for (k, e), c in counts.items() if k == "malformed"),
                       key=lambda m: (-m["count"], m["error"]))  # fmt: skip
    return {
        "records": counts.get(("ok", None), 0), "malformed": malformed,
        "malformed_total": sum(m["count"] for m in malformed), "path": archive, "plan": _plan_json(plan),
        "previous_cursors": old, "cursors": cursors, "missing": [m.to_json() for m in missing],
    }  # fmt: skip


# ------------------------------------------------------------------------------------------ analysis


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


class _Writer:
    """Collects each table once, writes it as Parquet under tables/ and as CSV under csv/, keeps its rows.

    Report tables are small, so Spark's per-job latency dominates; ``run`` executes many tables'
    jobs concurrently from a thread pool (Spark schedules jobs of different threads side by side). The
    CSV is written from the collected rows on the driver (no second Spark job).
    """

    def __init__(self, spark: SparkSession, out: str, progress: Progress, threads: int = 4,
                 write: bool = True) -> None:
        self.write = write
        self.spark = spark
        self.out = out
        self.progress = progress
        self.threads = threads
        self.outputs: dict[str, str] = {}
        self.csv: dict[str, str] = {}

    def _one(self, name: str, build: Callable[[], DataFrame], empty: bool = False) -> list[dict[str, Any]]:
        if empty and not self.write:
            return []
        self.spark.sparkContext.setJobDescription(f"mq trace analyze: table {name}")  # per thread
        df = build()
        rows = [] if empty else df.collect()
        if not self.write:
            return [r.asDict(recursive=True) for r in rows]
        rel = os.path.join("tables", name)
        self.spark.createDataFrame(rows, df.schema).coalesce(1).write.mode("overwrite").parquet(
            os.path.join(self.out, rel)
        )
        self.outputs[name] = rel
        dicts = [r.asDict(recursive=True) for r in rows]
        self.csv[name] = write_csv(os.path.join(self.out, "csv"), name, df.columns, dicts)
        return dicts

    def run(self, tables: dict[str, Callable[[], DataFrame]], empty: Collection[str] = ()
            ) -> dict[str, list[dict[str, Any]]]:
        """Every table's rows, each table built by its function in a worker thread; those named in ``empty``
        are known to have none and run no Spark job (nor are they built, unless they are written)."""
        out: dict[str, list[dict[str, Any]]] = {}
        with ThreadPoolExecutor(self.threads, thread_name_prefix="mq-trace-table") as pool:
            futures = {pool.submit(self._one, name, build, name in empty): name for name, build in tables.items()}
            for fut in as_completed(futures):
                name = futures[fut]
                out[name] = fut.result()
                self.progress(f"table:{name}", f"rows={len(out[name])}")
        return out


def write_csv(directory: str, name: str, columns: list[str], rows: list[dict[str, Any]]) -> str:
    """``directory/name.csv`` with a header row; nested values as JSON. Returns the relative path."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{name}.csv"), "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else json.dumps(r[c]) if isinstance(r[c], (dict, list)) else r[c]
                        for c in columns])
    return os.path.join("csv", f"{name}.csv")


def _pipeline(cur: DataFrame, args: argparse.Namespace) -> dict[str, DataFrame]:
    """pubs, dels and facts of one window, cached and materialised (so concurrent jobs share them). pubs
    and dels are cut from one cached per-message aggregation (``transforms.message_summary``)."""
    msgs = T.message_summary(cur).cache()
    pubs = T.pub_messages(cur, args.bucket_ms, messages=msgs)
    dels = T.deliveries(cur, messages=msgs)
    facts = T.message_group_facts(pubs, dels, T.dead_letter_marks(cur), args.max_reconsume_times).cache()
    return {"pubs": pubs, "dels": dels, "facts": facts, "msgs": msgs, "facts_count": facts.count()}


def empty_tables(by_type: dict[str, int], facts: int, unpaired: int) -> set[str]:
    """The report tables that have no rows by their definitions (``transforms``), given the window's
    well-formed record counts per trace type, the rows of ``message_group_facts`` and the ``unpaired_msg_ids``:
    the job skips their Spark jobs. No Pub: no published message (pubs, facts and every Pub section are
    empty); no facts row: no delivery lag, no stuck message, no skewed host; no SubAfter: no consume, no
    failure, no duplicate; no SubBefore: no attempt (the retry histogram) and no unfinished delivery, which
    also needs an unpaired msg_id."""
    empty: set[str] = set()
    if not by_type.get("Pub"):
        empty |= {"completeness", "send_latency_by_topic", "send_latency_by_group", "send_latency_by_store_host",
                  "send_latency_series", "hot_keys", "hot_tags", "store_host_skew"}
    if not facts:
        empty |= {"delivery_lag", "delivery_lag_series", "stuck_unconsumed", "clock_skew_hosts"}
    if not by_type.get("SubAfter"):
        empty |= {"consume_cost", "context_codes", "slowest_hosts", "top_failed_keys", "top_failed_messages",
                  "duplicates"}
    if not by_type.get("SubBefore") or not unpaired:
        empty.add("stuck_unfinished")
    if not by_type.get("SubBefore"):
        empty.add("retry_histogram")
    return empty


TABLE_NAMES = (
    "completeness", "send_latency_by_topic", "send_latency_by_group", "send_latency_by_store_host",
    "send_latency_series", "delivery_lag", "delivery_lag_series", "consume_cost", "context_codes", "slowest_hosts",
    "retry_histogram", "top_failed_messages", "top_failed_keys", "stuck_unconsumed", "stuck_unfinished",
    "duplicates", "hot_keys", "hot_tags", "store_host_skew", "trace_queue_skew", "trace_health", "clock_skew_hosts",
    "regressions",
)  # fmt: skip
_EMPTY_HEALTH = {"messages": 0, "complete": 0, "complete_share": None, "orphan_deliveries": 0, "negative_lag": 0,
                 "negative_e2e": 0}


def _load(spark: SparkSession, args: argparse.Namespace, lo: int, progress: Progress
          ) -> tuple[DataFrame, dict[str, Any]]:
    """The input's records of [lo, until) plus live marker rows, and the input's description."""
    info: dict[str, Any] = {"format": args.input_format}
    if args.input_format == "live":
        plan = plan_read(_namesrv_addrs(args), args.trace_topic, lo, args.until_ms,
                         chunk_messages=args.chunk_messages, slack_ms=args.slack_ms)
        info.update(_plan_json(plan), namesrv=args.namesrv)
        info["_missing"] = plan.missing
        progress("plan", f"messages={plan.messages} chunks={len(plan.chunks)} missing={len(plan.missing)}")
        if plan.messages <= SMALL_INPUT_MESSAGES and spark.sparkContext.master.startswith("local"):
            bodies = os.path.join(args.out, SCRATCH_DIR, "bodies.json")
            loaded = R.read_in_driver(spark, plan, bodies)
            if os.path.getsize(bodies) <= SMALL_INPUT_BYTES:  # decode small input without generated code too
                _small_sql(spark)
        else:
            loaded = R.read_live(spark, plan)
    elif args.input_format == "raw":
        info["path"] = args.input
        loaded = R.read_raw(spark, args.input)
    else:
        info["path"] = args.input
        loaded = R.read_archive(spark, args.input, lo, args.until_ms)
    event = F.coalesce(F.col("timestamp"), F.col("trace_store_time"))
    keep = ((event >= lo) & (event < args.until_ms)) | F.col("error").startswith(MISSING_PREFIX)
    if args.input_format == "parquet":
        return loaded.select(*ANALYSIS_COLUMNS).where(keep), info
    # Live and raw input are pulled and decoded once, into a scratch Parquet copy under --out that the
    # analysis then reads like an archive: each pass reads only the columns it needs. Measured per million
    # records: writing it 5.5 s, and a pass over it about half the time of a pass over Spark's compressed
    # in-memory cache (which also takes longer to build). The window filter is applied when the copy is
    # read, not before it is written: Spark pushes a filter into the projection below it, so filtering the
    # freshly decoded rows would evaluate the decoding expressions (error, timestamp) once more for the
    # filter; at 5 M live records that made decoding four times as slow (24 s -> 95 s). A 100-record report
    # also took 2 s more CPU from Spark's cache than from the copy: the cache's size is unknown when the
    # first queries are planned, and the copy's file sizes let Spark broadcast the small sides of joins.
    scratch = os.path.join(args.out, SCRATCH_DIR, "records")
    loaded.select(*ANALYSIS_COLUMNS).write.mode("overwrite").parquet(scratch)
    return spark.read.parquet(scratch).where(keep), info


def analyze(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    length = args.until_ms - args.since_ms
    prev_since = args.since_ms - length
    lo = args.since_ms if args.no_compare else prev_since
    loaded, info = _load(spark, args, lo, progress)
    size_to_input(spark, args, loaded)
    missing: list[MissingRange] = info.pop("_missing", [])
    # One pass over the input: record counts per window, type and malformed reason, marker rows, and every
    # record-level report table (summary.record_summary); the summary is small, keep it.
    summary = S.record_summary(loaded, args.bucket_ms, args.since_ms, stats=True).cache()
    stats = _rows(summary.where(F.col("section") == "records").select("w", "s1", "s2", "n"))
    by_type: dict[str, int] = {}
    malformed: dict[str, int] = {}
    previous = 0
    for r in stats:
        e, n = r["s2"], r["n"]
        if e is not None and e.startswith(MISSING_PREFIX):
            missing.append(parse_missing(e))
        elif r["w"] == "prev":
            previous += n if e is None else 0
        elif e is not None:
            malformed[e] = malformed.get(e, 0) + n
        else:
            by_type[r["s1"]] = by_type.get(r["s1"], 0) + n
    in_window = sum(by_type.values())
    progress("load", f"records={in_window} previous={previous} missing={len(missing)}")
    info["missing"] = [m.to_json() for m in missing]
    result: dict[str, Any] = {
        "version": REPORT_VERSION,
        "window": {"since_ms": args.since_ms, "until_ms": args.until_ms, "grace_ms": args.grace_ms,
                   "bucket_ms": args.bucket_ms, "max_reconsume_times": args.max_reconsume_times},
        "input": info,
        "missing": info["missing"],
        "records": {"in_window": in_window, "by_type": by_type, "malformed_total": sum(malformed.values()),
                    "malformed": [{"error": k, "count": v}
                                  for k, v in sorted(malformed.items(), key=lambda kv: (-kv[1], kv[0]))]},
    }  # fmt: skip
    compare = not args.no_compare and previous > 0
    if in_window == 0:
        r: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLE_NAMES}
        r["trace_health"] = [dict(_EMPTY_HEALTH)]
        result["empty"] = True
        result["sections"] = _sections(r, args, prev_since if compare else None)
        result["outputs"] = {}
        loaded.unpersist()
        summary.unpersist()
        return result
    cur = T.in_window(loaded, args.since_ms, args.until_ms)
    p = _pipeline(cur, args)
    pubs, dels, facts = p["pubs"], p["dels"], p["facts"]
    unpaired = T.unpaired_msg_ids(p["msgs"]).cache()  # counted, so its size is known when joins are planned
    empty = empty_tables(by_type, p["facts_count"], unpaired.count())
    progress("prepare")
    until, grace, top = args.until_ms, args.grace_ms, args.top

    @cache
    def latency(key: str) -> DataFrame:
        return T.send_latency(cur, [key], summary=summary)

    @cache
    def lag() -> DataFrame:
        return T.delivery_lag(facts)

    @cache
    def cost() -> DataFrame:
        return T.consume_cost(cur, summary=summary)

    # Each table is built (its DataFrame analysed) in the thread that runs it, alongside other tables' jobs.
    tables: dict[str, Callable[[], DataFrame]] = {
        "completeness": lambda: T.completeness_ledger(pubs, facts, until, grace),
        "send_latency_by_topic": lambda: latency("topic"),
        "send_latency_by_group": lambda: latency("group"),
        "send_latency_by_store_host": lambda: latency("store_host"),
        "send_latency_series": lambda: T.send_latency_series(cur, args.bucket_ms, summary=summary),
        "delivery_lag": lag,
        "delivery_lag_series": lambda: T.delivery_lag_series(facts),
        "consume_cost": cost,
        "context_codes": lambda: T.context_codes(cur, summary=summary),
        "slowest_hosts": lambda: T.slowest_hosts(cur, top, summary=summary),
        "retry_histogram": lambda: T.retry_histogram(dels),
        "top_failed_messages": lambda: T.top_failed_messages(dels, top),
        "top_failed_keys": lambda: T.top_failed_keys(cur, top, summary=summary),
        "stuck_unconsumed": lambda: T.stuck_unconsumed(facts, until, grace),
        "stuck_unfinished": lambda: T.stuck_unfinished(cur, until, grace, candidates=unpaired),
        "duplicates": lambda: T.duplicates(dels),
        "hot_keys": lambda: T.hot_keys(pubs, top),
        "hot_tags": lambda: T.hot_tags(pubs, top),
        "store_host_skew": lambda: T.store_host_skew(pubs),
        "trace_queue_skew": lambda: T.trace_queue_skew(cur, summary=summary),
        "trace_health": lambda: T.trace_health(pubs, dels, facts),
        "clock_skew_hosts": lambda: T.clock_skew_hosts(facts),
    }
    if compare:
        prev = T.in_window(loaded, prev_since, args.since_ms)
        psum = S.previous_window(summary)
        pp = _pipeline(prev, args)
        frames = [
            T.regressions(latency("topic"), T.send_latency(prev, ["topic"], summary=psum), "send_latency",
                          ["topic"], ["cost_p99", "failure_rate"]),
            T.regressions(lag(), T.delivery_lag(pp["facts"]), "delivery_lag", ["group"], ["lag_p99", "e2e_p99"]),
            T.regressions(cost(), T.consume_cost(prev, summary=psum), "consume_cost", ["group"],
                          ["cost_p99", "failure_rate"]),
        ]  # fmt: skip
        regressions = T.order_regressions(frames, top)
        tables["regressions"] = lambda: regressions
        progress("prepare_previous")
    w = _Writer(spark, args.out, progress, write=not args.no_tables)
    r = w.run(tables, empty)
    progress("tables")
    for frame in (loaded, summary, unpaired):
        frame.unpersist()
    result["sections"] = _sections(r, args, prev_since if compare else None)
    result["outputs"] = dict(sorted(w.outputs.items()))
    result["csv"] = dict(sorted(w.csv.items()))
    return result


#: Input bytes (Parquet, as Spark estimates them) per shuffle partition, up to one partition per core.
PARTITION_BYTES = 16 << 20


def input_bytes(frame: DataFrame) -> int:
    """Spark's estimate of the bytes ``frame`` reads (the Parquet files of its scan, no job run)."""
    size = frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()  # a scala BigInt
    return size if isinstance(size, int) else int(size.toString())


def size_to_input(spark: SparkSession, args: argparse.Namespace, frame: DataFrame) -> None:
    """Shuffle partitions, adaptive execution and code generation sized to the input ``frame``, for the
    settings neither spark-submit nor ``--shuffle-partitions`` gave: a partition per PARTITION_BYTES, at most one
    per core (at least 2, as ``main`` sets before the size is known). A small input (SMALL_INPUT_BYTES) gets one
    partition, no adaptive execution and no generated code (SMALL_INPUT_SQL). Every shuffle of a small report
    is then a single task, a global sort needs no sampling job, and a query is one Spark job instead of one
    per stage; measured on the 2-core machine, a 100-record report's user CPU fell by 3 s, and by 2 s more
    without code generation."""
    conf = spark.sparkContext.getConf()
    size = input_bytes(frame)
    small = size <= SMALL_INPUT_BYTES
    if not args.shuffle_partitions and not conf.contains("spark.sql.shuffle.partitions"):
        cores = max(2, spark.sparkContext.defaultParallelism)
        parts = 1 if small else max(1, min(cores, -(-size // PARTITION_BYTES)))
        spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    if small:
        _small_sql(spark)


def _small_sql(spark: SparkSession) -> None:
    """SMALL_INPUT_SQL, but for the settings spark-submit was given."""
    conf = spark.sparkContext.getConf()
    for key, value in SMALL_INPUT_SQL.items():
        if not conf.contains(key):
            spark.conf.set(key, value)


#: SQL settings of a small input (``size_to_input``) unless spark-submit was given them. A report compiles
#: every query's generated Java (Janino) and then JIT-compiles the classes, for a few hundred rows each:
#: Spark's interpreted expressions and operators (the code path its tests check against the generated one)
#: cost less than that compilation.
SMALL_INPUT_SQL = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def _sections(r: dict[str, list[dict[str, Any]]], args: argparse.Namespace, prev_since: int | None
              ) -> dict[str, Any]:
    unconsumed, unfinished, dups = r["stuck_unconsumed"], r["stuck_unfinished"], r["duplicates"]
    return {
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
        "regressions": {"previous_since_ms": prev_since, "rows": r.get("regressions", [])},
    }  # fmt: skip


#: SQL settings the job applies unless spark-submit was given them.
SESSION_DEFAULTS = {
    # percentile_approx runs in an object hash aggregation (summary.record_summary, the latency tables): keep
    # it hash-based for this many keys per task before Spark falls back to sorting (its default, 128, sorts
    # as soon as the failed-key or time-bucket sections have more than a handful of keys).
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "400000",
    # The per-message aggregation is cached and read by every later step; uncompressed, at 5 M records its
    # cache took 21 s to build instead of 24 s, and the facts join, hot keys and duplicates read it in
    # 12.1 s instead of 15.4 s (alternating runs in one JVM).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}


def build_session(app_name: str = "mq-trace-analyze") -> SparkSession:
    spark = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.requireAllClusterKeysForCoPartition", "false")
        # PySpark 4 records the Python call site of every Column operation for error messages: a walk of the
        # Python stack and ~15 calls into the JVM per operation, 7,000 of the 13,000 calls a 100-record report
        # made before Spark ran anything (each ~1 ms on a busy 2-core machine).
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    _keep_jvm_objects(spark)
    return spark


def _keep_jvm_objects(spark: SparkSession) -> None:
    """Stop py4j from telling the JVM about every Python-side reference to a JVM object the driver drops:
    one call into the JVM each, a quarter of those a small report makes (~1,700 of ~5,900). The job is one
    short process, so the JVM may keep those objects until it exits. A no-op if py4j is laid out otherwise."""
    client = getattr(getattr(spark.sparkContext, "_gateway", None), "_gateway_client", None)
    prop = getattr(client, "gateway_property", None)
    if prop is not None and hasattr(prop, "enable_memory_management"):
        prop.enable_memory_management = False


def _process_start_ms() -> int | None:
    """When this Python process started (epoch ms), before its imports."""
    try:
        import psutil

        return int(psutil.Process().create_time() * 1000)
    except Exception:  # noqa: BLE001 - a diagnostic only
        return None


def _jvm_start_ms(spark: SparkSession) -> int | None:
    """When the driver's JVM started (epoch ms); None if the JVM does not say."""
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        return int(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime())
    except Exception:  # noqa: BLE001 - a diagnostic only
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    session_start_ms = int(time.time() * 1000)
    progress = Progress()
    spark = build_session()
    startup = {"jvm_start_ms": _jvm_start_ms(spark), "python_start_ms": _process_start_ms(),
               "session_start_ms": session_start_ms}
    submitted = spark.sparkContext.getConf()  # a copy, made once: each read of it is a call into the JVM
    if args.shuffle_partitions or not submitted.contains("spark.sql.shuffle.partitions"):
        # The report tables are small: one task per core beats more, smaller ones (measured on local[2]).
        parts = args.shuffle_partitions or max(2, spark.sparkContext.defaultParallelism)
        spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    for key, value in SESSION_DEFAULTS.items():
        if not submitted.contains(key):
            spark.conf.set(key, value)
    progress("session")
    os.makedirs(args.out, exist_ok=True)
    try:
        result = export(spark, args, progress) if args.mode == "export" else analyze(spark, args, progress)
    finally:
        shutil.rmtree(os.path.join(args.out, SCRATCH_DIR), ignore_errors=True)
    result["timings"] = progress.timings
    result["startup"] = startup
    name = "export.json" if args.mode == "export" else "report.json"
    with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=str)
    progress("done")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
