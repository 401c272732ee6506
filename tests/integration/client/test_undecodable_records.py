"""Issue 28 defect 4: a stored record the client cannot decode must not stall consumption.

A queue of 11 messages holds one record the client cannot decode, written the way a hostile client or a
failing disk can:

- a SEND_MESSAGE_V2 with sysFlag 0x1 (compressed) and a body that is not zlib (the broker stores bodies as
  they come, as RocketMQ's does);
- a record whose TOTALSIZE on disk no longer matches its length (the framing of the pull answer breaks there).

The push consumer (concurrent and orderly), ``mq pull``, ``printMsg``, ``queryMsgByOffset`` and ``queryMsgById``
must deliver the 10 others and name the bad record (topic, queue, queue offset, commit-log offset). Before the
fix the push consumer delivered 0 of 11 (every pull of the queue raised zlib.error, logged at DEBUG) and
``mq pull`` failed with "unexpected error"; with a broken framing the rest of the answer was dropped silently.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from mq.cli.main import cli as mq_cli
from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.pull_api import PullConsumer
from mq.common.message import MessageQueue
from mq.config import ConsumerConfig
from mq.protocol import headers as H
from mq.protocol.codes import ResponseCode
from tests.integration.broker.wire import send_cmd

N = 11
BAD = 5


def store_queue(cluster, client, topic: str) -> list[H.SendMessageResponseHeader]:
    """11 messages in queue 0 of ``topic``; the one at queue offset 5 flagged compressed, its body not zlib."""
    sent = []
    for i in range(N):
        cmd = send_cmd(topic, b"body %d" % i, queue_id=0, tags="TagA", sys_flag=1 if i == BAD else 0)
        resp = cluster.run(client.invoke(cluster.broker_addr, cmd))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        sent.append(H.SendMessageResponseHeader.from_ext(resp.ext_fields))
    assert [s.queue_offset for s in sent] == list(range(N))
    cluster.run(cluster.broker.register_all(force=True))
    return sent


def break_framing(cluster, topic: str, queue_offset: int) -> int:
    """Make the record's TOTALSIZE on disk 7 bytes too large (as a torn or rotten disk block would); returns
    its commit-log offset. The consume queue still points at it with its true size."""
    store = cluster.broker.store
    phy = store.get_commit_log_offset_in_queue(topic, 0, queue_offset)
    root = Path(cluster.broker.store_config.store_path_root_dir) / "commitlog"
    seg = max((p for p in root.iterdir() if int(p.name) <= phy), key=lambda p: int(p.name))
    fd = os.open(seg, os.O_RDWR)
    try:
        pos = phy - int(seg.name)
        (total,) = struct.unpack(">i", os.pread(fd, 4, pos))
        os.pwrite(fd, struct.pack(">i", total + 7), pos)
    finally:
        os.close(fd)
    return phy


def bad_offset(cluster, topic: str) -> int:
    return cluster.broker.store.get_commit_log_offset_in_queue(topic, 0, BAD)


def expected_bodies() -> list[bytes]:
    return [b"body %d" % i for i in range(N) if i != BAD]


async def consume_all(config, topic: str, *, orderly: bool, want: int, timeout: float = 20.0):
    got: list = []

    def listener(msgs, _ctx):
        got.extend(m for m in msgs if m.topic == topic)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(ConsumerConfig(group=f"G{topic}", consume_from_where="FIRST"), listener, config,
                     orderly=orderly)
    c.subscribe(topic)
    await c.start()
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(got) < want and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # nothing more may come
        offset = c.offset_store.memory(MessageQueue(topic, cluster_broker_name(c), 0))
    finally:
        await c.shutdown(grace=1.0)
    return got, c, offset


def cluster_broker_name(c: PushConsumer) -> str:
    return next(iter(c.process_queues)).broker_name


def skip_warnings(caplog, topic: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "skipped" in r.getMessage() and f"topic {topic}" in r.getMessage()]


@pytest.fixture
def mq_cli_run(run, cluster):
    runner = CliRunner()

    def invoke(*args: str):
        return run(asyncio.to_thread(runner.invoke, mq_cli, ["-n", cluster.namesrv_addr, *args],
                                     env={"COLUMNS": "250"}), timeout=60)
    return invoke


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
def test_push_consumer_steps_over_a_body_that_does_not_inflate(cluster, client, client_config, caplog, orderly):
    topic = f"UndecBody{int(orderly)}"
    store_queue(cluster, client, topic)
    phy = bad_offset(cluster, topic)
    caplog.set_level(logging.WARNING)
    got, consumer, committed = cluster.run(consume_all(client_config(), topic, orderly=orderly, want=N - 1))
    assert sorted(m.body for m in got) == sorted(expected_bodies())
    assert [m.queue_offset for m in sorted(got, key=lambda m: m.queue_offset)] == [i for i in range(N) if i != BAD]
    assert consumer.counters.skipped_undecodable == 1
    assert committed == N  # the offset moved past the bad record: the group is not stuck on it
    (warning,) = skip_warnings(caplog, topic)
    assert "queue 0 of broker-a" in warning and f"queue offset {BAD}," in warning
    assert f"commit-log offset {phy}" in warning and "does not inflate" in warning


def test_push_consumer_steps_over_a_record_whose_framing_is_broken(cluster, client, client_config, caplog):
    topic = "UndecFraming"
    for i in range(N):  # all plain this time: one record's size on disk is then broken
        cmd = send_cmd(topic, b"body %d" % i, queue_id=0, tags="TagA")
        assert cluster.run(client.invoke(cluster.broker_addr, cmd)).code == ResponseCode.SUCCESS
    cluster.run(cluster.broker.register_all(force=True))
    phy = break_framing(cluster, topic, BAD)
    caplog.set_level(logging.WARNING)
    got, consumer, committed = cluster.run(consume_all(client_config(), topic, orderly=False, want=N - 1))
    assert sorted(m.body for m in got) == sorted(expected_bodies())
    assert consumer.counters.skipped_undecodable == 1
    assert committed == N
    (warning,) = skip_warnings(caplog, topic)
    assert f"queue offset {BAD}," in warning and f"commit-log offset {phy}" in warning


def test_pull_consumer_result_names_the_skipped_record(cluster, client, client_config):
    topic = "UndecPull"
    store_queue(cluster, client, topic)
    seen = []

    async def main():
        async with PullConsumer("UndecPullG", client_config(), on_undecodable=seen.append) as pc:
            (q,) = [q for q in await pc.fetch_subscribe_queues(topic) if q.queue_id == 0]
            return await pc.pull(q, 0, 32)

    res = cluster.run(main())
    assert [m.body for m in res.messages] == expected_bodies()
    assert res.next_begin_offset == N
    assert [(s.topic, s.queue_id, s.queue_offset, s.commit_log_offset) for s in res.skipped] == [
        (topic, 0, BAD, bad_offset(cluster, topic))]
    assert seen == res.skipped


@pytest.mark.parametrize("broken", ["body", "framing"])
def test_mq_pull_prints_the_others_and_warns(cluster, client, mq_cli_run, broken):
    topic = f"UndecCli{broken}"
    if broken == "body":
        store_queue(cluster, client, topic)
        phy = bad_offset(cluster, topic)
    else:
        for i in range(N):
            cmd = send_cmd(topic, b"body %d" % i, queue_id=0, tags="TagA")
            assert cluster.run(client.invoke(cluster.broker_addr, cmd)).code == ResponseCode.SUCCESS
        cluster.run(cluster.broker.register_all(force=True))
        phy = break_framing(cluster, topic, BAD)
    res = mq_cli_run("pull", "-t", topic, "--queue", "0", "--json")
    assert res.exit_code == 0, (res.output, res.exception)
    rows = json.loads(res.stdout)
    assert [r["body"] for r in rows] == [b.decode() for b in expected_bodies()]
    assert "warning: skipped" in res.stderr
    assert f"queue offset {BAD}," in res.stderr and f"commit-log offset {phy}" in res.stderr


def test_admin_commands_name_the_undecodable_record(cluster, client, mq_cli_run):
    topic = "UndecAdmin"
    sent = store_queue(cluster, client, topic)
    phy = bad_offset(cluster, topic)

    res = mq_cli_run("printMsg", "-t", topic, "--json")
    assert res.exit_code == 0, (res.output, res.exception)
    doc = json.loads(res.stdout)
    assert sorted(m["body"] for q in doc["queues"] for m in q["messages"]) == sorted(
        b.decode() for b in expected_bodies())
    assert f"queue offset {BAD}," in res.stderr and f"commit-log offset {phy}" in res.stderr

    res = mq_cli_run("queryMsgByOffset", "-t", topic, "-b", "broker-a", "-q", "0", "-o", str(BAD))
    assert res.exit_code == 1
    assert f"queue offset {BAD}," in res.stderr and f"commit-log offset {phy}" in res.stderr
    assert "holds a record that cannot be decoded" in str(res.exception)

    res = mq_cli_run("queryMsgById", "-i", sent[BAD].msg_id)
    assert res.exit_code == 1
    assert f"commit-log offset {phy}" in res.stderr and "does not inflate" in res.stderr

    res = mq_cli_run("queryMsgById", "-i", sent[BAD + 1].msg_id, "--json")  # its neighbours are fine
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["messages"][0]["body"] == f"body {BAD + 1}"
