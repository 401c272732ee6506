"""Prometheus metrics: what scraping costs the sends, and how long a scrape of a large broker takes.

1. Send throughput side by side, in one run, in alternating rounds: the broker's /metrics scraped every second
   against not scraped. Two brokers run (``mq broker start``, no name server, ASYNC_FLUSH, their own stores):
   one with ``metricsExporterType: DISABLE``, one with ``PROM``. Each round drives one of them with pre-encoded
   1 KiB sends (``--conns`` connections x ``--inflight`` in flight, from broker_send_bench.py) for ``--seconds``;
   the rounds cycle through

       off        the broker without metrics
       on         the broker with metrics, nobody scraping
       scraped    the same broker, GET /metrics every second (curl, another process)

   so drift of the shared machine spreads over the three. Each line is one round (sends/s and the broker's CPU
   per send); then the median of each condition, the ratios scraped/on and on/off of the medians, and the
   spread of scraped/on taken round by round.

2. Scrape time of a broker with ``--topics`` topics (4 queues, 40 messages each) and ``--groups`` consumer
   groups, each consuming 5 topics (1,000 group-topic pairs for 200 groups): every group pulled 5 messages of
   every queue it consumes and acked 3, so each pair has lag, in-flight and ready messages to compute. It then
   makes ``--scrapes`` GET /metrics (curl, over loopback), 1.1 s apart so that each computes the lag again: the
   first (the endpoint has nothing kept yet), then alternately one after nothing changed but the clock and one
   after a send to every topic (``--no-churn``: only the former). For each kind: the GET's wall time, the broker
   process's CPU time during it, and the longest round trip of GET_MAX_OFFSET requests sent back to back by
   another connection during the GET, against as long a window without one: a bound on how long the scrape
   held the broker's event loop.

With ``--large``, part 1's broker with metrics first gets part 2's topics and groups, so that every scrape
during the sends is a scrape of that large broker.

    python benchmarks/metrics_bench.py [--rounds 6] [--seconds 4] [--conns 4] [--inflight 16] [--large]
                                       [--topics 1000] [--groups 200] [--scrapes 21] [--no-churn]
                                       [--only sends|scrape]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.append(str(Path(__file__).resolve().parents[1]))  # an installed or PYTHONPATH mq wins
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_daemons import free_port, wait_port  # noqa: E402
from broker_send_bench import measure_sends, send_frame, stop_broker  # noqa: E402
from machine import CpuWindow, python_speed  # noqa: E402

from mq.common.message import Message  # noqa: E402
from mq.common.record import encode_batch  # noqa: E402
from mq.protocol import headers as H  # noqa: E402
from mq.protocol.codes import RequestCode  # noqa: E402
from mq.protocol.command import RemotingCommand  # noqa: E402


def start_broker(workdir: Path, metrics_port: int | None) -> tuple[subprocess.Popen, int]:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = ["flushDiskType: ASYNC_FLUSH", "mappedFileSizeCommitLog: 268435456", "haListenPort: 0", "grpcServerPort: -1"]
    if metrics_port is not None:
        conf += ["metricsExporterType: PROM", f"metricsPromExporterPort: {metrics_port}"]
    (workdir / "broker.yaml").write_text("\n".join(conf) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "broker", "start",
                             "--grpc-port", "-1", "--namesrv", "", "--port",
                             str(port), "--store", str(workdir / "store"), "--config", str(workdir / "broker.yaml"),
                             "--log-level", "WARNING", "--pid-file", str(workdir / "broker.pid")],
                            env=dict(os.environ, MQ_HOME=str(workdir)))
    wait_port(port)
    if metrics_port is not None:
        wait_port(metrics_port)
    return proc, port


def get(url: str) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
    return time.perf_counter() - t0, body


class Scraper(threading.Thread):
    """GET ``url`` every ``interval`` seconds until stopped; keeps the durations."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.stop_event = threading.Event()
        self.durations: list[float] = []

    def run(self) -> None:
        curl = shutil.which("curl")  # in its own process: reading the answer takes none of this one's CPU
        while not self.stop_event.is_set():
            t0 = time.monotonic()
            if curl:
                subprocess.run([curl, "-sf", "-o", os.devnull, self.url], check=True)
                self.durations.append(time.monotonic() - t0)
            else:
                self.durations.append(get(self.url)[0])
            self.stop_event.wait(max(0.0, self.interval - (time.monotonic() - t0)))


# -- 1. sends with and without scraping ---------------------------------------------------------------------
def bench_sends(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mq-metrics-bench-"))
    mport = free_port()
    off_proc, off_port = start_broker(tmp / "off", None)
    on_proc, on_port = start_broker(tmp / "on", mport)
    url = f"http://127.0.0.1:{mport}/metrics"
    try:
        frame = send_frame("MetricsBenchT", 0)
        if args.large:
            t0 = time.perf_counter()
            asyncio.run(populate(on_port, args.topics, args.groups, 5))
            print(f"the broker with metrics holds {args.topics} topics and {args.groups} groups (populated in "
                  f"{time.perf_counter() - t0:.0f} s)", flush=True)
        for port in (off_port, on_port):  # auto-create the topic, warm the store
            asyncio.run(measure_sends(port, frame, 1, 16, 1.0))
        procs = {off_port: psutil.Process(off_proc.pid), on_port: psutil.Process(on_proc.pid)}
        plan = [("off", off_port, False), ("on", on_port, False), ("scraped", on_port, True)]
        rates: dict[str, list[float]] = {name: [] for name, _, _ in plan}
        cpus: dict[str, list[float]] = {name: [] for name, _, _ in plan}
        scrapes: list[float] = []
        print(f"sends of 1 KiB, {args.conns} connections x {args.inflight} in flight, {args.seconds:.0f} s rounds",
              flush=True)
        with CpuWindow() as whole:
            for r in range(args.rounds):
                order = plan[r % 3:] + plan[:r % 3]  # rotate which condition goes first
                for name, port, scraped in order:
                    scraper = Scraper(url) if scraped else None
                    if scraper is not None:
                        scraper.start()
                    with CpuWindow() as w:
                        rate, errors, cpu = asyncio.run(measure_sends(port, frame, args.conns, args.inflight,
                                                                      args.seconds, procs[port]))
                    if scraper is not None:
                        scraper.stop_event.set()
                        scraper.join()
                        scrapes += scraper.durations
                    rates[name].append(rate)
                    cpus[name].append(cpu)
                    print(f"round {r + 1} {name:8s} {rate:10,.0f} sends/s  broker CPU {cpu * 1e6:6.1f} us/send  "
                          f"errors {errors}  {w.short()}", flush=True)
        med = {k: statistics.median(v) for k, v in rates.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpus.items()}
        for name in rates:
            print(f"median {name:8s} {med[name]:10,.0f} sends/s  broker CPU {med_cpu[name] * 1e6:6.1f} us/send")
        print(f"scraped / on  (a scrape every second): throughput {med['scraped'] / med['on']:.2%}, "
              f"CPU per send {med_cpu['scraped'] / med_cpu['on']:.2%}")
        pair = sorted(x / y for x, y in zip(rates["scraped"], rates["on"]))
        print(f"scraped / on, round by round: median {statistics.median(pair):.2%}, from {pair[0]:.2%} to "
              f"{pair[-1]:.2%} over {len(pair)} rounds")
        print(f"on / off      (metrics on, not scraped): throughput {med['on'] / med['off']:.2%}, "
              f"CPU per send {med_cpu['on'] / med_cpu['off']:.2%}")
        if scrapes:
            print(f"scrapes during the load: {len(scrapes)}, median {statistics.median(scrapes) * 1e3:.1f} ms, "
                  f"worst {max(scrapes) * 1e3:.1f} ms")
        print(f"the machine during the rounds: {whole.short()}")
        # what one scrape costs the broker, measured with the broker idle: its CPU time over 50 scrapes (and
        # pauses) minus its CPU time over the same pauses without scrapes (the clock ticks are 10 ms)
        ps = procs[on_port]
        n = 50

        def window(scrape: bool) -> float:
            c0 = sum(ps.cpu_times()[:2])
            for _ in range(n):
                if scrape:
                    get(url)
                time.sleep(0.1)
            return sum(ps.cpu_times()[:2]) - c0

        idle = window(False)
        cost = max(0.0, window(True) - idle) / n
        print(f"one scrape costs the idle broker {cost * 1e3:.1f} ms of CPU ({n} scrapes, idle time subtracted): "
              f"at one scrape a second {cost:.2%} of a core; the sends above used "
              f"{med_cpu['on'] * med['on']:.0%} of a core")
    finally:
        stop_broker(off_proc)
        stop_broker(on_proc)
        shutil.rmtree(tmp, ignore_errors=True)


# -- 2. scrape time of a large broker -------------------------------------------------------------------------
async def populate(port: int, topics: int, groups: int, per_group: int) -> None:
    """``topics`` topics of 4 queues with 40 messages each; ``groups`` groups consuming ``per_group`` topics
    each: every queue pulled 5 messages and acked 3 (lag 37, in flight 2, ready 35 per queue)."""
    from mq.remoting import RemotingClient

    client = RemotingClient(name="bench")
    addr = f"127.0.0.1:{port}"
    names = [f"ScrapeTopic{i:04d}" for i in range(topics)]
    sem = asyncio.Semaphore(64)

    async def call(cmd: RemotingCommand) -> None:
        async with sem:
            resp = await client.invoke(addr, cmd, 30)
        if resp.code != 0:
            raise SystemExit(f"request {cmd.code} failed: {resp.code} {resp.remark}")

    async def fill(topic: str) -> None:
        for q in range(4):
            h = H.SendMessageRequestHeaderV2(producer_group="BenchPG", topic=topic, default_topic="TBW102",
                                             default_topic_queue_nums=4, queue_id=q, sys_flag=0,
                                             born_timestamp=int(time.time() * 1000), flag=0, properties="",
                                             batch=True)
            body = encode_batch([Message(topic, b"x" * 200) for _ in range(40)])
            await call(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, h.to_ext(), body))

    async def consume(group: str, topic: str) -> None:
        for q in range(4):
            h = H.PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=q, queue_offset=0,
                                           max_msg_nums=5, sys_flag=4, commit_offset=0, suspend_timeout_millis=0,
                                           sub_version=0, subscription="*")
            await call(RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext()))
            ack = H.UpdateConsumerOffsetRequestHeader(group, topic, q, 3)
            await call(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ack.to_ext()))

    try:
        await asyncio.gather(*(fill(t) for t in names))
        await asyncio.gather(*(consume(f"ScrapeGroup{g:03d}", names[(g * per_group + k) % topics])
                               for g in range(groups) for k in range(per_group)))
    finally:
        await client.close()


async def churn(port: int, topics: int) -> None:
    """One send to every topic: every topic's in-counters and size histogram and every pair's lag move."""
    from mq.remoting import RemotingClient

    client = RemotingClient(name="bench-churn")
    sem = asyncio.Semaphore(64)

    async def one(t: int) -> None:
        topic = f"ScrapeTopic{t:04d}"
        async with sem:
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, H.SendMessageRequestHeaderV2(
                    producer_group="BenchPG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
                    queue_id=t % 4, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
                    properties="").to_ext(), b"y" * 200), 30)

    try:
        await asyncio.gather(*(one(t) for t in range(topics)))
    finally:
        await client.close()


async def scrape_probed(url: str, port: int) -> tuple[float, float, float, bytes]:
    """GET ``url`` (curl, in its own process, when installed) while one connection sends GET_MAX_OFFSET requests
    to the broker, one every millisecond or so: (GET seconds, longest round trip during the GET, longest round
    trip in as long a window just after, with no GET), and the body. The round trips bound the broker's
    event-loop stalls."""
    from mq.remoting import RemotingClient

    client = RemotingClient(name="bench-probe")
    addr = f"127.0.0.1:{port}"
    cmd = H.GetMaxOffsetRequestHeader(topic="ScrapeTopic0000", queue_id=0)

    async def probe(stop: asyncio.Event) -> float:
        worst = 0.0
        while not stop.is_set():
            t0 = time.perf_counter()
            await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, cmd.to_ext()), 30)
            worst = max(worst, time.perf_counter() - t0)
            await asyncio.sleep(0.001)  # light enough not to take the broker's CPU from the scrape
        return worst

    async def fetch() -> tuple[float, bytes]:
        if shutil.which("curl"):
            t0 = time.perf_counter()
            proc = await asyncio.create_subprocess_exec("curl", "-sf", url, stdout=subprocess.PIPE)
            body, _ = await proc.communicate()
            return time.perf_counter() - t0, body
        return await asyncio.to_thread(get, url)

    try:
        stop = asyncio.Event()
        task = asyncio.ensure_future(probe(stop))
        seconds, body = await fetch()
        stop.set()
        during = await task
        stop = asyncio.Event()
        task = asyncio.ensure_future(probe(stop))
        await asyncio.sleep(min(seconds, 1.0))
        stop.set()
        before = await task
    finally:
        await client.close()
    return seconds, during, before, body


def bench_scrape(args: argparse.Namespace) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    tmp = Path(tempfile.mkdtemp(prefix="mq-metrics-scrape-"))
    mport = free_port()
    proc, port = start_broker(tmp / "big", mport)
    url = f"http://127.0.0.1:{mport}/metrics"
    try:
        t0 = time.perf_counter()
        asyncio.run(populate(port, args.topics, args.groups, 5))
        print(f"populated {args.topics} topics x 4 queues, {args.groups} groups x 5 topics in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        time.sleep(1.0)
        ps = psutil.Process(proc.pid)
        # per kind of scrape: (GET s, broker CPU s during the GET, longest round trip during, and without a GET,
        # the broker's own wall and CPU time of the scrape, read from the next scrape's answer)
        rows: dict[str, list[tuple[float, ...]]] = {"first": [], "idle": [], "churn": []}
        body, previous = b"", None
        with CpuWindow() as w:
            for i in range(args.scrapes + 1):  # the last one only reads the time of the one before
                kind = "first" if i == 0 else ("churn" if args.churn and i % 2 == 0 else "idle")
                if kind == "churn" and i < args.scrapes:
                    asyncio.run(churn(port, args.topics))
                time.sleep(1.1)  # past the lag pass's minimum interval: every scrape computes it again
                c0 = sum(ps.cpu_times()[:2])
                seconds, during, before, body = asyncio.run(scrape_probed(url, port))
                cpu = sum(ps.cpu_times()[:2]) - c0
                own = [float(m.group(1)) if m else float("nan") for m in (re.search(
                    rb"^mq_metrics_scrape_%s_seconds\{[^}]*\} (\S+)$" % name, body, re.M) for name in (
                        b"duration", b"cpu"))]
                if previous is not None:
                    rows[previous[0]].append((*previous[1], *own))
                previous = (kind, (seconds, cpu, during, before)) if i < args.scrapes else None
        samples = [s for fam in text_string_to_metric_families(body.decode()) for s in fam.samples]
        lag_rows = sum(1 for s in samples if s.name == "rocketmq_consumer_lag_messages")
        print(f"scrape of {args.topics} topics / {args.groups} groups ({lag_rows} lag series; "
              f"{len(body) / 1024:.0f} KiB, {len(samples):,} samples); {w.short()}")
        print("  GET: the GET's wall time (curl); broker: the scrape's wall and CPU time as the broker reports them "
              "(mq_metrics_scrape_*); CPU: the broker process's CPU time during the GET (10 ms ticks); loop: the "
              "longest round trip of GET_MAX_OFFSET requests, one a millisecond, during the GET (and in as long a "
              "window without one)")
        for kind, what in (("first", "first scrape (nothing kept yet)"),
                           ("idle", "then, nothing changed but the clock"),
                           ("churn", "then, after one send to every topic")):
            got = rows[kind]
            if not got:
                continue

            def med(k: int) -> float:
                return statistics.median(x[k] for x in got) * 1e3

            def worst(k: int) -> float:
                return max(x[k] for x in got) * 1e3

            print(f"  {what:36s} n={len(got):2d}  GET median {med(0):6.1f} worst {worst(0):6.1f} ms | broker wall "
                  f"{med(4):6.1f} CPU {med(5):6.1f} ms (median) | process CPU {med(1):4.0f} ms | loop median "
                  f"{med(2):5.1f} worst {worst(2):5.1f} ms (no GET: {med(3):4.1f}, {worst(3):5.1f})")
        from importlib.metadata import version

        print(f"prometheus_client {version('prometheus_client')}; python speed "
              f"{python_speed():.0f} ns per reference call")
    finally:
        stop_broker(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--scrapes", type=int, default=21)
    ap.add_argument("--no-churn", dest="churn", action="store_false",
                    help="scrape an idle broker only (by default every other scrape follows a send to every topic)")
    ap.add_argument("--only", choices=("sends", "scrape"))
    ap.add_argument("--large", action="store_true",
                    help="sends: the broker with metrics first gets --topics topics and --groups groups")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if args.only != "scrape":
        bench_sends(args)
    if args.only != "sends":
        bench_scrape(args)


if __name__ == "__main__":
    main()
