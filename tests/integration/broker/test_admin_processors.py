"""The broker's admin request processors over real sockets (PROTOCOL.md §4.5), driven with raw commands."""

from __future__ import annotations

import asyncio
import time

import pytest

from mq.common.fastjson import loads
from mq.common.record import decode_record
from mq.protocol import headers as H
from mq.protocol.bodies import (ConsumerConnection, ConsumeStats, GroupList, KVTable, MessageQueue,
                                ProducerConnection, ResetOffsetBody, SubscriptionGroupConfig, SubscriptionGroupWrapper,
                                TopicConfigSerializeWrapper, TopicList, TopicRouteData, TopicStatsTable)
from mq.protocol.codes import LanguageCode, RequestCode as R, ResponseCode as C
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient

from tests.integration.broker.wire import heartbeat_cmd, req, send_cmd


def create_topic(topic: str, r: int = 4, w: int = 4, perm: int = 6) -> RemotingCommand:
    return req(R.UPDATE_AND_CREATE_TOPIC, H.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=r, write_queue_nums=w, perm=perm,
        topic_filter_type="SINGLE_TAG"))


@pytest.fixture
def consumer_client(run):
    c = RemotingClient(name="consumer")
    yield c
    run(c.close())


def test_create_topic_registers_route_and_refuses_bad_names(cluster, client):
    run, addr = cluster.run, cluster.broker_addr

    async def go():
        assert (await client.invoke(addr, create_topic("AdminT1", 3, 5))).code == C.SUCCESS
        cfg = TopicConfigSerializeWrapper.from_json((await client.invoke(addr, req(R.GET_ALL_TOPIC_CONFIG))).body)
        tc = cfg.topic_config_table["AdminT1"]
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (3, 5, 6)
        route = await client.invoke(cluster.namesrv_addr, req(R.GET_ROUTEINFO_BY_TOPIC,
                                                               H.GetRouteInfoRequestHeader(topic="AdminT1")))
        assert route.code == C.SUCCESS
        qd = TopicRouteData.from_json(route.body).queue_datas
        assert [(q.read_queue_nums, q.write_queue_nums) for q in qd] == [(3, 5)]
        for bad in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_x", "TBW102", "bad topic!", "DefaultCluster"):
            resp = await client.invoke(addr, create_topic(bad))
            assert resp.code == C.SYSTEM_ERROR, bad
            assert resp.remark
        systems = TopicList.from_json((await client.invoke(addr, req(R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))).body)
        assert {"SCHEDULE_TOPIC_XXXX", "TBW102", "DefaultCluster"} <= systems.topic_list
        assert "AdminT1" not in systems.topic_list

    run(go())


def test_a_topic_change_registers_that_topic_alone(cluster, client, monkeypatch):
    """RocketMQ's registerIncrementBrokerData: a created topic goes to the name server alone (with the table's
    new data version), once; a deletion sends the whole table. The name server keeps the other topics."""
    run, addr = cluster.run, cluster.broker_addr
    reg = cluster.broker.registrar
    real = reg.register_all
    sent: list[list[str] | None] = []

    async def spy(force=False, topics=None):
        sent.append(None if topics is None else sorted(t.topic_name for t in topics))
        return await real(force, topics)

    monkeypatch.setattr(reg, "register_all", spy)

    async def routed(topic: str) -> bool:
        resp = await client.invoke(cluster.namesrv_addr, req(R.GET_ROUTEINFO_BY_TOPIC,
                                                              H.GetRouteInfoRequestHeader(topic=topic)))
        return resp.code == C.SUCCESS

    async def go():
        assert (await client.invoke(addr, create_topic("IncT1"))).code == C.SUCCESS
        assert sent == [["IncT1"]]  # before the answer, and only that topic
        assert (await client.invoke(addr, create_topic("IncT2", 2, 2))).code == C.SUCCESS
        await asyncio.sleep(0.1)  # the coalesced registration the change also scheduled has nothing left
        assert sent == [["IncT1"], ["IncT2"]]
        assert await routed("IncT1") and await routed("IncT2") and await routed("TBW102")
        version = cluster.broker.topic_config.data_version
        live = cluster.namesrv.table.broker_live_table[addr]
        assert live.data_version == version
        resp = await client.invoke(addr, req(R.DELETE_TOPIC_IN_BROKER, H.DeleteTopicRequestHeader(topic="IncT1")))
        assert resp.code == C.SUCCESS
        for _ in range(100):
            if len(sent) == 3:
                break
            await asyncio.sleep(0.02)
        assert sent[2] is None  # the whole table

    run(go())


def test_topic_stats_consume_stats_and_delete(cluster, client):
    run, addr = cluster.run, cluster.broker_addr

    async def go():
        await client.invoke(addr, create_topic("AdminT2", 2, 2))
        before = int(time.time() * 1000)
        for i in range(5):
            resp = await client.invoke(addr, send_cmd("AdminT2", b"m%d" % i, queue_id=i % 2, keys=f"k{i}"))
            assert resp.code == C.SUCCESS, resp.remark
        stats = TopicStatsTable.from_json((await client.invoke(
            addr, req(R.GET_TOPIC_STATS_INFO, H.GetTopicStatsInfoRequestHeader(topic="AdminT2")))).body)
        name = cluster.broker.broker_name
        q0, q1 = stats.offset_table[MessageQueue("AdminT2", name, 0)], stats.offset_table[MessageQueue("AdminT2", name, 1)]
        assert (q0.min_offset, q0.max_offset, q1.min_offset, q1.max_offset) == (0, 3, 0, 2)
        assert q0.last_update_timestamp >= before - 5 and q1.last_update_timestamp >= before - 5
        unknown = await client.invoke(addr, req(R.GET_TOPIC_STATS_INFO, H.GetTopicStatsInfoRequestHeader(topic="Nope")))
        assert unknown.code == C.TOPIC_NOT_EXIST

        await client.invoke(addr, req(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
            consumer_group="G2", topic="AdminT2", queue_id=0, commit_offset=2)))
        cs = ConsumeStats.from_json((await client.invoke(addr, req(
            R.GET_CONSUME_STATS, H.GetConsumeStatsRequestHeader(consumer_group="G2")))).body)
        ow0, ow1 = cs.offset_table[MessageQueue("AdminT2", name, 0)], cs.offset_table[MessageQueue("AdminT2", name, 1)]
        assert (ow0.broker_offset, ow0.consumer_offset, ow1.broker_offset, ow1.consumer_offset) == (3, 2, 2, 0)
        assert ow0.last_timestamp >= before - 5 and ow1.last_timestamp == 0
        raw = (await client.invoke(addr, req(R.GET_CONSUME_STATS, H.GetConsumeStatsRequestHeader(
            consumer_group="G2", topic="AdminT2")))).body
        assert b'{"brokerName":' in raw  # MessageQueue object keys, as fastjson writes them

        who = GroupList.from_json((await client.invoke(addr, req(
            R.QUERY_TOPIC_CONSUME_BY_WHO, H.QueryTopicConsumeByWhoRequestHeader(topic="AdminT2")))).body)
        assert who.group_list == {"G2"}
        spans = loads((await client.invoke(addr, req(R.QUERY_CONSUME_TIME_SPAN, H.QueryConsumeTimeSpanRequestHeader(
            topic="AdminT2", group="G2")))).body)["consumeTimeSpanSet"]
        assert len(spans) == 2 and spans[0]["messageQueue"]["queueId"] == 0
        assert spans[0]["minTimeStamp"] <= spans[0]["consumeTimeStamp"] <= spans[0]["maxTimeStamp"]
        assert spans[0]["delayTime"] >= 0

        offsets_raw = (await client.invoke(addr, req(R.GET_ALL_CONSUMER_OFFSET))).body
        assert b'"AdminT2@G2":{0:2}' in offsets_raw  # unquoted int keys, as Java

        assert (await client.invoke(addr, req(R.DELETE_TOPIC_IN_BROKER,
                                              H.DeleteTopicRequestHeader(topic="AdminT2")))).code == C.SUCCESS
        cfg = TopicConfigSerializeWrapper.from_json((await client.invoke(addr, req(R.GET_ALL_TOPIC_CONFIG))).body)
        assert "AdminT2" not in cfg.topic_config_table
        assert "AdminT2@G2" not in (await client.invoke(addr, req(R.GET_ALL_CONSUMER_OFFSET))).body.decode()
        gone = await client.invoke(addr, req(R.GET_TOPIC_STATS_INFO, H.GetTopicStatsInfoRequestHeader(topic="AdminT2")))
        assert gone.code == C.TOPIC_NOT_EXIST
        refused = await client.invoke(addr, req(R.DELETE_TOPIC_IN_BROKER, H.DeleteTopicRequestHeader(topic="TBW102")))
        assert refused.code == C.SYSTEM_ERROR

    run(go())


def test_subscription_groups(cluster, client):
    run, addr = cluster.run, cluster.broker_addr

    async def go():
        cfg = SubscriptionGroupConfig(group_name="SG1", retry_max_times=3, consume_broadcast_enable=False)
        assert (await client.invoke(addr, req(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=cfg.to_json()))).code == 0
        wrapper = SubscriptionGroupWrapper.from_json((await client.invoke(
            addr, req(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
        assert wrapper.subscription_group_table["SG1"] == cfg
        bad = SubscriptionGroupConfig(group_name="bad group")
        assert (await client.invoke(addr, req(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=bad.to_json()))).code == 1
        assert (await client.invoke(addr, req(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP))).code == 1
        await client.invoke(addr, req(R.DELETE_SUBSCRIPTIONGROUP, H.DeleteSubscriptionGroupRequestHeader(
            group_name="SG1", remove_offset=True)))
        wrapper = SubscriptionGroupWrapper.from_json((await client.invoke(
            addr, req(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
        assert "SG1" not in wrapper.subscription_group_table

    run(go())


def test_connections_reset_offset_and_relays(cluster, client, consumer_client, monkeypatch):
    from mq.daemon.broker.processors import admin as admin_mod

    run, addr = cluster.run, cluster.broker_addr
    monkeypatch.setattr(admin_mod, "RELAY_TIMEOUT", 0.5)
    pushed: list[RemotingCommand] = []
    running_reply = b'{"properties":{"consumeType":"CONSUME_PASSIVELY"},"mqTable":{}}'

    def on_reset(conn, cmd):
        pushed.append(cmd)

    def on_running(conn, cmd):
        return cmd.response(C.SUCCESS, body=running_reply)

    def on_direct(conn, cmd):
        msg = decode_record(cmd.body)
        return cmd.response(C.SUCCESS, body=b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,'
                                            b'"remark":"' + msg.body + b'","spentTimeMills":1}')

    consumer_client.register(R.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
    consumer_client.register(R.GET_CONSUMER_RUNNING_INFO, on_running)
    consumer_client.register(R.CONSUME_MESSAGE_DIRECTLY, on_direct)

    async def go():
        await client.invoke(addr, create_topic("AdminT3", 2, 2))
        sent = []
        for i in range(4):
            resp = await client.invoke(addr, send_cmd("AdminT3", b"body%d" % i, queue_id=i % 2))
            sent.append(H.SendMessageResponseHeader.from_ext(resp.ext_fields))
        conn_req = req(R.GET_CONSUMER_CONNECTION_LIST, H.GetConsumerConnectionListRequestHeader(consumer_group="G3"))
        assert (await client.invoke(addr, conn_req)).code == C.CONSUMER_NOT_ONLINE
        prod_req = req(R.GET_PRODUCER_CONNECTION_LIST, H.GetProducerConnectionListRequestHeader(producer_group="PG3"))
        assert (await client.invoke(addr, prod_req)).code == C.SYSTEM_ERROR

        # offline group: CONSUMER_NOT_ONLINE with RocketMQ's remark, and nothing changes (mqadmin then commits the
        # offsets itself, queue by queue)
        await client.invoke(addr, req(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
            consumer_group="G3", topic="AdminT3", queue_id=0, commit_offset=2)))
        reset = req(R.INVOKE_BROKER_TO_RESET_OFFSET, H.ResetOffsetRequestHeader(
            topic="AdminT3", group="G3", timestamp=0, is_force=True))
        resp = await client.invoke(addr, reset)  # queue 1 has no committed offset: RocketMQ's refusal
        assert (resp.code, resp.remark) == (C.SYSTEM_ERROR, "THe consumer group <G3> not exist")
        await client.invoke(addr, req(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
            consumer_group="G3", topic="AdminT3", queue_id=1, commit_offset=0)))
        resp = await client.invoke(addr, reset)
        assert resp.code == C.CONSUMER_NOT_ONLINE
        assert resp.remark == "Consumer not online, so can not reset offset, Group: G3 Topic: AdminT3 Timestamp: 0"
        q = await client.invoke(addr, req(R.QUERY_CONSUMER_OFFSET, H.QueryConsumerOffsetRequestHeader(
            consumer_group="G3", topic="AdminT3", queue_id=0)))
        assert H.QueryConsumerOffsetResponseHeader.from_ext(q.ext_fields).offset == 2
        unknown = req(R.INVOKE_BROKER_TO_RESET_OFFSET, H.ResetOffsetRequestHeader(
            topic="AdminT3", group="NoSuchGroup", timestamp=0, is_force=True))
        assert (await client.invoke(addr, unknown)).code == C.SYSTEM_ERROR

        # online group: connections listed, 220 pushed (C++ list form for a CPP admin)
        hb = heartbeat_cmd("10.0.0.9@c1", consumer_group="G3", topic="AdminT3", producer_group="PG3")
        assert (await consumer_client.invoke(addr, hb)).code == C.SUCCESS
        cc = ConsumerConnection.from_json((await client.invoke(addr, conn_req)).body)
        assert [c.client_id for c in cc.connection_set] == ["10.0.0.9@c1"]
        assert "AdminT3" in cc.subscription_table
        pc = ProducerConnection.from_json((await client.invoke(addr, prod_req)).body)
        assert [c.client_id for c in pc.connection_set] == ["10.0.0.9@c1"]
        resp = await client.invoke(addr, reset)
        assert resp.code == C.SUCCESS
        cpp = req(R.INVOKE_BROKER_TO_RESET_OFFSET, H.ResetOffsetRequestHeader(
            topic="AdminT3", group="G3", timestamp=0, is_force=True))
        cpp.language = LanguageCode.CPP
        assert (await client.invoke(addr, cpp)).code == C.SUCCESS
        for _ in range(50):
            if len(pushed) >= 2:
                break
            await asyncio.sleep(0.02)
        assert [p.code for p in pushed] == [R.RESET_CONSUMER_CLIENT_OFFSET] * 2
        assert H.ResetOffsetRequestHeader.from_ext(pushed[0].ext_fields).group == "G3"
        assert {mq.queue_id for mq in ResetOffsetBody.from_json(pushed[0].body).offset_table} == {0, 1}
        listed = loads(pushed[1].body)["offsetTable"]
        assert isinstance(listed, list) and {e["queueId"] for e in listed} == {0, 1}
        assert all(set(e) == {"brokerName", "offset", "queueId", "topic"} for e in listed)

        # relays
        run_req = req(R.GET_CONSUMER_RUNNING_INFO, H.GetConsumerRunningInfoRequestHeader(
            consumer_group="G3", client_id="10.0.0.9@c1"))
        resp = await client.invoke(addr, run_req)
        assert (resp.code, bytes(resp.body)) == (C.SUCCESS, running_reply)
        direct = req(R.CONSUME_MESSAGE_DIRECTLY, H.ConsumeMessageDirectlyResultRequestHeader(
            consumer_group="G3", client_id="10.0.0.9@c1", msg_id=sent[1].msg_id))
        resp = await client.invoke(addr, direct)
        assert resp.code == C.SUCCESS and loads(resp.body)["remark"] == "body1"
        missing = req(R.GET_CONSUMER_RUNNING_INFO, H.GetConsumerRunningInfoRequestHeader(
            consumer_group="G3", client_id="nobody"))
        assert (await client.invoke(addr, missing)).code == C.SYSTEM_ERROR
        consumer_client.register(R.GET_CONSUMER_RUNNING_INFO, lambda conn, cmd: None)  # never answers
        resp = await client.invoke(addr, run_req, timeout=5)
        assert resp.code == C.CONSUME_MSG_TIMEOUT

    run(go())


def test_runtime_info_and_broker_config(cluster, client):
    run, addr = cluster.run, cluster.broker_addr

    async def go():
        await client.invoke(addr, send_cmd("AdminT4", b"x"))
        kv = KVTable.from_json((await client.invoke(addr, req(R.GET_BROKER_RUNTIME_INFO))).body).table
        for key in ("putTps", "getTransferedTps", "msgPutTotalTodayNow", "msgGetTotalTodayNow", "brokerVersionDesc",
                    "brokerVersion", "earliestMessageTimeStamp", "commitLogDiskRatio", "dispatchBehindBytes"):
            assert key in kv, key
        # RocketMQ's format: three windows (10, 60, 600 samples of one second), empty until there are enough
        assert len(kv["putTps"].split(" ")) == 3 and kv["getTotalTps"] == "0.0 0.0 0.0"
        assert kv["brokerVersionDesc"] == "V4_9_7" and kv["putMessageTimesTotal"] == "1"
        assert kv["remainTransientStoreBufferNumbs"] == "2147483647" and kv["putMessageDistributeTime"] == "null"

        resp = await client.invoke(addr, req(R.GET_BROKER_CONFIG))
        lines = dict(line.split("=", 1) for line in resp.body.decode().splitlines())
        assert lines["brokerName"] == cluster.broker.broker_name and lines["autoCreateTopicEnable"] == "true"
        assert "flushDiskType" in lines
        assert loads(resp.ext_fields["version"])["counter"] == 0

        upd = await client.invoke(addr, req(R.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\n"))
        assert upd.code == C.SUCCESS, upd.remark
        assert cluster.broker.config.auto_create_topic_enable is False
        resp = await client.invoke(addr, req(R.GET_BROKER_CONFIG))
        assert "autoCreateTopicEnable=false" in resp.body.decode()
        assert loads(resp.ext_fields["version"])["counter"] == 1
        for body, words in ((b"brokerName=x\n", "run time"), (b"noSuchKey=1\n", "unknown"),
                            (b"defaultTopicQueueNums=many\n", "bad value"), (b"", "no key")):
            bad = await client.invoke(addr, req(R.UPDATE_BROKER_CONFIG, body=body))
            assert bad.code == C.SYSTEM_ERROR and words in bad.remark, (body, bad.remark)

        delay = await client.invoke(addr, req(R.GET_ALL_DELAY_OFFSET))
        assert delay.code == C.SUCCESS and "offsetTable" in loads(delay.body)

    run(go())
