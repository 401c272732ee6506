"""The official RocketMQ Go client (rocketmq-client-go v2.1.2) against our name server and broker.

The Go client implements the remoting protocol itself (its own header encoding, message decoder, rebalance,
offset store, trace dispatcher and transaction check handler), so these tests check our daemons against a third
independent implementation. ``go_client.py`` builds the driver (``go_driver/main.go``) once; every script runs
in its own process under a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.interop.conftest import Daemons
from tests.interop.go_client import GoClientUnavailable, build

pytestmark = pytest.mark.interop
ONE_SECOND_DELAYS = " ".join(["1s"] * 18)  # a sent-back message comes back after 1 s instead of 10 s


@pytest.fixture(scope="module")
def go_driver() -> Path:
    try:
        return build()
    except GoClientUnavailable as exc:
        pytest.skip(f"cannot build the Go client here: {exc}")


@pytest.fixture
def daemons(tmp_path):
    d = Daemons(str(tmp_path), broker_options={"enable_property_filter": True, "trace_topic_enable": True,
                                                "transaction_check_interval": 1000, "transaction_time_out": 1000},
                message_delay_level=ONE_SECOND_DELAYS)
    d.start()
    yield d
    d.stop()


def driver_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("MQ_ACCESS_KEY", "MQ_SECRET_KEY")}


def run_driver(driver: Path, *args: str, timeout: float = 90) -> list[dict]:
    proc = subprocess.run([str(driver), *args], capture_output=True, text=True, timeout=timeout, env=driver_env(),
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]


def produce(driver: Path, ns: str, topic: str, count: int, tags: str, mode: str = "sync") -> list[dict]:
    return run_driver(driver, "produce", ns, topic, "GID_GO_PRODUCER", str(count), tags, mode)


def consume_while(driver: Path, args: list[str], during=None, exit_code: int = 0) -> list[dict]:
    """Run the driver's consumer; once it runs, call ``during()``. Returns its ``received`` list."""
    consumer = subprocess.Popen([str(driver), "consume", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=driver_env(), stdin=subprocess.DEVNULL)
    try:
        while True:
            line = consumer.stdout.readline()
            if not line:
                raise AssertionError(f"the consumer exited before starting: {consumer.stderr.read()[-2000:]}")
            if line.startswith("{") and json.loads(line).get("started"):
                break
        if during is not None:
            during()
        out, err = consumer.communicate(timeout=120)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()
    results = [json.loads(ln)["received"] for ln in out.splitlines() if ln.startswith('{"received"')]
    assert results, f"the consumer printed no result (exit code {consumer.returncode}): {err[-2000:]}"
    assert consumer.returncode == exit_code, (results[-1], err[-2000:])
    return results[-1]


def mq_cli(ns: str, *args: str) -> dict | list:
    proc = subprocess.run([sys.executable, "-m", "mq.cli.main", *args, "-n", ns, "--json"], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def create_topic(ns: str, topic: str, queues: int) -> None:
    mq_cli(ns, "updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", str(queues), "-w", str(queues))


def test_go_producer_results_match_what_we_store_and_index(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoSend", 4)
    results = produce(go_driver, ns, "GoSend", 8, "TagA,TagB")
    assert [r["status"] for r in results] == [0] * 8  # SendOK
    assert {r["broker"] for r in results} == {"broker-a"} and {r["regionId"] for r in results} == {"DefaultRegion"}

    stored = {(m["queueId"], m["queueOffset"]): m for m in mq_cli(ns, "pull", "-t", "GoSend", "--from", "first",
                                                                  "--count", "100")}
    assert len(stored) == 8
    for r in results:  # queue, offset, both ids: what the client was told is what we stored
        m = stored[(r["queueId"], r["queueOffset"])]
        assert (m["msgId"], m["body"], m["tags"], m["keys"]) == (r["msgId"], f"go-{r['i']}-{r['tag']}", r["tag"],
                                                                 f"gkey-{r['i']} gshared")
        assert m["offsetMsgId"] == r["offsetMsgId"]

    by_key = mq_cli(ns, "queryMsgByKey", "-t", "GoSend", "-k", "gkey-5")["messages"]
    assert [(m["body"], m["uniqKey"]) for m in by_key] == [("go-5-TagB", results[5]["msgId"])]
    assert len(mq_cli(ns, "queryMsgByKey", "-t", "GoSend", "-k", "gshared")["messages"]) == 8
    for ident in (results[2]["msgId"], results[2]["offsetMsgId"]):  # UNIQ_KEY and offsetMsgId
        assert [m["body"] for m in mq_cli(ns, "queryMsgById", "-i", ident, "-t", "GoSend")["messages"]] == \
            ["go-2-TagA"]


def test_go_async_oneway_batch_and_orderly_sends(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoModes", 4)
    asynchronous = produce(go_driver, ns, "GoModes", 6, "TagA", "async")
    assert sorted(r["i"] for r in asynchronous) == list(range(6)) and {r["status"] for r in asynchronous} == {0}
    assert produce(go_driver, ns, "GoModes", 5, "TagB", "oneway") == []
    (batch,) = produce(go_driver, ns, "GoModes", 4, "TagC", "batch")
    ids = batch["offsetMsgId"].split(",")
    assert batch["status"] == 0 and len(ids) == 4  # one offsetMsgId per message of the batch, as Java answers
    stored = mq_cli(ns, "pull", "-t", "GoModes", "--from", "first", "--count", "100")
    assert sorted(m["tags"] for m in stored) == ["TagA"] * 6 + ["TagB"] * 5 + ["TagC"] * 4
    in_batch = sorted((m["queueOffset"], m["body"], m["offsetMsgId"]) for m in stored if m["tags"] == "TagC")
    assert {m["queueId"] for m in stored if m["tags"] == "TagC"} == {batch["queueId"]}
    assert [o for o, _, _ in in_batch] == list(range(batch["queueOffset"], batch["queueOffset"] + 4))
    assert [b for _, b, _ in in_batch] == [f"go-{i}-TagC" for i in range(4)] and [i for _, _, i in in_batch] == ids

    create_topic(ns, "GoOrder", 4)
    orderly = produce(go_driver, ns, "GoOrder", 10, "TagA", "orderly")  # sharding keys order-0 and order-1
    queues = {r["i"] % 2: set() for r in orderly}
    for r in orderly:
        queues[r["i"] % 2].add(r["queueId"])
    assert all(len(q) == 1 for q in queues.values())  # one queue per sharding key
    consumed = consume_while(go_driver, [ns, "GoOrder", "GID_GO_ORDERLY", "*", "10", "60", "orderly"])
    for key, (qid,) in queues.items():  # an orderly consumer sees each key's messages in send order
        assert [m["body"] for m in consumed if m["queueId"] == qid] == [f"go-{i}-TagA" for i in range(key, 10, 2)]


def test_go_push_consumer_gets_exactly_its_tags_old_and_new(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoPush", 4)
    produce(go_driver, ns, "GoPush", 6, "TagA,TagB,TagC")  # before the group exists

    def more() -> None:
        time.sleep(1.0)
        produce(go_driver, ns, "GoPush", 6, "TagA,TagB,TagC")  # while it runs
        assert mq_cli(ns, "send", "-t", "GoPush", "--tag", "TagC", "--keys", "from-mq",
                      "--body", "from mq send")["status"] == "SEND_OK"

    got = consume_while(go_driver, [ns, "GoPush", "GID_GO_PUSH", "TagA || TagC", "9", "60", "tag"], more)
    assert sorted(m["body"] for m in got) == sorted(["go-0-TagA", "go-2-TagC", "go-3-TagA", "go-5-TagC"] * 2
                                                    + ["from mq send"])
    assert len({m["msgId"] for m in got}) == 9 and all(m["topic"] == "GoPush" for m in got)
    assert [m["keys"] for m in got if m["body"] == "from mq send"] == ["from-mq"]
    assert {m["storeHost"] for m in got} == {daemons.broker.address}

    # the client commits what it consumed (a filtered TagB message at a queue's end may stay behind, as in Java)
    needed: dict[int, int] = {}
    for m in got:
        needed[m["queueId"]] = max(needed.get(m["queueId"], 0), m["queueOffset"] + 1)
    committed = {q["queueId"]: q["consumerOffset"] for q in mq_cli(ns, "consumerProgress", "-g", "GID_GO_PUSH")["queues"]
                 if q["topic"] == "GoPush"}
    assert all(committed.get(q, 0) >= o for q, o in needed.items()), (committed, needed)


def test_go_consumer_retry_later_redelivers_through_the_retry_topic(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoRetry", 2)
    # The Go client looks up its %RETRY% topic's route before its first heartbeat creates the topic, and then
    # only every 30 s; a group that has run before finds it at once (Java's client does the same).
    assert consume_while(go_driver, [ns, "GoRetry", "GID_GO_RETRY", "*", "1", "2", "tag"], exit_code=2) == []
    produce(go_driver, ns, "GoRetry", 2, "TagA")
    got = consume_while(go_driver, [ns, "GoRetry", "GID_GO_RETRY", "*", "2", "60", "retry"])
    assert sorted(m["body"] for m in got) == ["go-0-TagA", "go-1-TagA"]
    for m in got:  # sent back with CONSUMER_SEND_MSG_BACK, stored in the retry topic, restored by the client
        assert m["topic"] == "GoRetry" and m["reconsumeTimes"] == 1
        assert m["properties"]["REAL_TOPIC"] == "%RETRY%GID_GO_RETRY" and m["properties"]["RETRY_TOPIC"] == "GoRetry"


def test_go_sql92_consumer_gets_exactly_the_matching_messages(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoSql", 2)
    produce(go_driver, ns, "GoSql", 9, "TagA,TagB,TagC")
    got = consume_while(go_driver, [ns, "GoSql", "GID_GO_SQL", "TAGS IN ('TagA', 'TagC') AND KEYS <> 'gkey-0 gshared'",
                                    "5", "60", "sql"])
    assert sorted(m["body"] for m in got) == ["go-2-TagC", "go-3-TagA", "go-5-TagC", "go-6-TagA", "go-8-TagC"]


def test_go_transaction_producer_commit_rollback_and_check(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoTx", 2)
    out = run_driver(go_driver, "transaction", ns, "GoTx", "GID_GO_TX")
    sends, checked = out[:-1], out[-1]["checked"]
    assert [(r["status"], r["state"]) for r in sends] == [(0, 1), (0, 2), (0, 3)]  # commit, rollback, unknown
    assert checked == ["tx-check"]  # the broker asked the producer about the unknown one, which committed it
    stored = mq_cli(ns, "pull", "-t", "GoTx", "--from", "first", "--count", "100")
    assert sorted(m["body"] for m in stored) == ["tx-check", "tx-commit"]


def test_go_message_trace_is_read_by_mq_trace(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoTrace", 2)
    (sent,) = produce(go_driver, ns, "GoTrace", 1, "TagA", "trace")
    deadline = time.monotonic() + 15
    while True:  # the client's trace dispatcher sends its record in the background
        trace = mq_cli(ns, "trace", "-i", sent["msgId"])
        if trace["pubs"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    (pub,) = trace["pubs"]
    assert (pub["group"], pub["topic"], pub["tags"], pub["keys"], pub["status"]) == \
        ("GID_GO_PRODUCER", "GoTrace", "TagA", "gkey-0 gshared", "success")
    assert pub["offset_msg_id"] == sent["offsetMsgId"] and pub["store_host"] == daemons.broker.address
    assert trace["stored"]["queue_offset"] == sent["queueOffset"]


def test_go_admin_api_creates_lists_and_deletes_a_topic(daemons, go_driver):
    ns = daemons.namesrv.address
    created, groups, deleted = run_driver(go_driver, "admin", ns, "GoAdmin", daemons.broker.address)
    assert created == {"step": "created", "queueIds": [0, 1, 2, 3], "listed": True}
    assert {"SELF_TEST_C_GROUP", "TOOLS_CONSUMER"} <= set(groups["groups"])
    assert deleted == {"step": "deleted", "listed": False}
    assert "GoAdmin" not in [t["topic"] for t in mq_cli(ns, "topicList")["topics"]]
    assert daemons.broker.topic_config.get("GoAdmin") is None


def test_go_pull_consumer_reads_each_queue_with_a_tag_filter(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoPull", 2)
    sent = produce(go_driver, ns, "GoPull", 10, "TagA,TagB")
    out = run_driver(go_driver, "pull", ns, "GoPull", "GID_GO_PULL", "TagA", "2", "3")
    pulls, received = [o["pull"] for o in out if "pull" in o], out[-1]["received"]
    want = sorted((r["queueId"], r["queueOffset"], f"go-{r['i']}-TagA") for r in sent if r["tag"] == "TagA")
    assert sorted((m["queueId"], m["queueOffset"], m["body"]) for m in received) == want
    assert all(p["found"] <= 3 for p in pulls)
    for q in (0, 1):  # every queue is read to its end: the last pull finds nothing new, or nothing that matches
        last = [p for p in pulls if p["queueId"] == q][-1]
        stored = daemons.broker.store.get_max_offset("GoPull", q)
        assert (last["max"], last["next"]) == (stored, stored) and last["status"] in (1, 2)


def start_consumers(driver: Path, args: list[list[str]]) -> list[subprocess.Popen]:
    """Start several driver consumers and wait until each runs."""
    procs = []
    for a in args:
        p = subprocess.Popen([str(driver), "consume", *a], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=driver_env(), stdin=subprocess.DEVNULL)
        procs.append(p)
        line = p.stdout.readline()
        while line and not (line.startswith("{") and json.loads(line).get("started")):
            line = p.stdout.readline()
        if not line:
            for q in procs:
                q.kill()
            raise AssertionError(f"a consumer exited before starting: {p.stderr.read()[-2000:]}")
    return procs


def received_by(procs: list[subprocess.Popen]) -> list[list[dict]]:
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        results = [json.loads(ln)["received"] for ln in stdout.splitlines() if ln.startswith('{"received"')]
        assert results, stderr[-2000:]
        out.append(results[-1])
    return out


def test_three_go_consumers_split_the_queues_and_broadcasting_gets_everything(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoGroup", 6)
    # three members of one clustering group (each stops after 15 s) and two broadcasting consumers
    procs = start_consumers(go_driver, [[ns, "GoGroup", "GID_GO_TRIO", "*", "1000", "15", "tag"] for _ in range(3)]
                            + [[ns, "GoGroup", "GID_GO_BROADCAST", "*", "30", "60", "broadcast"] for _ in range(2)])
    deadline = time.monotonic() + 20
    while len(mq_cli(ns, "consumerConnection", "-g", "GID_GO_TRIO")["connectionSet"]) < 3:
        assert time.monotonic() < deadline, "the three members never all joined"
        time.sleep(0.3)
    time.sleep(2.0)  # NOTIFY_CONSUMER_IDS_CHANGED reached every member and each rebalanced
    produce(go_driver, ns, "GoGroup", 30, "TagA")
    trio, broadcast = received_by(procs[:3]), received_by(procs[3:])
    bodies = sorted(m["body"] for got in trio for m in got)
    assert bodies == sorted(f"go-{i}-TagA" for i in range(30))  # each message once across the group
    queues = [{m["queueId"] for m in got} for got in trio]
    assert all(queues) and not (queues[0] & queues[1] or queues[0] & queues[2] or queues[1] & queues[2])
    for got in broadcast:  # every broadcasting consumer gets every message
        assert sorted(m["body"] for m in got) == sorted(f"go-{i}-TagA" for i in range(30))
