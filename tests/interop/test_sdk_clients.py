"""The official RocketMQ Go client (rocketmq-client-go v2.1.2) and Java client (rocketmq-client 4.9.x) against
our name server and broker.

Each implements the remoting protocol itself (header encoding, message decoder, rebalance, offset store, trace
dispatcher, transaction check handler), sharing no code with the C++ client or with each other. Both drivers
take the same modes and print the same JSON (``drivers.py``), so most tests here run against both; the Go
admin API and pull consumer, and Java's request-reply and lite pull consumer, have tests of their own. ``go_client.py`` and ``java_client.py`` say what each build
needs; without it the tests skip and say why. Every script runs in its own process under a timeout."""

from __future__ import annotations

import time

import pytest

from tests.interop.build_cache import ClientUnavailable
from tests.interop.conftest import Daemons
from tests.interop.drivers import Driver, build
from tests.interop.helpers import consumer_result, mq_cli

pytestmark = pytest.mark.interop
ONE_SECOND_DELAYS = " ".join(["1s"] * 18)  # a sent-back message comes back after 1 s instead of 10 s


def driver_or_skip(name: str) -> Driver:
    try:
        return build(name)
    except ClientUnavailable as exc:
        pytest.skip(f"cannot build the {name} client driver here: {exc}")


@pytest.fixture(scope="module", params=["go", "java"])
def driver(request) -> Driver:
    return driver_or_skip(request.param)


@pytest.fixture(scope="module")
def go_driver() -> Driver:
    return driver_or_skip("go")


@pytest.fixture(scope="module")
def java_driver() -> Driver:
    return driver_or_skip("java")


@pytest.fixture
def daemons(tmp_path):
    d = Daemons(str(tmp_path), broker_options={"enable_property_filter": True, "trace_topic_enable": True,
                                                "transaction_check_interval": 1000, "transaction_time_out": 1000},
                message_delay_level=ONE_SECOND_DELAYS)
    d.start()
    yield d
    d.stop()


def create_topic(ns: str, topic: str, queues: int) -> None:
    mq_cli(ns, "updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", str(queues), "-w", str(queues))


def test_producer_results_match_what_we_store_and_index(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkSend", 4)
    results = driver.produce(ns, "SdkSend", 8, "TagA,TagB")
    assert [r["status"] for r in results] == ["SEND_OK"] * 8
    assert {r["broker"] for r in results} == {"broker-a"} and {r["regionId"] for r in results} == {"DefaultRegion"}

    stored = {(m["queueId"], m["queueOffset"]): m for m in mq_cli(ns, "pull", "-t", "SdkSend", "--from", "first",
                                                                  "--count", "100")}
    assert len(stored) == 8
    for r in results:  # queue, offset, both ids: what the client was told is what we stored
        m = stored[(r["queueId"], r["queueOffset"])]
        assert (m["msgId"], m["body"], m["tags"], m["keys"]) == (r["msgId"], driver.body(r["i"], r["tag"]),
                                                                 r["tag"], driver.keys(r["i"]))
        assert m["offsetMsgId"] == r["offsetMsgId"]

    by_key = mq_cli(ns, "queryMsgByKey", "-t", "SdkSend", "-k", f"{driver.k}key-5")["messages"]
    assert [(m["body"], m["uniqKey"]) for m in by_key] == [(driver.body(5, "TagB"), results[5]["msgId"])]
    assert len(mq_cli(ns, "queryMsgByKey", "-t", "SdkSend", "-k", f"{driver.k}shared")["messages"]) == 8
    for ident in (results[2]["msgId"], results[2]["offsetMsgId"]):  # UNIQ_KEY and offsetMsgId
        assert [m["body"] for m in mq_cli(ns, "queryMsgById", "-i", ident, "-t", "SdkSend")["messages"]] == \
            [driver.body(2, "TagA")]


def test_async_oneway_batch_and_orderly_sends(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkModes", 4)
    asynchronous = driver.produce(ns, "SdkModes", 6, "TagA", "async")
    assert sorted(r["i"] for r in asynchronous) == list(range(6))
    assert {r["status"] for r in asynchronous} == {"SEND_OK"}
    assert driver.produce(ns, "SdkModes", 5, "TagB", "oneway") == []
    (batch,) = driver.produce(ns, "SdkModes", 4, "TagC", "batch")
    ids = batch["offsetMsgId"].split(",")
    assert batch["status"] == "SEND_OK" and len(ids) == 4  # one offsetMsgId per message, as Java answers
    deadline = time.monotonic() + 10  # oneway sends are not acknowledged: wait until they are stored
    while sum(daemons.broker.store.get_max_offset("SdkModes", q) for q in range(4)) < 15:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    stored = mq_cli(ns, "pull", "-t", "SdkModes", "--from", "first", "--count", "100")
    assert sorted(m["tags"] for m in stored) == ["TagA"] * 6 + ["TagB"] * 5 + ["TagC"] * 4
    in_batch = sorted((m["queueOffset"], m["body"], m["offsetMsgId"]) for m in stored if m["tags"] == "TagC")
    assert {m["queueId"] for m in stored if m["tags"] == "TagC"} == {batch["queueId"]}
    assert [o for o, _, _ in in_batch] == list(range(batch["queueOffset"], batch["queueOffset"] + 4))
    assert [b for _, b, _ in in_batch] == [driver.body(i, "TagC") for i in range(4)]
    assert [i for _, _, i in in_batch] == ids

    create_topic(ns, "SdkOrder", 4)
    orderly = driver.produce(ns, "SdkOrder", 10, "TagA", "orderly")  # a queue chosen by i % 2
    queues: dict[int, set[int]] = {0: set(), 1: set()}
    for r in orderly:
        queues[r["i"] % 2].add(r["queueId"])
    assert all(len(q) == 1 for q in queues.values())
    consumed = driver.consume_while([ns, "SdkOrder", f"GID_{driver.name}_ORDERLY", "*", "10", "60", "orderly"])
    for key, (qid,) in queues.items():  # an orderly consumer sees each queue's messages in send order
        assert [m["body"] for m in consumed if m["queueId"] == qid] == \
            [driver.body(i, "TagA") for i in range(key, 10, 2)]


def test_push_consumer_gets_exactly_its_tags_old_and_new(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkPush", 4)
    driver.produce(ns, "SdkPush", 6, "TagA,TagB,TagC")  # before the group exists

    def more() -> None:
        time.sleep(1.0)
        driver.produce(ns, "SdkPush", 6, "TagA,TagB,TagC")  # while it runs
        assert mq_cli(ns, "send", "-t", "SdkPush", "--tag", "TagC", "--keys", "from-mq",
                      "--body", "from mq send")["status"] == "SEND_OK"

    got = driver.consume_while([ns, "SdkPush", f"GID_{driver.name}_PUSH", "TagA || TagC", "9", "60", "tag"], more)
    wanted = [driver.body(0, "TagA"), driver.body(2, "TagC"), driver.body(3, "TagA"), driver.body(5, "TagC")]
    assert sorted(m["body"] for m in got) == sorted(wanted * 2 + ["from mq send"])
    assert len({m["msgId"] for m in got}) == 9 and all(m["topic"] == "SdkPush" for m in got)
    assert [m["keys"] for m in got if m["body"] == "from mq send"] == ["from-mq"]
    assert {m["storeHost"] for m in got} == {daemons.broker.address}

    # the client commits what it consumed (a filtered TagB message at a queue's end may stay behind, as in Java)
    needed: dict[int, int] = {}
    for m in got:
        needed[m["queueId"]] = max(needed.get(m["queueId"], 0), m["queueOffset"] + 1)
    committed = {q["queueId"]: q["consumerOffset"]
                 for q in mq_cli(ns, "consumerProgress", "-g", f"GID_{driver.name}_PUSH")["queues"]
                 if q["topic"] == "SdkPush"}
    assert all(committed.get(q, 0) >= o for q, o in needed.items()), (committed, needed)


def test_retry_later_redelivers_through_the_retry_topic(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkRetry", 2)
    group = f"GID_{driver.name}_RETRY"
    # Both clients look up their %RETRY% topic's route before the first heartbeat creates the topic, and then
    # only every 30 s; a group that has run before finds it at once.
    assert driver.consume_while([ns, "SdkRetry", group, "*", "1", "2", "tag"], exit_code=2) == []
    driver.produce(ns, "SdkRetry", 2, "TagA")
    got = driver.consume_while([ns, "SdkRetry", group, "*", "2", "60", "retry"])
    assert sorted(m["body"] for m in got) == [driver.body(0, "TagA"), driver.body(1, "TagA")]
    for m in got:  # sent back with CONSUMER_SEND_MSG_BACK, stored in the retry topic, restored by the client
        assert m["topic"] == "SdkRetry" and m["reconsumeTimes"] == 1
        assert m["properties"]["RETRY_TOPIC"] == "SdkRetry"


def test_sql92_consumer_gets_exactly_the_matching_messages(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkSql", 2)
    driver.produce(ns, "SdkSql", 9, "TagA,TagB,TagC")
    selector = f"TAGS IN ('TagA', 'TagC') AND KEYS <> '{driver.keys(0)}'"
    got = driver.consume_while([ns, "SdkSql", f"GID_{driver.name}_SQL", selector, "5", "60", "sql"])
    assert sorted(m["body"] for m in got) == sorted(driver.body(i, t) for i, t in
                                                    ((2, "TagC"), (3, "TagA"), (5, "TagC"), (6, "TagA"), (8, "TagC")))


def test_transaction_producer_commit_rollback_and_check(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkTx", 2)
    out = driver.lines("transaction", ns, "SdkTx", f"GID_{driver.name}_TX")
    sends, checked = out[:-1], out[-1]["checked"]
    assert [(r["status"], r["state"]) for r in sends] == [("SEND_OK", "COMMIT_MESSAGE"),
                                                          ("SEND_OK", "ROLLBACK_MESSAGE"), ("SEND_OK", "UNKNOW")]
    assert checked == ["tx-check"]  # the broker asked the producer about the unknown one, which committed it
    stored = mq_cli(ns, "pull", "-t", "SdkTx", "--from", "first", "--count", "100")
    assert sorted(m["body"] for m in stored) == ["tx-check", "tx-commit"]


def test_message_trace_is_read_by_mq_trace(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkTrace", 2)
    (sent,) = driver.produce(ns, "SdkTrace", 1, "TagA", "trace")
    deadline = time.monotonic() + 15
    while True:  # the client's trace dispatcher sends its record in the background
        trace = mq_cli(ns, "trace", "-i", sent["msgId"])
        if trace["pubs"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    (pub,) = trace["pubs"]
    assert (pub["group"], pub["topic"], pub["tags"], pub["keys"], pub["status"]) == \
        (f"GID_{driver.name.upper()}_PRODUCER", "SdkTrace", "TagA", driver.keys(0), "success")
    assert pub["offset_msg_id"] == sent["offsetMsgId"] and pub["store_host"] == daemons.broker.address
    assert trace["stored"]["queue_offset"] == sent["queueOffset"]

    # a consumer with tracing on leaves SubBefore/SubAfter records, which mq trace decodes into its group. The
    # message is sent once the consumer has run a while: the Java client registers its trace hook only after
    # its consumer started, and messages consumed in that gap go untraced.
    group = f"GID_{driver.name}_TRACE_CONSUMER"
    create_topic(ns, "SdkTraceSub", 2)
    later: list[dict] = []

    def send_later() -> None:
        time.sleep(3.0)
        later.extend(driver.produce(ns, "SdkTraceSub", 1, "TagB"))

    got = driver.consume_while([ns, "SdkTraceSub", group, "*", "1", "60", "trace"], send_later)
    assert [m["body"] for m in got] == [driver.body(0, "TagB")]
    deadline = time.monotonic() + 15
    while True:
        trace = mq_cli(ns, "trace", "-i", later[0]["msgId"])
        if trace["groups"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    (consumed,) = trace["groups"]
    assert (consumed["group"], consumed["status"]) == (group, "consumed")
    assert [(a["retry_times"], a["status"]) for a in consumed["attempts"]] == [(0, "success")]


def test_three_consumers_split_the_queues_and_broadcasting_gets_everything(daemons, driver):
    ns = daemons.namesrv.address
    create_topic(ns, "SdkGroup", 6)
    trio = f"GID_{driver.name}_TRIO"
    # three members of one clustering group (each stops after 15 s) and two broadcasting consumers
    procs = [driver.start_consumer([ns, "SdkGroup", trio, "*", "1000", "15", "tag"]) for _ in range(3)]
    procs += [driver.start_consumer([ns, "SdkGroup", f"GID_{driver.name}_BROADCAST", "*", "30", "60", "broadcast"])
              for _ in range(2)]
    try:
        deadline = time.monotonic() + 20
        while len(mq_cli(ns, "consumerConnection", "-g", trio)["connectionSet"]) < 3:
            assert time.monotonic() < deadline, "the three members never all joined"
            time.sleep(0.3)
        time.sleep(2.0)  # NOTIFY_CONSUMER_IDS_CHANGED reached every member and each rebalanced
        driver.produce(ns, "SdkGroup", 30, "TagA")
    except BaseException:
        for p in procs:
            p.kill()
        raise
    members = [consumer_result(p, exit_code=None) for p in procs[:3]]
    broadcast = [consumer_result(p) for p in procs[3:]]
    everything = sorted(driver.body(i, "TagA") for i in range(30))
    assert sorted(m["body"] for got in members for m in got) == everything  # each message once in the group
    queues = [{m["queueId"] for m in got} for got in members]
    assert all(queues) and not (queues[0] & queues[1] or queues[0] & queues[2] or queues[1] & queues[2])
    for got in broadcast:  # every broadcasting consumer gets every message
        assert sorted(m["body"] for m in got) == everything


def test_java_request_reply_round_trips(daemons, java_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "JavaRequest", 2)
    replies = java_driver.lines("request", ns, "JavaRequest", "GID_JAVA_REQUEST", "3")
    # SEND_REPLY_MESSAGE pushed each reply to the requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT)
    assert [r["reply"] for r in replies] == ["re:ping-0", "re:ping-1", "re:ping-2"]
    stored = mq_cli(ns, "pull", "-t", "DefaultCluster_REPLY_TOPIC", "--from", "first", "--count", "10")
    assert sorted(m["body"] for m in stored) == ["re:ping-0", "re:ping-1", "re:ping-2"]


def test_java_lite_pull_consumer_subscribes_assigns_seeks_and_commits(daemons, java_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "JavaLite", 2)
    java_driver.produce(ns, "JavaLite", 6, "TagA,TagB")
    (out,) = java_driver.lines("lite", ns, "JavaLite", "GID_JAVA_LITE", "TagA", "3")
    assert sorted(out["subscribed"]) == [java_driver.body(i, "TagA") for i in (0, 2, 4)]
    assert sorted(out["assigned"]) == sorted(java_driver.body(i, t) for i, t in
                                             ((0, "TagA"), (1, "TagB"), (2, "TagA"), (3, "TagB"), (4, "TagA"),
                                              (5, "TagB")))
    ends = {q: daemons.broker.store.get_max_offset("JavaLite", q) for q in (0, 1)}
    assert {int(q): o for q, o in out["committed"].items()} == ends  # commitSync reached the broker
    progress = mq_cli(ns, "consumerProgress", "-g", "GID_JAVA_LITE_ASSIGN")["queues"]
    assert {q["queueId"]: q["consumerOffset"] for q in progress if q["topic"] == "JavaLite"} == ends


def test_go_admin_api_creates_lists_and_deletes_a_topic(daemons, go_driver):
    ns = daemons.namesrv.address
    created, groups, deleted = go_driver.lines("admin", ns, "GoAdmin", daemons.broker.address)
    assert created == {"step": "created", "queueIds": [0, 1, 2, 3], "listed": True}
    assert {"SELF_TEST_C_GROUP", "TOOLS_CONSUMER"} <= set(groups["groups"])
    assert deleted == {"step": "deleted", "listed": False}
    assert "GoAdmin" not in [t["topic"] for t in mq_cli(ns, "topicList")["topics"]]
    assert daemons.broker.topic_config.get("GoAdmin") is None


def test_go_pull_consumer_reads_each_queue_with_a_tag_filter(daemons, go_driver):
    ns = daemons.namesrv.address
    create_topic(ns, "GoPull", 2)
    sent = go_driver.produce(ns, "GoPull", 10, "TagA,TagB")
    out = go_driver.lines("pull", ns, "GoPull", "GID_GO_PULL", "TagA", "2", "3")
    pulls, received = [o["pull"] for o in out if "pull" in o], out[-1]["received"]
    want = sorted((r["queueId"], r["queueOffset"], go_driver.body(r["i"], "TagA")) for r in sent if r["tag"] == "TagA")
    assert sorted((m["queueId"], m["queueOffset"], m["body"]) for m in received) == want
    assert all(p["found"] <= 3 for p in pulls)
    for q in (0, 1):  # every queue is read to its end: the last pull finds nothing new, or nothing that matches
        last = [p for p in pulls if p["queueId"] == q][-1]
        stored = daemons.broker.store.get_max_offset("GoPull", q)
        assert (last["max"], last["next"]) == (stored, stored) and last["status"] in (1, 2)

