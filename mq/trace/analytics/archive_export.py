"""``--mode export``: append trace records to a Parquet archive partitioned by date and hour, and advance the
per-queue cursors stored with it (``readers.save_cursors``), so that a re-run fetches only what is new."""

from __future__ import annotations

import argparse
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from mq.trace.analytics import readers as R
from mq.trace.analytics.schema import COLUMNS, PARTITION_COLUMNS
from mq.trace.analytics.stage_progress import Progress
from mq.trace.analytics.table_writer import collect_rows
from mq.trace.live_reader import MISSING_PREFIX, cursor_key, plan_read


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
        by_error = {r["error"]: r["count"] for r in collect_rows(spark.read.parquet(archive).groupBy("error").count())}
        malformed = sorted(({"error": k, "count": v} for k, v in by_error.items() if k is not None),
                           key=lambda m: (-m["count"], m["error"]))  # fmt: skip
        progress("count")
        return {"records": sum(by_error.values()) - sum(m["count"] for m in malformed), "malformed": malformed,
                "malformed_total": sum(m["count"] for m in malformed), "path": archive, "missing": []}  # fmt: skip
    old = R.load_cursors(spark, archive)
    plan = plan_read(R.namesrv_list(args.namesrv), args.trace_topic, args.since_ms, None, cursors=old,
                     chunk_messages=args.chunk_messages, slack_ms=args.slack_ms)
    progress("plan", f"messages={plan.messages} chunks={len(plan.chunks)}")
    df = R.read_live(spark, plan).cache()
    marker = F.col("error").startswith(MISSING_PREFIX)
    counts = {(r["k"], r["error"]): r["count"] for r in collect_rows(
        df.groupBy(F.when(marker, "missing").when(F.col("error").isNotNull(), "malformed").otherwise("ok").alias("k"),
                   F.when(~marker, F.col("error")).alias("error")).count())}  # fmt: skip
    progress("read", f"records={counts.get(('ok', None), 0)}")
    missing = plan.missing + (R.missing_of(df) if any(k == "missing" for k, _ in counts) else [])
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
        "malformed_total": sum(m["count"] for m in malformed), "path": archive, "plan": R.plan_json(plan),
        "previous_cursors": old, "cursors": cursors, "missing": [m.to_json() for m in missing],
    }  # fmt: skip
