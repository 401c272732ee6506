"""The job's SparkSession and the SQL settings it sizes to the input; its start-up times for the report."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from mq.trace.spark_submit import SMALL_INPUT_BYTES

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
    """The session spark-submit configured, with the settings every trace job wants."""
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


#: Input bytes (Parquet, as Spark estimates them) per shuffle partition, up to one partition per core.
PARTITION_BYTES = 16 << 20


def input_bytes(frame: DataFrame) -> int:
    """Spark's estimate of the bytes ``frame`` reads (the Parquet files of its scan, no job run)."""
    size = frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()  # a scala BigInt
    return size if isinstance(size, int) else int(size.toString())


def size_to_input(spark: SparkSession, frame: DataFrame, shuffle_partitions: int = 0) -> None:
    """Shuffle partitions, adaptive execution and code generation sized to the input ``frame``, for the
    settings neither spark-submit nor ``--shuffle-partitions`` gave: a partition per PARTITION_BYTES, at most one
    per core (at least 2, as ``job.main`` sets before the size is known). A small input (SMALL_INPUT_BYTES) gets one
    partition, no adaptive execution and no generated code (SMALL_INPUT_SQL). Every shuffle of a small report
    is then a single task, a global sort needs no sampling job, and a query is one Spark job instead of one
    per stage; measured on the 2-core machine, a 100-record report's user CPU fell by 3 s, and by 2 s more
    without code generation."""
    conf = spark.sparkContext.getConf()
    size = input_bytes(frame)
    small = size <= SMALL_INPUT_BYTES
    if not shuffle_partitions and not conf.contains("spark.sql.shuffle.partitions"):
        cores = max(2, spark.sparkContext.defaultParallelism)
        parts = 1 if small else max(1, min(cores, -(-size // PARTITION_BYTES)))
        spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    if small:
        small_sql(spark)


def small_sql(spark: SparkSession) -> None:
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


def process_start_ms() -> int | None:
    """When this Python process started (epoch ms), before its imports."""
    try:
        import psutil

        return int(psutil.Process().create_time() * 1000)
    except Exception:  # noqa: BLE001 - a diagnostic only
        return None


def jvm_start_ms(spark: SparkSession) -> int | None:
    """When the driver's JVM started (epoch ms); None if the JVM does not say."""
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        return int(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime())
    except Exception:  # noqa: BLE001 - a diagnostic only
        return None
