"""Pure DataFrame -> DataFrame transforms behind ``mq trace analyze`` (one function per report table).

Input is the flat record frame of ``schema.py``. The building blocks:

- ``pub_messages``: one row per published msg_id (a producer may send one id more than once);
- ``deliveries``: one row per (msg_id, consumer group) summarising its SubBefore/SubAfter records;
- ``subscriptions``: which groups consume which topic (groups seen consuming any message of it);
- ``message_group_facts``: every consumable message x every group subscribed to its topic, with its
  delivery summary; most report sections aggregate this frame.

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

DLQ_PREFIX = "%DLQ%"


def _pcts(col: str, prefix: str) -> list[Column]:
    """p50/p90/p99/max of ``col`` as ``<prefix>_p50`` ..."""
    arr = F.percentile_approx(F.col(col), list(PERCENTILES), ACCURACY)
    out = [arr[i].alias(f"{prefix}_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)]
    return out + [F.max(col).alias(f"{prefix}_max")]


def _bucket(col: str, bucket_ms: int) -> Column:
    return (F.col(col) - F.col(col) % F.lit(bucket_ms)).alias("bucket")


# ----------------------------------------------------------------------------------------- the input


def malformed_counts(records: DataFrame) -> DataFrame:
    """(error, count) of malformed records, most frequent first."""
    return (
        records.where(F.col("error").isNotNull())
        .groupBy("error")
        .agg(F.count(F.lit(1)).alias("count"))
        .orderBy(F.desc("count"), "error")
    )


def in_window(records: DataFrame, since_ms: int, until_ms: int) -> DataFrame:
    """Well-formed records whose event time (timestamp, else the trace message's store time) is in
    [since_ms, until_ms)."""
    t = F.coalesce(F.col("timestamp"), F.col("trace_store_time"))
    return records.where(F.col("error").isNull() & (t >= since_ms) & (t < until_ms))


# ------------------------------------------------------------------------------------ building blocks


def _hashed(df: DataFrame) -> DataFrame:
    return df.withColumn("h", F.xxhash64("msg_id"))


def message_summary(records: DataFrame) -> DataFrame:
    """``pub_messages`` and ``deliveries`` in ONE aggregation: one row per (msg_id, ``is_sub``, ``sub_group``).

    ``is_sub`` false: the msg_id's Pub/EndTransaction records (the ``pub_messages`` columns, ``has_pub``
    false when it has no Pub); true: its SubBefore/SubAfter records of one consumer group (the
    ``deliveries`` columns). The picks carry strings (``min_by``), so Spark aggregates by sorting; the
    records are hash-partitioned by msg_id first, so one shuffle and one sort serve both frames (two
    separate aggregations cost two of each, measured 4.7 s against 7.5 s per million records).

    ``unpaired`` (delivery rows only) marks the groups that may hold a SubBefore without its SubAfter, the
    candidates of ``stuck_unfinished`` (see ``_unpaired``)."""
    # Written as SQL text: the same expressions built as Columns cost ~400 calls into the JVM (see sql_decode).
    is_pub, is_tx = "trace_type = 'Pub'", "trace_type = 'EndTransaction'"
    before, after = "trace_type = 'SubBefore'", "trace_type = 'SubAfter'"
    is_sub = f"({before} OR {after})"
    # The first Pub: successful attempts first, then by time.
    first = ("min_by(struct(topic, `group`, store_host, timestamp, store_time, msg_type, tags, keys), "
             f"CASE WHEN {is_pub} THEN named_struct('f', NOT success, 't', timestamp) END) AS p")  # fmt: skip
    # ``h`` (a hash of msg_id) leads the grouping keys so that the sort behind the aggregation orders by a
    # long: msg ids of one broker share their first 8 bytes (its address), the prefix Spark sorts strings by,
    # so sorting by msg_id first compared whole strings (5 M records: 24-29 s -> 17 s for shuffle and sort).
    # ``rh``: the request id's hash, computed once per record for the pairing checks (the sort aggregation
    # is not code-generated, so an expression used four times there is evaluated four times).
    keyed = records.where(f"{is_pub} OR {is_tx} OR {is_sub}").selectExpr(
        "*", "xxhash64(msg_id) AS h", f"{is_sub} AS is_sub", f"CASE WHEN {is_sub} THEN `group` END AS sub_group",
        "xxhash64(request_id) AS rh",
    )  # fmt: skip
    parts = int(records.sparkSession.conf.get("spark.sql.shuffle.partitions") or "2")
    aggregates = (
        first, f"count(CASE WHEN {is_pub} THEN 1 END) AS pubs",
        f"max(CASE WHEN {is_pub} THEN CAST(success AS int) END) AS ok",
        f"max_by(CASE WHEN {is_tx} THEN transaction_state END, CASE WHEN {is_tx} THEN timestamp END) AS tx_state",
        f"min(CASE WHEN {before} THEN timestamp END) AS first_before_ts",
        f"count(CASE WHEN {before} THEN 1 END) AS attempts",
        f"max(CASE WHEN {before} THEN retry_times END) AS max_retry",
        f"count(CASE WHEN {after} THEN 1 END) AS afters",
        f"count(CASE WHEN {after} AND success THEN 1 END) AS successes",
        f"count(CASE WHEN {after} AND NOT success THEN 1 END) AS failures",
        f"min(CASE WHEN {after} AND success THEN timestamp END) AS first_success_ts",
        f"min_by(CASE WHEN {before} THEN client_host END, CASE WHEN {before} THEN timestamp END) AS client_host",
        *_pairing_checks(before, after),
    )  # fmt: skip
    m = keyed.repartition(parts, "msg_id").groupBy("h", "msg_id", "is_sub", "sub_group").agg(
        *[F.expr(a) for a in aggregates]
    )
    return m.selectExpr(
        "msg_id", "is_sub", "sub_group", "pubs > 0 AS has_pub",
        *[f"p.`{c}` AS `{c}`" for c in ("topic", "group", "store_host", "timestamp", "store_time", "msg_type", "tags",
                                       "keys")],
        "ok", "tx_state", "first_before_ts", "attempts", "max_retry", "afters", "successes", "failures",
        "first_success_ts", "client_host", f"{_unpaired()} AS unpaired",
    )  # fmt: skip


#: The two 31-bit halves of a request id's hash, summed per (msg_id, group) for SubBefore and SubAfter apart.
_RID_HALVES = ((0, "lo"), (32, "hi"))


def _pairing_checks(before: str, after: str) -> list[str]:
    """Aggregates that tell whether the SubBefores of a (msg_id, group) can all have a SubAfter of the same
    request_id: counts of SubBefores with and without a request_id, of SubAfters with one, and the sums of
    their request ids' hashes (two 31-bit halves, so a long sum cannot overflow)."""
    out = [f"count(CASE WHEN {before} AND request_id IS NULL THEN 1 END) AS rb_null",
           f"count(CASE WHEN {before} AND request_id IS NOT NULL THEN 1 END) AS rb_n",
           f"count(CASE WHEN {after} AND request_id IS NOT NULL THEN 1 END) AS ra_n"]  # fmt: skip
    for shift, half in _RID_HALVES:
        part = f"shiftrightunsigned(rh, {shift}) & 2147483647"
        out.append(f"sum(CASE WHEN {before} AND request_id IS NOT NULL THEN {part} END) AS rb_{half}")
        out.append(f"sum(CASE WHEN {after} AND request_id IS NOT NULL THEN {part} END) AS ra_{half}")
    return out


def _unpaired() -> str:
    """True when some SubBefore of the group may lack its SubAfter: one without a request_id or a msg_id (these
    never pair), or SubBefore and SubAfter request ids that differ as multisets (different counts or hash
    sums). Equal multisets mean every SubBefore has a SubAfter; different ones with equal counts and equal
    62-bit hash sums are missed with a probability of about 2^-62 (xxhash64 spreads request ids evenly)."""
    differ = " OR ".join(["rb_n != ra_n", *(f"coalesce(rb_{half}, 0) != coalesce(ra_{half}, 0)" for _, half in _RID_HALVES)])
    return f"(is_sub AND (rb_null > 0 OR msg_id IS NULL OR {differ}))"


def pub_messages(records: DataFrame, bucket_ms: int, messages: DataFrame | None = None) -> DataFrame:
    """One row per Pub msg_id: topic, producer group, store host, pub_ts (first successful Pub, else first
    Pub), store_time, stored (any Pub succeeded), msg_type, tags, keys, tx_state (last EndTransaction) and
    ``consumable`` (stored, and for a transactional half message, committed). ``messages``: the
    ``message_summary(records)`` already computed (``records`` is then not read)."""
    m = messages if messages is not None else message_summary(records)
    out = m.where(~F.col("is_sub") & F.col("has_pub")).select(
        "msg_id",
        "topic",
        F.col("group").alias("producer_group"),
        "store_host",
        F.col("timestamp").alias("pub_ts"),
        "store_time",
        (F.col("ok") == 1).alias("stored"),
        "msg_type",
        "tags",
        "keys",
        "tx_state",
    )
    consumable = F.col("stored") & (
        (F.coalesce(F.col("msg_type"), F.lit(0)) != 1) | (F.col("tx_state") == "COMMIT_MESSAGE")
    )
    return out.withColumn("consumable", F.coalesce(consumable, F.lit(False))).withColumn(
        "bucket", _bucket("pub_ts", bucket_ms)
    )


def deliveries(records: DataFrame, messages: DataFrame | None = None) -> DataFrame:
    """One row per (msg_id, group) with SubBefore/SubAfter records: first_before_ts, attempts (SubBefore
    count), max_retry, afters, successes, failures, first_success_ts, client_host (of the first SubBefore)."""
    m = messages if messages is not None else message_summary(records)
    return m.where(F.col("is_sub")).select(
        "msg_id", F.col("sub_group").alias("group"), "first_before_ts", "attempts", "max_retry", "afters",
        "successes", "failures", "first_success_ts", "client_host",
    )  # fmt: skip


def subscriptions(pubs: DataFrame, dels: DataFrame) -> DataFrame:
    """Distinct (topic, group): a group subscribes to a topic if it consumed any message of it."""
    return pubs.select("msg_id", "topic").join(dels.select("msg_id", "group"), "msg_id").select("topic", "group").distinct()


def dead_letter_marks(records: DataFrame) -> DataFrame:
    """(msg_id, group) of records on a ``%DLQ%<group>`` topic."""
    return (
        records.where(F.col("topic").startswith(DLQ_PREFIX))
        .select("msg_id", F.expr(f"substring(topic, {len(DLQ_PREFIX) + 1})").alias("group"))
        .distinct()
    )


def message_group_facts(
    pubs: DataFrame, dels: DataFrame, dlq: DataFrame, max_reconsume_times: int = 16
) -> DataFrame:
    """Every consumable message x every group subscribed to its topic, with its delivery summary.

    consumed = a successful SubAfter; retried = a retry_times > 0 or a failed SubAfter; dead_lettered =
    not consumed and (max_retry >= max_reconsume_times or a %DLQ% record); lag and e2e as in the module doc.
    """
    subs = subscriptions(pubs, dels)
    base = pubs.where("consumable").join(F.broadcast(subs), "topic")  # a few (topic, group) rows
    # The sort-merge joins lead with a hash of msg_id (see message_summary): sorting by a long, not by msg
    # ids that share their first 8 bytes (5 M records: this join 12.9-13.8 s -> 8.6 s).
    keys = ["h", "msg_id", "group"]
    j = _hashed(base).join(_hashed(dels), keys, "left").join(
        _hashed(dlq).withColumn("dlq_mark", F.lit(True)), keys, "left"
    )
    consumed = F.coalesce(F.col("successes"), F.lit(0)) > 0
    return j.select(
        "msg_id", "topic", "group", "bucket", "pub_ts", "store_time", "producer_group", "store_host",
        "first_before_ts", F.coalesce("attempts", F.lit(0)).alias("attempts"), "max_retry",
        F.coalesce("afters", F.lit(0)).alias("afters"), F.coalesce("successes", F.lit(0)).alias("successes"),
        F.coalesce("failures", F.lit(0)).alias("failures"), "first_success_ts", "client_host",
        consumed.alias("consumed"),
        ((F.coalesce("max_retry", F.lit(0)) > 0) | (F.coalesce("failures", F.lit(0)) > 0)).alias("retried"),
        (~consumed & ((F.coalesce("max_retry", F.lit(-1)) >= max_reconsume_times) | F.col("dlq_mark").isNotNull()))
        .alias("dead_lettered"),
        (F.col("first_before_ts") - F.col("store_time")).alias("lag"),
        (F.col("first_success_ts") - F.col("pub_ts")).alias("e2e"),
    )  # fmt: skip


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


def unpaired_msg_ids(messages: DataFrame) -> DataFrame:
    """The msg_ids (one column, distinct) that ``message_summary`` marks ``unpaired``: the only ones that
    can have a SubBefore without its SubAfter (see ``stuck_unfinished``)."""
    return messages.where("unpaired").select("msg_id").distinct()


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
