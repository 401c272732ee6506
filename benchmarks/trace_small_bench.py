"""Start-up benchmark of ``mq trace analyze`` on a small store: where the seconds of a tiny report go.

    python benchmarks/trace_small_bench.py --records 100 --rounds 3
    python benchmarks/trace_small_bench.py --tree /tmp/mq-old --tree . --rounds 4   # old and new, alternating
    python benchmarks/trace_small_bench.py --first-run --rounds 3 --warmup 0   # each run without an archive

1. starts `mq namesrv start` and `mq broker start` (traceTopicEnable) as their own processes;
2. sends ~N synthetic trace records (mq.trace.synthetic, the last 30 minutes) into RMQ_SYS_TRACE_TOPIC;
3. runs the real command, ``python -m mq.cli.main -n NS trace analyze --since 1d --json``, once per ``--tree``
   per round (each tree's ``mq`` package imported through PYTHONPATH, so two code trees alternate in one run
   against the same broker), and prints per run its wall time and its phases:

   - ``cli``: process start to the CLI's first progress line (Python, imports, the input's size probe);
   - ``jvm``: from there to the JVM's start (the spark-submit shell scripts and the java launcher);
   - ``submit``: JVM start to the job's Python process starting (SparkSubmit, the py4j gateway);
   - ``import``: the job's Python imports (pyspark, mq);
   - ``session``: the SparkSession (SparkContext, executors, SQL session);
   - the job's own stages (``plan``, ``load``, ``prepare``, ``table:*`` summed as ``tables``, ``done``), as
     the job's report times them;
   - ``exit``: the job's last stage to the CLI's exit (SparkContext stop, JVM exit, rendering).

   and its CPU time (user + system of the CLI and every process under it, the JVM included), which a busy
   machine inflates less than the wall time. The jvm/submit/import split needs a job that reports its
   start-up times (``report["startup"]``); for an older job those phases are shown together as ``start``.

``--first-run`` measures a first use: the CLI gets a private MQ_HOME whose Spark class-data archive is removed
before each run, so every run is one that writes it. The CLI returns once the report is ready, and the JVM's
dump of the archive goes on under ``mq.trace.archive_finisher``. The run's line also says when the archive was
installed, counted from the CLI's start. That dump's CPU is not in the run's CPU time, as the CLI has exited.

A benchmark, not a test: it prints figures and asserts only that each report counts the records sent.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemons import daemons  # noqa: E402

from mq.remoting import new_event_loop  # noqa: E402
from mq.trace.synthetic import GroundTruth, SyntheticConfig, generate, send_bodies  # noqa: E402

RECORDS_PER_MESSAGE = 4.3
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: A progress line of the CLI on a pipe: ``[  12.3s] stage detail``.
_LINE = re.compile(r"^\[\s*(\d+(?:\.\d+)?)s\] (\S+)")


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def feed(broker_ns: str, records: int) -> GroundTruth:
    """Send about ``records`` trace records of the last 30 minutes to the broker the name server routes to."""
    from mq.trace.live_reader import fetch_route

    route = fetch_route([broker_ns], TRACE_TOPIC)
    if route is None:
        raise SystemExit(f"{TRACE_TOPIC} has no route: is traceTopicEnable on?")
    addr = route.broker_datas[0].broker_addrs.get(0) or route.broker_datas[0].broker_addrs.get("0")
    truth = GroundTruth()
    now = int(time.time() * 1000)
    cfg = SyntheticConfig(messages=max(1, round(records / RECORDS_PER_MESSAGE)), seed=5, start_ms=now - 30 * 60_000,
                          duration_ms=10 * 60_000, dlq_rate=0.0)
    loop = new_event_loop()
    try:
        loop.run_until_complete(send_bodies(addr, TRACE_TOPIC, generate(cfg, truth), connections=1, in_flight=4))
    finally:
        loop.close()
    return truth


def fresh_archive(cache: Path) -> None:
    """Wait for any finisher still writing an archive in ``cache``, then remove every archive there."""
    from mq.trace.class_archive import wait_for_dumps

    if not wait_for_dumps(cache, 300.0):
        raise SystemExit(f"a class-data archive is still being written in {cache} after 300 s")
    for p in cache.glob("*.jsa"):
        p.unlink()


def archive_ready(cache: Path, t0: float, timeout: float = 120.0) -> float | None:
    """Seconds from ``t0`` until no finisher holds a lock in ``cache`` and an archive is there (None: none)."""
    from mq.trace.class_archive import wait_for_dumps

    wait_for_dumps(cache, timeout)
    return time.time() - t0 if any(cache.glob("*.jsa")) else None


def run_once(tree: Path, ns: str, since: str, extra: list[str], env: dict[str, str]) -> dict:
    """One `mq trace analyze` of ``tree``; returns its wall time, CPU time (user + system of the CLI and every
    process under it: JVM, job, Python workers), phases and record count."""
    env = dict(env, PYTHONPATH=str(tree), SPARK_LOCAL_IP="127.0.0.1")
    argv = [sys.executable, "-m", "mq.cli.main", "-n", ns, "trace", "analyze", "--since", since, "--json", *extra]
    lines: list[tuple[float, str]] = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.Popen(argv, cwd=str(tree), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read_err() -> None:
        assert proc.stderr is not None
        for ln in proc.stderr:
            lines.append((time.time(), ln.rstrip("\n")))

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait()
    reader.join()
    t_end = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"mq trace analyze ({tree}) failed ({proc.returncode}):\n"
                         + "\n".join(ln for _, ln in lines[-40:]))
    report = json.loads(out)
    stages = [(t, m.group(2)) for t, ln in lines if (m := _LINE.match(ln))]
    first = stages[0][0] if stages else t0  # "starting spark-submit": the CLI is up
    phases: dict[str, float] = {"cli": first - t0}
    start = report.get("startup") or {}
    timings = dict(report.get("timings") or {})
    session = timings.pop("session", 0.0)
    if start.get("jvm_start_ms") and start.get("python_start_ms") and start.get("session_start_ms"):
        phases["jvm"] = start["jvm_start_ms"] / 1000 - first
        phases["submit"] = (start["python_start_ms"] - start["jvm_start_ms"]) / 1000
        phases["import"] = (start["session_start_ms"] - start["python_start_ms"]) / 1000
        phases["session"] = session
    else:  # a job that does not report its start-up: up to the arrival of its first stage, "session"
        phases["start"] = next((t for t, st in stages if st == "session"), first) - first
    for k, v in timings.items():  # the table:<name> stages end one after another: "tables" is their sum
        if k.startswith("table:"):
            phases["tables"] = phases.get("tables", 0.0) + v
        else:
            phases[k] = phases.get(k, 0.0) + v
    done = next((t for t, st in stages if st == "done"), t_end)
    phases["exit"] = t_end - done
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": t_end - t0, "cpu": cpu, "phases": phases, "records": report["records"]["in_window"], "t0": t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100, help="approximate number of trace records in the store")
    ap.add_argument("--since", default="1d", help="`mq trace analyze --since`")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1, help="uncounted runs per tree first")
    ap.add_argument("--tree", action="append", default=[],
                    help="a code tree whose mq to run (repeatable; alternated within each round) [default: this one]")
    ap.add_argument("--namesrv", default=None, help="use this name server's brokers as they are (no daemons, no feed)")
    ap.add_argument("--arg", action="append", default=[], help="extra `mq trace analyze` argument (repeatable)")
    ap.add_argument("--first-run", action="store_true",
                    help="every run without the class-data archive (a private MQ_HOME), as a first use")
    a = ap.parse_args()
    trees = [Path(t).resolve() for t in a.tree] or [Path(__file__).resolve().parents[1]]
    print(f"cpus {os.cpu_count()}; load average {_load()}", flush=True)
    with contextlib.ExitStack() as stack:
        if a.namesrv:
            ns, expected = a.namesrv, None
            print(f"using the name server at {ns} and the trace records its brokers hold", flush=True)
        else:
            ns, _ = stack.enter_context(daemons(broker_yaml="traceTopicEnable: true\n"))
            truth = feed(ns, a.records)
            expected = truth.records
            print(f"store: {truth.records} trace records (+{truth.malformed} malformed) in {truth.bodies} trace "
                  f"messages", flush=True)
        # The CLI runs with this environment (its MQ_HOME, where the Spark driver's class-data archive is kept),
        # not the daemons' temporary one; the warm-up runs let it write that archive once, as a first use does.
        env = dict(os.environ)
        cache = None
        if a.first_run:
            env["MQ_HOME"] = stack.enter_context(tempfile.TemporaryDirectory(prefix="mq-first-run-"))
            cache = Path(env["MQ_HOME"]) / "cache" / "spark"
            stack.callback(fresh_archive, cache)  # no finisher outlives the benchmark
        for _ in range(a.warmup):
            for tree in trees:
                r = run_once(tree, ns, a.since, a.arg, env)
                print(f"warm-up {tree}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU (not counted)", flush=True)
        walls: dict[Path, list[float]] = {t: [] for t in trees}
        cpus: dict[Path, list[float]] = {t: [] for t in trees}
        for rnd in range(a.rounds):
            for tree in trees:
                if cache is not None:
                    fresh_archive(cache)
                load = _load()
                r = run_once(tree, ns, a.since, a.arg, env)
                if expected is not None and r["records"] != expected:
                    raise SystemExit(f"the report counts {r['records']} records, {expected} were sent")
                walls[tree].append(r["wall"])
                cpus[tree].append(r["cpu"])
                ph = ", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items())
                ready = ""
                if cache is not None:
                    t = archive_ready(cache, r["t0"])
                    ready = "; no archive written" if t is None else f"; archive installed at {t:.2f} s"
                cpu = "CPU not counted (the job outlives the CLI)" if cache is not None else f"{r['cpu']:.2f} s CPU"
                print(f"round {rnd + 1} {tree}: {r['wall']:.2f} s wall, {cpu}; load average {load} -> "
                      f"{_load()}{ready}\n  phases (s): {ph}", flush=True)
        for tree in trees:
            w, c = walls[tree], cpus[tree]
            cpu = "" if cache is not None else f", CPU median {statistics.median(c):.2f} s"
            print(f"{tree}: wall median {statistics.median(w):.2f} s (min {min(w):.2f}, max {max(w):.2f}){cpu}, over "
                  f"{len(w)} run(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
