"""``--mode analyze``: the report of one window (and the comparison with the window before it).

``analyze`` loads the input's records (``_load``), counts them in one pass that also builds every record-level
table (``summary.record_summary``), builds the per-message frames (``message_frames``), skips the tables that are
empty by definition (``empty_tables``) and runs the rest side by side (``table_writer``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from functools import cache
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mq.trace.analytics import message_frames as M
from mq.trace.analytics import readers as R
from mq.trace.analytics import summary as S
from mq.trace.analytics import transforms as T
from mq.trace.analytics.session_settings import size_to_input, small_sql
from mq.trace.analytics.stage_progress import Progress
from mq.trace.analytics.table_writer import TableWriter, collect_rows
from mq.trace.live_reader import MISSING_PREFIX, MissingRange, parse_missing, plan_read
from mq.trace.spark_submit import SMALL_INPUT_BYTES, SMALL_INPUT_MESSAGES

REPORT_VERSION = 2
#: Columns the analysis reads (the archive has more).
ANALYSIS_COLUMNS = (
    "trace_type", "timestamp", "group", "topic", "msg_id", "tags", "keys", "store_host", "client_host",
    "cost_time", "msg_type", "success", "retry_times", "request_id", "context_code", "store_time",
    "transaction_state", "broker", "queue_id", "trace_store_time", "error",
)  # fmt: skip
#: Scratch copy of the decoded records of a live or raw input, under --out, removed when the job ends.
SCRATCH_DIR = "_records"


def _pipeline(cur: DataFrame, args: argparse.Namespace) -> dict[str, DataFrame]:
    """pubs, dels and facts of one window, cached and materialised (so concurrent jobs share them). pubs
    and dels are cut from one cached per-message aggregation (``message_frames.message_summary``)."""
    msgs = M.message_summary(cur).cache()
    pubs = M.pub_messages(cur, args.bucket_ms, messages=msgs)
    dels = M.deliveries(cur, messages=msgs)
    facts = M.message_group_facts(pubs, dels, M.dead_letter_marks(cur), args.max_reconsume_times).cache()
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
        plan = plan_read(R.namesrv_list(args.namesrv), args.trace_topic, lo, args.until_ms,
                         chunk_messages=args.chunk_messages, slack_ms=args.slack_ms)
        info.update(R.plan_json(plan), namesrv=args.namesrv)
        info["_missing"] = plan.missing
        progress("plan", f"messages={plan.messages} chunks={len(plan.chunks)} missing={len(plan.missing)}")
        if plan.messages <= SMALL_INPUT_MESSAGES and spark.sparkContext.master.startswith("local"):
            bodies = os.path.join(args.out, SCRATCH_DIR, "bodies.json")
            loaded = R.read_in_driver(spark, plan, bodies)
            if os.path.getsize(bodies) <= SMALL_INPUT_BYTES:  # decode small input without generated code too
                small_sql(spark)
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
    size_to_input(spark, loaded, args.shuffle_partitions)
    missing: list[MissingRange] = info.pop("_missing", [])
    # One pass over the input: record counts per window, type and malformed reason, marker rows, and every
    # record-level report table (summary.record_summary); the summary is small, keep it.
    summary = S.record_summary(loaded, args.bucket_ms, args.since_ms, stats=True).cache()
    stats = collect_rows(summary.where(F.col("section") == "records").select("w", "s1", "s2", "n"))
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
    cur = M.in_window(loaded, args.since_ms, args.until_ms)
    p = _pipeline(cur, args)
    pubs, dels, facts = p["pubs"], p["dels"], p["facts"]
    unpaired = M.unpaired_msg_ids(p["msgs"]).cache()  # counted, so its size is known when joins are planned
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
        prev = M.in_window(loaded, prev_since, args.since_ms)
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
    w = TableWriter(spark, args.out, progress, write=not args.no_tables)
    r = w.run(tables, empty)
    progress("tables")
    for frame in (loaded, summary, unpaired):
        frame.unpersist()
    result["sections"] = _sections(r, args, prev_since if compare else None)
    result["outputs"] = dict(sorted(w.outputs.items()))
    result["csv"] = dict(sorted(w.csv.items()))
    return result


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
