"""The official RocketMQ 5.x Python client (PyPI rocketmq-python-client 5.1.x) against the broker's gRPC endpoint.

Every client runs in its own process (``py5_driver.py``): its generated protobuf modules stay out of this
interpreter, and so do its threads. The name server and broker run in this process on a background loop
(``Daemons``), with a gRPC endpoint on a free port, SQL92 filters on and a 1 s transaction check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rocketmq.v5.producer")

from mq.protocol.bodies import SubscriptionGroupConfig  # noqa: E402
from tests.interop.conftest import grpc_daemons  # noqa: E402
from tests.interop.helpers import group_connections, mq_cli, running  # noqa: E402

pytestmark = pytest.mark.interop
DRIVER = str(Path(__file__).with_name("py5_driver.py"))
CPP_DRIVER = str(Path(__file__).with_name("cpp_driver.py"))


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    with grpc_daemons(str(tmp_path_factory.mktemp("py5"))) as daemons:
        daemons.home = str(tmp_path_factory.mktemp("home"))
        yield daemons


def _env(d) -> dict:
    return {**os.environ, "HOME": d.home, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def py5(d, *args: object, timeout: float = 120) -> list[dict]:
    proc = subprocess.run([sys.executable, DRIVER, args[0], d.endpoint, *map(str, args[1:])], capture_output=True,
                          text=True, timeout=timeout, env=_env(d), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]


def py5_running(d, *args: object):
    """A 5.x consumer process (``helpers.running``), yielded once it has started."""
    return running([sys.executable, DRIVER, args[0], d.endpoint, *map(str, args[1:])], _env(d))


def received(lines: list[dict]) -> list[dict]:
    return [ln["received"] for ln in lines if "received" in ln][-1]


def cpp(*args: object, timeout: float = 90, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, CPP_DRIVER, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])


def group_config(d, group: str, **fields) -> None:
    async def put():
        sgm = d.broker.subscription_groups
        cfg = sgm.find_or_create(group) or SubscriptionGroupConfig(group_name=group)
        for k, v in fields.items():
            setattr(cfg, k, v)
        sgm.put(cfg)

    d.call(put())


# -- producers ---------------------------------------------------------------------------------------------------
def test_normal_send_is_read_by_mq_pull_with_id_tag_keys(d):
    sent = py5(d, "send", "Py5Normal", 3, "--tag", "TagA", "--prop", "color=red-{i}")
    ids = [s["id"] for s in sent]
    assert len(set(ids)) == 3 and all(len(i) == 34 for i in ids)
    pulled = mq_cli(d.namesrv.address, "pull", "-t", "Py5Normal")
    by_id = {m["msgId"]: m for m in pulled}
    assert set(by_id) == set(ids)
    for s in sent:
        m = by_id[s["id"]]
        assert m["tags"] == "TagA" and m["keys"] == f"py5key-{s['i']}" and m["body"] == f"py5-{s['i']}"
    # the user property is stored as a 4.x property
    for s in sent:
        props = _stored_properties(d, "Py5Normal", s["id"])
        assert props["color"] == f"red-{s['i']}" and props["UNIQ_KEY"] == s["id"]


def _stored_properties(d, topic: str, uniq: str) -> dict:
    from mq.daemon.broker.requeue import load

    async def find():
        store = d.broker.store
        for qid in range(16):
            cq = store.cq_table.find(topic, qid, create=False)
            if cq is None:
                continue
            for off in range(cq.min_offset, cq.max_offset):
                unit = cq.get_unit(off)
                m = load(store, unit[0], unit[1]) if unit else None
                if m is not None and m.properties.get("UNIQ_KEY") == uniq:
                    return m.properties
        return None

    props = d.call(find())
    assert props is not None, f"{uniq} not stored in {topic}"
    return props


def test_fifo_message_group_keeps_send_order(d):
    group_config(d, "Py5FifoGroup", consume_message_orderly=True)
    py5(d, "send", "Py5Fifo", 12, "--kind", "fifo", "--group", "order-1", "--prefix", "fifo")
    lines = py5(d, "receive", "Py5Fifo", "Py5FifoGroup", 12, 40, "--batch", 4)
    got = received(lines)
    assert [m["body"] for m in got] == [f"fifo-{i}" for i in range(12)]
    assert {m["group"] for m in got} == {"order-1"}


def test_delay_message_arrives_on_time(d):
    with py5_running(d, "receive", "Py5Delay", "Py5DelayGroup", 1, 40) as finish:
        sent = py5(d, "send", "Py5Delay", 1, "--kind", "delay", "--delay-s", 4)
        got = received(finish())
    assert len(got) == 1 and got[0]["id"] == sent[0]["id"]
    due_ms = got[0]["delivery_ts"]
    assert due_ms > 0
    assert due_ms <= got[0]["at"] <= due_ms + 1500, (got[0]["at"] - due_ms)


def test_recalled_delay_message_is_not_delivered(d):
    with py5_running(d, "receive", "Py5Recall", "Py5RecallGroup", 1, 12) as finish:
        recalled = py5(d, "send", "Py5Recall", 1, "--kind", "delay", "--delay-s", 5, "--recall", "--prefix", "gone")
        kept = py5(d, "send", "Py5Recall", 1, "--kind", "delay", "--delay-s", 5, "--prefix", "kept")
        got = received(finish())
    assert recalled[0]["recall"] and any("recalled" in ln for ln in recalled)
    assert [m["id"] for m in got] == [kept[0]["id"]]


def test_transactions_commit_rollback_and_check_back(d):
    commit = py5(d, "transaction", "Py5Tx", "commit")
    rollback = py5(d, "transaction", "Py5Tx", "rollback")
    unknown = py5(d, "transaction", "Py5Tx", "unknown", "--check", "commit", "--stay", 30)
    checked = [ln for ln in unknown if "checked" in ln and isinstance(ln["checked"], str)]
    assert checked, unknown
    got = received(py5(d, "receive", "Py5Tx", "Py5TxGroup", 2, 20))
    ids = {m["id"] for m in got}
    assert ids == {commit[0]["sent"], unknown[0]["sent"]}
    assert rollback[0]["sent"] not in ids


# -- simple consumer ---------------------------------------------------------------------------------------------
def test_receive_ack_and_no_redelivery(d):
    sent = py5(d, "send", "Py5Ack", 5, "--tag", "TagA", "--prefix", "ack")
    got = received(py5(d, "receive", "Py5Ack", "Py5AckGroup", 5, 30))
    assert sorted(m["id"] for m in got) == sorted(s["id"] for s in sent)
    assert all(m["attempt"] == 1 and not m["corrupted"] for m in got)
    again = received(py5(d, "receive", "Py5Ack", "Py5AckGroup", 1, 14, "--invisible", 10))
    assert again == []


def test_redelivery_after_invisible_time_and_change_invisible(d):
    sent = py5(d, "send", "Py5Redeliver", 2, "--prefix", "redo")
    first = received(py5(d, "receive", "Py5Redeliver", "Py5RedoGroup", 2, 30, "--no-ack", "--invisible", 10))
    assert len(first) == 2
    t0 = time.time()
    second = received(py5(d, "receive", "Py5Redeliver", "Py5RedoGroup", 2, 40, "--no-ack", "--invisible", 10,
                          "--change", 20))
    assert sorted(m["id"] for m in second) == sorted(s["id"] for s in sent)
    assert all(m["attempt"] == 2 for m in second)
    assert second[0]["at"] / 1000 - t0 >= 0  # came back after the first invisible time
    # changed to 20 s: not back within 12 s, then back with attempt 3, and the new handle acks it
    early = received(py5(d, "receive", "Py5Redeliver", "Py5RedoGroup", 1, 8, "--invisible", 10))
    assert early == []
    third = received(py5(d, "receive", "Py5Redeliver", "Py5RedoGroup", 2, 40, "--invisible", 10))
    assert all(m["attempt"] == 3 for m in third) and len(third) == 2


def test_retry_to_dlq_after_max_attempts(d):
    group_config(d, "Py5DlqGroup", retry_max_times=1)  # max attempts 2
    sent = py5(d, "send", "Py5Dlq", 1, "--prefix", "dlq")
    attempts = []
    for _ in range(2):
        attempts += received(py5(d, "receive", "Py5Dlq", "Py5DlqGroup", 1, 40, "--no-ack", "--invisible", 10))
    assert [m["attempt"] for m in attempts] == [1, 2]
    time.sleep(12)
    assert received(py5(d, "receive", "Py5Dlq", "Py5DlqGroup", 1, 8, "--invisible", 10)) == []
    dlq = mq_cli(d.namesrv.address, "pull", "-t", "%DLQ%Py5DlqGroup")
    assert [m["msgId"] for m in dlq] == [sent[0]["id"]]


def test_tag_and_sql_filters(d):
    py5(d, "send", "Py5Filter", 2, "--tag", "TagA", "--prefix", "a", "--prop", "n=3")
    py5(d, "send", "Py5Filter", 2, "--tag", "TagB", "--prefix", "b", "--prop", "n=7")
    py5(d, "send", "Py5Filter", 2, "--tag", "TagC", "--prefix", "c", "--prop", "n=9")
    tags = received(py5(d, "receive", "Py5Filter", "Py5TagGroup", 4, 30, "--tag-expr", "TagA || TagC"))
    assert sorted(m["tag"] for m in tags) == ["TagA", "TagA", "TagC", "TagC"]
    sql = received(py5(d, "receive", "Py5Filter", "Py5SqlGroup", 4, 30, "--sql", "n > 5"))
    assert sorted(m["tag"] for m in sql) == ["TagB", "TagB", "TagC", "TagC"]


# -- push consumer -----------------------------------------------------------------------------------------------
def test_push_consumer_redelivers_a_failed_message_and_is_listed(d):
    sent = py5(d, "send", "Py5Push", 3, "--prefix", "push")
    with py5_running(d, "push", "Py5Push", "Py5PushGroup", 3, 60, "--fail-first") as finish:
        conn = group_connections(d.namesrv.address, "Py5PushGroup")
        status = mq_cli(d.namesrv.address, "consumerStatus", "-g", "Py5PushGroup")
        lines = finish()
    assert conn and conn[0]["language"] == "PYTHON", conn
    text = json.dumps(status)
    assert conn[0]["clientId"] in text and "CONSUME_POP" in text and "Py5Push" in text, text[:2000]
    progress = mq_cli(d.namesrv.address, "consumerProgress", "-g", "Py5PushGroup")
    assert "Py5Push" in json.dumps(progress)
    got = received(lines)
    assert sorted(m["id"] for m in got) == sorted(s["id"] for s in sent)
    assert all(m["attempt"] == 2 for m in got)


# -- across protocols --------------------------------------------------------------------------------------------
def test_cpp_4x_message_received_by_5x(d):
    cpp("produce", d.namesrv.address, "Py5FromCpp", "sync", 3, "TagX")
    got = received(py5(d, "receive", "Py5FromCpp", "Py5FromCppGroup", 3, 30))
    assert sorted(m["body"] for m in got) == [f"sync-{i}-TagX" for i in range(3)]
    assert all(m["tag"] == "TagX" and m["keys"] == [f"key-sync-{m['body'].split('-')[1]}"] for m in got)
    assert all(len(m["id"]) == 32 and not m["corrupted"] for m in got)


def test_5x_message_received_by_cpp_push_consumer(d):
    sent = py5(d, "send", "Py5ToCpp", 3, "--tag", "TagY", "--prefix", "tocpp")
    out = cpp("push", d.namesrv.address, "Py5ToCpp", "CppFrom5x", "*", 3, 40, timeout=90)
    got = out["received"]
    assert sorted(m["id"] for m in got) == sorted(s["id"] for s in sent)
    assert all(m["tags"] == "TagY" for m in got)
    assert sorted(m["keys"] for m in got) == [f"tocppkey-{i}" for i in range(3)]


def test_4x_and_5x_groups_on_one_topic_each_get_everything(d):
    with py5_running(d, "receive", "Py5Both", "Py5BothGroup", 6, 60) as finish:
        cpp("produce", d.namesrv.address, "Py5Both", "sync", 3, "T4")
        py5(d, "send", "Py5Both", 3, "--tag", "T5", "--prefix", "both")
        cpp_out = cpp("push", d.namesrv.address, "Py5Both", "CppBothGroup", "*", 6, 40, timeout=90)
        got5 = received(finish())
    assert len(cpp_out["received"]) == 6
    assert sorted(m["tags"] for m in cpp_out["received"]) == ["T4"] * 3 + ["T5"] * 3
    assert sorted(m["tag"] for m in got5) == ["T4"] * 3 + ["T5"] * 3
