"""End-to-end latency, send -> push-consumer callback, at a fixed rate, with every party in its own process.

The name server and the broker run as `mq namesrv start` / `mq broker start`; the producer (the load generator)
is a separate Python process sending 1 KB messages at ``--rate`` msg/s; this process runs the push consumer and
measures, per message, the time from the producer's born timestamp to the listener callback (one machine, one
clock), split at the broker's store timestamp (millisecond clocks, so each part is ±1 ms). Prints p50/p99/max and
the rate actually reached.

    python benchmarks/e2e_latency_bench.py [--rate 5000] [--seconds 20] [--size 1024] [--loop-lag]
        [--broker mq|rocketmq]

``--loop-lag`` also runs a probe in the consumer's event loop (a 1 ms sleep, timed, over and over) and prints how
late it woke: stalls of the consumer process itself (CPU shared with the broker and the producer on a 2-core
machine) rather than of the path a message takes.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from bench_daemons import BROKER_KINDS, brokers, percentile as pct
from machine import CpuWindow

PRODUCER = r'''
import asyncio, sys, time
from mq.client.producer import Producer
from mq.common.message import Message
from mq.config import ClientConfig, ProducerConfig
from mq.remoting import run

ns, topic, rate, seconds, size = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])

async def main():
    p = await Producer(ProducerConfig(group="bench_e2e_p"), ClientConfig(namesrv_addr=ns, instance_name="e2ep",
                                                                        client_ip="127.0.0.1")).start()
    body = b"x" * size
    await p.send(Message(topic, body))
    sent, failed = 0, 0
    start = time.monotonic()
    pending = set()
    i = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            break
        due = int((now - start) * rate) - i          # messages owed by now
        for _ in range(min(due, 256)):
            fut = asyncio.ensure_future(p.send(Message(topic, body)))
            pending.add(fut)
            fut.add_done_callback(pending.discard)
            i += 1
        await asyncio.sleep(0.001)
    if pending:
        done, _ = await asyncio.wait(pending, timeout=30)
        failed = sum(1 for f in done if f.exception() is not None)
    await p.shutdown()
    print(f"SENT {i} FAILED {failed} SECONDS {time.monotonic() - start:.2f}", flush=True)

run(main())
'''


async def consume(ns: str, topic: str, args, lat: list[float]) -> None:
    from mq.client.consumer import PushConsumer
    from mq.client.hooks import ConsumeStatus
    from mq.config import ClientConfig, ConsumerConfig

    def listener(msgs, ctx):
        now = time.time() * 1000
        lat.extend(now - m.born_timestamp for m in msgs)
        split.extend((m.store_timestamp - m.born_timestamp, now - m.store_timestamp) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    split: list[tuple[float, float]] = []

    c = PushConsumer(ConsumerConfig(group="bench_e2e_c", consume_from_where="FIRST"), listener,
                     ClientConfig(namesrv_addr=ns, instance_name="e2ec", client_ip="127.0.0.1"))
    c.subscribe(topic)
    await c.start()
    lags: list[float] = []

    async def probe() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - t - 0.001) * 1000)

    prober = asyncio.ensure_future(probe()) if args.loop_lag else None
    window = CpuWindow().__enter__()
    prod = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PRODUCER, ns, topic, str(args.rate), str(args.seconds), str(args.size),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await prod.communicate()
    line = out.decode().strip().splitlines()[-1]
    sent = int(line.split()[1])
    deadline = time.monotonic() + 30
    while len(lat) < sent and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    window.stop()
    if prober is not None:
        prober.cancel()
    await c.shutdown()
    print(f"producer: {line}")
    warm = lat[len(lat) // 20:]  # drop the first 5 % (route discovery, rebalance)
    print(f"end to end, 1 producer process -> {args.broker} broker process -> push consumer, {args.size} B at "
          f"{args.rate:,.0f} msg/s offered: {sent / args.seconds:,.0f} msg/s sent, {len(lat)} received")
    print(f"  born -> callback p50 {pct(warm, 50):.1f} ms   p99 {pct(warm, 99):.1f} ms   max {max(warm):.1f} ms")
    parts = split[len(split) // 20:]
    for i, name in ((0, "born -> stored"), (1, "stored -> callback")):
        v = [x[i] for x in parts]
        print(f"    {name:18s} p50 {pct(v, 50):.1f} ms   p99 {pct(v, 99):.1f} ms   max {max(v):.1f} ms")
    if lags:
        print(f"  consumer loop lag (1 ms sleeps, {len(lags)}): p50 {pct(lags, 50):.2f} ms   p99 {pct(lags, 99):.2f} ms"
              f"   max {max(lags):.2f} ms")
    print(f"  {window.summary()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--loop-lag", action="store_true", help="probe the consumer's event-loop stalls")
    ap.add_argument("--broker", default="mq", choices=BROKER_KINDS,
                    help="whose name server and broker carry the messages (rocketmq: RocketMQ's own)")
    args = ap.parse_args()
    with brokers(args.broker) as (ns, _broker):
        subprocess.run([sys.executable, "-m", "mq.cli.main", "-n", ns, "updateTopic", "-t", "BenchE2E", "-c",
                        "DefaultCluster", "-r", "4", "-w", "4"], check=True, capture_output=True)
        from mq.remoting import run

        lat: list[float] = []
        run(consume(ns, "BenchE2E", args, lat))


if __name__ == "__main__":
    main()
