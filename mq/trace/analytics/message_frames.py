"""The per-message frames behind ``mq trace analyze``'s report tables (``transforms``), and the input's window.

Input is the flat record frame of ``schema.py``. The building blocks:

- ``message_summary``: ``pub_messages`` and ``deliveries`` in one aggregation (the job caches it);
- ``pub_messages``: one row per published msg_id (a producer may send one id more than once);
- ``deliveries``: one row per (msg_id, consumer group) summarising its SubBefore/SubAfter records;
- ``subscriptions``: which groups consume which topic (groups seen consuming any message of it);
- ``message_group_facts``: every consumable message x every group subscribed to its topic, with its
  delivery summary; most report sections aggregate this frame.

Time conventions (``transforms`` has them too): epoch ms; Pub "store time" is the client's estimate
``timestamp + cost_time / 2`` (TRACE.md §6.1); buckets are ``ts - ts % bucket_ms`` of the Pub timestamp.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

DLQ_PREFIX = "%DLQ%"


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


def unpaired_msg_ids(messages: DataFrame) -> DataFrame:
    """The msg_ids (one column, distinct) that ``message_summary`` marks ``unpaired``: the only ones that
    can have a SubBefore without its SubAfter (see ``stuck_unfinished``)."""
    return messages.where("unpaired").select("msg_id").distinct()
