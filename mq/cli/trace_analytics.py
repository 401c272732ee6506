"""`mq trace analyze` and `mq trace export`: the Spark trace analytics, run through spark-submit.

Both build the job's arguments, run ``spark-submit`` (``mq.trace.spark_submit``) and show its progress on
stderr (a live status line on a terminal, one line per stage otherwise), then print the result.
``analyze`` reads the trace topic straight from the brokers (or ``--input`` archive); ``export`` appends
new trace records to a Parquet archive, incrementally (per-queue cursors stored with the archive).
Heavy modules are imported inside the commands so ``mq --help`` stays instant.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import click

from mq.cli.common import json_option

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")


def parse_duration_ms(text: str) -> int:
    """``90s``, ``10m``, ``1h``, ``1d``, ``2w``, ``250ms`` -> milliseconds."""
    m = _DURATION.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a duration like 30m, 1h, 1d")
    return int(float(m.group(1)) * _UNITS_MS[m.group(2)])


def parse_time_ms(text: str, now_ms: int) -> int:
    """A point in time: a duration ago (``1d``), epoch milliseconds, ``now``, or an ISO date/time (UTC if
    it has no zone)."""
    from datetime import datetime, timezone

    t = text.strip()
    if t == "now":
        return now_ms
    if t.isdigit() and len(t) >= 10:
        return int(t)
    if _DURATION.match(t):
        return now_ms - parse_duration_ms(t)
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither a duration (1h), epoch ms nor an ISO time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def _conf_pairs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        if "=" not in v:
            raise click.BadParameter(f"--conf {v!r}: expected KEY=VALUE")
        k, _, val = v.partition("=")
        out[k.strip()] = val
    return out


class _ProgressView:
    """Shows the job's stages on stderr: a live status (stage + elapsed, ticking) on a terminal, one line
    per stage otherwise. Never silent for long: the status line ticks every second while Spark works."""

    def __init__(self, title: str, quiet: bool = False) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.title = title
        self.quiet = quiet
        self.t0 = time.monotonic()
        self.stage = "starting spark-submit"
        self.status: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _text(self) -> str:
        return f"{self.title}: {self.stage}  [{time.monotonic() - self.t0:5.1f} s]"

    def __enter__(self) -> "_ProgressView":
        if self.console.is_terminal and not self.quiet:
            self.status = self.console.status(self._text())
            self.status.start()
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        elif not self.quiet:
            self.console.print(f"[{0.0:6.1f}s] {self.title}: starting spark-submit", highlight=False)
        return self

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.status.update(self._text())

    def __call__(self, p: Any) -> None:
        detail = " ".join(f"{k}={v}" for k, v in p.detail.items())
        self.stage = f"{p.stage} {detail}".strip()
        if self.status is not None:
            self.status.update(self._text())
        elif not self.quiet:
            self.console.print(f"[{time.monotonic() - self.t0:6.1f}s] {self.stage}", highlight=False)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.status is not None:
            self.status.stop()


def _submit_options(master: str, deploy_mode: str | None, conf: tuple[str, ...], small_input: bool = False) -> Any:
    from mq.daemon.runtime import mq_home
    from mq.trace.spark_submit import SubmitOptions

    return SubmitOptions(master=master, deploy_mode=deploy_mode, conf=_conf_pairs(conf), small_input=small_input,
                         class_cache=str(mq_home() / "cache" / "spark"))


def _small_input(obj: Any, master: str, input_path: str | None, trace_topic: str, lo_ms: int, until_ms: int) -> bool:
    """Whether the job's input is small enough for a short-job JVM (``spark_submit.SMALL_INPUT_MESSAGES``): the
    trace messages stored in the window, counted at the brokers (a few offset requests, no pulls), or the size
    of a local archive's date partitions. False when unknown (a cluster master, a remote archive, a broker that
    does not answer)."""
    from mq.trace.live_reader import ChannelError, plan_read
    from mq.trace.spark_submit import SMALL_INPUT_BYTES, SMALL_INPUT_MESSAGES

    if not master.startswith("local"):
        return False
    if input_path:
        return _archive_bytes(input_path, lo_ms, until_ms) <= SMALL_INPUT_BYTES
    try:
        plan = plan_read(obj.namesrv_addrs, trace_topic, lo_ms, until_ms, timeout=2.0)
    except ChannelError:
        return False
    return not plan.missing and plan.messages <= SMALL_INPUT_MESSAGES


def _archive_bytes(path: str, lo_ms: int, until_ms: int) -> float:
    """Bytes of a local archive's ``date=`` partitions that can hold [lo_ms, until_ms); infinity for a remote
    (URI) or unreadable archive."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", path) and not path.startswith("file:"):
        return float("inf")
    root = Path(path.removeprefix("file:"))
    first, last = (time.strftime("%Y-%m-%d", time.gmtime(max(t, 0) / 1000)) for t in (lo_ms, until_ms))
    total = 0
    try:
        for part in root.iterdir():
            if part.name.startswith("date=") and first <= part.name[5:] <= last:
                total += sum(f.stat().st_size for f in part.rglob("*") if f.is_file())
    except OSError:
        return float("inf")
    return total


_spark_options = [
    click.option("--master", default="local[*]", show_default=True,
                 help="Spark master: local[N], spark://HOST:7077, yarn, k8s://..."),
    click.option("--deploy-mode", type=click.Choice(["client", "cluster"]), default=None,
                 help="spark-submit --deploy-mode (cluster needs --out on a shared file system)."),
    click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark setting (repeatable)."),
    click.option("--trace-topic", default="RMQ_SYS_TRACE_TOPIC", show_default=True, help="The trace topic."),
    click.option("--chunk-messages", type=click.IntRange(1), default=4000, show_default=True,
                 help="Trace messages pulled per Spark task."),
]


def _with(options: list[Any]):  # type: ignore[no-untyped-def]
    def deco(f):  # type: ignore[no-untyped-def]
        for opt in reversed(options):
            f = opt(f)
        return f

    return deco


@click.command("analyze")
@click.option("--since", default="1d", show_default=True, help="Window start: 1h, 1d, epoch ms or ISO time (UTC).")
@click.option("--until", default="now", show_default=True, help="Window end (same forms as --since).")
@click.option("--input", "input_path", default=None,
              help="Analyse a Parquet archive written by `mq trace export` instead of the live brokers.")
@_with(_spark_options)
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Keep the report: DIR/report.json, DIR/tables/<section> (Parquet), DIR/csv/<section>.csv.")
@click.option("--html", "html_file", default=None, type=click.Path(dir_okay=False),
              help="Write a self-contained HTML report (inline SVG charts).")
@click.option("--grace", default="10m", show_default=True, help="Time a message may take to be consumed.")
@click.option("--bucket", default="10m", show_default=True, help="Time bucket of the ledger and series.")
@click.option("--max-reconsume-times", type=int, default=16, show_default=True)
@click.option("--top", type=int, default=20, show_default=True, help="Rows of the top-N tables.")
@click.option("--top-ids", type=int, default=100, show_default=True, help="Ids listed per anomaly list.")
@click.option("--no-compare", is_flag=True, help="Skip the comparison with the previous window.")
@json_option
@click.pass_obj
def analyze(obj: Any, since: str, until: str, input_path: str | None, master: str, deploy_mode: str | None,
            conf: tuple[str, ...], trace_topic: str, chunk_messages: int, out_dir: str | None,
            html_file: str | None, grace: str, bucket: str, max_reconsume_times: int, top: int, top_ids: int,
            no_compare: bool, json_mode: bool) -> None:
    """Analyse message traces with Spark: completeness, latencies, retries, stuck messages, hot keys,
    regressions. Reads the trace topic straight from the brokers (or an archive with --input)."""
    import tempfile

    from mq.cli.console import Console
    from mq.trace.report import load_report, missing_lines, render_terminal, write_html
    from mq.trace.spark_submit import run_job

    now = int(time.time() * 1000)
    since_ms, until_ms = parse_time_ms(since, now), parse_time_ms(until, now)
    if until_ms <= since_ms:
        raise click.BadParameter("--until must be after --since")
    args = ["--since-ms", str(since_ms), "--until-ms", str(until_ms), "--grace-ms", str(parse_duration_ms(grace)),
            "--bucket-ms", str(parse_duration_ms(bucket)), "--max-reconsume-times", str(max_reconsume_times),
            "--top", str(top), "--top-ids", str(top_ids), "--trace-topic", trace_topic,
            "--chunk-messages", str(chunk_messages)]
    if no_compare:
        args.append("--no-compare")
    if not out_dir:  # nobody would see the per-section Parquet/CSV files: skip writing them
        args.append("--no-tables")
    if input_path:
        args += ["--input-format", "parquet", "--input", _abs_uri(input_path)]
    else:
        args += ["--input-format", "live", "--namesrv", ";".join(obj.namesrv_addrs)]
    console = Console(json_mode=json_mode)
    lo_ms = since_ms if no_compare else 2 * since_ms - until_ms  # the job also reads the previous window
    small = _small_input(obj, master, input_path, trace_topic, lo_ms, until_ms)
    with tempfile.TemporaryDirectory(prefix="mq-trace-") as tmp:
        out = Path(out_dir).resolve() if out_dir else Path(tmp) / "out"
        with _ProgressView("mq trace analyze") as view:
            run_job(args, out, options=_submit_options(master, deploy_mode, conf, small), on_progress=view,
                    environ=_job_environ(obj))
        report = load_report(out)
    if html_file:
        write_html(report, html_file)
    if json_mode:
        console.json(report)
        return
    render_terminal(report)
    for line in missing_lines(report):
        console.warn(f"missing data: {line}")
    if report.get("empty"):
        console.line("no trace records in the window")
    if out_dir:
        console.note(f"report: {out}/report.json, tables: {out}/tables (Parquet), {out}/csv (CSV)")
    if html_file:
        console.note(f"html: {html_file}")


def _job_environ(obj: Any) -> dict[str, str]:
    """The job's environment: ours, plus the ACL credentials given on the command line, which the live reader
    signs its requests with (on a cluster master, executors need MQ_ACCESS_KEY/MQ_SECRET_KEY themselves)."""
    env = dict(os.environ)
    if obj.access_key:
        env["MQ_ACCESS_KEY"], env["MQ_SECRET_KEY"] = obj.access_key, obj.secret_key
    return env


def _abs_uri(path: str) -> str:
    """A local path made absolute (Spark runs elsewhere); URIs (hdfs://, s3a://, file:) unchanged."""
    return path if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", path) else str(Path(path).resolve())


@click.command("export")
@click.option("--to", "dest", required=True, help="Archive: a directory, hdfs://... or s3a://...")
@click.option("--since", default=None,
              help="Where queues without a cursor start (1d, epoch ms, ISO time) [default: the oldest kept].")
@_with(_spark_options)
@json_option
@click.pass_obj
def export(obj: Any, dest: str, since: str | None, master: str, deploy_mode: str | None, conf: tuple[str, ...],
           trace_topic: str, chunk_messages: int, json_mode: bool) -> None:
    """Append the trace topic's new records to a Parquet archive partitioned by date and hour. A cursor per
    queue is stored with the archive (_mq_cursors.json), so a re-run fetches only what is new."""
    import json
    import tempfile

    from mq.cli.console import Console
    from mq.trace.report import missing_lines
    from mq.trace.spark_submit import run_job

    args = ["--mode", "export", "--input-format", "live", "--namesrv", ";".join(obj.namesrv_addrs),
            "--archive", _abs_uri(dest), "--trace-topic", trace_topic, "--chunk-messages", str(chunk_messages)]
    if since:
        args += ["--since-ms", str(parse_time_ms(since, int(time.time() * 1000)))]
    console = Console(json_mode=json_mode)
    with tempfile.TemporaryDirectory(prefix="mq-trace-export-") as tmp:
        with _ProgressView("mq trace export") as view:
            run_job(args, Path(tmp), options=_submit_options(master, deploy_mode, conf), on_progress=view,
                    environ=_job_environ(obj))
        result = json.loads((Path(tmp) / "export.json").read_text(encoding="utf-8"))
    if json_mode:
        console.json(result)
        return
    plan = result.get("plan", {})
    console.line(f"exported {result['records']:,} records (+{result['malformed_total']:,} malformed) from "
                 f"{plan.get('messages', 0):,} trace messages to {result['path']}")
    rows = [(q["broker"], q["queue_id"], q["start"], q["end"], q["end"] - q["start"]) for q in plan.get("queues", [])]
    if rows:
        console.table("Queues read", ["broker", "queue", "from", "to", "messages"], rows)
    for line in missing_lines(result):
        console.warn(f"missing data: {line}")
