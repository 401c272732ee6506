"""Render the trace analytics job's ``report.json``: rich tables for the terminal, and one self-contained
HTML file with inline SVG charts (no network, no JavaScript). Never imports pyspark.

Charts: send latency p50/p90/p99 per time bucket, delivery lag p99 per consumer group over time, and
completeness per bucket (consumed / dead-lettered / never consumed, summed over topics and groups).
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

#: (section title, path into report["sections"], columns) of the tables shown, in order.
TABLES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("Completeness (per topic x bucket x group)", ("completeness", "rows"),
     ("topic", "bucket", "group", "published", "stored", "send_failed", "consumed", "retried", "dead_lettered",
      "never_consumed", "loss")),
    ("Send latency by topic", ("send_latency", "by_topic"),
     ("topic", "sends", "failure_rate", "cost_p50", "cost_p90", "cost_p99", "cost_max")),
    ("Send latency by producer group", ("send_latency", "by_group"),
     ("group", "sends", "failure_rate", "cost_p50", "cost_p90", "cost_p99", "cost_max")),
    ("Send latency by store host", ("send_latency", "by_store_host"),
     ("store_host", "sends", "failure_rate", "cost_p50", "cost_p90", "cost_p99", "cost_max")),
    ("Delivery lag and end-to-end per consumer group (ms)", ("delivery_lag", "by_group"),
     ("group", "delivered", "lag_p50", "lag_p90", "lag_p99", "lag_max", "e2e_p50", "e2e_p99", "e2e_max")),
    ("Consume cost per group (ms)", ("consume_cost", "by_group"),
     ("group", "consumes", "failure_rate", "cost_p50", "cost_p90", "cost_p99", "cost_max")),
    ("Consume results by group and host", ("consume_cost", "context_codes"),
     ("group", "client_host", "return_type", "count")),
    ("Slowest consumer hosts", ("consume_cost", "slowest_hosts"), ("client_host", "consumes", "cost_p99", "cost_max")),
    ("Retry histogram", ("retries", "histogram"), ("retry_times", "pairs")),
    ("Most failed messages", ("retries", "top_messages"), ("msg_id", "group", "failures", "max_retry", "successes")),
    ("Most failed keys", ("retries", "top_keys"), ("key", "failures")),
    ("Stuck: published, never delivered", ("stuck", "unconsumed"), ("msg_id", "topic", "group", "pub_ts", "age_ms")),
    ("Stuck: delivery started, never finished", ("stuck", "unfinished"),
     ("msg_id", "group", "client_host", "retry_times", "before_ts")),
    ("Duplicate consumption", ("duplicates", "rows"), ("msg_id", "group", "successes", "attempts")),
    ("Hot keys", ("hot", "keys"), ("key", "messages")),
    ("Hot tags", ("hot", "tags"), ("topic", "tags", "messages")),
    ("Placement per store host", ("hot", "store_hosts"), ("topic", "store_host", "messages", "share", "skew")),
    ("Trace queues", ("hot", "trace_queues"), ("broker", "queue_id", "records", "share")),
    ("Clock skew (negative lag) by consumer host", ("health", "skewed_hosts"), ("client_host", "negative_lag", "min_lag")),
    ("Regressions vs the previous window (worst first)", ("regressions", "rows"),
     ("section", "key", "metric", "previous", "current", "delta", "change")),
)  # fmt: skip

_TIME_COLUMNS = {"bucket", "pub_ts", "before_ts"}


def load_report(path: str | Path) -> dict[str, Any]:
    """Read ``report.json`` (a file, or the job's output directory)."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    return json.loads(p.read_text(encoding="utf-8"))


def fmt(column: str, value: Any) -> str:
    """One cell as text: times as UTC, rates/shares as %, floats with 3 significant decimals."""
    if value is None:
        return "-"
    if column in _TIME_COLUMNS and isinstance(value, int):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value / 1000))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if column.endswith("_rate") or column in ("share", "change", "complete_share"):
            return f"{value * 100:.2f}%"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _get(sections: Mapping[str, Any], path: Sequence[str]) -> list[dict[str, Any]]:
    node: Any = sections
    for k in path:
        node = node.get(k, {}) if isinstance(node, Mapping) else {}
    return node if isinstance(node, list) else []


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    """Headline facts: window, records, malformed, stuck, duplicates, trace health."""
    w, rec, s = report["window"], report["records"], report["sections"]
    h = s["health"]
    share = fmt("complete_share", h.get("complete_share"))
    lost = sum(r.get("never_consumed", 0) for r in s["completeness"]["rows"])
    head = [f"window {fmt('bucket', w['since_ms'])} .. {fmt('bucket', w['until_ms'])} UTC, grace {w['grace_ms']} ms"]
    head += [f"MISSING DATA: {m}" for m in missing_lines(report)]
    if report.get("empty"):
        return head + [f"no trace records in this window (malformed {rec['malformed_total']:,})"]
    return head + [
        f"records {rec['in_window']:,} ({', '.join(f'{k} {v:,}' for k, v in sorted(rec['by_type'].items()))}); "
        f"malformed {rec['malformed_total']:,}",
        f"messages {h['messages']:,}, complete traces {share}, orphan deliveries {h['orphan_deliveries']:,}, "
        f"negative lags {h['negative_lag']:,}",
        f"never consumed {lost:,}; stuck undelivered {s['stuck']['unconsumed_total']:,}, unfinished "
        f"{s['stuck']['unfinished_total']:,}; duplicated {s['duplicates']['total']:,}",
    ]


def missing_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per range of the trace topic that could not be read (broker down, data expired)."""
    out = []
    for m in report.get("missing") or []:
        where = f"broker {m['broker']}" + (f" ({m['addr']})" if m.get("addr") else "")
        if m.get("queue_id") is not None:
            where += f" queue {m['queue_id']}"
        if m.get("start") is not None or m.get("end") is not None:
            lo = "?" if m.get("start") is None else m["start"]
            hi = "end" if m.get("end") is None else m["end"]
            where += f" offsets [{lo}, {hi})"
        out.append(f"{where}: {m['reason']}")
    return out


def render_terminal(report: Mapping[str, Any], console: Console | None = None, max_rows: int = 20) -> None:
    """Print the report as rich tables (each capped at ``max_rows`` rows)."""
    console = console or Console()
    for line in summary_lines(report):
        console.print(line)
    for title, path, cols in TABLES:
        rows = _get(report["sections"], path)
        if not rows:
            continue
        t = Table(title=title, title_justify="left")
        for c in cols:
            t.add_column(c, justify="left" if c in ("topic", "group", "msg_id", "key", "client_host") else "right")
        for r in rows[:max_rows]:
            t.add_row(*(fmt(c, r.get(c)) for c in cols))
        if len(rows) > max_rows:
            t.caption = f"{len(rows) - max_rows} more rows in the Parquet output"
        console.print(t)


# ----------------------------------------------------------------------------------------------- SVG

_W, _H, _PAD = 720, 260, 48
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _scale(lo: float, hi: float, a: float, b: float):  # type: ignore[no-untyped-def]
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _axes(title: str, y_max: float, x_lo: int, x_hi: int) -> list[str]:
    e = html.escape
    out = [f'<text x="{_PAD}" y="18" font-size="14" font-weight="bold">{e(title)}</text>',
           f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - 10}" y2="{_H - _PAD}" stroke="#333"/>',
           f'<line x1="{_PAD}" y1="30" x2="{_PAD}" y2="{_H - _PAD}" stroke="#333"/>']  # fmt: skip
    for i in range(5):
        v = y_max * i / 4
        y = _H - _PAD - (_H - _PAD - 30) * i / 4
        out.append(f'<text x="{_PAD - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{fmt("v", float(v))}</text>')
        out.append(f'<line x1="{_PAD}" y1="{y:.1f}" x2="{_W - 10}" y2="{y:.1f}" stroke="#eee"/>')
    for x_val, anchor in ((x_lo, "start"), (x_hi, "end")):
        x = _PAD if anchor == "start" else _W - 10
        label = time.strftime("%m-%d %H:%M", time.gmtime(x_val / 1000))
        out.append(f'<text x="{x}" y="{_H - _PAD + 16}" font-size="10" text-anchor="{anchor}">{label}</text>')
    return out


def line_chart(title: str, series: Mapping[str, Sequence[tuple[int, float]]]) -> str:
    """An inline SVG line chart of named (time ms, value) series."""
    pts = [p for s in series.values() for p in s if p[1] is not None]
    if not pts:
        return f"<p>{html.escape(title)}: no data</p>"
    x_lo, x_hi = min(p[0] for p in pts), max(p[0] for p in pts)
    y_max = max(max(p[1] for p in pts), 1)
    sx, sy = _scale(x_lo, x_hi, _PAD, _W - 10), _scale(0, y_max, _H - _PAD, 30)
    parts = _axes(title, y_max, x_lo, x_hi)
    for i, (name, s) in enumerate(series.items()):
        c = _COLORS[i % len(_COLORS)]
        xy = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s if y is not None)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{xy}"/>')
        parts.append(f'<text x="{_W - 150}" y="{34 + 13 * i}" font-size="11" fill="{c}">{html.escape(name)}</text>')
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img">{"".join(parts)}</svg>'


def stacked_bar_chart(title: str, buckets: Sequence[int], stacks: Mapping[str, Sequence[float]]) -> str:
    """An inline SVG stacked bar chart: one bar per bucket, one colour per stack name."""
    if not buckets:
        return f"<p>{html.escape(title)}: no data</p>"
    totals = [sum(vals[i] for vals in stacks.values()) for i in range(len(buckets))]
    y_max = max(max(totals), 1)
    parts = _axes(title, y_max, buckets[0], buckets[-1])
    width = (_W - 10 - _PAD) / len(buckets)
    sy = _scale(0, y_max, 0, _H - _PAD - 30)
    for i in range(len(buckets)):
        base = _H - _PAD
        for j, (name, vals) in enumerate(stacks.items()):
            h = sy(vals[i])
            if h > 0:
                x = _PAD + i * width + 1
                parts.append(f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{max(width - 2, 1):.1f}" height="{h:.1f}" '
                             f'fill="{_COLORS[j % len(_COLORS)]}"><title>{html.escape(name)} {vals[i]:g}</title></rect>')  # fmt: skip
            base -= h
    for j, name in enumerate(stacks):
        parts.append(f'<text x="{_W - 150}" y="{34 + 13 * j}" font-size="11" fill="{_COLORS[j]}">{html.escape(name)}</text>')
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img">{"".join(parts)}</svg>'


def charts(report: Mapping[str, Any]) -> list[str]:
    """The three charts of the HTML report, as SVG strings."""
    s = report["sections"]
    series = s["send_latency"]["series"]
    lat = {f"send {p}": [(r["bucket"], r[f"cost_{p}"]) for r in series] for p in ("p50", "p90", "p99")}
    lag: dict[str, list[tuple[int, float]]] = {}
    for r in s["delivery_lag"]["series"]:
        lag.setdefault(f"{r['group']} lag p99", []).append((r["bucket"], r["lag_p99"]))
    per_bucket: dict[int, list[float]] = {}
    for r in s["completeness"]["rows"]:
        acc = per_bucket.setdefault(r["bucket"], [0.0, 0.0, 0.0])
        acc[0] += r.get("consumed") or 0
        acc[1] += r.get("dead_lettered") or 0
        acc[2] += r.get("never_consumed") or 0
    buckets = sorted(per_bucket)
    stacks = {name: [per_bucket[b][i] for b in buckets] for i, name in enumerate(("consumed", "dead-lettered", "never consumed"))}
    return [
        line_chart("Send latency per bucket (ms)", lat),
        line_chart("Delivery lag p99 per consumer group (ms)", lag),
        stacked_bar_chart("Completeness per bucket (message x group)", buckets, stacks),
    ]


def render_html(report: Mapping[str, Any], max_rows: int = 50) -> str:
    """The whole report as one self-contained HTML document (inline CSS and SVG, no scripts)."""
    e = html.escape
    body = [f"<h1>RocketMQ trace report</h1><ul>{''.join(f'<li>{e(x)}</li>' for x in summary_lines(report))}</ul>"]
    body += [f'<div class="chart">{c}</div>' for c in charts(report)]
    for title, path, cols in TABLES:
        rows = _get(report["sections"], path)
        if not rows:
            continue
        head = "".join(f"<th>{e(c)}</th>" for c in cols)
        trs = "".join("<tr>" + "".join(f"<td>{e(fmt(c, r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows[:max_rows])
        more = f"<p class=more>{len(rows) - max_rows} more rows</p>" if len(rows) > max_rows else ""
        body.append(f"<h2>{e(title)}</h2><table><tr>{head}</tr>{trs}</table>{more}")
    style = ("body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin-bottom:12px}"
             "td,th{border:1px solid #ccc;padding:2px 8px;font-size:12px;text-align:right}th{background:#f3f3f3}"
             ".chart{margin:12px 0}.more{color:#777;font-size:12px}")  # fmt: skip
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>mq trace report</title>'
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")  # fmt: skip


def write_html(report: Mapping[str, Any], path: str | Path) -> Path:
    p = Path(path)
    p.write_text(render_html(report), encoding="utf-8")
    return p
