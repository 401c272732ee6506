"""`mq send` through click's CliRunner against the fake cluster (hosted on a background loop thread)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from .fake_broker import start_cluster, stop_cluster

from mq.cli.main import cli
from mq.client.sync import LoopThread


@pytest.fixture(scope="module")
def hosted():
    lt = LoopThread("fake-cluster")
    ns, brokers = lt.run(start_cluster("broker-a", "broker-b", topics={"TopicTest": 4}))
    try:
        yield ns, brokers
    finally:
        lt.run(stop_cluster(ns, brokers))
        lt.stop()


def invoke(ns, *args, input=None):
    return CliRunner().invoke(cli, ["-n", ns.addr, *args], input=input, catch_exceptions=False,
                              standalone_mode=False)


def test_send_typed_exactly_generates_a_body(hosted):
    ns, (a, b) = hosted
    before = len(a.requests) + len(b.requests)
    r = invoke(ns, "send", "-t", "TopicTest", "--tag", "TagA", input="")
    assert r.exit_code == 0, r.output
    assert "SEND_OK" in r.output
    assert len(a.requests) + len(b.requests) == before + 1
    msgs = a.stored("TopicTest") + b.stored("TopicTest")
    assert any(m.body.startswith(b"Hello mq ") and m.tags == "TagA" for m in msgs)


def test_send_json_stdin_body_properties_and_exact_queue(hosted):
    ns, (a, b) = hosted
    r = invoke(ns, "send", "-t", "TopicTest", "--broker", "broker-b", "--queue", "2", "--keys", "k1,k2",
               "--property", "color=red", "--json", input="piped body")
    res = json.loads(r.output)
    assert res["status"] == "SEND_OK" and res["broker"] == "broker-b" and res["queueId"] == 2
    stored = b.stored("TopicTest", 2)[res["queueOffset"]]
    assert stored.body == b"piped body" and stored.keys == "k1 k2" and stored.properties["color"] == "red"


def test_send_count_summary(hosted):
    ns, (a, b) = hosted
    r = invoke(ns, "send", "-t", "TopicTest", "--count", "30", "--size", "100", "--async", "--json")
    out = json.loads(r.output)
    assert out["summary"]["ok"] == 30 and out["summary"]["failed"] == 0 and len(out["results"]) == 30
    assert {x["broker"] for x in out["results"]} == {"broker-a", "broker-b"}


def test_send_errors_name_the_cause(hosted):
    from mq.errors import InvalidTopicError, TopicNotExistError

    ns, _ = hosted
    with pytest.raises(InvalidTopicError, match=r"illegal characters, allowing only"):
        invoke(ns, "send", "-t", "bad topic", "--body", "x")
    with pytest.raises(TopicNotExistError, match="no route for topic 'NoSuchTopic'"):
        invoke(ns, "send", "-t", "NoSuchTopic", "--body", "x")


def test_send_main_prints_one_line_and_exits_nonzero(hosted, capsys):
    from mq.cli.main import main

    ns, _ = hosted
    with pytest.raises(SystemExit) as ei:
        main(["-n", "127.0.0.1:1", "send", "-t", "TopicTest", "--body", "x"])
    assert ei.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach name server 127.0.0.1:1" in err[0]
