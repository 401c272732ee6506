"""``mq`` against Apache RocketMQ 4.9's own broker, under RocketMQ's own benchmark tools, side by side in one run.

Four cases, each run against both brokers in turn (``mq``, RocketMQ, ``mq``, RocketMQ, ... for ``--rounds``
rounds), each on a fresh name server, broker and store (``bench_daemons.brokers``, both ASYNC_FLUSH), with the
topic (``--topic``, default ``BenchmarkVs``) created with ``--queues`` (8) queues before the tools start:

- ``send``: the official benchmark Producer (``org.apache.rocketmq.example.benchmark.Producer -w 16 -s 1024``,
  each thread sending synchronously): its "Send TPS" and "Average RT" lines after ``--warmup`` seconds;
- ``e2e``: the official benchmark Consumer and Producer together: the Consumer's "TPS" and born-to-consume
  latency ("AVG(B2C) RT"), and the Producer's TPS, each tool's 10 s windows listed; beside them the messages
  each broker counted out over the measured window (``msgGetTotalTodayNow``, with the round trip of each
  counter read) and its backlog (stored minus pulled) at the window's start and end. The tools' windows and
  the counted window do not cover the same seconds: where a broker's rate still climbs (a freshly started JVM
  warming up) the later windows report more than the counted one;
- ``drain``: the Producer fills a backlog of ``--backlog`` messages (``-q``), then the official Consumer (a new
  group, which starts at offset 0) drains it: messages per second from the first pulled message to the last,
  read from the broker's own counter (``msgGetTotalTodayNow`` of GET_BROKER_RUNTIME_INFO, polled every 50 ms);
- ``load``: ``send`` while a CPU-burning process (a Python busy loop) runs beside it, pinned to the last CPU
  with ``--burn-pin`` (default: not pinned; the scheduler places it). ``--e2e-burn`` runs the same process
  beside ``e2e``.

For each case and broker it prints the official figures, the broker's peak RSS (all of it, and without the
pages of its mapped store files, which the kernel may drop at any time), the broker's CPU time (user + system,
all threads) per message handled, how busy the whole machine was over the measured window (its user, system
and softirq shares: on two CPUs the clients' kernel time is part of what limits a case), and the load average
before and after. After each round it prints the ratios ``mq / RocketMQ`` (for latencies ``RocketMQ / mq``, so
above 1 means ``mq`` is ahead on every figure).

The Java broker runs as ``bench_daemons`` starts it (``tests/interop/java_broker.py``): RocketMQ 4.9.7's
``BrokerStartup`` on OpenJDK with ``-Xms2g -Xmx2g`` and RocketMQ's defaults otherwise (G1, the collector its
``runbroker.sh`` chooses and the JVM's default on this machine; ``sendMessageThreadPoolNums`` 1 and the spin put
lock, its 4.9 defaults; ASYNC_FLUSH). ``runbroker.sh`` asks for an 8 GiB heap with ``AlwaysPreTouch``; the
broker keeps messages in mapped files, not on the heap, so 2 GiB leaves it the same room to work in while the
pre-touched 8 GiB would only add RSS.

    source /work/java/env.sh   # or set MQ_JAVA_BENCH_CLASSPATH and MQ_JAVA_BROKER_CLASSPATH
    python benchmarks/vs_rocketmq.py [--rounds 3] [--cases send,e2e,drain,load] [--seconds 40] [--warmup 20]
        [--threads 16] [--size 1024] [--queues 8] [--backlog 1000000] [--burn-pin] [--brokers mq,rocketmq]
        [--mq-config KEY=VALUE ...] [--slave-read] [--e2e-burn]

``--slave-read`` runs ``e2e`` against a master and its slave instead of one broker (``bench_daemons.
replicated_brokers``: ASYNC_MASTER and SLAVE of one broker name, both with ``slaveReadEnable``), with the Consumer's
group created beforehand on both with ``brokerId`` 1, so every pull answer suggests the slave and the Consumer
pulls from the slave process: RocketMQ's own way to take the consumers' reads off the master. Broker CPU is then the
two processes' together, and messages counted out are the two brokers' counts added.

``--mq-config`` changes a setting of ``mq``'s broker only (its YAML name and value), to compare settings in
alternating runs, e.g. ``--brokers mq --mq-config warmAheadBytes=0`` against the same run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench_daemons import BROKER_KINDS, brokers, replicated_brokers
from bench_processes import JavaTool, RssSampler, busiest_thread, cpu_s, data_segments_out, thread_times
from machine import CpuWindow

sys.path.append(str(Path(__file__).resolve().parents[1]))  # an installed or PYTHONPATH mq wins

from mq.client.admin import MQAdmin  # noqa: E402
from mq.protocol.admin_bodies import SubscriptionGroupConfig  # noqa: E402
from mq.protocol.bodies import TopicConfig  # noqa: E402

#: the tools' default topic: both brokers create it at start with 1,024 queues
BUILTIN_TOPIC = "BenchmarkTest"
CASES = ("send", "e2e", "drain", "load")
_SEND = re.compile(r"Send TPS: *(\d+) .*Average RT\(ms\): *([\d.]+) .*Send Failed: *(\d+) Response Failed: *(\d+)")
_CONSUME = re.compile(r"TPS: *(\d+) FAIL: *(\d+) AVG\(B2C\) RT\(ms\): *([\d.]+) AVG\(S2C\) RT\(ms\): *([\d.]+) "
                      r"MAX\(B2C\) RT\(ms\): *(\d+)")
LABEL = {"mq": "mq", "rocketmq": "RocketMQ"}
#: the benchmark Consumer's group (its default, without the random suffix)
CONSUMER_GROUP = "benchmark_consumer"


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@dataclass
class Result:
    case: str
    kind: str
    figures: dict[str, float] = field(default_factory=dict)
    text: str = ""


async def _broker_addr(admin: MQAdmin, broker_id: int = 0, timeout: float = 60.0) -> str:
    """The address of the one broker with ``broker_id`` (0: the master, 1: its slave), once it has registered
    with the name server."""
    deadline = time.monotonic() + timeout
    while True:
        info = await admin.cluster_info()
        addrs = [bd.broker_addrs[broker_id] for bd in info.broker_addr_table.values() if broker_id in bd.broker_addrs]
        if len(addrs) == 1:
            return addrs[0]
        if len(addrs) > 1 or time.monotonic() > deadline:
            raise SystemExit(f"expected one broker with brokerId {broker_id}, the name server knows {addrs}")
        await asyncio.sleep(0.2)


async def _admin_call(namesrv: str, fn):
    async with MQAdmin([namesrv]) as admin:
        return await fn(admin, await _broker_addr(admin))


def prefer_slave(namesrv: str, timeout: float = 60.0) -> None:
    """Create the Consumer's group with ``brokerId`` 1 on the master and wait until the slave has copied it (a
    slave takes its groups from the master every ``slaveSyncInterval``, 10 s): with ``slaveReadEnable`` every
    pull answer then suggests the slave."""
    async def go(admin: MQAdmin, addr: str) -> None:
        await admin.create_and_update_subscription_group_config(
            addr, SubscriptionGroupConfig(group_name=CONSUMER_GROUP, broker_id=1))
        slave = await _broker_addr(admin, 1)
        deadline = time.monotonic() + timeout
        while True:
            groups = (await admin.get_all_subscription_group(slave)).subscription_group_table
            if getattr(groups.get(CONSUMER_GROUP), "broker_id", 0) == 1:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"the slave has not copied group {CONSUMER_GROUP} from the master")
            await asyncio.sleep(0.5)
    asyncio.run(_admin_call(namesrv, go))


def create_topic(namesrv: str, topic: str, queues: int) -> None:
    async def go(admin: MQAdmin, addr: str) -> None:
        await admin.create_and_update_topic_config(addr, TopicConfig(topic_name=topic, read_queue_nums=queues,
                                                                     write_queue_nums=queues))
    asyncio.run(_admin_call(namesrv, go))


class Counters:
    """The broker's message counters (GET_BROKER_RUNTIME_INFO: msgPutTotalTodayNow, msgGetTotalTodayNow),
    on one admin connection kept open on a loop in this thread."""

    def __init__(self, namesrv: str, broker_id: int = 0) -> None:
        self.loop = asyncio.new_event_loop()
        self.admin = MQAdmin([namesrv])
        self.addr = self.loop.run_until_complete(_broker_addr(self.admin, broker_id))

    def read(self) -> tuple[int, int]:
        t = time.monotonic()
        kv = self.loop.run_until_complete(self.admin.fetch_broker_runtime_stats(self.addr))
        #: the round trip of the last read: the counters were read at some point inside it
        self.rtt = time.monotonic() - t
        return int(kv.get("msgPutTotalTodayNow", 0)), int(kv.get("msgGetTotalTodayNow", 0))

    def close(self) -> None:
        self.loop.run_until_complete(self.admin.close())
        self.loop.close()


def _producer_args(ns: str, a: argparse.Namespace, quantity: int = 0) -> list[str]:
    args = ["-n", ns, "-w", str(a.threads), "-s", str(a.size), "-t", a.topic]
    if quantity:
        args += ["-q", str(quantity)]
    return args


def _send_figures(lines: list[tuple[float, str]], t_from: float) -> tuple[list[tuple[int, float]], int, int]:
    windows = []
    failed = resp_failed = 0
    for t, line in lines:
        m = _SEND.search(line)
        if m:
            failed, resp_failed = int(m.group(3)), int(m.group(4))
            if t >= t_from:
                windows.append((int(m.group(1)), float(m.group(2))))
    return windows, failed, resp_failed


def _busiest(th0: dict, th1: dict, msgs: int, seconds: float) -> str:
    """The broker's busiest thread over a window: the share of a core it used and its CPU per message. For mq's
    broker that is the event loop, which does all of a request's Python work."""
    user, system = busiest_thread(th0, th1)
    per = 1e6 / max(1, msgs)
    return (f"busiest thread {(user + system) / seconds:.2f} cores, {user * per:.1f} user + {system * per:.1f} "
            f"system us/msg")


def _start_burner(a: argparse.Namespace) -> subprocess.Popen:
    """A CPU-burning process (a Python busy loop), pinned to the last CPU with ``--burn-pin``."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    if a.burn_pin:
        os.sched_setaffinity(burner.pid, {max(os.sched_getaffinity(0))})
    return burner


def _stop_burner(burner: subprocess.Popen | None) -> None:
    if burner is not None:
        burner.kill()
        burner.wait()


def _burner_text(a: argparse.Namespace) -> str:
    return f"; a busy loop {'pinned to CPU ' + str(max(os.sched_getaffinity(0))) if a.burn_pin else 'unpinned'}"


def run_send(kind: str, ns: str, broker: psutil.Process, a: argparse.Namespace, case: str) -> Result:
    counters = Counters(ns)
    burner = _start_burner(a) if case == "load" else None
    prod = JavaTool(a.bench_classpath, "Producer", _producer_args(ns, a))
    try:
        start = time.monotonic()
        time.sleep(a.warmup)
        c0, p0, t0 = cpu_s(broker), counters.read()[0], time.monotonic()
        pc0, th0 = prod.cpu(), thread_times(broker)
        with RssSampler(broker) as rss, CpuWindow() as machine:
            time.sleep(a.seconds)
        c1, p1, t1 = cpu_s(broker), counters.read()[0], time.monotonic()
        pc1, th1 = prod.cpu(), thread_times(broker)
        # the Producer prints every 10 s: wait for the line that covers the end of the window
        time.sleep(max(0.0, 10.5 - ((t1 - start) % 10)))
        windows, failed, resp_failed = _send_figures(prod.drain_lines(), start + a.warmup + 9.5)
    finally:
        prod.stop()
        _stop_burner(burner)
        counters.close()
    sent = p1 - p0
    tps = sum(w[0] for w in windows) / max(1, len(windows))
    rt = sum(w[0] * w[1] for w in windows) / max(1, sum(w[0] for w in windows))
    f = {"tps": tps, "rt": rt, "broker_tps": sent / (t1 - t0), "failed": failed, "resp_failed": resp_failed,
         "cpu_us": (c1 - c0) / max(1, sent) * 1e6, "cores": (c1 - c0) / (t1 - t0),
         "client_cpu_us": (pc1 - pc0) / max(1, sent) * 1e6, "rss": rss.peak, "rss_own": rss.peak_own}
    text = (f"Producer {tps:,.0f} sends/s (broker counted {f['broker_tps']:,.0f}/s), average RT {rt:.3f} ms, "
            f"{len(windows)} x 10 s windows, send failed {failed}, response failed {resp_failed}; broker CPU "
            f"{f['cpu_us']:.1f} us/msg ({f['cores']:.2f} cores; {_busiest(th0, th1, sent, t1 - t0)}), "
            f"Producer CPU {f['client_cpu_us']:.1f} us/msg; {machine.split()}")
    if burner is not None:
        text += _burner_text(a)
    return Result(case, kind, f, text)


def run_e2e(kind: str, ns: str, broker: psutil.Process, a: argparse.Namespace,
            slave: psutil.Process | None = None) -> Result:
    """The e2e case; with ``slave`` (``--slave-read``) the Consumer pulls from it, and its CPU and its count of
    messages out are added to the master's."""
    counters = Counters(ns)
    slave_counters = Counters(ns, broker_id=1) if slave is not None else None
    cons = JavaTool(a.bench_classpath, "Consumer", ["-n", ns, "-t", a.topic, "-g", CONSUMER_GROUP])
    prod = burner = None
    try:
        if a.e2e_burn:
            burner = _start_burner(a)
        cons.wait_for("Consumer Started", 60)
        time.sleep(2)  # the first rebalance
        prod = JavaTool(a.bench_classpath, "Producer", _producer_args(ns, a))
        start = time.monotonic()
        time.sleep(a.warmup)
        sc0, sg0 = (cpu_s(slave), slave_counters.read()[1]) if slave_counters is not None else (0.0, 0)
        c0, (p0, g0), t0 = cpu_s(broker), counters.read(), time.monotonic()
        q0, s0, th0 = cons.cpu(), data_segments_out(cons.proc.pid), thread_times(broker)
        with RssSampler(broker) as rss, CpuWindow() as machine:
            time.sleep(a.seconds)
        rtt0 = counters.rtt
        c1, (p1, g1), t1 = cpu_s(broker), counters.read(), time.monotonic()
        q1, s1, th1 = cons.cpu(), data_segments_out(cons.proc.pid), thread_times(broker)
        sc1, sg1 = (cpu_s(slave), slave_counters.read()[1]) if slave_counters is not None else (0.0, 0)
        rtt1 = counters.rtt
        time.sleep(max(0.0, 10.5 - ((t1 - start) % 10)))
        t_from = start + a.warmup + 9.5
        windows, failed, _ = _send_figures(prod.drain_lines(), t_from)
        consumed = []
        for t, line in cons.drain_lines():
            m = _CONSUME.search(line)
            if m and t >= t_from:
                consumed.append((int(m.group(1)), float(m.group(3)), int(m.group(5))))
    finally:
        if prod is not None:
            prod.stop()
        cons.stop()
        _stop_burner(burner)
        counters.close()
        if slave_counters is not None:
            slave_counters.close()
    # with a slave serving the pulls, the broker side is both processes; the master's backlog is then its
    # puts minus what both counted out
    c1 += sc1 - sc0
    g0 += sg0
    g1 += sg1
    ctps = sum(c[0] for c in consumed) / max(1, len(consumed))
    b2c = sum(c[0] * c[1] for c in consumed) / max(1, sum(c[0] for c in consumed))
    b2c_max = max((c[2] for c in consumed), default=0)
    stps = sum(w[0] for w in windows) / max(1, len(windows))
    got = g1 - g0
    # messages stored but not yet pulled, by the broker's own counters: a backlog that shrinks over the window
    # means the Consumer's windows include catching up on what it fell behind by in the warm-up
    lag0, lag1 = p0 - g0, p1 - g1
    segs = None if s0 is None or s1 is None else s1 - s0  # the Consumer's requests; None: `ss` could not run
    f = {"consume_tps": ctps, "got_tps": got / (t1 - t0), "b2c": b2c, "b2c_max": b2c_max, "send_tps": stps,
         "failed": failed, "backlog": (lag0, lag1),
         "cpu_us": (c1 - c0) / max(1, got) * 1e6, "cores": (c1 - c0) / (t1 - t0), "rss": rss.peak,
         "rss_own": rss.peak_own, "consumer_cpu_us": (q1 - q0) / max(1, got) * 1e6,
         "per_pull": 0.0 if segs is None else got / max(1, segs)}
    text = (f"Consumer {ctps:,.0f} msgs/s, born-to-consume average {b2c:.2f} ms (max {b2c_max} ms), Producer "
            f"{stps:,.0f} sends/s, {len(consumed)} x 10 s windows (Consumer {' / '.join(f'{c[0]:,}' for c in consumed)}, "
            f"Producer {' / '.join(f'{w[0]:,}' for w in windows)}); broker counted {(p1 - p0) / (t1 - t0):,.0f} "
            f"put/s {got / (t1 - t0):,.0f} got/s (counter reads {rtt0 * 1000:.0f} / {rtt1 * 1000:.0f} ms), backlog "
            f"{lag0:,} -> {lag1:,} messages; broker CPU "
            f"{f['cpu_us']:.1f} us per message in and out "
            f"({f['cores']:.2f} cores"
            + (f", the slave {(sc1 - sc0) / (t1 - t0):.2f} of them, its count out {(sg1 - sg0) / (t1 - t0):,.0f}/s"
               if slave is not None else "")
            + f"; {'the master: ' if slave is not None else ''}{_busiest(th0, th1, got, t1 - t0)}); the Consumer "
            + (f"sent {segs / (t1 - t0):,.0f} requests/s ({f['per_pull']:.2f} messages each)"
               if segs is not None else "requests not counted (`ss` could not run)")
            + f" and used {f['consumer_cpu_us']:.1f} us of CPU per message; {machine.split()}"
            + (_burner_text(a) if burner is not None else ""))
    return Result("e2e", kind, f, text)


def run_drain(kind: str, ns: str, broker: psutil.Process, a: argparse.Namespace) -> Result:
    counters = Counters(ns)
    cons = None
    try:
        with RssSampler(broker) as rss:
            t_fill = time.monotonic()
            prod = JavaTool(a.bench_classpath, "Producer", _producer_args(ns, a, a.backlog))
            try:
                while counters.read()[0] < a.backlog:
                    if prod.proc.poll() is not None:
                        raise SystemExit("the Producer exited before the backlog was full")
                    time.sleep(0.5)
            finally:
                prod.stop()
            fill_s = time.monotonic() - t_fill
            put = counters.read()[0]
            cons = JavaTool(a.bench_classpath, "Consumer", ["-n", ns, "-t", a.topic])
            c0 = cpu_s(broker)
            first = last = None
            got = 0
            deadline = time.monotonic() + max(120.0, a.backlog / 5_000)
            while time.monotonic() < deadline:
                got = counters.read()[1]
                now = time.monotonic()
                if got and first is None:
                    first = (now, got)
                if got >= put:
                    last = now
                    break
                time.sleep(0.05)
            c1 = cpu_s(broker)
    finally:
        if cons is not None:
            cons.stop()
        counters.close()
    if first is None or last is None:
        raise SystemExit(f"the Consumer pulled {got:,} of {put:,} messages in time")
    rate = (put - first[1]) / max(1e-6, last - first[0])
    f = {"drain": rate, "cpu_us": (c1 - c0) / max(1, got) * 1e6, "rss": rss.peak, "rss_own": rss.peak_own,
         "fill_s": fill_s}
    text = (f"Consumer drained {put:,} messages at {rate:,.0f} msgs/s ({last - first[0]:.2f} s from the first "
            f"pull); broker CPU {f['cpu_us']:.1f} us/msg while draining; filled in {fill_s:.0f} s")
    return Result("drain", kind, f, text)


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def run_case(case: str, kind: str, a: argparse.Namespace) -> Result:
    if a.slave_read:
        with replicated_brokers(kind, "ASYNC_FLUSH") as (ns, master, slave):
            if a.topic != BUILTIN_TOPIC:
                create_topic(ns, a.topic, a.queues)
            prefer_slave(ns)
            time.sleep(1)
            return run_e2e(kind, ns, master, a, slave)
    with brokers(kind, "ASYNC_FLUSH", "".join(f"{k}: {v}\n" for k, v in a.mq_config)) as (ns, broker):
        if a.topic != BUILTIN_TOPIC:
            create_topic(ns, a.topic, a.queues)
        time.sleep(1)
        if case in ("send", "load"):
            return run_send(kind, ns, broker, a, case)
        if case == "e2e":
            return run_e2e(kind, ns, broker, a)
        return run_drain(kind, ns, broker, a)


#: (figure, label, higher is better)
RATIOS = {
    "send": [("tps", "send TPS", True), ("rt", "average RT", False), ("cpu_us", "broker CPU/msg", False)],
    "load": [("tps", "send TPS", True), ("rt", "average RT", False), ("cpu_us", "broker CPU/msg", False)],
    "e2e": [("consume_tps", "consume TPS", True), ("got_tps", "broker-counted", True),
            ("b2c", "born-to-consume", False), ("cpu_us", "broker CPU/msg", False),
            ("per_pull", "messages per pull", True), ("consumer_cpu_us", "Consumer CPU/msg", False)],
    "drain": [("drain", "drain rate", True), ("cpu_us", "broker CPU/msg", False)],
}


def ratio_line(case: str, by_kind: dict[str, Result]) -> str:
    ours, theirs = by_kind.get("mq"), by_kind.get("rocketmq")
    if ours is None or theirs is None:
        return ""
    parts = []
    for key, label, higher in RATIOS[case]:
        x, y = ours.figures.get(key, 0.0), theirs.figures.get(key, 0.0)
        r = (x / y if higher else y / x) if x and y else float("nan")
        parts.append(f"{label} {r:.2f}x")
    return f"  ratio {case}: " + ", ".join(parts) + " (above 1: mq ahead)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--brokers", default="mq,rocketmq", help="the order within a round")
    ap.add_argument("--seconds", type=float, default=40.0, help="measured seconds of send, load and e2e")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--topic", default="BenchmarkVs",
                    help=f"created with --queues queues before each case; {BUILTIN_TOPIC} (the tools' default) is "
                         "built into both brokers with 1,024 queues")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--backlog", type=int, default=1_000_000)
    ap.add_argument("--burn-pin", action="store_true", help="pin the busy loop of the load case to the last CPU")
    ap.add_argument("--mq-config", action="append", default=[], type=_setting, metavar="KEY=VALUE",
                    help="a setting of mq's broker config (its YAML name), e.g. warmAheadBytes=0; repeatable")
    ap.add_argument("--e2e-burn", action="store_true",
                    help="e2e with the load case's CPU-burning process beside it (users share machines)")
    ap.add_argument("--slave-read", action="store_true",
                    help="e2e only: each broker as a master and a slave, the Consumer pulling from the slave")
    ap.add_argument("--bench-classpath", default=os.environ.get("MQ_JAVA_BENCH_CLASSPATH", ""))
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    kinds = [k for k in a.brokers.split(",") if k]
    for c in cases:
        if c not in CASES:
            raise SystemExit(f"unknown case {c!r} (known: {', '.join(CASES)})")
    if a.slave_read and cases != ["e2e"]:
        raise SystemExit("--slave-read runs the e2e case only: add --cases e2e")
    if a.slave_read and a.mq_config:
        raise SystemExit("--slave-read starts its brokers with their replication settings only")
    for k in kinds:
        if k not in BROKER_KINDS:
            raise SystemExit(f"unknown broker {k!r} (known: {', '.join(BROKER_KINDS)})")
    if not a.bench_classpath:
        raise SystemExit("set MQ_JAVA_BENCH_CLASSPATH (rocketmq-example + rocketmq-client 4.9.x), e.g. "
                         "source /work/java/env.sh")
    if "rocketmq" in kinds and not os.environ.get("MQ_JAVA_BROKER_CLASSPATH"):
        raise SystemExit("set MQ_JAVA_BROKER_CLASSPATH (rocketmq-broker + rocketmq-namesrv 4.9.x)")
    print(f"cases {', '.join(cases)}; {a.rounds} rounds of {' then '.join(LABEL[k] for k in kinds)}; "
          f"{a.threads} Producer threads, {a.size} B, topic {a.topic} "
          f"({1024 if a.topic == BUILTIN_TOPIC else a.queues} queues), ASYNC_FLUSH; {os.cpu_count()} CPUs"
          + "".join(f"; mq's {k}: {v}" for k, v in a.mq_config)
          + ("; each broker a master and a slave, the Consumer pulling from the slave" if a.slave_read else ""),
          flush=True)
    table: list[tuple[int, Result, str, str]] = []
    for rnd in range(1, a.rounds + 1):
        print(f"round {rnd}: load average {load_avg()}", flush=True)
        for case in cases:
            by_kind: dict[str, Result] = {}
            for kind in kinds:
                before = load_avg()
                with CpuWindow() as window:
                    res = run_case(case, kind, a)
                after = load_avg()
                by_kind[kind] = res
                table.append((rnd, res, before, after))
                print(f"  {case:5} {LABEL[kind]:8}: {res.text}; broker RSS peak {res.figures['rss'] / 2**20:.0f} MiB "
                      f"({res.figures['rss_own'] / 2**20:.0f} MiB without mapped store files); load average "
                      f"{before} -> {after}, {window.short()}", flush=True)
            line = ratio_line(case, by_kind)
            if line:
                print(line, flush=True)
        print(f"round {rnd} done: load average {load_avg()}", flush=True)
    print("\nsummary (mq / RocketMQ; latency and CPU as RocketMQ / mq):", flush=True)
    for case in cases:
        for key, label, higher in RATIOS[case]:
            rs = []
            for rnd in range(1, a.rounds + 1):
                vals = {r.kind: r.figures.get(key, 0.0) for n, r, _, _ in table if n == rnd and r.case == case}
                x, y = vals.get("mq"), vals.get("rocketmq")
                if x and y:
                    rs.append((x / y) if higher else (y / x))
            if rs:
                print(f"  {case:5} {label:16}: " + " ".join(f"{r:.2f}x" for r in rs), flush=True)
    rss = [r.figures["rss"] for _, r, _, _ in table if r.kind == "mq"]
    if rss:
        print(f"  mq broker RSS peak over all cases: {max(rss) / 2**20:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
