"""Sends/s from RocketMQ's own benchmark producer (``org.apache.rocketmq.example.benchmark.Producer``, the tool
behind the issue's "24,000 sends/s with 16 threads" for the Java broker) against ``mq``.

The name server and broker run as ``mq namesrv start`` / ``mq broker start`` (own processes, temporary store);
the Java producer runs in its own JVM with ``-w THREADS -s SIZE -t BenchmarkTest``, each thread sending
synchronously. It prints "Send TPS" every 10 s; the first ``--warmup`` seconds (JIT, route discovery) are left
out. Prints the steady rate, the producer's average RT, and the broker process's CPU per message.

    python benchmarks/java_producer_bench.py [--seconds 90] [--warmup 30] [--threads 16] [--size 1024]
        [--flush ASYNC_FLUSH|SYNC_FLUSH] [--classpath CP] [--broker mq|rocketmq]

The classpath must hold rocketmq-example and rocketmq-client 4.9.x with their dependencies (default
``$MQ_JAVA_BENCH_CLASSPATH``), e.g. from ``mvn dependency:build-classpath`` on ``rocketmq-example``.

``--broker rocketmq`` runs the same producer against Apache RocketMQ's own name server and broker instead
(``bench_daemons.brokers``), so the reference figure can be measured in the same hour as ours on this shared
machine.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time

import psutil

from bench_daemons import BROKER_KINDS, brokers
from machine import CpuWindow

_TPS = re.compile(r"Send TPS: *(\d+) .*Average RT\(ms\): *([\d.]+) .*Send Failed: *(\d+)")


def cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--warmup", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    ap.add_argument("--classpath", default=os.environ.get("MQ_JAVA_BENCH_CLASSPATH", ""))
    ap.add_argument("--broker", default="mq", choices=BROKER_KINDS,
                    help="whose name server and broker to measure")
    a = ap.parse_args()
    if not a.classpath:
        raise SystemExit("give --classpath or MQ_JAVA_BENCH_CLASSPATH (rocketmq-example + rocketmq-client 4.9.x)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with brokers(a.broker, a.flush) as (ns, broker):
        java = subprocess.Popen(["java", "-cp", a.classpath, "org.apache.rocketmq.example.benchmark.Producer",
                                 "-n", ns, "-w", str(a.threads), "-s", str(a.size), "-t", "BenchmarkTest"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        start = time.monotonic()
        windows: list[tuple[int, float, int]] = []
        c0 = None
        try:
            for line in java.stdout:
                m = _TPS.search(line)
                if not m:
                    continue
                elapsed = time.monotonic() - start
                if elapsed < a.warmup:
                    print(f"  warm-up   {line.strip()}", flush=True)
                    continue
                if c0 is None:  # the first line after the warm-up starts the measured windows
                    c0, t0 = cpu(broker), time.monotonic()
                    window = CpuWindow().__enter__()
                    continue
                windows.append((int(m.group(1)), float(m.group(2)), int(m.group(3))))
                print(f"  measured  {line.strip()}", flush=True)
                if elapsed >= a.seconds:
                    break
            c1, t1 = cpu(broker), time.monotonic()
            window.stop()
        finally:
            java.terminate()
            java.wait(30)
    if not windows:
        raise SystemExit("the producer printed no TPS line after the warm-up")
    sent = sum(tps for tps, _, _ in windows) * 10  # each line covers 10 s
    rate = sent / (10 * len(windows))
    rt = sum(r for _, r, _ in windows) / len(windows)
    print(f"{a.broker} broker, {a.flush}: RocketMQ benchmark Producer, {a.threads} threads, {a.size} B: {rate:,.0f} sends/s "
          f"(steady, {len(windows)} x 10 s), average RT {rt:.2f} ms, send failures {windows[-1][2]} in all; "
          f"broker CPU {(c1 - c0) / max(sent, 1) * 1e6:.1f} us/msg, {(c1 - c0) / (t1 - t0):.2f} cores", flush=True)
    print(window.summary(), flush=True)


if __name__ == "__main__":
    main()
