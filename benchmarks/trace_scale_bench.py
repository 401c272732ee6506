"""Scale benchmark of the trace analytics, end to end through the `mq` CLI and real daemons.

    /work/venv/bin/python benchmarks/trace_scale_bench.py --records 5000000 --master 'local[2]'

1. starts a name server and a broker (traceTopicEnable) in this process (served from a background thread);
2. generates ~N synthetic trace records (mq.trace.synthetic, one hour of traffic ending now) and sends them
   into the broker's RMQ_SYS_TRACE_TOPIC as trace messages over several connections (pipelined
   SEND_MESSAGE_V2, up to 200 records per message, zlib bodies) -> send rate;
3. `mq trace export --to ARCHIVE` (live pull -> Parquet by date/hour) -> export rate;
4. `mq trace analyze --since 2h --json` read live from the broker -> wall time;
5. `mq trace analyze --input ARCHIVE --since 2h --json` -> wall time.
Prints each figure and the job's stage timings. A benchmark, not a test: nothing is asserted but that
the reports count every record sent.

``--workdir DIR --reuse`` restarts the broker on the store a previous run left in DIR and skips step 2
(the records are then those of that run; widen ``--since`` if it was long ago).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mq.config import BrokerConfig, NamesrvConfig, StoreConfig
from mq.remoting import new_event_loop
from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate, send_bodies

MQ = str(Path(sys.executable).parent / "mq")
RECORDS_PER_MESSAGE = 4.3


def cli(ns: str, *args: str) -> tuple[float, dict, list[str]]:
    t0 = time.perf_counter()
    p = subprocess.run([MQ, "-n", ns, *args], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"mq {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return dt, json.loads(p.stdout), [ln for ln in p.stderr.splitlines() if ln.startswith("[")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="3g")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--chunk-messages", type=int, default=2000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--skip", default="", help="comma list of steps to skip: export,live,archive")
    ap.add_argument("--reuse", action="store_true", help="reuse the broker store left in --workdir (no generation)")
    ap.add_argument("--since", default="2h", help="analysis window start given to `mq trace analyze`")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    if a.reuse and not (a.workdir and (Path(a.workdir) / "store").is_dir()):
        raise SystemExit("--reuse needs a --workdir holding the store of a previous run")
    work = Path(a.workdir or tempfile.mkdtemp(prefix="mq-trace-scale-"))
    if not a.reuse:
        shutil.rmtree(work / "store", ignore_errors=True)
    shutil.rmtree(work / "archive", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    print(f"workdir {work}; load average {os.getloadavg()}; cpus {os.cpu_count()}", flush=True)

    from mq.daemon.broker.controller import BrokerController
    from mq.daemon.namesrv.server import NamesrvServer

    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    ns = NamesrvServer(NamesrvConfig(host="127.0.0.1", listen_port=0, kv_config_path=str(work / "kv.json")))
    loop.run_until_complete(ns.start())
    broker = BrokerController(
        BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr=ns.address, trace_topic_enable=True),
        store_config=StoreConfig(store_path_root_dir=str(work / "store"), mapped_file_size_commit_log=256 << 20))
    loop.run_until_complete(broker.start())
    messages = int(a.records / RECORDS_PER_MESSAGE)
    now = int(time.time() * 1000)
    cfg = SyntheticConfig(messages=messages, start_ms=now - 70 * 60_000, duration_ms=60 * 60_000,
                          max_records_per_body=200)
    truth = GroundTruth()
    if a.reuse:
        print(f"reusing the broker store in {work} (no generation)", flush=True)
    else:
        stats = loop.run_until_complete(send_bodies(broker.address, "RMQ_SYS_TRACE_TOPIC", generate(cfg, truth),
                                                    connections=a.connections, in_flight=16))
        print(f"generated+sent {truth.records:,} records (+{truth.malformed:,} malformed) in {stats.messages:,} "
              f"trace messages, {stats.bytes / 1e6:.1f} MB, in {stats.seconds:.1f} s = "
              f"{truth.records / stats.seconds:,.0f} records/s ({stats.messages / stats.seconds:,.0f} msg/s; "
              f"generation is most of it)", flush=True)  # fmt: skip
    server = threading.Thread(target=loop.run_forever, daemon=True)
    server.start()
    spark = ("--master", a.master, "--conf", f"spark.driver.memory={a.driver_memory}",
             "--chunk-messages", str(a.chunk_messages))
    try:
        if "export" not in skip:
            load = os.getloadavg()[0]
            dt, e, stages = cli(ns.address, "trace", "export", "--to", str(work / "archive"), "--json", *spark)
            print(f"export: {e['records']:,} records (+{e['malformed_total']:,} malformed) in {dt:.1f} s = "
                  f"{e['records'] / dt:,.0f} records/s end to end; "
                  f"load average {load:.2f} -> {os.getloadavg()[0]:.2f}; "
                  f"job timings {e['timings']}", flush=True)
        for name, extra in (("live", ()), ("archive", ("--input", str(work / "archive")))):
            if name in skip or (name == "archive" and "export" in skip):
                continue
            load = os.getloadavg()[0]
            dt, r, stages = cli(ns.address, "trace", "analyze", "--since", a.since, "--json", "--top-ids", "10",
                                *extra, *spark)
            n = r["records"]["in_window"]
            print(f"analyze ({name}): {n:,} records in window (+{r['records']['malformed_total']:,} malformed) in {dt:.1f} s = {n / dt:,.0f} records/s end to end "
                  f"(missing {len(r['missing'])}); load average {load:.2f} -> {os.getloadavg()[0]:.2f}; job timings: "
                  f"{ {k: v for k, v in r['timings'].items() if not k.startswith('table:')} }", flush=True)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        server.join(5)
        loop.run_until_complete(broker.stop())
        loop.run_until_complete(ns.stop())
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
