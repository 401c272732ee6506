"""Index service throughput: build_index/s and query/s with 1M keys (prints figures; asserts nothing).

    /work/venv/bin/python benchmarks/store_index_bench.py [--keys 1000000] [--queries 200000]

Uses RocketMQ's default file geometry (5M slots, 20M entries: one sparse 420 MB file) in a temporary
directory unless --dir is given. Messages carry one key each (``order-<i>``) in the first pass and a uniq key
plus two keys in the second; queries look up random existing keys over the whole time range.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from mq.store.index_hash import _java_string_hash
from mq.store.index_service import IndexService

T0 = 1_700_000_000_000


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>12,.0f}/s  ({seconds * 1e6 / n:6.2f} us each)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200_000)
    ap.add_argument("--slots", type=int, default=5_000_000)
    ap.add_argument("--index-num", type=int, default=20_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mq-index-bench-", dir=args.dir))
    n = args.keys
    try:
        keys = [f"TopicTest#order-{i:09d}" for i in range(n)]
        t = time.perf_counter()
        for k in keys:
            _java_string_hash(k)
        print(f"java String.hashCode (26-char keys)     {_rate(n, time.perf_counter() - t)}")

        svc = IndexService(root, max_hash_slot_num=args.slots, max_index_num=args.index_num)
        svc.load(True)
        build = svc.build_index
        t = time.perf_counter()
        for i in range(n):
            build("TopicTest", f"order-{i:09d}", None, i * 200, T0 + i)
        dt = time.perf_counter() - t
        print(f"build_index, 1 key per message          {_rate(n, dt)}")

        t = time.perf_counter()
        svc.flush()
        print(f"flush after {n:,} entries                {time.perf_counter() - t:8.3f} s")

        rnd = random.Random(7)
        picks = [rnd.randrange(n) for _ in range(args.queries)]
        query = svc.query
        t = time.perf_counter()
        found = 0
        for i in picks:
            found += len(query("TopicTest", f"order-{i:09d}", 32, 0, 2**62))
        dt = time.perf_counter() - t
        print(f"query (hit, max_num 32)                 {_rate(len(picks), dt)}  [{found:,} found]")

        t = time.perf_counter()
        for i in picks:
            query("TopicTest", f"absent-{i:09d}", 32, 0, 2**62)
        print(f"query (miss)                            {_rate(len(picks), time.perf_counter() - t)}")

        records = {i * 200: ("TopicTest", [f"order-{i:09d}"]) for i in picks}
        t = time.perf_counter()
        for i in picks:
            svc.query_verified("TopicTest", f"order-{i:09d}", 32, 0, 2**62, records.get)
        print(f"query_verified (dict read_keys)         {_rate(len(picks), time.perf_counter() - t)}")
        files = len(svc.files)
        svc.close()

        shutil.rmtree(root / "index")
        svc = IndexService(root, max_hash_slot_num=args.slots, max_index_num=args.index_num)
        svc.load(True)
        m = n // 3
        build = svc.build_index
        t = time.perf_counter()
        for i in range(m):
            build("TopicTest", f"order-{i:09d} user-{i % 1000}", f"7F00000100002A9F0000{i:012X}", i * 200, T0 + i)
        dt = time.perf_counter() - t
        print(f"build_index, uniq + 2 keys ({m:,} msgs) {_rate(m, dt)} = {3 * m / dt:,.0f} entries/s")
        t = time.perf_counter()
        hot = svc.query("TopicTest", "user-7", 32, 0, 2**62)
        print(f"query of a key shared by {m // 1000:,} msgs     {(time.perf_counter() - t) * 1e3:8.3f} ms "
              f"for {len(hot)} offsets")
        svc.close()
        print(f"files: {files} (slots={args.slots:,}, index-num={args.index_num:,})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
