"""`mq pull`, `mq consume` and `mq bench` through CliRunner against the fake cluster."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from .fake_broker import start_cluster, stop_cluster

from mq.cli.main import cli
from mq.client.sync import LoopThread
from mq.common import properties as P


@pytest.fixture(scope="module")
def hosted():
    lt = LoopThread("fake-cluster-2")
    ns, brokers = lt.run(start_cluster("broker-a", topics={"PullTopic": 2}))
    a = brokers[0]
    for i in range(10):
        a.put("PullTopic", i % 2, b"body %d" % i, {P.TAGS: "TagA" if i < 5 else "TagB", P.KEYS: f"k{i}",
                                                     P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"ID{i:02d}"})
    try:
        yield ns, a
    finally:
        lt.run(stop_cluster(ns, brokers))
        lt.stop()


def invoke(ns, *args):
    r = CliRunner().invoke(cli, ["-n", ns.addr, *args], catch_exceptions=False, standalone_mode=False)
    return r


def test_pull_walks_every_queue(hosted):
    ns, a = hosted
    rows = json.loads(invoke(ns, "pull", "-t", "PullTopic", "--json").output)
    assert sorted(r["msgId"] for r in rows) == [f"ID{i:02d}" for i in range(10)]
    assert {(r["queueId"], r["queueOffset"]) for r in rows} == {(q, o) for q in (0, 1) for o in range(5)}


def test_pull_expression_queue_offset_count_and_body_dir(hosted, tmp_path):
    ns, a = hosted
    rows = json.loads(invoke(ns, "pull", "-t", "PullTopic", "--expression", "TagB", "--json").output)
    assert sorted(r["msgId"] for r in rows) == [f"ID{i:02d}" for i in range(5, 10)]
    rows = json.loads(invoke(ns, "pull", "-t", "PullTopic", "--queue", "1", "--offset", "2", "--count", "2",
                             "--body-dir", str(tmp_path / "b"), "--json").output)
    assert [(r["queueId"], r["queueOffset"], r["keys"]) for r in rows] == [(1, 2, "k5"), (1, 3, "k7")]
    assert (tmp_path / "b" / "ID05").read_bytes() == b"body 5"
    out = invoke(ns, "pull", "-t", "PullTopic", "--count", "3").output
    assert "ID00" in out and "body 0" in out


def test_consume_prints_then_stops_at_count(hosted):
    ns, a = hosted
    out = invoke(ns, "consume", "-t", "PullTopic", "-g", "CliG", "--from", "first", "--count", "10", "--json",
                 "--timeout", "10").output
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sorted(r["msgId"] for r in rows) == [f"ID{i:02d}" for i in range(10)]
    assert a.offsets[("CliG", "PullTopic", 0)] == 5 and a.offsets[("CliG", "PullTopic", 1)] == 5


def test_bench_produce_reports_summary(hosted):
    ns, a = hosted
    out = invoke(ns, "bench", "produce", "-t", "PullTopic", "--count", "50", "-w", "4", "--json").output
    docs = json.loads("[" + out.replace("}\n{", "},{") + "]")
    total = docs[-1]
    assert total["window"] == "total" and total["ok"] == 50 and total["failed"] == 0
