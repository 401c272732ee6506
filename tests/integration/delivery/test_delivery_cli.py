"""`mq send` delivery flags against a real broker (CLI in a worker thread, the broker on the test's loop), and
the pure option parsers."""

from __future__ import annotations

import asyncio
import json
import time

import click
import pytest
from .delivery_helpers import make_topic, wait_for, stored_records

from mq.cli.delivery_options import delivery_properties, parse_duration, parse_time


def _cli(namesrv, *args: str):
    from click.testing import CliRunner

    from mq.cli.main import cli

    return asyncio.to_thread(CliRunner().invoke, cli, ["-n", namesrv.address, *args], catch_exceptions=False)



def test_parsers():
    assert parse_duration("90s") == 90 and parse_duration("1h30m") == 5400 and parse_duration("2d") == 172800
    assert parse_duration("1500ms") == 1.5 and parse_duration("12") == 12
    for bad in ("", "5x", "m5", "1h 2m"):
        with pytest.raises(click.BadParameter):
            parse_duration(bad)
    assert parse_time("1700000000000") == 1700000000000
    assert parse_time("2030-01-01T00:00:00+00:00") == 1893456000000
    with pytest.raises(click.BadParameter):
        parse_time("tomorrow")
    assert delivery_properties("90s", None) == {"TIMER_DELAY_SEC": "90"}
    assert delivery_properties(None, "1700000000000") == {"__STARTDELIVERTIME": "1700000000000"}
    with pytest.raises(click.UsageError):
        delivery_properties("1s", "1700000000000")


def test_send_flags(namesrv, broker_factory, run):
    broker = broker_factory(transaction_check_interval=300, transaction_time_out=200)

    async def go():
        await make_topic(broker, "TopicC1")
        t0 = int(time.time() * 1000)
        r = await _cli(namesrv, "send", "-t", "TopicC1", "--body", "later", "--delay", "2s", "--json")
        assert r.exit_code == 0, r.output
        at = t0 + 3000
        r = await _cli(namesrv, "send", "-t", "TopicC1", "--body", "at", "--deliver-at", str(at), "--json")
        assert r.exit_code == 0, r.output
        for state in ("commit", "rollback", "unknown"):
            r = await _cli(namesrv, "send", "-t", "TopicC1", "--body", state, "--transaction", state, "-g",
                           f"PG_C_{state}", "--json")
            assert r.exit_code == 0, r.output
            assert json.loads(r.output)["status"] == "SEND_OK"
        await wait_for(lambda: {m.body for m in stored_records(broker, "TopicC1")} >= {b"later", b"at", b"commit"}, 10)
        await asyncio.sleep(1.0)
        return t0, at

    t0, at = run(go(), 40)
    got = {m.body: m for m in stored_records(broker, "TopicC1")}
    # "unknown": its producer (the CLI) is gone, so the check finds nobody to answer; never committed
    assert set(got) == {b"later", b"at", b"commit"}
    assert got[b"later"].store_timestamp - t0 >= 2000
    assert 0 <= got[b"at"].store_timestamp - at <= 1000
