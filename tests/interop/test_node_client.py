"""The official RocketMQ Node.js client (npm ``apache-rocketmq``) against our name server and broker.

``node_client.py`` builds the client once (cached); every script runs in its own Node process under a
timeout. The client is the C++ client underneath, so its wire format is the C++ one; what this adds is the
proof that the published Node package, as an application would use it, works against ``mq``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.interop.helpers import consumer_result, mq_cli, start_consumer
from tests.interop.node_client import NodeClient, NodeClientUnavailable, build

pytestmark = pytest.mark.interop
DRIVER = str(Path(__file__).with_name("node_driver.js"))


@pytest.fixture(scope="module")
def node_client() -> NodeClient:
    try:
        return build()
    except NodeClientUnavailable as exc:
        pytest.skip(f"cannot build the Node.js client here: {exc}")


def produce(client: NodeClient, ns: str, topic: str, count: int, tags: str) -> list[dict]:
    proc = subprocess.run([str(client.node), DRIVER, "produce", ns, topic, "GID_NODE_PRODUCER", str(count), tags],
                          capture_output=True, text=True, timeout=60, env=client.env(), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]


def start_node_consumer(client: NodeClient, ns: str, topic: str, group: str, expression: str, count: int
                        ) -> subprocess.Popen:
    return start_consumer([str(client.node), DRIVER, "consume", ns, topic, group, expression, str(count), "40"],
                          client.env())


def test_node_producer_sends_tagged_keyed_messages_we_can_find(daemons, node_client):
    ns = daemons.namesrv.address
    results = produce(node_client, ns, "NodeSend", 8, "TagA,TagB")
    assert [r["statusStr"] for r in results] == ["OK"] * 8
    assert all(len(r["msgId"]) == 32 for r in results)
    store = daemons.broker.store
    assert sum(store.get_max_offset("NodeSend", q) for q in range(8)) == 8

    # every key of the space-separated KEYS property is indexed, and the msgId the client got is the UNIQ_KEY
    by_key = mq_cli(ns, "queryMsgByKey", "-t", "NodeSend", "-k", "nkey-5")["messages"]
    assert [(m["body"], m["tags"], m["keys"]) for m in by_key] == [("node-5-TagB", "TagB", "nkey-5 nshared")]
    assert by_key[0]["uniqKey"] == results[5]["msgId"]
    shared = mq_cli(ns, "queryMsgByKey", "-t", "NodeSend", "-k", "nshared")["messages"]
    assert sorted(m["body"] for m in shared) == sorted(f"node-{i}-{'TagA' if i % 2 == 0 else 'TagB'}"
                                                       for i in range(8))
    by_id = mq_cli(ns, "queryMsgById", "-i", results[2]["msgId"], "-t", "NodeSend")["messages"]
    assert [m["body"] for m in by_id] == ["node-2-TagA"]


def test_node_push_consumer_gets_exactly_its_tags_old_and_new(daemons, node_client):
    ns = daemons.namesrv.address
    produce(node_client, ns, "NodePush", 6, "TagA,TagB,TagC")  # before the group exists
    consumer = start_node_consumer(node_client, ns, "NodePush", "GID_NODE_PUSH", "TagA || TagC", 9)
    time.sleep(1.0)
    produce(node_client, ns, "NodePush", 6, "TagA,TagB,TagC")  # while it runs
    sent = mq_cli(ns, "send", "-t", "NodePush", "--tag", "TagC", "--keys", "from-mq", "--body", "from mq send")
    assert sent["status"] == "SEND_OK"
    got = consumer_result(consumer, timeout=60)

    # the same six bodies were sent twice: each TagA and TagC one arrives twice, TagB never
    assert sorted(m["body"] for m in got) == sorted(["node-0-TagA", "node-2-TagC", "node-3-TagA", "node-5-TagC"] * 2
                                                    + ["from mq send"])
    assert len({m["msgId"] for m in got}) == 9
    assert all(m["topic"] == "NodePush" and m["body"].endswith(m["tags"]) for m in got if m["keys"] != "from-mq")
    assert [m["keys"] for m in got if m["body"] == "from mq send"] == ["from-mq"]

    # the msgId a Node consumer sees is the UNIQ_KEY that the sender got back
    stored = mq_cli(ns, "pull", "-t", "NodePush", "--from", "first", "--count", "100")
    assert sorted(m["msgId"] for m in stored if m["tags"] != "TagB") == sorted(m["msgId"] for m in got)

    # on shutdown the client committed past every message it consumed. A TagB message behind the last
    # delivered one may stay uncommitted for now: the client (like Java's) moves its offset over filtered
    # messages only while nothing is being consumed from that queue, and the next empty long poll does it.
    needed: dict[int, int] = {}
    for m in stored:
        if m["tags"] != "TagB":
            needed[m["queueId"]] = max(needed.get(m["queueId"], 0), m["queueOffset"] + 1)
    deadline = time.monotonic() + 10
    while True:
        committed = {q["queueId"]: q["consumerOffset"]
                     for q in mq_cli(ns, "consumerProgress", "-g", "GID_NODE_PUSH")["queues"]
                     if q["topic"] == "NodePush"}
        if all(committed.get(q, 0) >= o for q, o in needed.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {q: committed.get(q, 0) for q in needed} == {q: max(o, committed.get(q, 0)) for q, o in needed.items()}
