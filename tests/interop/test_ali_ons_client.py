"""ali-ons (npm), the pure-JavaScript RocketMQ 4.x client, against our name server and broker.

ali-ons speaks the remoting protocol with its own encoder and decoder (JSON headers, its own message decoder,
rebalance and offset store), so these tests check our wire format against an implementation that shares no code
with the C++ client. Each script runs in its own Node process under a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.interop.conftest import Daemons
from tests.interop.helpers import mq_cli, npm_package
from tests.interop.node_client import install_ali_ons

pytestmark = pytest.mark.interop
DRIVER = str(Path(__file__).with_name("ons_driver.js"))
ONE_SECOND_DELAYS = " ".join(["1s"] * 18)  # a sent-back message comes back after 1 s instead of 10 s


@pytest.fixture(scope="module")
def ali_ons() -> dict[str, str]:
    return {**os.environ, "MQ_ALI_ONS": str(npm_package(install_ali_ons, "ali-ons"))}


@pytest.fixture
def daemons(tmp_path):
    d = Daemons(str(tmp_path), message_delay_level=ONE_SECOND_DELAYS)
    d.start()
    yield d
    d.stop()


def produce(env: dict, ns: str, topic: str, count: int, tags: str, first: int = 0) -> list[dict]:
    proc = subprocess.run(["node", DRIVER, "produce", ns, topic, str(count), tags, str(first)], capture_output=True,
                          text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]


def consume_while(env: dict, args: list[str], during) -> tuple[list[dict], list]:
    """Run the driver's consumer; once it is ready, call ``during()``. Returns every JSON line it printed and its
    ``received`` list; fails unless it exited 0."""
    consumer = subprocess.Popen(["node", DRIVER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, stdin=subprocess.DEVNULL)
    early = []  # deliveries can be printed before ready() resolves
    try:
        while True:
            line = consumer.stdout.readline()
            assert line, f"the consumer exited before starting: {consumer.stderr.read()[-2000:]}"
            early.append(line)
            if line.startswith("{") and json.loads(line).get("started"):
                break
        time.sleep(1.0)
        during()
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()
    lines = [json.loads(ln) for ln in early + out.splitlines() if ln.startswith("{")]
    results = [d["received"] for d in lines if "received" in d]
    assert results and consumer.returncode == 0, (consumer.returncode, results, err[-2000:])
    return lines, results[-1]


def test_ali_ons_producer_sends_what_we_store_and_index(daemons, ali_ons):
    ns = daemons.namesrv.address
    mq_cli(ns, "updateTopic", "-t", "OnsSend", "-c", "DefaultCluster", "-r", "4", "-w", "4")
    results = produce(ali_ons, ns, "OnsSend", 8, "TagA,TagB")
    assert [r["sendStatus"] for r in results] == ["SEND_OK"] * 8

    stored = mq_cli(ns, "pull", "-t", "OnsSend", "--from", "first", "--count", "100")
    by_body = {m["body"]: m for m in stored}
    assert sorted(by_body) == sorted(f"ons-{r['i']}-{r['tag']}" for r in results)
    for r in results:  # the queue, offset and (offset) msgId the client was told are where the message is
        m = by_body[f"ons-{r['i']}-{r['tag']}"]
        assert (m["queueId"], m["queueOffset"], m["offsetMsgId"], m["tags"], m["keys"]) == (
            r["queueId"], r["queueOffset"], r["msgId"], r["tag"], f"okey-{r['i']} oshared")

    by_key = mq_cli(ns, "queryMsgByKey", "-t", "OnsSend", "-k", "okey-5")["messages"]
    assert [m["body"] for m in by_key] == ["ons-5-TagB"]
    assert len(mq_cli(ns, "queryMsgByKey", "-t", "OnsSend", "-k", "oshared")["messages"]) == 8
    by_id = mq_cli(ns, "queryMsgById", "-i", results[2]["msgId"])["messages"]
    assert [m["body"] for m in by_id] == ["ons-2-TagA"]


def test_ali_ons_consumer_filters_by_tag_and_gets_a_sent_back_message_again(daemons, ali_ons):
    ns = daemons.namesrv.address
    mq_cli(ns, "updateTopic", "-t", "OnsPush", "-c", "DefaultCluster", "-r", "4", "-w", "4")
    produce(ali_ons, ns, "OnsPush", 6, "TagA,TagB,TagC")  # before the group exists
    lines, acked = consume_while(
        ali_ons, ["consume", ns, "OnsPush", "GID_ONS_PUSH", "TagA || TagC", "8", "40"],
        lambda: produce(ali_ons, ns, "OnsPush", 6, "TagA,TagB,TagC"))  # while it runs
    retried = [d["message"] for d in lines if d.get("message", {}).get("retry")]
    assert len(retried) == 1

    # each TagA/TagC body was sent twice and is acknowledged twice; TagB never arrives
    assert sorted(m["body"] for m in acked) == sorted(["ons-0-TagA", "ons-2-TagC", "ons-3-TagA", "ons-5-TagC"] * 2)
    assert {m["tags"] for m in acked} == {"TagA", "TagC"}
    # the message answered with ACTION_RETRY went back to the broker and came again, counted as a reconsume
    again = [m for m in acked if m["reconsumeTimes"] == 1]
    assert [(m["body"], m["keys"]) for m in again] == [(retried[0]["body"], retried[0]["keys"])]
    assert all(m["reconsumeTimes"] == 0 for m in acked if m is not again[0])
    retry_store = mq_cli(ns, "topicStatus", "-t", "%RETRY%GID_ONS_PUSH")["queues"]
    assert sum(q["maxOffset"] for q in retry_store) == 1

    # the group's committed offsets cover every acknowledged message of the topic
    needed: dict[int, int] = {}
    for m in acked:
        if m["reconsumeTimes"] == 0:
            needed[m["queueId"]] = max(needed.get(m["queueId"], 0), m["queueOffset"] + 1)
    committed = {q["queueId"]: q["consumerOffset"] for q in mq_cli(ns, "consumerProgress", "-g", "GID_ONS_PUSH")["queues"]
                 if q["topic"] == "OnsPush"}
    assert all(committed.get(q, 0) >= o for q, o in needed.items()), (needed, committed)


SQL_SELECTOR = "a BETWEEN 1 AND 3 AND TAGS IN ('TagA')"


def _sql_matches(i: int, tag: str) -> bool:
    return 1 <= i % 5 <= 3 and tag == "TagA"


@pytest.fixture
def filter_daemons(tmp_path):
    d = Daemons(str(tmp_path), broker_options={"enable_property_filter": True})
    d.start()
    yield d
    d.stop()


def test_ali_ons_sql92_consumer_gets_exactly_the_matching_messages(filter_daemons, ali_ons):
    """An ali-ons consumer subscribed with {expressionType: 'SQL92'} (heartbeat-registered selector, evaluated by
    our broker on the properties ali-ons's producer set) receives the matching messages sent before it started
    and while it runs, and nothing else."""
    ns = filter_daemons.namesrv.address
    mq_cli(ns, "updateTopic", "-t", "OnsSql", "-c", "DefaultCluster", "-r", "4", "-w", "4")
    sent = produce(ali_ons, ns, "OnsSql", 10, "TagA,TagB")  # before the group exists
    want = [f"ons-{i}-{'TagA' if i % 2 == 0 else 'TagB'}" for i in range(20)
            if _sql_matches(i, "TagA" if i % 2 == 0 else "TagB")]
    _, acked = consume_while(
        ali_ons, ["consume-sql", ns, "OnsSql", "GID_ONS_SQL", SQL_SELECTOR, str(len(want)), "40"],
        lambda: sent.extend(produce(ali_ons, ns, "OnsSql", 10, "TagA,TagB", 10)))  # while it runs: long polling
    assert [r["sendStatus"] for r in sent] == ["SEND_OK"] * 20
    assert sorted(m["body"] for m in acked) == sorted(want)  # each exactly once, two seconds of quiet after
    assert all(m["tags"] == "TagA" and 1 <= int(m["a"]) <= 3 for m in acked)


def test_ali_ons_sql92_consumer_without_property_filter_gets_nothing(daemons, ali_ons):
    """With enablePropertyFilter off every pull of the SQL92 group is refused (SYSTEM_ERROR): nothing is
    delivered, as with a RocketMQ 4.9 broker."""
    ns = daemons.namesrv.address
    mq_cli(ns, "updateTopic", "-t", "OnsSqlOff", "-c", "DefaultCluster", "-r", "2", "-w", "2")
    produce(ali_ons, ns, "OnsSqlOff", 4, "TagA")
    proc = subprocess.run(["node", DRIVER, "consume-sql", ns, "OnsSqlOff", "GID_ONS_SQL_OFF", SQL_SELECTOR, "1", "6"],
                          capture_output=True, text=True, timeout=60, env=ali_ons, stdin=subprocess.DEVNULL)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 2, proc.stderr[-2000:]  # timed out waiting
    assert [d for d in lines if "message" in d] == []
    assert [d["received"] for d in lines if "received" in d] == [[]]
