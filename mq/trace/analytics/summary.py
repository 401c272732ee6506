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
    event = F.coalesce(F.col("timestamp"), F.col("trace_store_time"))
    w = F.lit("cur") if since_ms is None else F.when(event < since_ms, "prev").otherwise("cur")
    tt = F.col("trace_type")
    pub, after = tt == "Pub", tt == "SubAfter"
    fail, cost = ~F.col("success"), F.col("cost_time")

    def row(section: str, s1: Column | None = None, s2: Column | None = None, s3: Column | None = None,
            n1: Column | None = None) -> Column:
        none_s, none_n = F.lit(None).cast("string"), F.lit(None).cast("long")
        return F.struct(F.lit(section).alias("section"), (none_s if s1 is None else s1).alias("s1"),
                        (none_s if s2 is None else s2).alias("s2"), (none_s if s3 is None else s3).alias("s3"),
                        (none_n if n1 is None else n1.cast("long")).alias("n1"))  # fmt: skip

    ts = F.col("timestamp")
    pub_rows = F.array(row("pub_topic", F.col("topic")), row("pub_group", F.col("group")),
                       row("pub_store", F.col("store_host")), row("pub_series", n1=ts - ts % F.lit(bucket_ms)))
    after_rows = F.array(row("after_group", F.col("group")),
                         row("after_code", F.col("group"), F.col("client_host"), n1=F.col("context_code")),
                         row("after_host", F.col("client_host")))  # fmt: skip
    tokens = F.filter(F.split(F.col("keys"), " "), lambda k: k != "")
    key_rows = F.transform(tokens, lambda k: row("failed_key", k))
    empty = F.array().cast("array<struct<section:string,s1:string,s2:string,s3:string,n1:bigint>>")
    ok = F.col("error").isNull()
    # Rows that need cost percentiles (Pub, SubAfter) go through one aggregation; rows that only count go
    # through another whose buffers are plain numbers (Spark's fast hash aggregation).
    timed = F.concat(
        F.when(pub, pub_rows).otherwise(empty),
        F.when(after, after_rows).otherwise(empty),
    )
    counted = F.concat(
        F.when(ok & after & fail & F.col("keys").isNotNull(), key_rows).otherwise(empty),
        F.when(ok, F.array(row("queue", F.col("broker"), n1=F.col("queue_id")))).otherwise(empty),
        F.array(row("records", tt, F.col("error"))) if stats else empty,
    )
    keys = ("w", "r.section", "r.s1", "r.s2", "r.s3", "r.n1")
    arr = F.percentile_approx("v", list(PERCENTILES), ACCURACY)
    with_costs = (
        records.where(ok & (pub | after))
        .select(w.alias("w"), F.explode(timed).alias("r"), cost.alias("v"), fail.alias("fail"))
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.count(F.when(F.col("fail"), 1)).alias("failures"),
            *[arr[i].alias(f"v_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)],
            F.max("v").alias("v_max"),
        )
    )
    counts = (
        records.select(w.alias("w"), F.explode(counted).alias("r"))
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("n"))
        .select("*", F.lit(0).cast("long").alias("failures"),
                *[F.lit(None).cast("int").alias(f"v_p{int(p * 100)}") for p in PERCENTILES],
                F.lit(None).cast("int").alias("v_max"))  # fmt: skip
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
