"""Pure DataFrame -> DataFrame transforms behind ``mq trace analyze``, one function per report table.

They read the per-message frames of ``message_frames`` (``pub_messages``, ``deliveries``, ``message_group_facts``)
and the record-level aggregation of ``summary``; ``stuck_unfinished`` also reads the records themselves.

Time conventions: all times are epoch ms. Pub "store time" is the client's estimate
``timestamp + cost_time / 2`` (TRACE.md §6.1, the broker time is not in the trace). Delivery lag is the
first SubBefore minus that store time; end-to-end is the first successful SubAfter minus the Pub
timestamp. Buckets are ``ts - ts % bucket_ms`` of the Pub timestamp. Percentiles are Spark's
``percentile_approx`` (exact nearest-rank on small groups: the smallest value v with at least p of the
values <= v).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from mq.trace.analytics.summary import ACCURACY, PERCENTILES, PUB_SECTIONS, section_of, summary_pcts


def _pcts(col: str, prefix: str) -> list[Column]:
    """p50/p90/p99/max of ``col`` as ``<prefix>_p50`` ..."""
    arr = F.percentile_approx(F.col(col), list(PERCENTILES), ACCURACY)
    out = [arr[i].alias(f"{prefix}_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)]
    return out + [F.max(col).alias(f"{prefix}_max")]


# ------------------------------------------------------------------------------------ report sections


def completeness_ledger(pubs: DataFrame, facts: DataFrame, until_ms: int, grace_ms: int) -> DataFrame:
    """Section 1, per topic x bucket x consumer group (group NULL for a topic nobody consumes):
    published, stored, send_failed, consumed, retried, dead_lettered, never_consumed (consumable, Pub at
    least grace_ms before until_ms, not consumed, not dead-lettered) and loss (never_consumed > 0)."""
    per_bucket = pubs.groupBy("topic", "bucket").agg(
        F.count(F.lit(1)).alias("published"),
        F.count(F.when(F.col("stored"), 1)).alias("stored"),
        F.count(F.when(~F.col("stored"), 1)).alias("send_failed"),
    )
    overdue = F.col("pub_ts") <= F.lit(until_ms - grace_ms)
    per_group = facts.groupBy("topic", "bucket", "group").agg(
        F.count(F.when(F.col("consumed"), 1)).alias("consumed"),
        F.count(F.when(F.col("retried"), 1)).alias("retried"),
        F.count(F.when(F.col("dead_lettered"), 1)).alias("dead_lettered"),
        F.count(F.when(overdue & ~F.col("consumed") & ~F.col("dead_lettered"), 1)).alias("never_consumed"),
    )
    zero = F.lit(0).cast("long")
    return (
        per_bucket.join(per_group, ["topic", "bucket"], "left")
        .select(
            "topic", "bucket", "group", "published", "stored", "send_failed",
            *[F.coalesce(c, zero).alias(c) for c in ("consumed", "retried", "dead_lettered", "never_consumed")],
        )  # fmt: skip
        .withColumn("loss", F.col("never_consumed") > 0)
        .orderBy("topic", "bucket", "group")
    )


def send_latency(records: DataFrame, by: Sequence[str], summary: DataFrame | None = None) -> DataFrame:
    """Section 2: per ``by`` (["topic"], ["group"] or ["store_host"]) over every Pub record: sends,
    failures, failure_rate and cost_time p50/p90/p99/max. ``summary``: ``record_summary(records)``
    computed once for many tables (``records`` is then not read)."""
    if len(by) != 1 or by[0] not in PUB_SECTIONS:
        raise ValueError(f"send_latency groups by one of {sorted(PUB_SECTIONS)}, not {list(by)}")
    key = by[0]
    s = section_of(records, summary, PUB_SECTIONS[key])
    return (
        s.select(F.col("s1").alias(key), F.col("n").alias("sends"), "failures", *summary_pcts("cost"))
        .withColumn("failure_rate", F.col("failures") / F.col("sends"))
        .orderBy(key)
    )


def send_latency_series(records: DataFrame, bucket_ms: int, summary: DataFrame | None = None) -> DataFrame:
    """Send cost percentiles per time bucket (all topics), for the latency chart. A ``summary`` must have
    been built with the same ``bucket_ms``."""
    s = section_of(records, summary, "pub_series", bucket_ms)
    return s.select(F.col("n1").alias("bucket"), F.col("n").alias("sends"), *summary_pcts("cost")).orderBy("bucket")


def delivery_lag(facts: DataFrame) -> DataFrame:
    """Section 3: per consumer group, delivery lag and end-to-end percentiles over delivered messages."""
    return (
        facts.where(F.col("lag").isNotNull())
        .groupBy("group")
        .agg(F.count(F.lit(1)).alias("delivered"), *_pcts("lag", "lag"), *_pcts("e2e", "e2e"))
        .orderBy("group")
    )


def delivery_lag_series(facts: DataFrame) -> DataFrame:
    """Section 3 as a time series: per (bucket, group), lag p50/p99 and e2e p99."""
    arr = F.percentile_approx("lag", [0.5, 0.99], ACCURACY)
    return (
        facts.where(F.col("lag").isNotNull())
        .groupBy("bucket", "group")
        .agg(
            F.count(F.lit(1)).alias("delivered"),
            arr[0].alias("lag_p50"),
            arr[1].alias("lag_p99"),
            F.percentile_approx("e2e", 0.99, ACCURACY).alias("e2e_p99"),
        )
        .orderBy("bucket", "group")
    )


def consume_cost(records: DataFrame, summary: DataFrame | None = None) -> DataFrame:
    """Section 4: per consumer group over SubAfter records: consumes, failures, failure_rate, cost pcts."""
    s = section_of(records, summary, "after_group")
    return (
        s.select(F.col("s1").alias("group"), F.col("n").alias("consumes"), "failures", *summary_pcts("cost"))
        .withColumn("failure_rate", F.col("failures") / F.col("consumes"))
        .orderBy("group")
    )


_CODE_NAMES = ["SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED"]


def context_codes(records: DataFrame, summary: DataFrame | None = None) -> DataFrame:
    """Section 4: SubAfter count per (group, client_host, context_code) with the ConsumeReturnType name."""
    names = F.element_at(F.array(*[F.lit(n) for n in _CODE_NAMES]), F.col("context_code") + 1)
    s = section_of(records, summary, "after_code")
    return (
        s.select(F.col("s1").alias("group"), F.col("s2").alias("client_host"),
                 F.col("n1").cast("int").alias("context_code"), F.col("n").alias("count"))  # fmt: skip
        .withColumn("return_type", F.when(F.col("context_code").between(0, 4), names).otherwise(F.lit("UNKNOWN")))
        .orderBy("group", "client_host", "context_code")
    )


def slowest_hosts(records: DataFrame, top: int, summary: DataFrame | None = None) -> DataFrame:
    """Section 4: consumer client hosts by SubAfter cost p99 (then max), slowest first."""
    s = section_of(records, summary, "after_host")
    return (
        s.select(F.col("s1").alias("client_host"), F.col("n").alias("consumes"), *summary_pcts("cost"))
        .orderBy(F.desc("cost_p99"), F.desc("cost_max"), "client_host")
        .limit(top)
    )


def retry_histogram(dels: DataFrame) -> DataFrame:
    """Section 5: number of (msg_id, group) pairs by their highest retry_times."""
    return (
        dels.where(F.col("attempts") > 0)
        .groupBy(F.col("max_retry").alias("retry_times"))
        .agg(F.count(F.lit(1)).alias("pairs"))
        .orderBy("retry_times")
    )


def top_failed_messages(dels: DataFrame, top: int) -> DataFrame:
    """Section 5: (msg_id, group) with the most failed SubAfters."""
    return (
        dels.where(F.col("failures") > 0)
        .select("msg_id", "group", "failures", "max_retry", "successes")
        .orderBy(F.desc("failures"), "msg_id", "group")
        .limit(top)
    )


def top_failed_keys(records: DataFrame, top: int, summary: DataFrame | None = None) -> DataFrame:
    """Section 5: message keys (space-separated tokens) by number of failed SubAfters."""
    s = section_of(records, summary, "failed_key")
    return (
        s.select(F.col("s1").alias("key"), F.col("n").alias("failures"))
        .orderBy(F.desc("failures"), "key")
        .limit(top)
    )


def stuck_unconsumed(facts: DataFrame, until_ms: int, grace_ms: int) -> DataFrame:
    """Section 6: consumable messages with no SubBefore for a subscribed group, published at least
    grace_ms before until_ms; ``age_ms`` = until_ms - pub_ts."""
    return (
        facts.where(F.col("first_before_ts").isNull() & (F.col("pub_ts") <= until_ms - grace_ms))
        .select("msg_id", "topic", "group", "pub_ts", (F.lit(until_ms) - F.col("pub_ts")).alias("age_ms"))
        .orderBy("pub_ts", "msg_id", "group")
    )


def stuck_unfinished(records: DataFrame, until_ms: int, grace_ms: int, candidates: DataFrame | None = None
                     ) -> DataFrame:
    """Section 6: SubBefore records with no SubAfter of the same (request_id, msg_id), started at least
    grace_ms before until_ms (a NULL request_id or msg_id never pairs).

    ``candidates``: ``unpaired_msg_ids`` of ``message_summary(records)``; only the Sub records of those ids
    (usually few) are then read, in one pass: a broadcast semi join. Cache and count it first, so that Spark
    knows its size when it plans the join (planned as a sort-merge join, the big side is shuffled before
    adaptive execution switches to a broadcast). Each remaining SubBefore is then matched against the
    SubAfters of its (request_id, msg_id) by a window over them."""
    tt, cut = F.col("trace_type"), until_ms - grace_ms
    old = (tt == "SubBefore") & (F.col("timestamp") <= cut)
    subs = records.where(old | (tt == "SubAfter"))
    if candidates is not None:
        ids = candidates.select(F.col("msg_id").alias("c_msg_id"))
        subs = subs.join(ids, subs["msg_id"].eqNullSafe(ids["c_msg_id"]), "left_semi")
    paired = (tt == "SubAfter") & F.col("request_id").isNotNull() & F.col("msg_id").isNotNull()
    afters = F.count(F.when(paired, 1)).over(Window.partitionBy("request_id", "msg_id"))
    return (
        subs.select("*", afters.alias("afters"))
        .where(old & (F.col("afters") == 0))
        .select("msg_id", "group", "request_id", "client_host", "retry_times", F.col("timestamp").alias("before_ts"))
        .orderBy("before_ts", "msg_id", "group")
    )


def duplicates(dels: DataFrame) -> DataFrame:
    """Section 7: (msg_id, group) with more than one successful SubAfter."""
    return (
        dels.where(F.col("successes") > 1)
        .select("msg_id", "group", "successes", "attempts")
        .orderBy(F.desc("successes"), "msg_id", "group")
    )


def hot_keys(pubs: DataFrame, top: int) -> DataFrame:
    """Section 8: key tokens of published messages by count."""
    return (
        pubs.where(F.col("keys").isNotNull())
        .select(F.explode(F.split("keys", " ")).alias("key"))
        .where(F.col("key") != "")
        .groupBy("key")
        .agg(F.count(F.lit(1)).alias("messages"))
        .orderBy(F.desc("messages"), "key")
        .limit(top)
    )


def hot_tags(pubs: DataFrame, top: int) -> DataFrame:
    """Section 8: (topic, tag) by published messages (tag NULL = untagged)."""
    return (
        pubs.groupBy("topic", "tags")
        .agg(F.count(F.lit(1)).alias("messages"))
        .orderBy(F.desc("messages"), "topic", "tags")
        .limit(top)
    )


def store_host_skew(pubs: DataFrame) -> DataFrame:
    """Section 8: per (topic, store_host) message count, share of the topic, and the topic's skew
    (max host count / mean host count; 1.0 = even). The business queue id is not in the trace, so the
    broker (store host) is the finest placement the trace can show."""
    counts = pubs.groupBy("topic", "store_host").agg(F.count(F.lit(1)).alias("messages"))
    totals = counts.groupBy("topic").agg(
        F.sum("messages").alias("topic_total"), (F.max("messages") / F.avg("messages")).alias("skew")
    )
    return (
        counts.join(totals, "topic")
        .select("topic", "store_host", "messages", (F.col("messages") / F.col("topic_total")).alias("share"), "skew")
        .orderBy("topic", "store_host")
    )


def trace_queue_skew(records: DataFrame, summary: DataFrame | None = None) -> DataFrame:
    """Section 8: trace records per trace-topic queue (broker, queue_id) and their share."""
    counts = section_of(records, summary, "queue").select(
        F.col("s1").alias("broker"), F.col("n1").cast("int").alias("queue_id"), F.col("n").alias("records")
    )
    total = counts.agg(F.sum("records").alias("total"))
    return (
        counts.crossJoin(total)
        .select("broker", "queue_id", "records", (F.col("records") / F.col("total")).alias("share"))
        .orderBy("broker", "queue_id")
    )


def trace_health(pubs: DataFrame, dels: DataFrame, facts: DataFrame) -> DataFrame:
    """Section 9, one row: messages (consumable), complete (every subscribed group has a SubBefore and a
    SubAfter), complete_share, orphan_deliveries ((msg_id, group) with Sub records but no Pub in the
    window), negative_lag and negative_e2e pairs (clock skew).

    No joins of the big frames: incomplete messages are the few distinct msg_ids of facts rows missing a
    SubBefore or SubAfter (facts hold consumable messages only), and orphans come out of one hash
    aggregation of pubs and dels by msg_id."""
    messages = pubs.where("consumable").agg(F.count(F.lit(1)).alias("messages"))
    ok = F.col("first_before_ts").isNotNull() & (F.col("afters") > 0)
    incomplete = facts.where(~ok).select("msg_id").distinct().agg(F.count(F.lit(1)).alias("incomplete"))
    per_msg = (
        pubs.select("msg_id", F.lit(1).alias("p"), F.lit(0).alias("d"))
        .unionByName(dels.select("msg_id", F.lit(0).alias("p"), F.lit(1).alias("d")))
        .groupBy("msg_id")
        .agg(F.max("p").alias("p"), F.sum("d").alias("d"))
    )
    orphans = per_msg.where(F.col("p") == 0).agg(
        F.coalesce(F.sum("d"), F.lit(0)).cast("long").alias("orphan_deliveries")
    )
    neg = facts.agg(
        F.count(F.when(F.col("lag") < 0, 1)).alias("negative_lag"),
        F.count(F.when(F.col("e2e") < 0, 1)).alias("negative_e2e"),
    )
    share = F.when(F.col("messages") > 0, F.col("complete") / F.col("messages"))
    return (
        messages.crossJoin(incomplete)
        .withColumn("complete", F.col("messages") - F.col("incomplete"))
        .crossJoin(orphans)
        .crossJoin(neg)
        .withColumn("complete_share", share)
        .select("messages", "complete", "complete_share", "orphan_deliveries", "negative_lag", "negative_e2e")
    )


def clock_skew_hosts(facts: DataFrame) -> DataFrame:
    """Section 9: consumer client hosts with negative delivery lags, with the most negative value."""
    return (
        facts.where(F.col("lag") < 0)
        .groupBy("client_host")
        .agg(F.count(F.lit(1)).alias("negative_lag"), F.min("lag").alias("min_lag"))
        .orderBy(F.desc("negative_lag"), "client_host")
    )


def regressions(
    current: DataFrame, previous: DataFrame, section: str, keys: Sequence[str], metrics: Sequence[str]
) -> DataFrame:
    """Section 10: metrics of ``current`` vs ``previous`` (same shape), one row per (key, metric):
    section, key (the key columns joined by '/'), metric, previous, current, delta, change (delta /
    |previous|, NULL when previous is 0 or missing). Higher is worse for every metric used here, so
    ``order_regressions`` sorts by change then delta, descending."""
    key_expr = F.concat_ws("/", *[F.coalesce(F.col(k).cast("string"), F.lit("-")) for k in keys])
    cur = current.select(key_expr.alias("key"), *[F.col(m).cast("double").alias(m) for m in metrics])
    prev = previous.select(key_expr.alias("key"), *[F.col(m).cast("double").alias(f"prev_{m}") for m in metrics])
    j = cur.join(prev, "key", "full")
    stack = F.explode(
        F.array(*[F.struct(F.lit(m).alias("metric"), F.col(f"prev_{m}").alias("previous"), F.col(m).alias("current"))
                  for m in metrics])  # fmt: skip
    )
    rows = j.select("key", stack.alias("s")).select("key", "s.metric", "s.previous", "s.current")
    delta = F.col("current") - F.col("previous")
    change = F.when(F.col("previous") != 0, delta / F.abs(F.col("previous")))
    return rows.select(F.lit(section).alias("section"), "key", "metric", "previous", "current",
                       delta.alias("delta"), change.alias("change"))  # fmt: skip


def order_regressions(frames: Sequence[DataFrame], top: int) -> DataFrame:
    """Union of ``regressions`` outputs present in both windows, worst movers first: by relative change,
    a rise from 0 counting as the largest change, then by absolute delta."""
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    both = out.where(F.col("previous").isNotNull() & F.col("current").isNotNull())
    score = F.when(F.col("change").isNotNull(), F.col("change")).when(F.col("delta") > 0, F.lit(1e18)).otherwise(0.0)
    return both.orderBy(score.desc(), F.desc("delta"), "section", "key", "metric").limit(top)
