"""Benchmark of ``mq trace analyze``: generate N synthetic trace records, export them to a Parquet archive
(date/hour partitions) with job.py --mode export, then time job.py --mode analyze over the archive.

    /work/venv/bin/python benchmarks/trace_analyze_bench.py --records 5000000 --master 'local[2]'

Prints the generation rate, the export rate, the analysis time and the job's own stage timings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from mq.trace.spark_submit import SubmitOptions, run_job
from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate, write_raw_jsonl

#: Trace records per message with the default config (Pub + deliveries to ~1.6 groups + retries ...).
RECORDS_PER_MESSAGE = 4.3


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5_000_000, help="approximate number of trace records")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="3g")
    ap.add_argument("--workdir", default=None, help="keep data here (default: a temporary directory)")
    ap.add_argument("--skip-generate", action="store_true", help="reuse WORKDIR/archive")
    ap.add_argument("--repeat", type=int, default=1, help="analyze the archive this many times (same data)")
    a = ap.parse_args()

    work = Path(a.workdir or tempfile.mkdtemp(prefix="mq-trace-bench-"))
    raw, archive, out = work / "raw", work / "archive", work / "report"
    opts = SubmitOptions(master=a.master, conf={"spark.driver.memory": a.driver_memory})
    messages = int(a.records / RECORDS_PER_MESSAGE)
    # One hour of traffic: ~1,400 messages/s for 5 M records.
    cfg = SyntheticConfig(messages=messages, duration_ms=3_600_000, max_records_per_body=200)
    truth = GroundTruth()
    print(f"workdir {work}; cpus {os.cpu_count()}; load average {_load()}", flush=True)
    if not a.skip_generate:
        shutil.rmtree(raw, ignore_errors=True)
        t0 = time.perf_counter()
        bodies = write_raw_jsonl(generate(cfg, truth), raw, bodies_per_file=20_000)
        gen = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in raw.glob("*.jsonl"))
        print(f"generated {truth.records:,} records in {bodies:,} bodies ({truth.compressed_bodies:,} compressed), "
              f"{size / 1e6:.1f} MB JSONL, in {gen:.1f} s = {truth.records / gen:,.0f} records/s")  # fmt: skip
        t0 = time.perf_counter()
        shutil.rmtree(archive, ignore_errors=True)
        run_job(["--mode", "export", "--input-format", "raw", "--input", str(raw), "--archive", str(archive)],
                work / "export", options=opts)
        exp = time.perf_counter() - t0
        info = json.loads((work / "export" / "export.json").read_text())
        print(f"exported {info['records']:,} records (+{info['malformed_total']:,} malformed) to Parquet in "
              f"{exp:.1f} s = {info['records'] / exp:,.0f} records/s (spark-submit start-up included)")  # fmt: skip
        since, until = cfg.start_ms, truth.max_timestamp + 60_000  # leftovers flush after the last record
    else:
        since, until = cfg.start_ms, cfg.start_ms + 48 * 3_600_000
    for _ in range(a.repeat):
        load_before = _load()
        t0 = time.perf_counter()
        run_job(
            ["--input-format", "parquet", "--input", str(archive), "--since-ms", str(since), "--until-ms",
             str(until), "--grace-ms", "600000"],
            out, options=opts,
        )  # fmt: skip
        total = time.perf_counter() - t0
        report = json.loads((out / "report.json").read_text())
        n = report["records"]["in_window"]
        t = report["timings"]
        print(f"analyzed {n:,} records on {a.master} in {total:.1f} s wall (spark-submit included) = "
              f"{n / total:,.0f} records/s; load average before {load_before}, after {_load()}", flush=True)
        print("job stages (s): " + ", ".join(f"{k} {v:.1f}" for k, v in t.items() if not k.startswith("table:"))
              + f"; report tables {sum(v for k, v in t.items() if k.startswith('table:')):.1f}", flush=True)
    s = report["sections"]
    print(f"found: stuck {s['stuck']['unconsumed_total']:,}, unfinished {s['stuck']['unfinished_total']:,}, "
          f"duplicates {s['duplicates']['total']:,}, malformed {report['records']['malformed_total']:,}")  # fmt: skip
    if truth.records:
        print(f"planted: stuck {len(truth.stuck):,}, unfinished {len(truth.unfinished):,}, "
              f"duplicates {len(truth.duplicated):,}, malformed {truth.malformed:,}")  # fmt: skip
    if a.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
