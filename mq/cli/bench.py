"""`mq bench produce|consume`: throughput and latency every few seconds, then a summary (like RocketMQ's
``benchmark/producer.sh`` and ``consumer.sh``)."""

from __future__ import annotations

import time

import click

from mq.cli.common import json_option
from mq.cli.send import client_config


@click.group("bench")
def bench() -> None:
    """Benchmark producing or consuming."""


def _report(console, label: str, s: dict, json_mode: bool) -> None:
    if json_mode:
        console.json({"window": label, **s})
    else:
        console.line(f"[{label}] {s['per_second']:>9} msg/s  {s['mib_per_second']:>7} MiB/s  p50 {s['p50_ms']} ms  "
                     f"p99 {s['p99_ms']} ms  max {s['max_ms']} ms  ok {s['ok']}  failed {s['failed']}")
        for cause, n in s["failures"].items():
            console.line(f"    {n} x {cause}")


@bench.command("produce")
@click.option("-t", "--topic", default="BenchmarkTest", show_default=True, help="Topic.")
@click.option("-s", "--size", type=click.IntRange(min=1), default=128, show_default=True, help="Body size (bytes).")
@click.option("-w", "--concurrency", type=click.IntRange(min=1), default=64, show_default=True,
              help="Sends in flight.")
@click.option("-d", "--duration", type=float, default=20.0, show_default=True, help="Seconds to run.")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many messages.")
@click.option("--tag", default=None, help="Tag of every message.")
@click.option("--rate", type=float, default=None, help="Target messages per second (default: as fast as it goes).")
@click.option("--interval", type=float, default=5.0, show_default=True, help="Seconds between reports.")
@click.option("-g", "--group", default="benchmark_producer", show_default=True, help="Producer group.")
@json_option
@click.pass_obj
def produce(obj, topic, size, concurrency, duration, count, tag, rate, interval, group, json_mode) -> None:
    """Send as fast as possible (or at --rate) and report send latency and throughput."""
    import asyncio

    from mq.cli.console import Console
    from mq.client.producer import Producer
    from mq.client.stats import Stats, cause_of
    from mq.client.sync import build_message
    from mq.common.topic import validate_topic
    from mq.config import ProducerConfig
    from mq.remoting import run

    validate_topic(topic)
    console = Console(json_mode=json_mode)
    body = b"x" * size

    async def main() -> dict:
        producer = await Producer(ProducerConfig(group=group), client_config(obj)).start()
        total, window = Stats(), Stats()
        stop_at = time.monotonic() + duration
        issued = 0
        start = time.monotonic()

        async def worker() -> None:
            nonlocal issued, window
            while time.monotonic() < stop_at and (count is None or issued < count):
                issued += 1
                if rate:
                    delay = start + issued / rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                t0 = time.monotonic()
                try:
                    await producer.send(build_message(topic, body, tags=tag))
                except Exception as exc:
                    total.fail(cause_of(exc))
                    window.fail(cause_of(exc))
                    continue
                ms = (time.monotonic() - t0) * 1000
                total.record(ms, size)
                window.record(ms, size)

        async def reporter() -> None:
            nonlocal window
            while True:
                await asyncio.sleep(interval)
                w, window = window, Stats()
                _report(console, f"{time.monotonic() - start:6.1f}s", w.summary(), json_mode)

        try:
            await producer.fetch_publish_queues(topic)
            rep = asyncio.ensure_future(reporter())
            try:
                await asyncio.gather(*(worker() for _ in range(concurrency)))
            finally:
                rep.cancel()
        finally:
            await producer.shutdown()
        return total.summary()

    s = run(main())
    _report(console, "total", s, json_mode)


@bench.command("consume")
@click.option("-t", "--topic", default="BenchmarkTest", show_default=True, help="Topic.")
@click.option("-g", "--group", default="benchmark_consumer", show_default=True, help="Consumer group.")
@click.option("--expression", default="*", show_default=True, help="Tag expression.")
@click.option("-d", "--duration", type=float, default=20.0, show_default=True, help="Seconds to run.")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many messages.")
@click.option("--from", "from_", type=click.Choice(["last", "first"]), default="last", show_default=True,
              help="Where a new group starts.")
@click.option("--interval", type=float, default=5.0, show_default=True, help="Seconds between reports.")
@json_option
@click.pass_obj
def consume(obj, topic, group, expression, duration, count, from_, interval, json_mode) -> None:
    """Consume with a push consumer; report throughput and born-to-consume latency."""
    import asyncio

    from mq.cli.console import Console
    from mq.client.consumer import PushConsumer
    from mq.client.hooks import ConsumeStatus
    from mq.client.stats import Stats
    from mq.common.topic import validate_topic
    from mq.config import ConsumerConfig
    from mq.remoting import run

    validate_topic(topic)
    console = Console(json_mode=json_mode)

    async def main() -> dict:
        total, window = Stats(), Stats()
        done = asyncio.Event()

        def listener(msgs, ctx):
            now = time.time() * 1000
            for m in msgs:
                lat = max(0.0, now - m.born_timestamp)
                total.record(lat, len(m.body))
                window.record(lat, len(m.body))
            if count is not None and total.ok >= count:
                done.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(ConsumerConfig(group=group, consume_from_where=from_.upper()), listener,
                                client_config(obj))
        consumer.subscribe(topic, expression)
        await consumer.start()
        start = time.monotonic()

        async def reporter() -> None:
            nonlocal window
            while True:
                await asyncio.sleep(interval)
                w, window = window, Stats()
                _report(console, f"{time.monotonic() - start:6.1f}s", w.summary(), json_mode)

        rep = asyncio.ensure_future(reporter())
        try:
            await asyncio.wait_for(done.wait(), duration)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        finally:
            rep.cancel()
            await consumer.shutdown()
        return total.summary()

    s = run(main())
    _report(console, "total", s, json_mode)
