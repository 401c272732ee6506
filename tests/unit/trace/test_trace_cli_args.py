"""mq trace analyze/export argument handling that needs no Spark: times, durations, --conf, missing lines."""

from __future__ import annotations

import click
import pytest

from mq.cli.trace_analytics import _abs_uri, _conf_pairs, parse_duration_ms, parse_time_ms
from mq.trace.report import missing_lines, summary_lines

NOW = 1_700_000_000_000


def test_durations_and_points_in_time() -> None:
    assert parse_duration_ms("90s") == 90_000 and parse_duration_ms("1d") == 86_400_000
    assert parse_duration_ms("250ms") == 250 and parse_duration_ms("1.5h") == 5_400_000
    assert parse_time_ms("1h", NOW) == NOW - 3_600_000 and parse_time_ms("now", NOW) == NOW
    assert parse_time_ms("1699999999000", NOW) == 1_699_999_999_000
    assert parse_time_ms("2023-11-14T22:13:20", NOW) == NOW  # no zone: UTC
    for bad in ("yesterday", "1y", ""):
        with pytest.raises(click.BadParameter):
            parse_time_ms(bad, NOW)


def test_conf_pairs_and_uris() -> None:
    assert _conf_pairs(("spark.a=1", "spark.b=x=y")) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(click.BadParameter):
        _conf_pairs(("novalue",))
    assert _abs_uri("hdfs://nn:8020/arch") == "hdfs://nn:8020/arch" and _abs_uri("s3a://b/p") == "s3a://b/p"
    assert _abs_uri("rel/dir").startswith("/") and _abs_uri("rel/dir").endswith("rel/dir")


def test_missing_data_and_empty_reports_are_said_in_the_summary() -> None:
    report = {
        "window": {"since_ms": NOW, "until_ms": NOW + 1, "grace_ms": 0},
        "records": {"in_window": 0, "by_type": {}, "malformed_total": 0, "malformed": []},
        "sections": {"health": {}, "completeness": {"rows": []}},
        "empty": True,
        "missing": [{"broker": "broker-b", "addr": "10.0.0.2:10911", "queue_id": 1, "start": 5, "end": None,
                     "reason": "broker unavailable: refused"},
                    {"broker": "broker-c", "addr": "", "queue_id": None, "start": None, "end": None,
                     "reason": "no master address in the route"}],
    }
    assert missing_lines(report) == [
        "broker broker-b (10.0.0.2:10911) queue 1 offsets [5, end): broker unavailable: refused",
        "broker broker-c: no master address in the route",
    ]
    lines = summary_lines(report)
    assert lines[1].startswith("MISSING DATA: broker broker-b") and lines[-1].startswith("no trace records")
