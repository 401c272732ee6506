"""report.py renders a report.json: terminal tables and a self-contained HTML file with SVG charts."""

from __future__ import annotations

import json
import re

from rich.console import Console

from mq.trace.report import charts, fmt, load_report, render_terminal, write_html

B0, B1 = 1_700_000_400_000, 1_700_001_000_000


def _report() -> dict:
    comp = [
        {"topic": "T", "bucket": B0, "group": "CG", "published": 10, "stored": 9, "send_failed": 1, "consumed": 7,
         "retried": 1, "dead_lettered": 1, "never_consumed": 1, "loss": True},
        {"topic": "T", "bucket": B1, "group": "CG", "published": 5, "stored": 5, "send_failed": 0, "consumed": 5,
         "retried": 0, "dead_lettered": 0, "never_consumed": 0, "loss": False},
    ]  # fmt: skip
    lat = [{"bucket": B0, "sends": 10, "cost_p50": 3, "cost_p90": 7, "cost_p99": 12, "cost_max": 30},
           {"bucket": B1, "sends": 5, "cost_p50": 4, "cost_p90": 9, "cost_p99": 40, "cost_max": 41}]  # fmt: skip
    return {
        "version": 1,
        "window": {"since_ms": B0, "until_ms": B1 + 600_000, "grace_ms": 600_000, "bucket_ms": 600_000},
        "records": {"in_window": 40, "by_type": {"Pub": 15, "SubBefore": 13, "SubAfter": 12}, "malformed_total": 2,
                    "malformed": [{"error": "bad_number", "count": 2}]},
        "sections": {
            "completeness": {"rows": comp},
            "send_latency": {"by_topic": [{"topic": "T", "sends": 15, "failure_rate": 1 / 15, "cost_p50": 3,
                                           "cost_p90": 7, "cost_p99": 40, "cost_max": 41}],
                             "by_group": [], "by_store_host": [], "series": lat},
            "delivery_lag": {"by_group": [], "series": [{"bucket": B0, "group": "CG", "lag_p99": 80},
                                                        {"bucket": B1, "group": "CG", "lag_p99": 95}]},
            "consume_cost": {"by_group": [], "context_codes": [], "slowest_hosts": []},
            "retries": {"histogram": [{"retry_times": 0, "pairs": 12}, {"retry_times": 16, "pairs": 1}],
                        "top_messages": [], "top_keys": []},
            "stuck": {"unconsumed_total": 1, "unconsumed": [{"msg_id": "STUCK-ID-1", "topic": "T", "group": "CG",
                                                              "pub_ts": B0, "age_ms": 1_200_000}],
                      "unfinished_total": 0, "unfinished": []},
            "duplicates": {"total": 0, "extra_deliveries": 0, "rows": []},
            "hot": {"keys": [{"key": "<HOT&key>", "messages": 3}], "tags": [], "store_hosts": [], "trace_queues": []},
            "health": {"messages": 14, "complete": 12, "complete_share": 12 / 14, "orphan_deliveries": 0,
                       "negative_lag": 1, "negative_e2e": 0, "skewed_hosts": []},
            "regressions": {"previous_since_ms": B0 - 1_200_000, "rows": []},
        },
    }  # fmt: skip


def test_terminal_rendering_shows_summary_and_tables() -> None:
    console = Console(record=True, width=200)
    render_terminal(_report(), console)
    text = console.export_text()
    assert "malformed 2" in text and "complete traces 85.71%" in text
    assert "STUCK-ID-1" in text and "2023-11-14 22:20:00" in text
    assert "Duplicate consumption" not in text  # empty tables are omitted


def test_html_is_self_contained_with_three_svg_charts(tmp_path) -> None:
    (tmp_path / "report.json").write_text(json.dumps(_report()))
    path = write_html(load_report(tmp_path), tmp_path / "r.html")
    page = path.read_text()
    assert page.count("<svg") == 3
    assert not re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", page)
    assert "&lt;HOT&amp;key&gt;" in page and "<HOT&key>" not in page
    # Completeness chart: bar heights are proportional to consumed counts 7 and 5 (same scale).
    svg = charts(_report())[2]
    heights = [float(h) for h in re.findall(r'height="([0-9.]+)" fill="#1f77b4"', svg)]
    assert len(heights) == 2 and abs(heights[0] / heights[1] - 7 / 5) < 0.01


def test_cell_formatting() -> None:
    assert fmt("failure_rate", 0.0125) == "1.25%"
    assert fmt("bucket", 0) == "1970-01-01 00:00:00"
    assert fmt("x", None) == "-" and fmt("loss", True) == "yes" and fmt("cost_p99", 12.0) == "12"
