"""RocketMQ 4.9.x's own example programs (the rocketmq-example module), unmodified, against our name server and
broker: what they print, and what the broker stored.

They need ``java`` and ``$MQ_JAVA_EXAMPLE_CLASSPATH`` (rocketmq-example and rocketmq-client 4.9.x with their
dependencies). Most of them hard-code the name server 127.0.0.1:9876, so each scenario runs in a network
namespace of its own (``unshare -n``), or on the host when port 9876 is free; otherwise the tests skip and say
why. ``example_sandbox`` starts the daemons, runs the programs and reports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[2]
EX = "org.apache.rocketmq.example."
#: MessageExt.toString's msgId: the offset message id (the commit log's offset and the broker's address)
MSG_ID = re.compile(r"\bmsgId=([0-9A-F]{32})")
SENT = re.compile(r"SendResult \[sendStatus=SEND_OK, msgId=([0-9A-F]{32}), offsetMsgId=([0-9A-F]{32})")


def _netns_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True)
    return probe.returncode == 0


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def examples():
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH")
    if not os.environ.get("MQ_JAVA_EXAMPLE_CLASSPATH"):
        pytest.skip("set MQ_JAVA_EXAMPLE_CLASSPATH to the rocketmq-example 4.9.x classpath to run RocketMQ's examples")
    if _netns_works():
        prefix = ["unshare", "-n"]
        flags = ["--netns"]
    elif _port_free(9876):
        prefix, flags = [], []
    else:
        pytest.skip("the examples need 127.0.0.1:9876: no network namespace (unshare -n) here and the port is busy")

    def run(scenario: dict, timeout: float = 300) -> dict:
        proc = subprocess.run([*prefix, sys.executable, "-m", "tests.interop.example_sandbox", *flags],
                              input=json.dumps(scenario), capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run


def received(text: str) -> list[str]:
    """The offset msgIds a consumer printed (MessageExt.toString of each message it got)."""
    return MSG_ID.findall(text)


def sent(text: str) -> list[tuple[str, str]]:
    """(msgId, offsetMsgId) of each SEND_OK SendResult a producer printed."""
    return SENT.findall(text)


def test_quickstart_producer_and_consumer(examples):
    """quickstart: 1,000 messages to TopicTest, each SendResult SEND_OK; the push consumer (CONSUME_FROM_FIRST_OFFSET)
    receives each of them."""
    r = examples({
        "steps": [{"run": "producer", "main": EX + "quickstart.Producer", "timeout": 180},
                  {"run": "consumer", "main": EX + "quickstart.Consumer", "until": ["msgId=", 1000], "timeout": 120}],
        "topics": ["TopicTest"], "groups": [["please_rename_unique_group_name_4", "TopicTest"]],
    })
    assert not r["timedOut"], r["outputs"]["consumer"][-3000:]
    ids = sent(r["outputs"]["producer"])
    assert len(ids) == 1000 and len({u for u, _ in ids}) == 1000
    assert set(received(r["outputs"]["consumer"])) == {o for _, o in ids}
    stored = r["stored"]["TopicTest"]
    assert len(stored) == 1000 and {m["tags"] for m in stored} == {"TagA"}
    assert {m["body"] for m in stored} == {f"Hello RocketMQ {i}" for i in range(1000)}
    assert "Consumer Started." in r["outputs"]["consumer"]


def _printed_messages(text: str) -> list[dict[str, str]]:
    """queueId, queueOffset, msgId and the TAGS/KEYS/DELAY properties of each MessageExt a consumer printed."""
    out = []
    for m in re.finditer(r"MessageExt \[brokerName=[^,]*, queueId=(\d+), storeSize=\d+, queueOffset=(\d+).*?"
                         r"\bmsgId=([0-9A-F]{32}).*?properties=\{([^}]*)\}", text):
        props = dict(p.split("=", 1) for p in m.group(4).split(", ") if "=" in p)
        out.append({"queueId": m.group(1), "queueOffset": int(m.group(2)), "msgId": m.group(3), **props})
    return out


def test_simple_producers_and_consumers(examples):
    """simple: synchronous, asynchronous and oneway producers; the push consumer, the lite pull consumer
    (subscribe) and the pull consumer (offsets it commits) all read what they stored."""
    r = examples({
        "steps": [{"run": "sync", "main": EX + "simple.Producer"},
                  {"run": "async", "main": EX + "simple.AsyncProducer"},
                  {"run": "oneway", "main": EX + "simple.OnewayProducer"},
                  {"stored": "TopicTest", "count": 228},
                  {"run": "push", "main": EX + "simple.PushConsumer", "until": ["msgId=", 228]},
                  {"run": "lite", "main": EX + "simple.LitePullConsumerSubscribe", "until": ["msgId=", 228]},
                  {"start": "pull", "main": EX + "simple.PullConsumer"},
                  {"sleep": 12}],
        "topics": ["TopicTest", "Jodie_topic_1023"],
        "groups": [["please_rename_unique_group_name_5", "TopicTest"], ["CID_JODIE_1", "TopicTest"]],
    })
    assert not r["timedOut"], r["timedOut"]
    out = r["outputs"]
    assert len(sent(out["sync"])) == 128
    assert len(re.findall(r"^\d+ +OK [0-9A-F]{32}", out["async"], re.M)) == 100 and "Exception" not in out["async"]
    stored = r["stored"]["TopicTest"]
    assert len(stored) == 228 and len(r["stored"]["Jodie_topic_1023"]) == 100
    assert Counter(m["keys"] for m in stored) == {"OrderID188": 128, None: 100}
    everything = {m["properties"]["UNIQ_KEY"] for m in stored}
    for name in ("push", "lite"):
        assert {p["UNIQ_KEY"] for p in _printed_messages(out[name])} == everything, name
    ends = defaultdict(int)
    for m in stored:
        ends[str(m["queueId"])] = max(ends[str(m["queueId"])], m["queueOffset"] + 1)
    assert r["offsets"]["please_rename_unique_group_name_5@TopicTest"] == ends  # the pull consumer's commits


def test_order_messages(examples):
    """ordermessage: the producer's selector puts each order id in one queue, in order; the orderly consumer
    (which suspends a queue every fifth batch) sees each queue in offset order."""
    r = examples({
        "steps": [{"run": "orders", "main": EX + "ordermessage.Producer"},
                  {"run": "feed", "main": EX + "simple.Producer"},  # the consumer reads TopicTest (TagA)
                  # until it printed each of the 128 (a suspended batch is printed again: lines are not enough)
                  {"run": "orderly", "main": EX + "ordermessage.Consumer",
                   "until": [r"UNIQ_KEY=([0-9A-F]{32})", 128, "distinct"], "timeout": 90}],
        "topics": ["TopicTestjjj", "TopicTest"],
    })
    assert len(sent(r["outputs"]["orders"])) == 100
    by_queue = defaultdict(list)
    for m in r["stored"]["TopicTestjjj"]:
        by_queue[m["queueId"]].append(int(m["keys"][3:]))
    for qid, ids in by_queue.items():
        assert ids == sorted(ids) and {i % 10 % 4 for i in ids} == {qid}, (qid, ids)
    printed = _printed_messages(r["outputs"]["orderly"])
    assert {p["UNIQ_KEY"] for p in printed} == {m["properties"]["UNIQ_KEY"] for m in r["stored"]["TopicTest"]}
    per_queue = defaultdict(list)
    for p in printed:
        per_queue[p["queueId"]].append(p["queueOffset"])
    for qid, offsets in per_queue.items():  # a suspended batch comes again, never an earlier one after a later
        assert all(b >= a for a, b in zip(offsets, offsets[1:])), (qid, offsets)
    assert any(b == a for offsets in per_queue.values() for a, b in zip(offsets, offsets[1:]))  # suspended


def test_transactions(examples):
    """transaction: ten half messages, each UNKNOW at first; the broker's checks ask the producer, which answers
    UNKNOW, COMMIT or ROLLBACK by index: messages 1, 4 and 7 are committed, no other."""
    r = examples({
        "broker": {"transaction_check_interval": 1000},
        "steps": [{"start": "producer", "main": EX + "transaction.TransactionProducer"},
                  {"stored": "TopicTest1234", "count": 3, "timeout": 60}, {"sleep": 4}],
        "topics": ["TopicTest1234", "RMQ_SYS_TRANS_HALF_TOPIC"],
    })
    out = r["outputs"]["producer"]
    assert len(re.findall(r"SendResult \[sendStatus=SEND_OK, msgId=[0-9A-F]{32}, offsetMsgId=null", out)) == 10, \
        out[-2000:]  # a half message's SendResult (TransactionSendResult) has no offsetMsgId
    committed = r["stored"]["TopicTest1234"]
    assert sorted(m["body"] for m in committed) == ["Hello RocketMQ 1", "Hello RocketMQ 4", "Hello RocketMQ 7"]
    assert {m["keys"] for m in committed} == {"KEY1", "KEY4", "KEY7"}
    assert len({m["properties"]["UNIQ_KEY"] for m in r["stored"]["RMQ_SYS_TRANS_HALF_TOPIC"]}) == 10


def test_batches(examples):
    """batch: a batch of three, then 100,000 messages split into batches of at most 1 MB; every message stored
    once, in order, with its key."""
    r = examples({
        "steps": [{"run": "simple", "main": EX + "batch.SimpleBatchProducer", "until": ["SEND_OK", 1]},
                  {"start": "split", "main": EX + "batch.SplitBatchProducer"},
                  {"stored": "BatchTest", "count": 100_003, "timeout": 180}, {"sleep": 1}],
        "topics": ["BatchTest"],
    }, timeout=400)
    stored = r["stored"]["BatchTest"]
    assert len(stored) == 100_003
    bodies = Counter(m["body"] for m in stored)
    assert all(bodies[f"Hello world {i}"] == 1 + (i < 3) for i in range(100_000)), "each body once (0-2 twice)"
    assert "sendStatus=SEND_OK" in r["outputs"]["split"]


def test_tag_and_sql_filters(examples):
    """filter: tag expression TagA || TagC gets 40 of 60; the SQL92 selector gets messages 0, 1 and 3."""
    r = examples({
        "broker": {"enable_property_filter": True},
        "steps": [{"run": "tags", "main": EX + "filter.TagFilterProducer"},
                  {"run": "tagConsumer", "main": EX + "filter.TagFilterConsumer", "until": ["msgId=", 40]},
                  {"run": "sql", "main": EX + "filter.SqlFilterProducer"},
                  {"run": "sqlConsumer", "main": EX + "filter.SqlFilterConsumer", "until": ["msgId=", 3]},
                  {"sleep": 3}],
        "topics": ["TagFilterTest", "SqlFilterTest"],
    })
    tagged = _printed_messages(r["outputs"]["tagConsumer"])
    assert Counter(p["TAGS"] for p in {p["msgId"]: p for p in tagged}.values()) == {"TagA": 20, "TagC": 20}
    picked = {p["msgId"]: p for p in _printed_messages(r["outputs"]["sqlConsumer"])}.values()
    assert sorted(int(p["a"]) for p in picked) == [0, 1, 3]


def test_scheduled_messages(examples):
    """schedule: 100 messages with delay level 3 (10 s) are delivered after it; as RocketMQ 4.9.7 stores them,
    the delivered messages still carry DELAY=3 (getDelayTimeLevel()) and the producer's WAIT."""
    r = examples({
        "create": {"TestTopic": 4},  # the consumer starts first: it must find the topic's route at once
        "steps": [{"start": "consumer", "main": EX + "schedule.ScheduledMessageConsumer"},
                  {"run": "producer", "main": EX + "schedule.ScheduledMessageProducer"},
                  {"wait": "consumer", "until": ["Receive message", 100], "timeout": 60}],
        "topics": ["TestTopic"],
    })
    assert not r["timedOut"], r["outputs"]["consumer"][-2000:]
    stored = r["stored"]["TestTopic"]
    assert len(stored) == 100
    for m in stored:
        assert m["storeTimestamp"] - m["bornTimestamp"] >= 9_000, m
        assert m["properties"]["DELAY"] == "3" and m["properties"]["WAIT"] == "true"
        assert m["properties"]["REAL_TOPIC"] == "TestTopic"
    later = [int(x) for x in re.findall(r"Receive message\[msgId=[0-9A-F]+ (-?\d+)  ms later\]",
                                        r["outputs"]["consumer"])]
    assert len(later) >= 100 and max(later) < 5_000  # picked up soon after delivery (long polling)


def test_broadcast_consumers(examples):
    """broadcast: two consumers of one group in BROADCASTING mode each get every matching message."""
    r = examples({
        "steps": [{"start": "one", "main": EX + "broadcast.PushConsumer", "ready": "Broadcast Consumer Started."},
                  {"start": "two", "main": EX + "broadcast.PushConsumer", "ready": "Broadcast Consumer Started."},
                  {"run": "producer", "main": EX + "simple.Producer"},
                  {"wait": "one", "until": ["msgId=", 128]}, {"wait": "two", "until": ["msgId=", 128]}],
        "topics": ["TopicTest"],
    })
    assert not r["timedOut"], r["timedOut"]
    everything = {m["properties"]["UNIQ_KEY"] for m in r["stored"]["TopicTest"]}
    for name in ("one", "two"):
        assert {p["UNIQ_KEY"] for p in _printed_messages(r["outputs"][name])} == everything, name


def test_request_reply(examples):
    """rpc: a request answered by the response consumer through the broker's reply path."""
    r = examples({
        "create": {"RequestTopic": 4},
        "steps": [{"start": "responder", "main": EX + "rpc.ResponseConsumer", "ready": "Consumer Started."},
                  {"sleep": 3},
                  {"run": "requester", "main": EX + "rpc.RequestProducer"},
                  {"sleep": 1}],
        "topics": ["DefaultCluster_REPLY_TOPIC"],
    })
    out = r["outputs"]["requester"]
    assert re.search(r"request to <RequestTopic> cost: \d+ replyMessage: .*reply message contents", out) or \
        "body=[114, 101, 112, 108, 121" in out, out[-2000:]
    assert "reply to " in r["outputs"]["responder"]
