"""Queue administration against real daemons: `mq cloneGroupOffset`, `queryCq`, `cleanExpiredCQ`,
`cleanUnusedTopic`, `deleteExpiredCommitLog` and the raw requests (314, 321, 306, 316, 329) they send.

Each check reads the broker's real state afterwards: its offset table, its consume-queue files, its commit-log
segments, and that it still serves sends and pulls."""

from __future__ import annotations

import json

import pytest

from mq.common.msg_id import decode_offset_msg_id
from mq.common.tags import java_hash_code
from mq.protocol import headers as H
from mq.protocol.bodies import QueryConsumeQueueResponseBody
from mq.protocol.codes import RequestCode as R, ResponseCode as C

from tests.integration.broker.test_admin_cli import mq_json as ok_json
from tests.integration.broker.wire import heartbeat_cmd, pull_cmd, records, req, send_cmd

DELETE_EXPIRED_COMMITLOG = 329
SEGMENT = 128 * 1024


def call(run, client, addr, cmd):
    return run(client.invoke(addr, cmd, timeout=30))


def send(run, client, addr, topic: str, body: bytes = b"m", *, queue_id: int = 0, tags: str | None = None
         ) -> H.SendMessageResponseHeader:
    resp = call(run, client, addr, send_cmd(topic, body, queue_id=queue_id, tags=tags))
    assert resp.code == C.SUCCESS, resp.remark
    return H.SendMessageResponseHeader.from_ext(resp.ext_fields)


def commit(run, client, addr, group: str, topic: str, queue_id: int, offset: int) -> None:
    resp = call(run, client, addr, req(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset)))
    assert resp.code == C.SUCCESS


def create_topic(mq, topic: str, queues: int = 2) -> None:
    res = mq("updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", str(queues), "-w", str(queues))
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------------------------------------
# cloneGroupOffset (314)
# ---------------------------------------------------------------------------------------------
def test_clone_group_offset_cli_copies_every_queue(cluster, mq, client):
    run, addr, broker = cluster.run, cluster.broker_addr, cluster.broker
    create_topic(mq, "CloneT")
    for i in range(6):
        send(run, client, addr, "CloneT", queue_id=i % 2)
    commit(run, client, addr, "SrcG", "CloneT", 0, 2)
    commit(run, client, addr, "SrcG", "CloneT", 1, 3)

    out = ok_json(mq, "cloneGroupOffset", "-s", "SrcG", "-d", "DestG", "-t", "CloneT")
    assert [(b["addr"], b["error"]) for b in out["brokers"]] == [(addr, None)]
    assert [(q["queueId"], q["srcOffset"], q["destOffset"]) for q in out["brokers"][0]["queues"]] == [
        (0, 2, 2), (1, 3, 3)]
    assert (broker.offsets.query("DestG", "CloneT", 0), broker.offsets.query("DestG", "CloneT", 1)) == (2, 3)

    text = mq("cloneGroupOffset", "-s", "SrcG", "-d", "TextG", "-t", "CloneT")
    assert text.exit_code == 0, text.output
    assert "Clone offsets of SrcG to TextG on CloneT" in text.stdout and "cloned" in text.stdout
    assert broker.offsets.query("TextG", "CloneT", 1) == 3

    # the source group comes online subscribed to another topic: the broker skips CloneT unless -o
    assert call(run, client, addr, heartbeat_cmd("cid-srcg", consumer_group="SrcG", topic="OtherT")).code == C.SUCCESS
    skipped = ok_json(mq, "cloneGroupOffset", "-s", "SrcG", "-d", "SkipG", "-t", "CloneT")
    assert [q["destOffset"] for q in skipped["brokers"][0]["queues"]] == [None, None]
    assert broker.offsets.query("SkipG", "CloneT", 0) == -1
    forced = ok_json(mq, "cloneGroupOffset", "-s", "SrcG", "-d", "SkipG", "-t", "CloneT", "-o")
    assert [q["destOffset"] for q in forced["brokers"][0]["queues"]] == [2, 3] and forced["offline"] is True

    missing = mq("cloneGroupOffset", "-s", "SrcG", "-d", "DestG", "-t", "NoSuchTopicX")
    assert missing.exit_code == 1 and "NoSuchTopicX" in str(missing.exception)


def test_clone_group_offset_request_rules(cluster, mq, client):
    run, addr, broker = cluster.run, cluster.broker_addr, cluster.broker
    create_topic(mq, "CloneA", 1)
    create_topic(mq, "CloneB", 1)
    commit(run, client, addr, "Src2", "CloneA", 0, 4)
    commit(run, client, addr, "Src2", "CloneB", 0, 7)
    commit(run, client, addr, "Src2", "GoneTopic", 0, 9)  # offsets of a topic the broker does not configure

    def clone(dest, topic=None, offline=False):
        resp = call(run, client, addr, req(R.CLONE_GROUP_OFFSET, H.CloneGroupOffsetRequestHeader(
            src_group="Src2", dest_group=dest, topic=topic, offline=offline)))
        assert (resp.code, resp.remark, resp.body) == (C.SUCCESS, None, None)

    clone("AllG")  # no topic: every topic Src2 has offsets of, except unconfigured ones
    assert broker.offsets.table()["CloneA@AllG"] == {0: 4} and broker.offsets.table()["CloneB@AllG"] == {0: 7}
    assert "GoneTopic@AllG" not in broker.offsets.table()

    # online and subscribed to CloneA only: CloneB is skipped unless offline
    resp = call(run, client, addr, heartbeat_cmd("cid-src2", consumer_group="Src2", topic="CloneA"))
    assert resp.code == C.SUCCESS
    clone("OnG", "CloneB")
    assert "CloneB@OnG" not in broker.offsets.table()
    clone("OnG", "CloneA")
    assert broker.offsets.query("OnG", "CloneA", 0) == 4
    clone("OnG", "CloneB", offline=True)
    assert broker.offsets.query("OnG", "CloneB", 0) == 7


# ---------------------------------------------------------------------------------------------
# queryCq (321)
# ---------------------------------------------------------------------------------------------
def test_query_cq_units_match_what_was_sent(cluster, mq, client):
    run, addr, broker = cluster.run, cluster.broker_addr, cluster.broker
    create_topic(mq, "CqT", 1)
    tags = ["TagA", "TagB", "TagA", "TagC", "TagA"]
    sent = [send(run, client, addr, "CqT", b"body-%d" % i, tags=t) for i, t in enumerate(tags)]
    phys = [decode_offset_msg_id(s.msg_id)[1] for s in sent]

    out = ok_json(mq, "queryCq", "-t", "CqT", "-q", "0", "-i", "1", "-c", "3")
    assert (out["broker"], out["minQueueIndex"], out["maxQueueIndex"]) == (addr, 0, 5)
    units = out["units"]
    assert [(u["index"], u["physicOffset"], u["tagsCode"], u["eval"]) for u in units] == [
        (i, phys[i], java_hash_code(tags[i]), False) for i in (1, 2, 3)]
    cq = broker.store.cq_table.find("CqT", 0, create=False)
    assert [(u["physicOffset"], u["physicSize"], u["tagsCode"]) for u in units] == [cq.get_unit(i) for i in (1, 2, 3)]
    assert [u["message"]["tags"] for u in units] == tags[1:4]
    assert [u["message"]["queueOffset"] for u in units] == [1, 2, 3]
    assert out["subscriptionData"] is None and out["filterData"] is None

    # offline group: the broker says so; online group: its subscription and a match per unit
    off = ok_json(mq, "queryCq", "-t", "CqT", "-q", "0", "-i", "0", "-g", "NobodyG", "-b", addr)
    assert off["filterData"] == "NobodyG@CqT is not online!" and off["subscriptionData"] is None
    resp = call(run, client, addr, heartbeat_cmd("cid-cq", consumer_group="CqG", topic="CqT",
                                                 expression="TagA || TagC"))
    assert resp.code == C.SUCCESS
    on = ok_json(mq, "queryCq", "-t", "CqT", "-q", "0", "-i", "0", "-c", "10", "-g", "CqG", "--no-messages")
    assert on["subscriptionData"]["subString"] == "TagA || TagC" and on["filterData"] == "null"
    assert [u["eval"] for u in on["units"]] == [t in ("TagA", "TagC") for t in tags]
    assert all("message" not in u for u in on["units"])

    table = mq("queryCq", "-t", "CqT", "-q", "0", "-i", "0", "-g", "CqG")
    assert table.exit_code == 0, table.output
    assert "Consume queue 0@CqT" in table.stdout and "TagB" in table.stdout and "max index 5" in table.stdout

    past = mq("queryCq", "-t", "CqT", "-q", "0", "-i", "5")
    assert past.exit_code == 1 and "Index 5 of 0@CqT is not exist!" in past.output
    noq = mq("queryCq", "-t", "CqT", "-q", "3", "-i", "0")
    assert noq.exit_code == 1 and "3@CqT is not exist!" in str(noq.exception)


def test_query_consume_queue_raw_answers(cluster, client, mq):
    run, addr = cluster.run, cluster.broker_addr
    create_topic(mq, "CqRaw", 1)
    for i in range(3):
        send(run, client, addr, "CqRaw", tags="X")

    def query(**kw):
        return call(run, client, addr, req(R.QUERY_CONSUME_QUEUE, H.QueryConsumeQueueRequestHeader(**kw)))

    resp = query(topic="CqRaw", queue_id=0, index=0, count=2)
    assert resp.code == C.SUCCESS and resp.remark is None
    body = QueryConsumeQueueResponseBody.from_json(resp.body)
    assert (body.min_queue_index, body.max_queue_index, len(body.queue_data)) == (0, 3, 2)
    # fastjson shape: sorted keys, eval always present, null members left out
    assert resp.body.startswith(b'{"maxQueueIndex":3,"minQueueIndex":0,"queueData":[{"eval":false,"physicOffset":')
    resp = query(topic="CqRaw", queue_id=0, index=3, count=2)
    assert (resp.code, resp.remark, resp.body) == (C.SUCCESS, "Index 3 of 0@CqRaw is not exist!", None)
    resp = query(topic="CqRaw", queue_id=7, index=0, count=2)
    assert (resp.code, resp.remark) == (C.SYSTEM_ERROR, "7@CqRaw is not exist!")


# ---------------------------------------------------------------------------------------------
# deleteExpiredCommitLog (329), cleanExpiredCQ (306)
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def small_broker(broker_factory, namesrv, run):
    """A second broker with 128 KiB commit-log segments that expire at once (fileReservedTime 0) but only when
    asked: deleteWhen matches no hour and the disk is never "short"."""
    b = broker_factory(broker_name="broker-small", mapped_file_size_commit_log=SEGMENT, file_reserved_time=0,
                       delete_when="25", disk_max_used_space_ratio=95)
    return b


def test_delete_expired_commit_log_then_clean_expired_cq(namesrv, small_broker, client, run, mq_at):
    mq = lambda *args: mq_at(namesrv.address, *args)  # noqa: E731
    addr, store = small_broker.address, small_broker.store
    for topic in ("OldT", "NewT"):
        assert mq("updateTopic", "-t", topic, "-b", addr, "-r", "1", "-w", "1").exit_code == 0
    for _ in range(40):
        send(run, client, addr, "OldT", b"o" * 4000)
    old_end = store.cq_table.find("OldT", 0, create=False).last_unit_end()
    for _ in range(40):
        send(run, client, addr, "NewT", b"n" * 4000)
    files = [f.path for f in store.commit_log.queue.files]
    assert len(files) == 3 and old_end < 2 * SEGMENT

    out = ok_json(mq, "deleteExpiredCommitLog", "-b", addr)
    assert [(r["addr"], r["result"]) for r in out["brokers"]] == [(addr, "success")]
    assert [p.exists() for p in files] == [False, False, True]
    assert store.get_min_phy_offset() == 2 * SEGMENT
    cq_root = store.root / "consumequeue"
    assert (cq_root / "OldT" / "0").is_dir()  # its consume queue outlives its messages until cleanExpiredCQ

    out = ok_json(mq, "cleanExpiredCQ", "-c", "DefaultCluster")
    assert (addr, "success") in [(r["addr"], r["result"]) for r in out["brokers"]]
    assert not (cq_root / "OldT").exists()
    assert (cq_root / "NewT" / "0").is_dir()

    # the broker still serves both topics; OldT's queue starts afresh at offset 0
    assert send(run, client, addr, "OldT", b"again").queue_offset == 0
    resp = call(run, client, addr, pull_cmd("OldT", 0, 0))
    assert resp.code == C.SUCCESS and [m.body for m in records(resp)] == [b"again"]
    new_min = store.get_min_offset("NewT", 0)
    resp = call(run, client, addr, pull_cmd("NewT", 0, new_min, max_nums=1))
    assert resp.code == C.SUCCESS and records(resp)[0].queue_offset == new_min
    assert send(run, client, addr, "NewT", b"more").queue_offset == 40


def test_clean_requests_raw_answers_like_java(small_broker, client, run):
    addr = small_broker.address
    for code in (R.CLEAN_EXPIRED_CONSUMEQUEUE, R.CLEAN_UNUSED_TOPIC, DELETE_EXPIRED_COMMITLOG):
        resp = call(run, client, addr, req(code))
        assert (resp.code, resp.remark, resp.body) == (C.SUCCESS, None, None), code


# ---------------------------------------------------------------------------------------------
# cleanUnusedTopic (316)
# ---------------------------------------------------------------------------------------------
def test_clean_unused_topic(cluster, mq, client):
    run, addr, broker = cluster.run, cluster.broker_addr, cluster.broker
    create_topic(mq, "KeepT", 1)
    create_topic(mq, "DropT", 2)
    for q in (0, 1):
        send(run, client, addr, "DropT", queue_id=q)
    send(run, client, addr, "KeepT")
    cq_root = broker.store.root / "consumequeue"
    assert (cq_root / "DropT" / "1").is_dir()
    # the topic leaves the broker's topic table (e.g. topics.json edited) while its files stay
    assert broker.topic_config.delete("DropT")

    res = mq("cleanUnusedTopic")  # no -b/-c: every broker of every cluster, as mqadmin does
    assert res.exit_code == 0, res.output
    assert "cleanUnusedTopic" in res.stdout and "success" in res.stdout
    assert not (cq_root / "DropT").exists()
    assert (cq_root / "KeepT" / "0").is_dir()
    resp = call(run, client, addr, pull_cmd("KeepT", 0, 0))
    assert resp.code == C.SUCCESS and len(records(resp)) == 1


def test_clean_commands_report_unreachable_brokers(cluster, mq):
    res = mq("cleanExpiredCQ", "-b", "127.0.0.1:1", "--json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert [(r["addr"], r["result"]) for r in out["brokers"]] == [("127.0.0.1:1", "failed")]
    assert "1 of 1 broker(s) failed" in res.stderr
    bad = mq("deleteExpiredCommitLog", "-c", "NoSuchCluster")
    assert bad.exit_code == 1 and "NoSuchCluster" in str(bad.exception)
