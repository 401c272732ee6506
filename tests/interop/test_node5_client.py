"""The official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs) against the broker's gRPC endpoint.

A second 5.x implementation beside the Python one (test_py5_client.py): its own gRPC stack (@grpc/grpc-js), its own
startup (it waits for the Settings reply on Telemetry before anything else), receipt handles, retry policy and
message mapping. Each role runs in its own Node process (``node5_driver.js``) under a timeout; the name server
and broker run in this process with a gRPC endpoint on a free port."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.interop.conftest import grpc_daemons
from tests.interop.helpers import group_connections, mq_cli, npm_package, running
from tests.interop.node_client import install_node5

pytestmark = pytest.mark.interop
DRIVER = str(Path(__file__).with_name("node5_driver.js"))


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return {**os.environ, "MQ_NODE5_CLIENT": str(npm_package(install_node5, "the 5.x Node.js client"))}


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    with grpc_daemons(str(tmp_path_factory.mktemp("node5"))) as daemons:
        yield daemons


def node5(env: dict, d, *args: object, timeout: float = 90) -> list[dict]:
    proc = subprocess.run(["node", DRIVER, str(args[0]), d.endpoint, *map(str, args[1:])], capture_output=True,
                          text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]


def node5_running(env: dict, d, *args: object):
    """A consumer process (``helpers.running``), yielded once it has started."""
    return running(["node", DRIVER, str(args[0]), d.endpoint, *map(str, args[1:])], env)


def received(lines: list[dict]) -> list[dict]:
    return [ln["received"] for ln in lines if "received" in ln][-1]


def test_send_is_read_by_mq_pull_with_id_tag_keys_and_properties(env, d):
    sent = node5(env, d, "send", "Node5Normal", 3, "--tag", "TagA")
    ids = [s["id"] for s in sent]
    assert len(set(ids)) == 3 and all(len(i) == 34 for i in ids)
    pulled = {m["msgId"]: m for m in mq_cli(d.namesrv.address, "pull", "-t", "Node5Normal")}
    assert set(pulled) == set(ids)
    for s in sent:
        m = pulled[s["id"]]
        assert (m["tags"], m["keys"], m["body"]) == ("TagA", f"node5key-{s['i']}", f"node5-{s['i']}")


def test_simple_consumer_receives_acks_and_nothing_comes_back(env, d):
    sent = node5(env, d, "send", "Node5Ack", 5, "--tag", "TagA", "--prefix", "ack")
    got = received(node5(env, d, "receive", "Node5Ack", "Node5AckGroup", 5, 30))
    assert sorted(m["id"] for m in got) == sorted(s["id"] for s in sent)
    by_id = {m["id"]: m for m in got}
    for s in sent:
        m = by_id[s["id"]]
        assert (m["body"], m["tag"], m["keys"], m["attempt"]) == (f"ack-{s['i']}", "TagA", [f"ackkey-{s['i']}"], 1)
        assert m["props"].get("color") == f"red-{s['i']}" and m["born"] > 0
    # longer than the 10 s invisible time: an ack that did not take would bring the message back
    assert received(node5(env, d, "receive", "Node5Ack", "Node5AckGroup", 1, 14)) == []


def test_tag_and_sql_filters(env, d):
    node5(env, d, "send", "Node5Filter", 2, "--tag", "TagA", "--prefix", "a")
    node5(env, d, "send", "Node5Filter", 2, "--tag", "TagB", "--prefix", "b")
    by_tag = received(node5(env, d, "receive", "Node5Filter", "Node5TagGroup", 2, 30, "--tag", "TagB"))
    assert sorted(m["body"] for m in by_tag) == ["b-0", "b-1"]
    by_sql = received(node5(env, d, "receive", "Node5Filter", "Node5SqlGroup", 1, 30,
                            "--sql", "color = 'red-1' AND TAGS = 'TagA'"))
    assert [m["body"] for m in by_sql] == ["a-1"]


def test_fifo_message_group_keeps_send_order(env, d):
    from mq.protocol.bodies import SubscriptionGroupConfig

    async def orderly() -> None:
        d.broker.subscription_groups.put(SubscriptionGroupConfig(group_name="Node5FifoGroup",
                                                                 consume_message_orderly=True))

    d.call(orderly())
    node5(env, d, "send", "Node5Fifo", 12, "--group", "order-1", "--prefix", "fifo")
    got = received(node5(env, d, "receive", "Node5Fifo", "Node5FifoGroup", 12, 40))
    assert [m["body"] for m in got] == [f"fifo-{i}" for i in range(12)]
    assert {m["group"] for m in got} == {"order-1"}


def test_delay_message_is_not_delivered_before_it_is_due(env, d):
    with node5_running(env, d, "receive", "Node5Delay", "Node5DelayGroup", 1, 40) as finish:
        (sent,) = node5(env, d, "send", "Node5Delay", 1, "--delay-ms", 3000)
        got = received(finish())
    assert len(got) == 1 and got[0]["id"] == sent["id"]
    assert got[0]["delivery_ts"] > 0
    assert got[0]["delivery_ts"] <= got[0]["at"] <= got[0]["delivery_ts"] + 1500
    assert got[0]["at"] - sent["at"] >= 2500


def test_push_consumer_redelivers_a_failed_message_and_is_listed(env, d):
    with node5_running(env, d, "push", "Node5Push", "Node5PushGroup", 3, 60, "--fail-once") as finish:
        conns = group_connections(d.namesrv.address, "Node5PushGroup")
        sent = node5(env, d, "send", "Node5Push", 3, "--prefix", "push")
        lines = finish()
    # the Node client sends x-mq-language HTTP (RocketMQ's proxy takes it with LanguageCode.valueOf), and RocketMQ
    # 5's proxy lists it so
    assert conns and conns[0]["language"] == "HTTP", conns
    attempts: dict[str, list[int]] = {}
    for ln in lines:
        if "got" in ln:
            attempts.setdefault(ln["got"]["id"], []).append(ln["got"]["attempt"])
    assert sorted(m["id"] for m in received(lines)) == sorted(s["id"] for s in sent)
    assert all(attempts[s["id"]][:2] == [1, 2] for s in sent), attempts
    assert "Node5Push" in json.dumps(mq_cli(d.namesrv.address, "consumerProgress", "-g", "Node5PushGroup"))


def test_transactions_commit_rollback_and_check_back(env, d):
    lines = node5(env, d, "transaction", "Node5Tx", 30)
    ids = {ln["kind"]: ln["id"] for ln in lines if "kind" in ln}
    assert set(ids) == {"commit", "rollback", "unknown"}
    assert [ln["checked"] for ln in lines if "checked" in ln][:1] == [ids["unknown"]]
    got = received(node5(env, d, "receive", "Node5Tx", "Node5TxGroup", 2, 30))
    assert sorted(m["body"] for m in got) == ["commit", "unknown"]
    assert received(node5(env, d, "receive", "Node5Tx", "Node5TxGroup", 1, 6)) == []  # the rollback never comes


def test_4x_send_is_received_by_the_5x_node_client(env, d):
    mq_cli(d.namesrv.address, "send", "-t", "Node5From4x", "--body", "from-4x", "--tag", "Tag4", "--keys", "key4")
    got = received(node5(env, d, "receive", "Node5From4x", "Node5From4xGroup", 1, 30))
    assert [(m["body"], m["tag"], m["keys"]) for m in got] == [("from-4x", "Tag4", ["key4"])]
