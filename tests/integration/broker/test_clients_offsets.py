"""Membership (heartbeat, notify, expiry), offsets, locks, queries, retry/DLQ and restart, over raw calls."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from mq.common import properties as P
from mq.protocol import headers as H
from mq.protocol.bodies import (GetConsumerListByGroupResponseBody, LockBatchRequestBody, LockBatchResponseBody,
                                MessageQueue, UnlockBatchRequestBody)
from mq.protocol.codes import RequestCode, ResponseCode as RC
from mq.remoting import RemotingClient

from .wire import heartbeat_cmd, pull_cmd, records, req, send_cmd


def _notify_recorder(client: RemotingClient) -> list[str]:
    seen: list[str] = []

    def on_notify(conn, cmd):
        seen.append(cmd.ext_fields.get("consumerGroup"))
        return None

    client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    return seen


async def _wait(pred, timeout=3.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        await asyncio.sleep(0.01)
    return pred()


def test_heartbeat_membership_and_notify(cluster, run):
    b = cluster.broker

    async def main():
        c1, c2 = RemotingClient(), RemotingClient()
        seen1 = _notify_recorder(c1)
        try:
            r = await c1.invoke(b.address, heartbeat_cmd("10.0.0.1@1", consumer_group="G", topic="T",
                                                         producer_group="PG"))
            assert r.code == RC.SUCCESS
            assert b.topic_config.get("%RETRY%G") is not None
            assert b.producers.any_channel("PG").client_id == "10.0.0.1@1"
            r = await c2.invoke(b.address, heartbeat_cmd("10.0.0.2@2", consumer_group="G", topic="T"))
            assert await _wait(lambda: "G" in seen1)
            lst = await c1.invoke(b.address, req(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                 H.GetConsumerListByGroupRequestHeader("G")))
            ids = GetConsumerListByGroupResponseBody.from_json(lst.body).consumer_id_list
            assert sorted(ids) == ["10.0.0.1@1", "10.0.0.2@2"]
            seen1.clear()
            r = await c2.invoke(b.address, req(RequestCode.UNREGISTER_CLIENT,
                                               H.UnregisterClientRequestHeader("10.0.0.2@2", None, "G")))
            assert r.code == RC.SUCCESS
            assert await _wait(lambda: "G" in seen1)
            assert b.consumers.get("G").client_ids() == ["10.0.0.1@1"]
            # a C++ style heartbeat: integer enums, missing lists, string subVersion
            body = (b'{"clientID":"cpp@3#x","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
                    b'"groupName":"CG","messageModel":1,"subscriptionDataSet":[{"codeSet":[0],"subString":"TagA",'
                    b'"subVersion":"1690000000000","tagsSet":["TagA"],"topic":"T"}]}]}\n')
            r = await c2.invoke(b.address, req(RequestCode.HEART_BEAT, body=body))
            assert r.code == RC.SUCCESS
            info = b.consumers.get("CG")
            assert info.consume_type == 1 and info.subscriptions["T"].code_set != {0}
            # closing a connection removes it and notifies the rest
            seen1.clear()
            await c2.invoke(b.address, heartbeat_cmd("10.0.0.2@2", consumer_group="G", topic="T"))
            assert await _wait(lambda: "G" in seen1)
            seen1.clear()
            await c2.close()
            assert await _wait(lambda: "G" in seen1)
            assert b.consumers.get("CG") is None
            lst = await c1.invoke(b.address, req(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                 H.GetConsumerListByGroupRequestHeader("Nope")))
            assert lst.code == RC.SYSTEM_ERROR and "no consumer for this group" in lst.remark
        finally:
            await c1.close()
            await c2.close()

    run(main())


def test_silent_channels_expire(broker_factory, client, run):
    b = broker_factory(channel_expired_timeout=200, client_channel_scan_interval=50)

    async def main():
        await client.invoke(b.address, heartbeat_cmd("x@1", consumer_group="Exp", topic="T", producer_group="EP"))
        assert b.consumers.get("Exp") is not None
        assert await _wait(lambda: b.consumers.get("Exp") is None and not b.producers.groups(), 3.0)

    run(main())


def test_offset_rules_and_queries(broker_factory, client, run):
    b = broker_factory()

    async def main():
        q = lambda g, t, i: req(RequestCode.QUERY_CONSUMER_OFFSET, H.QueryConsumerOffsetRequestHeader(g, t, i))
        r = await client.invoke(b.address, q("NewGroup", "Unknown", 0))
        assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"
        t0 = int(time.time() * 1000)
        for i in range(5):
            await client.invoke(b.address, send_cmd("Off", f"{i}".encode()))
            await asyncio.sleep(0.005)
        r = await client.invoke(b.address, q("NewGroup", "Off", 0))
        assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"  # still in memory: start from 0
        await client.invoke(b.address, req(RequestCode.UPDATE_CONSUMER_OFFSET,
                                           H.UpdateConsumerOffsetRequestHeader("NewGroup", "Off", 0, 3)))
        r = await client.invoke(b.address, q("NewGroup", "Off", 0))
        assert r.ext_fields["offset"] == "3"
        # oneway update (the Java client's persist)
        cmd = req(RequestCode.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader("NewGroup", "Off", 0, 4))
        await client.invoke_oneway(b.address, cmd)
        assert await _wait(lambda: b.offsets.query("NewGroup", "Off", 0) == 4)
        # commit piggyback on pull (first pass only)
        await client.invoke(b.address, pull_cmd("Off", 0, 0, group="Pig", sys_flag=0x5, commit_offset=2))
        assert b.offsets.query("Pig", "Off", 0) == 2
        r = await client.invoke(b.address, req(RequestCode.GET_MAX_OFFSET, H.GetMaxOffsetRequestHeader("Off", 0)))
        assert r.ext_fields["offset"] == "5"
        r = await client.invoke(b.address, req(RequestCode.GET_MIN_OFFSET, H.GetMinOffsetRequestHeader("Off", 0)))
        assert r.ext_fields["offset"] == "0"
        r = await client.invoke(b.address, req(RequestCode.GET_MAX_OFFSET, H.GetMaxOffsetRequestHeader("Nope", 0)))
        assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"
        r = await client.invoke(b.address, req(RequestCode.GET_EARLIEST_MSG_STORETIME,
                                               H.GetEarliestMsgStoretimeRequestHeader("Off", 0)))
        assert abs(int(r.ext_fields["timestamp"]) - t0) < 5000
        r = await client.invoke(b.address, req(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                               H.SearchOffsetRequestHeader("Off", 0, t0 - 10_000)))
        assert r.ext_fields["offset"] == "0"
        r = await client.invoke(b.address, req(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                               H.SearchOffsetRequestHeader("Off", 0, t0 + 100_000)))
        assert r.ext_fields["offset"] == "4"

    run(main())


def test_query_not_found_when_first_entry_counts_as_on_disk(broker_factory, client, run):
    b = broker_factory(access_message_in_memory_max_ratio=0)

    async def main():
        await client.invoke(b.address, send_cmd("Disk", b"a"))
        await client.invoke(b.address, send_cmd("Disk", b"b"))
        r = await client.invoke(b.address, req(RequestCode.QUERY_CONSUMER_OFFSET,
                                               H.QueryConsumerOffsetRequestHeader("G", "Disk", 0)))
        assert r.code == RC.QUERY_NOT_FOUND

    run(main())


def test_lock_batch_and_expiry(broker_factory, client, run):
    b = broker_factory(rebalance_lock_max_live_time=300)

    async def main():
        mqs = {MessageQueue("T", b.broker_name, i) for i in range(3)}
        lock = lambda cid, s: req(RequestCode.LOCK_BATCH_MQ, body=LockBatchRequestBody("G", cid, s).to_json())
        r = await client.invoke(b.address, lock("A", mqs))
        assert LockBatchResponseBody.from_json(r.body).lock_ok_mq_set == mqs
        r = await client.invoke(b.address, lock("B", mqs))
        assert LockBatchResponseBody.from_json(r.body).lock_ok_mq_set == set()
        one = {MessageQueue("T", b.broker_name, 0)}
        r = await client.invoke(b.address, req(RequestCode.UNLOCK_BATCH_MQ,
                                               body=UnlockBatchRequestBody("G", "A", one).to_json()))
        assert r.code == RC.SUCCESS
        r = await client.invoke(b.address, lock("B", mqs))
        assert LockBatchResponseBody.from_json(r.body).lock_ok_mq_set == one
        await asyncio.sleep(0.4)  # A's locks expire
        r = await client.invoke(b.address, lock("B", mqs))
        assert LockBatchResponseBody.from_json(r.body).lock_ok_mq_set == mqs
        # C++ sends queueId as a number and a trailing newline
        body = b'{"clientId":"B","consumerGroup":"G","mqSet":[{"brokerName":"%s","queueId":1,"topic":"T"}]}\n' \
            % b.broker_name.encode()
        r = await client.invoke(b.address, req(RequestCode.LOCK_BATCH_MQ, body=body))
        assert len(LockBatchResponseBody.from_json(r.body).lock_ok_mq_set) == 1

    run(main())


def test_query_message_by_key_and_unique_key(cluster, client, run):
    b = cluster.broker

    async def main():
        t0 = int(time.time() * 1000) - 1000
        r = await client.invoke(b.address, send_cmd("Qry", b"findme", keys="order-1 order-2"))
        msg_id = r.ext_fields["msgId"]
        await client.invoke(b.address, send_cmd("Qry", b"other", keys="order-3"))
        q = H.QueryMessageRequestHeader("Qry", "order-2", 32, t0, int(time.time() * 1000) + 1000)
        r = await client.invoke(b.address, req(RequestCode.QUERY_MESSAGE, q))
        assert r.code == RC.SUCCESS and [m.body for m in records(r)] == [b"findme"]
        assert "indexLastUpdateTimestamp" in r.ext_fields
        uniq = records(r)[0].properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        q = H.QueryMessageRequestHeader("Qry", uniq, 1, t0, int(time.time() * 1000) + 1000, True)
        r = await client.invoke(b.address, req(RequestCode.QUERY_MESSAGE, q))
        assert r.code == RC.SUCCESS and records(r)[0].msg_id == msg_id
        q = H.QueryMessageRequestHeader("Qry", "missing", 32, t0, int(time.time() * 1000) + 1000)
        r = await client.invoke(b.address, req(RequestCode.QUERY_MESSAGE, q))
        assert r.code == RC.QUERY_NOT_FOUND

    run(main())


def test_retry_topic_send_goes_to_dlq_after_max(cluster, client, run):
    b = cluster.broker

    async def main():
        r = await client.invoke(b.address, send_cmd("%RETRY%RG", b"again", reconsume_times=1,
                                                    max_reconsume_times=3))
        assert r.code == RC.SUCCESS
        r = await client.invoke(b.address, send_cmd("%RETRY%RG", b"dead", reconsume_times=3,
                                                    max_reconsume_times=3))
        assert r.code == RC.SUCCESS
        dlq = b.topic_config.get("%DLQ%RG")
        assert dlq is not None and dlq.perm == 6
        p = await client.invoke(b.address, pull_cmd("%DLQ%RG", 0, 0))
        assert [m.body for m in records(p)] == [b"dead"]

    run(main())


def test_messages_offsets_and_topics_survive_restart(broker_factory, client, run, tmp_path):
    store = str(tmp_path / "persist")
    b = broker_factory(store_dir=store)

    async def phase1():
        for i in range(10):
            r = await client.invoke(b.address, send_cmd("Keep", f"m{i}".encode(), tags="A"))
            assert r.code == RC.SUCCESS
        await client.invoke(b.address, req(RequestCode.UPDATE_CONSUMER_OFFSET,
                                           H.UpdateConsumerOffsetRequestHeader("KG", "Keep", 0, 7)))
        await client.invoke(b.address, heartbeat_cmd("k@1", consumer_group="KG", topic="Keep"))
        await b.stop()
        client.close_connection(b.address)

    run(phase1())
    saved = json.loads((Path(store) / "config" / "consumerOffset.json").read_text())
    assert saved["offsetTable"]["Keep@KG"] == {"0": 7}
    b2 = broker_factory(store_dir=store)

    async def phase2():
        r = await client.invoke(b2.address, req(RequestCode.QUERY_CONSUMER_OFFSET,
                                                H.QueryConsumerOffsetRequestHeader("KG", "Keep", 0)))
        assert r.ext_fields["offset"] == "7"
        p = await client.invoke(b2.address, pull_cmd("Keep", 0, 7))
        assert [m.body for m in records(p)] == [b"m7", b"m8", b"m9"]
        assert b2.topic_config.get("Keep").write_queue_nums == 4
        assert b2.subscription_groups.get("KG") is not None
        r = await client.invoke(b2.address, send_cmd("Keep", b"m10"))
        assert r.ext_fields["queueOffset"] == "10"

    run(phase2())
