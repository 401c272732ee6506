"""Soak: a producer and a group of `mq consume` processes run for minutes while consumers and the broker are
killed; prints what was sent, what was consumed, what was lost (must be 0) and how the broker's memory moved.

Every party is its own process except the producer (this process, the Python client, sync sends from a few
tasks at a fixed rate). The consumers are `mq consume --json` processes of one CLUSTERING group whose output
lines are read here; a message counts as consumed once a consumer printed it, which its listener does before
the offset can be committed. Chaos, every ``--chaos-every`` seconds in turn: SIGKILL a consumer (its offsets
since the last commit are redelivered: duplicates, counted), SIGTERM a consumer (clean leave), and once, half
way, SIGKILL broker-a and restart it on the same store (crash recovery). With one broker, sends fail while it is
down and are counted as failed, never as acknowledged; with ``--brokers 2`` the topic is on broker-a and
broker-b, the producer has sendLatencyFaultEnable on, and sends go to broker-b meanwhile. After the run the consumers get ``--settle`` seconds to catch
up; then every acknowledged send must have been consumed.

    python benchmarks/soak.py [--seconds 180] [--rate 1000] [--consumers 3] [--brokers 1|2]
                              [--flush SYNC_FLUSH] [--chaos-every 20] [--settle 60] [--no-broker-kill]

Exit status 1 when an acknowledged message was never consumed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_daemons import free_port, wait_port  # noqa: E402

from mq.client.hooks import SendStatus  # noqa: E402
from mq.client.producer import Producer  # noqa: E402
from mq.common.message import Message  # noqa: E402
from mq.config import ClientConfig, ProducerConfig  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402

TOPIC, GROUP = "SoakTopic", "SoakGroup"


class Consumers:
    """`mq consume --json` processes; ``seen`` counts each msgId printed by any of them."""

    def __init__(self, ns: str, home: str) -> None:
        self.ns, self.home = ns, home
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.readers: list[asyncio.Task] = []
        self.seen: collections.Counter[str] = collections.Counter()
        self.started = 0

    async def start_one(self) -> None:
        self.started += 1
        p = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mq.cli.main", "-n", self.ns, "consume", "-t", TOPIC, "-g", GROUP, "--from",
            "first", "--json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=dict(os.environ, MQ_HOME=self.home))
        self.procs[p.pid] = p
        self.readers.append(asyncio.create_task(self._read(p)))

    async def _read(self, p: asyncio.subprocess.Process) -> None:
        assert p.stdout is not None
        async for line in p.stdout:
            try:
                self.seen[orjson.loads(line)["msgId"]] += 1
            except (orjson.JSONDecodeError, KeyError):
                pass

    async def stop_one(self, sig: int) -> None:
        pid = random.choice(list(self.procs))
        p = self.procs.pop(pid)
        p.send_signal(sig)
        await p.wait()

    async def stop_all(self) -> None:
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                await asyncio.wait_for(p.wait(), 30)
            except TimeoutError:
                p.kill()
        self.procs.clear()
        await asyncio.gather(*self.readers, return_exceptions=True)


def _rss_mib(pid: int, store: str) -> float:
    """RSS minus the resident pages of the store's mapped files."""
    p = psutil.Process(pid)
    mapped = sum(m.rss for m in p.memory_maps() if m.path.startswith(store))
    return (p.memory_info().rss - mapped) / 2**20


async def soak(args: argparse.Namespace, work: str) -> int:
    ns_port = free_port()
    home = os.path.join(work, "home")
    ns = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--port", str(ns_port), "--log-level", "WARNING",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, env=dict(os.environ, MQ_HOME=home))
    ns_addr = f"127.0.0.1:{ns_port}"
    await asyncio.to_thread(wait_port, ns_port)
    brokers = [BrokerProcess(Path(work) / name, {"brokerName": name, "namesrvAddr": ns_addr,
                                                 "flushDiskType": args.flush,
                                                 "mappedFileSizeCommitLog": 64 * 1024 * 1024})
               for name in ("broker-a", "broker-b")[:args.brokers]]
    broker = brokers[0]  # the one that is killed
    store = str(Path(work) / "broker-a" / "store")
    consumers = Consumers(ns_addr, home)
    acked: set[str] = set()
    failed: collections.Counter[str] = collections.Counter()
    events: list[str] = []
    rss: list[float] = []
    t0 = time.monotonic()

    def note(what: str) -> None:
        events.append(f"{time.monotonic() - t0:7.1f}s  {what}")
        print(events[-1], flush=True)

    try:
        for b in brokers:
            await asyncio.to_thread(b.start)
            mk = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "mq.cli.main", "-n", ns_addr, "updateTopic", "-t", TOPIC, "-b", b.address,
                "-r", "8", "-w", "8", stdout=asyncio.subprocess.DEVNULL, env=dict(os.environ, MQ_HOME=home))
            assert await mk.wait() == 0, "updateTopic failed"
        rss.append(_rss_mib(broker.proc.pid, store))
        for _ in range(args.consumers):
            await consumers.start_one()
        producer = await Producer(ProducerConfig(group="SoakProducer", send_msg_timeout=3.0,
                                                 send_latency_fault_enable=args.brokers > 1),
                                  ClientConfig(namesrv_addr=ns_addr, client_ip="127.0.0.1",
                                               instance_name="soak-producer")).start()
        stop = asyncio.Event()
        seq = 0

        async def sender() -> None:
            nonlocal seq
            interval = args.tasks / args.rate
            nxt = time.monotonic()
            while not stop.is_set():
                seq += 1
                body = b"soak %d" % seq
                try:
                    r = await producer.send(Message(TOPIC, body))
                    if r.status is SendStatus.SEND_OK:
                        acked.add(r.msg_id)
                    else:
                        failed[r.status.name] += 1
                except Exception as exc:  # counted, never acknowledged
                    failed[type(exc).__name__] += 1
                nxt += interval
                delay = nxt - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    nxt = time.monotonic()

        async def chaos() -> None:
            step = 0
            broker_killed = args.no_broker_kill
            while True:
                await asyncio.sleep(args.chaos_every)
                if stop.is_set():
                    return
                if not broker_killed and time.monotonic() - t0 >= args.seconds / 2:
                    broker_killed = True
                    rss.append(_rss_mib(broker.proc.pid, store))
                    await asyncio.to_thread(broker.kill)
                    note("broker-a SIGKILLed")
                    await asyncio.sleep(2)
                    await asyncio.to_thread(broker.start)
                    note("broker-a restarted (crash recovery)")
                    continue
                step += 1
                sig = signal.SIGKILL if step % 2 else signal.SIGTERM
                await consumers.stop_one(sig)
                await consumers.start_one()
                note(f"consumer {'SIGKILLed' if sig == signal.SIGKILL else 'stopped'} and replaced")

        async def progress() -> None:
            while not stop.is_set():
                await asyncio.sleep(10)
                note(f"acked {len(acked):,}  failed {sum(failed.values()):,}  consumed {len(consumers.seen):,}")

        tasks = [asyncio.create_task(sender()) for _ in range(args.tasks)]
        side = [asyncio.create_task(chaos()), asyncio.create_task(progress())]
        await asyncio.sleep(args.seconds)
        stop.set()
        await asyncio.gather(*tasks)
        for t in side:
            t.cancel()
        await producer.shutdown()
        note(f"producing stopped: {len(acked):,} acknowledged; settling for up to {args.settle:.0f} s")
        deadline = time.monotonic() + args.settle
        while time.monotonic() < deadline and not acked <= consumers.seen.keys():
            await asyncio.sleep(0.5)
        rss.append(_rss_mib(broker.proc.pid, store))
    finally:
        await consumers.stop_all()
        for b in brokers:
            await asyncio.to_thread(b.stop)
        ns.send_signal(signal.SIGTERM)
        await ns.wait()

    seen = consumers.seen
    missing = acked - seen.keys()
    dups = sum(n - 1 for n in seen.values() if n > 1)
    extra = len(seen.keys() - acked)
    elapsed = args.seconds
    print()
    print(f"brokers, flush mode        : {args.brokers}, {args.flush}")
    print(f"sends acknowledged         : {len(acked):,} ({len(acked) / elapsed:,.0f}/s over {elapsed:.0f} s)")
    print(f"sends failed               : {sum(failed.values()):,} {dict(failed)}")
    print(f"consumed (distinct)        : {len(seen):,}")
    print(f"acknowledged, not consumed : {len(missing):,}  <- must be 0")
    print(f"consumed more than once    : {dups:,} redeliveries (consumer kills, rebalances)")
    print(f"consumed, not acknowledged : {extra:,} (sends that failed on the client but were stored)")
    print(f"consumer processes started : {consumers.started}")
    print("broker-a RSS excl. mappings: " + " -> ".join(f"{r:.1f}" for r in rss) + " MiB")
    if missing:
        print("first missing:", sorted(missing)[:10])
    return 1 if missing else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="sends per second (all tasks together)")
    ap.add_argument("--tasks", type=int, default=8, help="concurrent sync senders")
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--brokers", type=int, choices=(1, 2), default=1)
    ap.add_argument("--flush", choices=("SYNC_FLUSH", "ASYNC_FLUSH"), default="SYNC_FLUSH")
    ap.add_argument("--chaos-every", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=60.0)
    ap.add_argument("--no-broker-kill", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mq-soak-")
    try:
        code = asyncio.run(soak(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
