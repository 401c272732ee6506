"""MQAdmin's broker-admin methods against a real name server and broker."""

from __future__ import annotations

import time

import pytest

from mq.client.admin import MQAdmin
from mq.errors import BrokerError, ConnectError, ConsumerNotOnlineError, TopicNotExistError
from mq.protocol import headers as H
from mq.protocol.bodies import MessageQueue, TopicConfig
from mq.protocol.codes import RequestCode as R

from tests.integration.broker.wire import req, send_cmd


@pytest.fixture
def admin(cluster):
    a = MQAdmin([cluster.namesrv_addr], timeout=5.0)
    yield a
    cluster.run(a.close())


def test_admin_round_trip(cluster, admin):
    run, addr, name = cluster.run, cluster.broker_addr, cluster.broker.broker_name

    async def go():
        assert await admin.master_addrs() == {name: addr}
        assert await admin.master_addrs("DefaultCluster") == {name: addr}
        with pytest.raises(BrokerError, match="NoCluster"):
            await admin.master_addrs("NoCluster")
        await admin.create_and_update_topic_config(addr, TopicConfig("AcT", 2, 2))
        assert await admin.topic_master_addrs("AcT") == {name: addr}
        assert "AcT" in (await admin.get_all_topic_config(addr)).topic_config_table
        before = int(time.time() * 1000)
        for i in range(4):
            assert (await admin.client.invoke(addr, send_cmd("AcT", b"v%d" % i, queue_id=i % 2, keys="K"))).code == 0
        stats = await admin.examine_topic_stats_all("AcT")
        assert sorted((mq.queue_id, o.max_offset) for mq, o in stats.offset_table.items()) == [(0, 2), (1, 2)]

        # the mqadmin fallback path (commit offsets per queue) against our broker
        table = await admin.reset_offset_by_time_old(addr, "AcT", "AcG", -1)
        assert table == {MessageQueue("AcT", name, 0): 2, MessageQueue("AcT", name, 1): 2}
        await admin.client.invoke(addr, send_cmd("AcT", b"late", queue_id=0))
        await admin.client.invoke(addr, req(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
            consumer_group="AcG", topic="AcT", queue_id=0, commit_offset=1)))
        table = await admin.reset_offset_by_time_old(addr, "AcT", "AcG", -1)
        assert table[MessageQueue("AcT", name, 0)] == 3
        table = await admin.reset_offset_by_time_old(addr, "AcT", "AcG", before - 60_000, force=False)
        assert table[MessageQueue("AcT", name, 0)] == 0
        cs = await admin.examine_consume_stats_all("AcG", "AcT")
        assert cs.offset_table[MessageQueue("AcT", name, 0)].consumer_offset == 0

        assert await admin.query_topic_consume_by_who(addr, "AcT") == {"AcG"}
        spans = await admin.query_consume_time_span(addr, "AcT", "AcG")
        assert {s["messageQueue"]["queueId"] for s in spans} == {0, 1}
        assert "SCHEDULE_TOPIC_XXXX" in await admin.get_system_topic_list_from_broker(addr)
        assert (await admin.get_all_consumer_offset(addr))["AcT@AcG"] == {0: 0, 1: 0}
        assert isinstance(await admin.get_all_delay_offset(addr), dict)
        assert (await admin.get_broker_config(addr))["brokerName"] == name
        with pytest.raises(ConsumerNotOnlineError):
            await admin.examine_consumer_connection_all("AcG")
        with pytest.raises(BrokerError, match="not online"):
            await admin.get_consumer_running_info(addr, "AcG", "nobody")

        found = await admin.query_message_by_key("AcT", "K", 3)
        assert len(found) == 3 and [m.body for m in found] == [b"v3", b"v2", b"v1"]
        viewed = await admin.view_message_by_offset_msg_id(found[0].msg_id)
        assert viewed.body == b"v3"
        code, msgs, nxt, lo, hi = await admin.pull_message_at(addr, "AcT", 1, 1)
        assert (code, [m.body for m in msgs], nxt, hi) == (0, [b"v3"], 2, 2)
        with pytest.raises(TopicNotExistError):
            await admin.examine_topic_stats_all("NoSuchTopicAc")
        with pytest.raises(ConnectError, match="127.0.0.1:1"):
            await admin.fetch_broker_runtime_stats("127.0.0.1:1")

        await admin.delete_topic_in_broker(addr, "AcT")
        assert await admin.delete_topic_in_all_namesrv("AcT", "DefaultCluster") == []
        with pytest.raises(TopicNotExistError):
            await admin.topic_route("AcT")

    run(go())


def test_query_correction_offset(cluster, admin):
    """QUERY_CORRECTION_OFFSET (308): the smallest committed offset per queue over the groups not filtered out;
    Long.MAX_VALUE where it is beyond the compare group's; the filtered groups keep their offsets (Java's
    ConsumerOffsetManager drops them while it looks)."""
    addr = cluster.broker_addr

    async def go():
        await admin.create_and_update_topic_config(addr, TopicConfig("CorrT", 2, 2))
        for i in range(10):
            assert (await admin.client.invoke(addr, send_cmd("CorrT", b"m%d" % i, queue_id=i % 2))).code == 0
        for group, offsets in {"CorrA": {0: 5, 1: 3}, "CorrB": {0: 2, 1: 4}, "CorrD": {0: 1}}.items():
            for qid, off in offsets.items():
                await admin.client.invoke(addr, req(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
                    consumer_group=group, topic="CorrT", queue_id=qid, commit_offset=off)))
        assert await admin.query_correction_offset(addr, "CorrT", "CorrA") == {0: 1, 1: 3}
        assert await admin.query_correction_offset(addr, "CorrT", "CorrA", ["CorrB"]) == {0: 1, 1: 3}
        # CorrD left out and behind everybody else on queue 0: nothing to correct there
        assert await admin.query_correction_offset(addr, "CorrT", "CorrD", ["CorrB", "CorrD"]) == {0: 2**63 - 1, 1: 3}
        assert (await admin.get_all_consumer_offset(addr))["CorrT@CorrB"] == {0: 2, 1: 4}
        assert await admin.query_correction_offset(addr, "NoSuchT", "CorrA") == {}

    cluster.run(go())
