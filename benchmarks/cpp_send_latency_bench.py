"""Sync-send latency of the official C++ client (PyPI rocketmq==0.4.4) against our daemons.

Name server and broker run as their own processes (`mq namesrv start`, `mq broker start`); the C++ producer runs
in a fresh process and sends 1 KB messages one at a time, timing each `send_sync`.

    python benchmarks/cpp_send_latency_bench.py [--count 5000] [--flush ASYNC_FLUSH|SYNC_FLUSH] [--broker mq|rocketmq]

``--broker rocketmq`` measures Apache RocketMQ's own broker instead (``bench_daemons.brokers``), the reference
for the 0.55 ms p50.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from bench_daemons import BROKER_KINDS, brokers, percentile as pct
from machine import CpuWindow

PRODUCER = r'''
import json, sys, time
from rocketmq.client import Message, Producer
ns, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer("PID_CPP_LATENCY")
p.set_namesrv_addr(ns)
p.start()
body = "x" * 1024
def one(i):
    m = Message(topic); m.set_tags("TagA"); m.set_keys(f"k{i}"); m.set_body(body)
    t0 = time.perf_counter(); r = p.send_sync(m); dt = time.perf_counter() - t0
    assert int(r.status) == 0, r.status
    return dt
for i in range(200):
    one(i)
lat = [one(i) for i in range(count)]
p.shutdown()
print(json.dumps({"lat": lat}))
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    ap.add_argument("--broker", default="mq", choices=BROKER_KINDS, help="whose name server and broker to measure")
    args = ap.parse_args()
    with brokers(args.broker, args.flush) as (ns, _broker):
        time.sleep(1.0)
        with CpuWindow() as window:
            out = subprocess.run([sys.executable, "-c", PRODUCER, ns, "CppLatency", str(args.count)],
                                 capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise SystemExit(out.stderr[-2000:])
        lat = json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1])["lat"]
        ms = [x * 1000 for x in lat]
        print(f"C++ client (rocketmq==0.4.4) sync send to the {args.broker} broker, 1 KB, {args.count} sequential "
              f"sends, {args.flush}:")
        print(f"  p50 {pct(ms, 50):.3f} ms   p90 {pct(ms, 90):.3f} ms   p99 {pct(ms, 99):.3f} ms   "
              f"max {max(ms):.3f} ms   ({len(ms) / sum(lat):,.0f} sends/s)")
        print(f"  {window.summary()}")


if __name__ == "__main__":
    main()
