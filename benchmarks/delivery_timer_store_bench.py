"""The timer's own structure at scale, in process (no broker, no commit log): file N pending entries, checkpoint,
reopen, load the near window; time and memory of each step.

Fire times are spread uniformly over the 2-day roll window (what 1 M deliver times over 30 days become once
filed by deliver time modulo the window). Memory is the Python heap growth (tracemalloc) of the reopened store.

    python benchmarks/delivery_timer_store_bench.py [--entries 1000000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mq.daemon.broker.timer.buckets import TimerStore  # noqa: E402

ROLL_MS = 2 * 86_400_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=20_000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mq-bench-timerstore-"))
    now = int(time.time() * 1000)
    rnd = random.Random(3)
    try:
        s = TimerStore(root, precision_ms=100, bucket_span_ms=60_000)
        s.open(now)
        t0 = time.perf_counter()
        for b in range(0, args.entries, args.batch):
            n = min(args.batch, args.entries - b)
            s.add([(now + 1 + int(rnd.random() * ROLL_MS), 1000 + i, 200, b + i) for i in range(n)], b + n)
        t_add = time.perf_counter() - t0
        t0 = time.perf_counter()
        s.checkpoint()
        t_ck = time.perf_counter() - t0
        files = sum(1 for _ in (root / "buckets").iterdir())
        size = sum(f.stat().st_size for f in (root / "buckets").iterdir())
        del s
        tracemalloc.start()
        t0 = time.perf_counter()
        r = TimerStore(root, precision_ms=100, bucket_span_ms=60_000)
        r.open(now)
        t_open = time.perf_counter() - t0
        t0 = time.perf_counter()
        r.load_ahead(now)
        t_load = time.perf_counter() - t0
        heap, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"filed {args.entries:,} entries in {t_add:.2f} s ({args.entries / t_add:,.0f}/s) into {files} bucket "
              f"files ({size / 2**20:.1f} MiB); checkpoint (fsync of every file) {t_ck:.2f} s")
        print(f"reopen {t_open * 1e3:.0f} ms, load of the near window {t_load * 1e3:.1f} ms ({r.in_memory} entries "
              f"in memory); Python heap of the reopened store {heap / 2**20:.2f} MiB (peak {peak / 2**20:.2f} MiB), "
              f"pending {r.pending():,}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
