"""The record summary: every record-level report table of ``mq trace analyze`` from one Spark job.

``record_summary`` explodes each record into one row per report section it counts in and aggregates them
by ``(w, section, s1, s2, s3, n1)``; ``transforms`` cuts its tables (send latency, consume cost, context
codes, slowest hosts, failed keys, trace queue skew) from the small result with ``section_of``.

    +----------+---------+-----------------------------------------------------------------+
    | column   | type    | content                                                         |
    +----------+---------+-----------------------------------------------------------------+
    | w        | string  | ``cur``, or ``prev`` for records before ``since_ms``            |
    | section  | string  | one of SUMMARY_SECTIONS, or ``records`` (the job's counts)      |
    | s1 s2 s3 | string  | the section's string keys (topic, group, host, key, type, ...)  |
    | n1       | long    | the section's number key (bucket, context code, queue id)       |
    | n        | long    | records                                                         |
    | failures | long    | records with success = false                                    |
    | v_p50..  | int     | cost_time p50 / p90 / p99 (``percentile_approx``) and max       |
    +----------+---------+-----------------------------------------------------------------+
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

PERCENTILES = (0.5, 0.9, 0.99)
ACCURACY = 10_000

PUB_SECTIONS = {"topic": "pub_topic", "group": "pub_group", "store_host": "pub_store"}
#: Sections of ``record_summary`` and their keys (s1, s2, s3 strings, n1 long): per Pub record by topic,
#: producer group, store host, time bucket; per SubAfter by group, (group, client host, context code),
#: client host; per key token of a failed SubAfter; per trace queue (broker, queue_id) for every record.
SUMMARY_SECTIONS = ("pub_topic", "pub_group", "pub_store", "pub_series", "after_group", "after_code",
                    "after_host", "failed_key", "queue")  # fmt: skip


def record_summary(records: DataFrame, bucket_ms: int = 600_000, since_ms: int | None = None,
                   stats: bool = False) -> DataFrame:
    """Every record-level report table in one Spark job, instead of a job (and a pass over the records) each.

    Each well-formed record is exploded into a row per section it counts in (a Pub into four, a SubAfter
    into three, a failed SubAfter into one per key token, every record into ``queue``) and grouped by
    ``(w, section, s1, s2, s3, n1)``: n (records), failures (success = false), cost p50/p90/p99
    (``percentile_approx``) and max. Sections that only count are aggregated apart from those with costs
    (their buffers are plain numbers, which Spark aggregates much faster); the two are unioned. Tables are
    then cut from this small frame (``send_latency(..., summary=...)`` and friends).

    ``w`` is the window: ``prev`` for records whose event time is before ``since_ms``, else ``cur``.
    ``stats``: also one ``records`` row per (w, trace_type in s1, error in s2) over every row, malformed
    and marker rows included (the job's record counts)."""
    # Written as SQL text: the same expressions built as Columns cost ~600 calls into the JVM (see sql_decode).
    event = "coalesce(timestamp, trace_store_time)"
    w = "'cur'" if since_ms is None else f"CASE WHEN {event} < {int(since_ms)} THEN 'prev' ELSE 'cur' END"
    pub, after = "trace_type = 'Pub'", "trace_type = 'SubAfter'"
    ok = "error IS NULL"

    def row(section: str, s1: str | None = None, s2: str | None = None, s3: str | None = None,
            n1: str | None = None) -> str:
        none_s = "CAST(NULL AS string)"
        return (f"named_struct('section', '{section}', 's1', {s1 or none_s}, 's2', {s2 or none_s}, 's3', "
                f"{s3 or none_s}, 'n1', CAST({n1 or 'NULL'} AS bigint))")  # fmt: skip

    pub_rows = (f"array({row('pub_topic', 'topic')}, {row('pub_group', '`group`')}, {row('pub_store', 'store_host')}, "
                f"{row('pub_series', n1=f'timestamp - timestamp % {int(bucket_ms)}')})")  # fmt: skip
    after_rows = (f"array({row('after_group', '`group`')}, "
                  f"{row('after_code', '`group`', 'client_host', n1='context_code')}, "
                  f"{row('after_host', 'client_host')})")  # fmt: skip
    key_rows = f"transform(filter(split(keys, ' '), k -> k != ''), k -> {row('failed_key', 'k')})"
    empty = "CAST(array() AS array<struct<section:string,s1:string,s2:string,s3:string,n1:bigint>>)"
    # Rows that need cost percentiles (Pub, SubAfter) go through one aggregation; rows that only count go
    # through another whose buffers are plain numbers (Spark's fast hash aggregation).
    timed = f"concat(CASE WHEN {pub} THEN {pub_rows} ELSE {empty} END, CASE WHEN {after} THEN {after_rows} ELSE {empty} END)"
    records_rows = f"array({row('records', 'trace_type', 'error')})" if stats else empty
    counted = (f"concat(CASE WHEN {ok} AND {after} AND NOT success AND keys IS NOT NULL THEN {key_rows} "
               f"ELSE {empty} END, CASE WHEN {ok} THEN array({row('queue', 'broker', n1='queue_id')}) ELSE {empty} END, "
               f"{records_rows})")  # fmt: skip
    keys = ("w", "r.section", "r.s1", "r.s2", "r.s3", "r.n1")
    pcts = ", ".join(f"{p}D" for p in PERCENTILES)
    with_costs = (
        records.where(f"{ok} AND ({pub} OR {after})")
        .selectExpr(f"{w} AS w", f"explode({timed}) AS r", "cost_time AS v", "NOT success AS fail")
        .groupBy(*keys)
        .agg(*[F.expr(a) for a in (
            "count(1) AS n", "count(CASE WHEN fail THEN 1 END) AS failures",
            *[f"percentile_approx(v, array({pcts}), {ACCURACY})[{i}] AS v_p{int(p * 100)}"
              for i, p in enumerate(PERCENTILES)],
            "max(v) AS v_max",
        )])  # fmt: skip
    )
    counts = (
        records.selectExpr(f"{w} AS w", f"explode({counted}) AS r")
        .groupBy(*keys)
        .agg(F.expr("count(1) AS n"))
        .selectExpr("*", "CAST(0 AS bigint) AS failures", *[f"CAST(NULL AS int) AS v_p{int(p * 100)}" for p in PERCENTILES],
                    "CAST(NULL AS int) AS v_max")  # fmt: skip
    )
    return with_costs.unionByName(counts)


def section_of(records: DataFrame, summary: DataFrame | None, section: str, bucket_ms: int = 600_000) -> DataFrame:
    """The rows of one section of the current window (the summary computed here if not given)."""
    s = summary if summary is not None else record_summary(records, bucket_ms)
    return s.where((F.col("w") == "cur") & (F.col("section") == section))


def summary_pcts(prefix: str) -> list[Column]:
    return [F.col(f"v_p{int(p * 100)}").alias(f"{prefix}_p{int(p * 100)}") for p in PERCENTILES] + [
        F.col("v_max").alias(f"{prefix}_max")
    ]


def previous_window(summary: DataFrame) -> DataFrame:
    """The summary's previous-window rows, relabelled as current (to cut the previous window's tables)."""
    return summary.where(F.col("w") == "prev").withColumn("w", F.lit("cur"))
