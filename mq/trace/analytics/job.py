"""The spark-submit entry point of ``mq trace analyze`` and ``mq trace export``.

    python job.py --input-format {live,parquet,raw} [--input PATH] [--namesrv ADDRS --trace-topic T]
                  --since-ms MS --until-ms MS [--grace-ms MS] [--bucket-ms MS] [--max-reconsume-times N]
                  [--top N] [--top-ids N] [--no-compare] [--chunk-messages N]
                  [--mode {analyze,export}] [--archive URI] --out DIR

Inputs (``readers.py``): ``live`` pulls the trace topic from the brokers (``live_reader``: the driver
plans per-queue offset ranges, each task pulls its chunks); ``parquet`` is an archive written by
``--mode export``; ``raw`` is JSONL trace bodies (tests, offline benchmark).

``--mode analyze`` (``analysis.py``) writes every report table under ``DIR/tables/<name>/`` (Parquet) and
``DIR/csv/<name>.csv``, and ``DIR/report.json``. ``--mode export`` (``archive_export.py``) appends decoded
records to ``--archive`` partitioned by ``date``/``hour`` and advances the per-queue cursors stored with it
(``_mq_cursors.json``), so a re-run fetches only what is new; it writes ``DIR/export.json``. Ranges that could
not be read are listed under ``missing`` in both, never skipped silently. Progress goes to stderr as
``MQTRACE stage=<name> elapsed=<seconds>`` lines (``stage_progress.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

from mq.trace.analytics.pyspark_path import prefer_installed_pyspark

prefer_installed_pyspark(sys.path)  # before pyspark is imported

from mq.trace.analytics.analysis import SCRATCH_DIR, analyze  # noqa: E402
from mq.trace.analytics.archive_export import export  # noqa: E402
from mq.trace.analytics.session_settings import (  # noqa: E402
    SESSION_DEFAULTS, build_session, jvm_start_ms, process_start_ms,
)
from mq.trace.analytics.stage_progress import Progress  # noqa: E402

DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    session_start_ms = int(time.time() * 1000)
    progress = Progress()
    spark = build_session()
    startup = {"jvm_start_ms": jvm_start_ms(spark), "python_start_ms": process_start_ms(),
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
