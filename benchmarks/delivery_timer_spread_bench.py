"""Arbitrary delay under load: N messages with deliver times spread uniformly over a window; broker memory and
delivery lateness.

The broker runs in its own process; this process sends N messages (``TIMER_DELIVER_MS``, 100-byte bodies,
64 in flight on one connection), samples the broker's memory (RSS without the store's mapped files) every
2 s until every deliver time has passed plus a few seconds, stops the broker, and reads the store offline:
lateness = store time of the delivered message in its real topic - its requested deliver time, i.e. when it
became visible to consumers. Deliver times start ``--lead`` seconds after the start, after the send is over.

    python benchmarks/delivery_timer_spread_bench.py [--messages 100000] [--spread 600] [--port 30921]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from delivery_common import memory, pipeline_send, send_frame, start_broker, stop_broker  # noqa: E402

from mq.common import properties as P  # noqa: E402


def read_lateness(root: str, topic: str) -> tuple[list[int], int, int]:
    from mq.common.record import decode_record
    from mq.config import StoreConfig
    from mq.store.message_store import MessageStore

    store = MessageStore(StoreConfig(store_path_root_dir=str(Path(root) / "data"),
                                     mapped_file_size_commit_log=268435456))
    store.load()
    late, n, parked = [], 0, 0
    try:
        for q in range(4):
            off = 0
            while True:
                r = store.get_message("bench", topic, q, off, 32)
                if not r.buffers:
                    break
                for b in r.buffers:
                    m = decode_record(b)
                    late.append(m.store_timestamp - int(m.properties["BENCH_AT"]))
                    n += 1
                    parked += "TIMER_OUT_MS" in m.properties
                off = r.next_begin_offset
    finally:
        store.shutdown()
    return late, n, parked


def pct(xs: list[int], p: float) -> int:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--spread", type=float, default=600.0, help="seconds over which deliver times are spread")
    ap.add_argument("--lead", type=float, default=45.0,
                    help="seconds before the first deliver time (longer than the send takes)")
    ap.add_argument("--port", type=int, default=30921)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="mq-bench-timer-")
    proc = start_broker(args.port, root)
    ps = psutil.Process(proc.pid)
    try:
        base_rss = memory(ps, root)
        t0 = int(time.time() * 1000) + int(args.lead * 1000)
        rnd = random.Random(7)
        at = [t0 + int(rnd.random() * args.spread * 1000) for _ in range(args.messages)]
        body = b"x" * 100

        def make(i: int) -> bytes:
            props = P.encode_properties({P.TAGS: "T", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}",
                                         "TIMER_DELIVER_MS": str(at[i]), "BENCH_AT": str(at[i])})
            return send_frame("TimerBench", props, body)

        secs, errors = asyncio.run(pipeline_send(args.port, make, args.messages))
        print(f"sent {args.messages:,} timer messages in {secs:.1f} s ({args.messages / secs:,.0f}/s), "
              f"errors {errors}; deliver times spread over {args.spread:.0f} s", flush=True)
        after_send = memory(ps, root)
        samples = [after_send[1]]
        end = max(at) / 1000 + 5
        while time.time() < end:
            time.sleep(2.0)
            samples.append(memory(ps, root)[1])
        final = memory(ps, root)
    finally:
        stop_broker(proc)
    late, n, parked = read_lateness(root, "TimerBench")
    ck = json.loads((Path(root) / "data" / "timer" / "checkpoint.json").read_text())
    print(f"broker memory (RSS without store mappings): idle {base_rss[1]:.1f} MiB, after the send "
          f"{after_send[1]:.1f} MiB, peak while delivering {max(samples):.1f} MiB, end {final[1]:.1f} MiB "
          f"(full RSS at end {final[0]:.1f} MiB)")
    print(f"delivered {n:,}/{args.messages:,} ({parked:,} went through the timer); lateness ms: p50 {pct(late, 50)}, p99 {pct(late, 99)}, "
          f"max {max(late)}, min {min(late)}, mean {statistics.mean(late):.1f}; timer checkpoint {ck}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
