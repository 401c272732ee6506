"""CPU cost of the Python client per message: a producer with 16 sends in flight, then a push consumer draining
what it sent. The name server and broker run as their own processes (``bench_daemons.daemons``); this process is
the client, and its ``time.process_time`` (every thread) per message is the figure, with the rate reached.

    python benchmarks/client_cpu_bench.py [--messages 20000] [--size 1024] [--inflight 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

from bench_daemons import daemons

TOPIC = "BenchClientCpu"


async def measure(ns: str, n: int, size: int, inflight: int) -> None:
    from mq.client.consumer import PushConsumer
    from mq.client.hooks import ConsumeStatus
    from mq.client.producer import Producer
    from mq.common.message import Message
    from mq.config import ClientConfig, ConsumerConfig, ProducerConfig

    producer = Producer(ProducerConfig(group="bench_cpu_p"),
                        ClientConfig(namesrv_addr=ns, instance_name="bench_cpu_p", client_ip="127.0.0.1"))
    await producer.start()
    body = b"x" * size
    await producer.send(Message(TOPIC, body))  # route lookup and connection outside the measurement

    async def sender(count: int) -> None:
        for _ in range(count):
            await producer.send(Message(TOPIC, body))

    per = n // inflight
    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(sender(per) for _ in range(inflight)))
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    sent = per * inflight
    print(f"producer, {inflight} in flight: {cpu / sent * 1e6:6.1f} us CPU/send   {sent / wall:9,.0f} sends/s",
          flush=True)
    await producer.shutdown()

    got = 0
    done = asyncio.Event()
    want = sent + 1

    def listener(msgs, ctx):
        nonlocal got
        got += len(msgs)
        if got >= want:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(ConsumerConfig(group="bench_cpu_c", consume_from_where="FIRST"), listener,
                            ClientConfig(namesrv_addr=ns, instance_name="bench_cpu_c", client_ip="127.0.0.1"))
    consumer.subscribe(TOPIC)
    c0, t0 = time.process_time(), time.perf_counter()
    await consumer.start()
    await asyncio.wait_for(done.wait(), 300)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    print(f"push consumer, draining {got:,}: {cpu / got * 1e6:6.1f} us CPU/msg   {got / wall:9,.0f} msgs/s",
          flush=True)
    await consumer.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--inflight", type=int, default=16)
    a = ap.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with daemons() as (ns, env):
        subprocess.run([sys.executable, "-m", "mq.cli.main", "-n", ns, "updateTopic", "-t", TOPIC, "-c",
                        "DefaultCluster", "-r", "4", "-w", "4"], env=env, check=True, capture_output=True)
        from mq.remoting import run

        run(measure(ns, a.messages, a.size, a.inflight))


if __name__ == "__main__":
    main()
