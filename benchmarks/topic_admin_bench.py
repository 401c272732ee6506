"""Creating thousands of topics one by one (UPDATE_AND_CREATE_TOPIC, as `mq updateTopic` or mqadmin sends it).

Each creation rewrites the broker's topics.json and registers with the name server, so its cost grows with the
table: this prints, for every ``--every`` topics, the mean time per creation (the admin call answered after the
name server has the topic) and the broker's CPU per creation, then checks that the name server routes the last
topic and lists them all. ``--broker rocketmq`` runs the same against Apache RocketMQ 4.9's own name server and
broker (``$MQ_JAVA_BROKER_CLASSPATH``) for the reference figure on this machine.

    python benchmarks/topic_admin_bench.py [--topics 5000] [--every 1000] [--queues 8] [--broker mq|rocketmq]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import psutil

from bench_daemons import BROKER_KINDS, brokers

sys.path.append(str(Path(__file__).resolve().parents[1]))  # an installed or PYTHONPATH mq wins

from mq.client.admin import MQAdmin  # noqa: E402
from mq.protocol.bodies import TopicConfig  # noqa: E402


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


async def run(namesrv: str, broker: psutil.Process, topics: int, every: int, queues: int) -> None:
    async with MQAdmin([namesrv]) as admin:
        addrs = list((await admin.master_addrs()).values())
        if len(addrs) != 1:
            raise SystemExit(f"expected one master broker, the name server knows {addrs}")
        addr = addrs[0]
        before = len(await admin.topic_list())
        start = time.perf_counter()
        t0, c0 = start, _cpu(broker)
        for i in range(topics):
            await admin.create_and_update_topic_config(
                addr, TopicConfig(topic_name=f"BenchAdminT{i:06d}", read_queue_nums=queues, write_queue_nums=queues))
            if (i + 1) % every == 0 or i + 1 == topics:
                t1, c1 = time.perf_counter(), _cpu(broker)
                n = every if (i + 1) % every == 0 else (i + 1) % every
                print(f"topics {i + 1 - n + 1:6,}-{i + 1:6,}: {(t1 - t0) / n * 1e3:7.2f} ms per creation, broker CPU "
                      f"{(c1 - c0) / n * 1e3:6.2f} ms; {t1 - start:6.1f} s so far", flush=True)
                t0, c0 = t1, c1
        total = time.perf_counter() - start
        last = f"BenchAdminT{topics - 1:06d}"
        route = await admin.topic_route(last)
        listed = len(await admin.topic_list())
        print(f"{topics:,} topics created in {total:.1f} s ({topics / total:,.0f}/s); the name server routes {last} "
              f"to {len(route.queue_datas)} broker(s) and lists {listed - before:,} new topics; broker RSS "
              f"{broker.memory_info().rss / 2**20:.0f} MiB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=5000)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--broker", default="mq", choices=BROKER_KINDS, help="whose name server and broker to measure")
    a = ap.parse_args()
    with brokers(a.broker) as (namesrv, broker):
        asyncio.run(run(namesrv, broker, a.topics, max(1, a.every), a.queues))


if __name__ == "__main__":
    main()
