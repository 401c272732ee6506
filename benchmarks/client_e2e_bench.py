"""Client benchmark: a real name server + broker in this process (tmp store), then

1. producer throughput: N concurrent sync sends of SIZE-byte messages (send latency p50/p99);
2. end-to-end latency at a fixed rate (default 5,000 msg/s): born timestamp -> push-consumer callback.

Usage: python benchmarks/client_e2e_bench.py [--seconds 8] [--rate 5000] [--size 128] [--concurrency 64]
Prints figures; asserts nothing. Everything runs on one event loop (uvloop when installed), so the numbers
include the broker's own CPU on the same core.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.client.stats import Stats
from mq.common.message import Message
from mq.config import BrokerConfig, ClientConfig, ConsumerConfig, NamesrvConfig, ProducerConfig, StoreConfig
from mq.remoting import run


async def main(args) -> None:
    from mq.daemon.broker.controller import BrokerController
    from mq.daemon.namesrv.server import NamesrvServer

    tmp = tempfile.mkdtemp(prefix="mq-client-bench-")
    ns = NamesrvServer(NamesrvConfig(host="127.0.0.1", listen_port=0, kv_config_path=f"{tmp}/kv.json"))
    await ns.start()
    broker = BrokerController(BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr=ns.address),
                              store_config=StoreConfig(store_path_root_dir=f"{tmp}/store",
                                                       mapped_file_size_commit_log=256 * 1024 * 1024))
    await broker.start()
    cc = lambda name: ClientConfig(namesrv_addr=ns.address, instance_name=name, client_ip="127.0.0.1")  # noqa
    body = b"x" * args.size
    try:
        producer = await Producer(ProducerConfig(group="bench_p"), cc("p")).start()
        await producer.send(Message("BenchClient", body))
        for _ in range(50):
            try:
                await producer.instance.update_route("BenchClient")
                break
            except Exception:
                await broker.register_all(force=True)
                await asyncio.sleep(0.1)
        # 1. throughput
        st = Stats()
        stop = time.monotonic() + args.seconds

        async def worker():
            while time.monotonic() < stop:
                t0 = time.monotonic()
                await producer.send(Message("BenchClient", body))
                st.record((time.monotonic() - t0) * 1000, len(body))
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        s = st.summary()
        print(f"sync send, {args.concurrency} in flight, {args.size} B: {s['per_second']} msg/s, "
              f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms ({s['ok']} msgs)")

        # 2. end-to-end latency at a fixed rate
        e2e = Stats()

        def listener(msgs, ctx):
            now = time.time() * 1000
            for m in msgs:
                if m.topic == "BenchE2E":
                    e2e.record(now - m.born_timestamp, len(m.body))
            return ConsumeStatus.CONSUME_SUCCESS

        await producer.send(Message("BenchE2E", body))
        for _ in range(50):
            try:
                await producer.instance.update_route("BenchE2E")
                break
            except Exception:
                await broker.register_all(force=True)
                await asyncio.sleep(0.1)
        consumer = PushConsumer(ConsumerConfig(group="bench_c"), listener, cc("c"))
        consumer.subscribe("BenchE2E")
        await consumer.start()
        await asyncio.sleep(0.5)
        e2e = Stats()
        sent = 0
        t_start = time.monotonic()
        stop = t_start + args.seconds
        send_st = Stats()

        async def paced(k: int, n: int):
            nonlocal sent
            i = k
            while time.monotonic() < stop:
                due = t_start + i / args.rate
                d = due - time.monotonic()
                if d > 0:
                    await asyncio.sleep(d)
                t0 = time.monotonic()
                await producer.send(Message("BenchE2E", body))
                send_st.record((time.monotonic() - t0) * 1000)
                sent += 1
                i += n
        n = 32
        await asyncio.gather(*(paced(k, n) for k in range(n)))
        deadline = time.monotonic() + 10
        while e2e.ok < sent and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        s = e2e.summary()
        ss = send_st.summary()
        print(f"end-to-end at {args.rate:.0f} msg/s target: sent {sent} ({sent / args.seconds:.0f}/s), received "
              f"{e2e.ok}; born->callback p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms; "
              f"send p50 {ss['p50_ms']} ms p99 {ss['p99_ms']} ms")
        await consumer.shutdown()
        await producer.shutdown()
    finally:
        await broker.stop()
        await ns.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=64)
    run(main(ap.parse_args()))
