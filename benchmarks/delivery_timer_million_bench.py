"""A million pending timers: broker memory while they wait, and the broker's restart time.

The broker runs in its own process. This process sends N messages (default 1,000,000; 16-byte bodies, 128 in
flight) whose ``TIMER_DELIVER_MS`` is spread uniformly over the next 30 days, waits until the timer has filed
them all (its checkpoint's enqueueOffset reaches N), samples memory, restarts the broker (SIGINT, then a new
process) and times the restart until a send is answered (the timer opens before the broker serves requests),
then samples memory again.

    python benchmarks/delivery_timer_million_bench.py [--messages 1000000] [--port 30931]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from delivery_common import memory, pipeline_send, send_frame, start_broker, stop_broker  # noqa: E402

from mq.common import properties as P  # noqa: E402

DAY_MS = 86_400_000


def checkpoint(root: str) -> dict:
    try:
        return json.loads((Path(root) / "data" / "timer" / "checkpoint.json").read_text())
    except (OSError, ValueError):
        return {}


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--port", type=int, default=30931)
    args = ap.parse_args()
    n = args.messages
    root = tempfile.mkdtemp(prefix="mq-bench-timer1m-")
    proc = start_broker(args.port, root)
    try:
        ps = psutil.Process(proc.pid)
        idle = memory(ps, root)
        now = int(time.time() * 1000)
        rnd = random.Random(11)
        body = b"y" * 16

        def make(i: int) -> bytes:
            at = now + 60_000 + int(rnd.random() * 30 * DAY_MS)
            props = P.encode_properties({P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}", "TIMER_DELIVER_MS": str(at)})
            return send_frame("TimerMillion", props, body)

        secs, errors = asyncio.run(pipeline_send(args.port, make, n, inflight=128))
        print(f"sent {n:,} timer messages in {secs:.1f} s ({n / secs:,.0f}/s), errors {errors}", flush=True)
        t0 = time.monotonic()
        while checkpoint(root).get("enqueueOffset", 0) < n and time.monotonic() - t0 < 300:
            time.sleep(0.5)
        print(f"timer filed them {time.monotonic() - t0:.1f} s after the last send: {checkpoint(root)}", flush=True)
        time.sleep(2.0)
        pending = memory(ps, root)
        buckets = Path(root) / "data" / "timer" / "buckets"
        nfiles = sum(1 for _ in buckets.iterdir())
        print(f"broker memory with {n:,} pending: RSS {pending[0]:.1f} MiB, without store mappings "
              f"{pending[1]:.1f} MiB (idle before: {idle[1]:.1f} MiB); timer files {nfiles} buckets, "
              f"{dir_size(buckets) / 2**20:.1f} MiB", flush=True)
        t1 = time.monotonic()
        stop_broker(proc)
        stopped = time.monotonic() - t1
        t2 = time.monotonic()
        proc = start_broker(args.port, root)
        asyncio.run(pipeline_send(args.port, lambda i: send_frame("TimerMillion", "", body), 1, inflight=1))
        restart = time.monotonic() - t2
        ps = psutil.Process(proc.pid)
        time.sleep(2.0)
        after = memory(ps, root)
        print(f"restart: stop {stopped:.2f} s, start until the first send is answered {restart:.2f} s; memory "
              f"after restart: RSS {after[0]:.1f} MiB, without store mappings {after[1]:.1f} MiB; "
              f"checkpoint {checkpoint(root)}", flush=True)
    finally:
        stop_broker(proc)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
