"""The official C++ client (PyPI ``rocketmq==0.4.4``) against our name server and broker.

Each client runs in a fresh subprocess (``cpp_driver.py``) under a timeout: the wheel misbehaves in forked
children and its ``pull()`` can loop forever."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rocketmq.client")

pytestmark = pytest.mark.interop
DRIVER = str(Path(__file__).with_name("cpp_driver.py"))


def drive(*args: object, timeout: float = 60.0) -> dict:
    proc = subprocess.run([sys.executable, DRIVER, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads([ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")][-1])


@contextlib.contextmanager
def push_consumer(ns: str, topic: str, group: str, expr: str, expected: int, seconds: float):
    """A C++ push consumer in a fresh process (``cpp_driver.py push``), yielded once it has started and killed on
    the way out if it is still running."""
    consumer = subprocess.Popen([sys.executable, DRIVER, "push", ns, topic, group, expr, str(expected), str(seconds)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while True:  # the native library may print its own lines first
            line = consumer.stdout.readline()
            assert line, consumer.stderr.read()[-2000:]
            if line.startswith("{") and json.loads(line).get("started"):
                break
        yield consumer
    finally:
        if consumer.poll() is None:
            consumer.kill()


def received(consumer: subprocess.Popen, timeout: float) -> tuple[list[dict], str]:
    """Wait for a push driver to finish; the ``received`` list it printed and its stderr, or a failure naming its
    exit code and stderr."""
    out, err = consumer.communicate(timeout=timeout)
    lines = [json.loads(ln) for ln in out.strip().splitlines() if ln.startswith("{")]
    results = [d["received"] for d in lines if "received" in d]
    assert results, f"the push driver printed no result (exit code {consumer.returncode}): {err[-2000:]}"
    return results[-1], err


def test_sync_oneway_and_orderly_sends(daemons):
    ns = daemons.namesrv.address
    r = drive("produce", ns, "CppSync", "sync", 10, "TagA,TagB")
    assert [x["status"] for x in r["results"]] == [0] * 10
    assert all(len(x["msg_id"]) == 32 for x in r["results"])
    drive("produce", ns, "CppSync", "oneway", 5, "TagC")
    r = drive("produce", ns, "CppOrder", "orderly", 6, "TagO")
    assert [x["status"] for x in r["results"]] == [0] * 6
    b = daemons.broker
    total = sum(b.store.get_max_offset("CppSync", q) for q in range(4))
    assert total == 15
    # orderly: all to one queue (7 % 4 = 3), offsets consecutive
    assert b.store.get_max_offset("CppOrder", 3) == 6
    # keys were indexed: QUERY by key finds the message
    res = b.store.query_message("CppSync", "key-sync-3", 32, 0, int(time.time() * 1000) + 1000)
    assert len(res.buffers) == 1


def test_push_consumer_tag_expression_sees_old_and_new_messages(daemons):
    ns = daemons.namesrv.address
    drive("produce", ns, "CppPush", "sync", 9, "TagA,TagB,TagC")  # before the group exists
    with push_consumer(ns, "CppPush", "GID_CPP_PUSH", "TagA || TagC", 12, 40) as consumer:
        time.sleep(2.0)
        drive("produce", ns, "CppPush", "sync", 9, "TagA,TagB,TagC")  # while it runs
        got, err = received(consumer, 60)
    tags = sorted(g["tags"] for g in got)
    assert tags == ["TagA"] * 6 + ["TagC"] * 6, (tags, err[-1000:])
    assert len({g["id"] for g in got}) == 12  # each message once (bodies repeat across the two runs)
    info = daemons.broker.consumers.get("GID_CPP_PUSH")
    assert info is None or info.subscriptions["CppPush"].sub_string == "TagA || TagC"
    assert daemons.broker.topic_config.get("%RETRY%GID_CPP_PUSH") is not None


def test_pull_consumer_in_a_fresh_process(daemons):
    ns = daemons.namesrv.address
    drive("produce", ns, "CppPull", "sync", 8, "TagA,TagB")
    got = drive("pull", ns, "CppPull", "GID_CPP_PULL", "TagB", timeout=60)["received"]
    assert sorted(g["body"] for g in got) == sorted(f"sync-{i}-TagB" for i in range(1, 8, 2))


def mq_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mq.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_our_query_commands_find_what_the_cpp_client_sent(daemons):
    ns = daemons.namesrv.address
    r = drive("produce", ns, "CppQuery", "sync", 4, "TagQ")
    sent = r["results"][2]  # body "sync-2-TagQ", key "key-sync-2"
    by_key = mq_cli("-n", ns, "queryMsgByKey", "-t", "CppQuery", "-k", "key-sync-2", "--json")
    assert by_key.returncode == 0, by_key.stderr
    msgs = json.loads(by_key.stdout)["messages"]
    assert [m["body"] for m in msgs] == ["sync-2-TagQ"]
    assert msgs[0]["uniqKey"] == sent["msg_id"]  # the C++ SendResult.msgId is the UNIQ_KEY
    by_uniq = mq_cli("-n", ns, "queryMsgById", "-i", sent["msg_id"], "-t", "CppQuery", "--json")
    assert by_uniq.returncode == 0, by_uniq.stderr
    assert [m["body"] for m in json.loads(by_uniq.stdout)["messages"]] == ["sync-2-TagQ"]
    by_offset_id = mq_cli("-n", ns, "queryMsgById", "-i", msgs[0]["offsetMsgId"], "--json")
    assert by_offset_id.returncode == 0, by_offset_id.stderr
    assert json.loads(by_offset_id.stdout)["messages"][0]["keys"] == "key-sync-2"


def test_cpp_push_consumer_receives_what_mq_send_sent(daemons):
    ns = daemons.namesrv.address
    sent = mq_cli("-n", ns, "send", "-t", "MqToCpp", "--tag", "TagM", "--keys", "from-mq", "--body", "hello cpp",
                  "--json")
    assert sent.returncode == 0, sent.stderr
    with push_consumer(ns, "MqToCpp", "GID_CPP_FROM_MQ", "TagM", 2, 40) as consumer:
        time.sleep(1.0)
        again = mq_cli("-n", ns, "send", "-t", "MqToCpp", "--tag", "TagM", "--body", "second", "--json")
        assert again.returncode == 0, again.stderr
        got, err = received(consumer, 60)
    assert sorted(g["body"] for g in got) == ["hello cpp", "second"], err[-1000:]
    assert {g["tags"] for g in got} == {"TagM"}


def test_reset_offset_with_cplus_rewinds_a_running_cpp_consumer(daemons):
    """`mq resetOffsetByTime -c` (mqadmin's -c): the broker tells the online C++ consumer the new offsets in the
    list form the C++ client decodes, and it consumes the rewound messages again."""
    ns = daemons.namesrv.address
    before = int(time.time() * 1000) - 1000
    drive("produce", ns, "CppReset", "sync", 6, "TagR")
    with push_consumer(ns, "CppReset", "GID_CPP_RESET", "*", 12, 60) as consumer:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the first pass is consumed and its offsets committed
            committed = sum(max(daemons.broker.offsets.query("GID_CPP_RESET", "CppReset", q), 0) for q in range(4))
            if committed == 6:
                break
            time.sleep(0.5)
        assert committed == 6
        reset = mq_cli("-n", ns, "resetOffsetByTime", "-g", "GID_CPP_RESET", "-t", "CppReset", "-s", str(before),
                       "-c", "--json")
        assert reset.returncode == 0, reset.stderr
        assert sorted(r["offset"] for r in json.loads(reset.stdout)["offsets"]) == [0, 0, 0, 0]
        got, err = received(consumer, 90)
    bodies = sorted(g["body"] for g in got)
    assert bodies == sorted(f"sync-{i}-TagR" for i in range(6) for _ in range(2)), (bodies, err[-1000:])
