"""The name server over real loopback sockets: registration, routes, expiry, KV config, permissions."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time

import orjson
import pytest

from mq.client.admin import MQAdmin
from mq.config import NamesrvConfig
from mq.daemon.namesrv.server import NamesrvServer
from mq.errors import TopicNotExistError
from mq.protocol import headers as h
from mq.protocol.bodies import ClusterInfo, DataVersion, TopicList, TopicRouteData
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient

from .conftest import register_command

pytestmark = pytest.mark.asyncio


async def test_register_then_route_read_back(namesrv, client):
    resp = await client.invoke(namesrv.address, register_command(
        broker_name="broker-a", broker_addr="127.0.0.1:10911", topics={"TopicTest": 4, "Other": 8}))
    assert resp.code == ResponseCode.SUCCESS
    assert resp.flag & 1 and "extFields" not in resp.ext_fields  # a proper response with a header map
    async with MQAdmin([namesrv.address], client=client) as admin:
        route = await admin.topic_route("TopicTest")
        assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == \
            [("broker-a", 4, 4, 6)]
        assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
        assert route.broker_datas[0].cluster == "DefaultCluster"
        assert sorted(await admin.topic_list()) == ["Other", "TopicTest"]
        info = await admin.cluster_info()
        assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
        with pytest.raises(TopicNotExistError, match="no route for topic 'Nope'"):
            await admin.topic_route("Nope")


async def test_route_json_form_follows_request_version(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="b", broker_addr="127.0.0.1:1",
                                                          topics={"T": 2}))
    req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    req.version = 401
    standard = await client.invoke(namesrv.address, req)
    assert b'"brokerAddrs":{"0":"127.0.0.1:1"}' in standard.body
    orjson.loads(standard.body)  # standard JSON
    old = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    old.version = 63  # the C++ wheel
    legacy = await client.invoke(namesrv.address, old)
    assert b'"brokerAddrs":{0:"127.0.0.1:1"}' in legacy.body
    assert TopicRouteData.from_json(legacy.body) == TopicRouteData.from_json(standard.body)
    # acceptStandardJsonOnly wins over an old version
    old2 = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                   {"topic": "T", "acceptStandardJsonOnly": "true"})
    old2.version = 63
    assert b'{"0":' in (await client.invoke(namesrv.address, old2)).body


async def test_compressed_register_body_and_crc_check(namesrv, client):
    ok = await client.invoke(namesrv.address, register_command(broker_name="z", broker_addr="127.0.0.1:2",
                                                               topics={"Zt": 3}, compressed=True))
    assert ok.code == ResponseCode.SUCCESS
    bad = register_command(broker_name="y", broker_addr="127.0.0.1:3", topics={"Yt": 3})
    bad.ext_fields["bodyCrc32"] = "12345"
    resp = await client.invoke(namesrv.address, bad)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "crc32 not match"
    assert namesrv.table.pickup_route("Zt") is not None
    assert namesrv.table.pickup_route("Yt") is None


async def test_slave_registration_gets_master_address(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:10911",
                                                          topics={"T": 4}))
    resp = await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:10921",
                                                                 broker_id=1, topics={"T": 4}))
    hdr = h.RegisterBrokerResponseHeader.from_ext(resp.ext_fields)
    assert hdr.master_addr == "127.0.0.1:10911"
    assert hdr.ha_server_addr == "127.0.0.1:10912"
    route = namesrv.table.pickup_route("T")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}


async def test_unregister_removes_broker_and_its_topics(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1",
                                                          topics={"OnlyA": 1, "Shared": 1}))
    await client.invoke(namesrv.address, register_command(broker_name="b", broker_addr="127.0.0.1:2",
                                                          topics={"Shared": 1}))
    hdr = h.UnregisterBrokerRequestHeader(broker_name="a", broker_addr="127.0.0.1:1", cluster_name="DefaultCluster",
                                          broker_id=0)
    resp = await client.invoke(namesrv.address,
                               RemotingCommand.request(RequestCode.UNREGISTER_BROKER, hdr.to_ext()))
    assert resp.code == ResponseCode.SUCCESS
    assert namesrv.table.pickup_route("OnlyA") is None
    assert [q.broker_name for q in namesrv.table.pickup_route("Shared").queue_datas] == ["b"]


async def test_broker_expires_when_silent(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1",
                                                          topics={"T": 1}))
    namesrv.config = namesrv.config  # the scan reads the live config
    import dataclasses

    namesrv.config = dataclasses.replace(namesrv.config, broker_channel_expired_time_ms=300)
    deadline = time.monotonic() + 5
    while namesrv.table.pickup_route("T") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert namesrv.table.pickup_route("T") is None
    assert "127.0.0.1:1" not in namesrv.table.broker_live_table


async def test_query_data_version_keeps_broker_alive(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1",
                                                          topics={"T": 1}, counter=5))
    hdr = h.QueryDataVersionRequestHeader(broker_name="a", broker_addr="127.0.0.1:1", cluster_name="DefaultCluster",
                                          broker_id=0)
    same = DataVersion(timestamp=1700000000000, counter=5).to_json()
    resp = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.QUERY_DATA_VERSION,
                                                                        hdr.to_ext(), same))
    assert h.QueryDataVersionResponseHeader.from_ext(resp.ext_fields).changed is False
    assert DataVersion.from_json(resp.body).counter == 5
    newer = DataVersion(timestamp=1700000000000, counter=6).to_json()
    resp = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.QUERY_DATA_VERSION,
                                                                        hdr.to_ext(), newer))
    assert h.QueryDataVersionResponseHeader.from_ext(resp.ext_fields).changed is True


async def test_broker_connection_close_drops_it(namesrv):
    c = RemotingClient(name="broker-side")
    await c.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1", topics={"T": 1}))
    assert namesrv.table.pickup_route("T") is not None
    await c.close()
    deadline = time.monotonic() + 3
    while namesrv.table.pickup_route("T") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert namesrv.table.pickup_route("T") is None


async def test_concurrent_registrations_stay_consistent(namesrv):
    clients = [RemotingClient(name=f"b{i}") for i in range(8)]
    try:
        async def reg(i: int, c: RemotingClient) -> None:
            for round_ in range(20):
                topics = {f"T{j}": 4 for j in range(10)} | {f"own-{i}": 2}
                resp = await c.invoke(namesrv.address, register_command(
                    broker_name=f"broker-{i}", broker_addr=f"127.0.0.1:{20000 + i}", topics=topics,
                    counter=round_ + 1))
                assert resp.code == 0

        await asyncio.gather(*(reg(i, c) for i, c in enumerate(clients)))
        table = namesrv.table
        for j in range(10):
            route = table.pickup_route(f"T{j}")
            assert sorted(q.broker_name for q in route.queue_datas) == [f"broker-{i}" for i in range(8)]
            assert sorted(b.broker_name for b in route.broker_datas) == [f"broker-{i}" for i in range(8)]
        assert table.cluster_info().cluster_addr_table["DefaultCluster"] == {f"broker-{i}" for i in range(8)}
    finally:
        for c in clients:
            await c.close()


async def test_kv_config_round_trip_and_persistence(namesrv, client, tmp_path):
    async with MQAdmin([namesrv.address], client=client) as admin:
        await admin.put_kv("ORDER_TOPIC_CONFIG", "OrderT", "broker-a:4")
        assert await admin.get_kv("ORDER_TOPIC_CONFIG", "OrderT") == "broker-a:4"
        assert await admin.kv_namespace("ORDER_TOPIC_CONFIG") == {"OrderT": "broker-a:4"}
        assert await admin.get_kv("ORDER_TOPIC_CONFIG", "missing") is None
    saved = orjson.loads((tmp_path / "kvConfig.json").read_bytes())
    assert saved == {"configTable": {"ORDER_TOPIC_CONFIG": {"OrderT": "broker-a:4"}}}
    async with MQAdmin([namesrv.address], client=client) as admin:
        await admin.delete_kv("ORDER_TOPIC_CONFIG", "OrderT")
        assert await admin.get_kv("ORDER_TOPIC_CONFIG", "OrderT") is None


async def test_the_kv_config_is_bounded(tmp_path, client):
    """Any client may PUT_KV_CONFIG: without a bound it could grow the name server's memory, its kvConfig.json and
    the time each write and GET_KVLIST_BY_NAMESPACE takes on the event loop without limit."""
    cfg = dataclasses.replace(NamesrvConfig(), host="127.0.0.1", listen_port=0, kv_config_max_entries=3,
                              kv_config_max_bytes=4096, kv_config_path=str(tmp_path / "kvConfig.json"))
    server = NamesrvServer(cfg)
    await server.start()

    def put(key: str, value: str) -> RemotingCommand:
        return RemotingCommand.request(RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(
            namespace="NS", key=key, value=value).to_ext())
    try:
        for key in ("a", "b", "c"):
            assert (await client.invoke(server.address, put(key, "v"))).code == ResponseCode.SUCCESS
        refused = await client.invoke(server.address, put("d", "v"))
        assert refused.code == ResponseCode.SYSTEM_ERROR and "kvConfigMaxEntries" in refused.remark
        refused = await client.invoke(server.address, put("a", "x" * 5000))
        assert refused.code == ResponseCode.SYSTEM_ERROR and "kvConfigMaxBytes" in refused.remark
        assert (await client.invoke(server.address, put("a", "w"))).code == ResponseCode.SUCCESS
        saved = orjson.loads((tmp_path / "kvConfig.json").read_bytes())
        assert saved == {"configTable": {"NS": {"a": "w", "b": "v", "c": "v"}}}
    finally:
        await server.stop()


async def test_write_perm_wipe_and_add(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1",
                                                          topics={"T1": 1, "T2": 1}))
    async with MQAdmin([namesrv.address], client=client) as admin:
        assert await admin.wipe_write_perm("a") == 2
        assert (await admin.topic_route("T1")).queue_datas[0].perm == 4
        assert await admin.add_write_perm("a") == 2
        assert (await admin.topic_route("T1")).queue_datas[0].perm == 6


async def test_topic_lists_and_delete(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1",
                                                          cluster="C1", topics={"T1": 1}))
    await client.invoke(namesrv.address, register_command(broker_name="b", broker_addr="127.0.0.1:2",
                                                          cluster="C2", topics={"T2": 1}))
    async with MQAdmin([namesrv.address], client=client) as admin:
        assert await admin.topics_by_cluster("C1") == ["T1"]
        resp = await client.invoke(namesrv.address,
                                   RemotingCommand.request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS))
        sys_topics = TopicList.from_json(resp.body)
        assert {"C1", "C2", "a", "b"} <= set(sys_topics.topic_list)
        await admin.delete_topic_in_namesrv("T1")
        assert await admin.topic_list() == ["T2"]


async def test_cluster_info_uses_fastjson_int_keys(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1",
                                                          topics={"T": 1}))
    resp = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert b'"brokerAddrs":{0:"127.0.0.1:1"}' in resp.body
    assert ClusterInfo.from_json(resp.body).broker_addr_table["a"].broker_addrs == {0: "127.0.0.1:1"}


async def test_unknown_code_answered_not_supported(namesrv, client):
    resp = await client.invoke(namesrv.address, RemotingCommand.request(9999))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 9999 not supported"


async def test_missing_required_header_is_an_error_not_a_crash(namesrv, client):
    resp = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "topic" in resp.remark
    # the server still serves
    resp = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert resp.code == ResponseCode.SUCCESS


async def test_namesrv_config_get_and_update(namesrv, client):
    resp = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG))
    assert b"orderMessageEnable=false" in resp.body
    upd = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert (await client.invoke(namesrv.address, upd)).code == ResponseCode.SUCCESS
    assert namesrv.processors.config.order_message_enable is True
    bad = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"listenPort=1\n")
    resp = await client.invoke(namesrv.address, bad)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "listenPort" in resp.remark


#: RocketMQ 4.9.7's getNamesrvConfig keys (NamesrvConfig and NettyServerConfig; rocketmqHome with $ROCKETMQ_HOME)
ROCKETMQ_NAMESRV_KEYS = {
    "rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest", "orderMessageEnable",
    "listenPort", "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
    "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize", "serverSocketRcvBufSize", "writeBufferHighWaterMark", "writeBufferLowWaterMark",
    "serverSocketBacklog", "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector"}


async def test_namesrv_config_has_rocketmqs_keys(namesrv, client, monkeypatch):
    monkeypatch.setenv("ROCKETMQ_HOME", "/opt/rocketmq")
    resp = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG))
    kv = dict(line.split("=", 1) for line in resp.body.decode().splitlines())
    assert ROCKETMQ_NAMESRV_KEYS <= set(kv), ROCKETMQ_NAMESRV_KEYS - set(kv)
    assert kv["listenPort"] == str(namesrv.port) and kv["rocketmqHome"] == "/opt/rocketmq"
    assert kv["serverChannelMaxIdleTimeSeconds"] == "120" and kv["serverSocketBacklog"] == "1024"
    assert kv["clusterTest"] == "false" and kv["kvConfigPath"] == namesrv.config.kv_config_path


async def test_order_topic_conf_from_kv(namesrv, client):
    await client.invoke(namesrv.address, register_command(broker_name="a", broker_addr="127.0.0.1:1",
                                                          topics={"OT": 4}))
    namesrv.processors.config = __import__("dataclasses").replace(namesrv.processors.config,
                                                                  order_message_enable=True)
    async with MQAdmin([namesrv.address], client=client) as admin:
        await admin.put_kv("ORDER_TOPIC_CONFIG", "OT", "a:4")
        assert (await admin.topic_route("OT")).order_topic_conf == "a:4"


async def _answer_times_while(namesrv, client, slow) -> tuple[list[float], object]:
    """Seconds each GET_BROKER_CLUSTER_INFO took while ``slow`` (a coroutine) ran, asked from another thread with
    its own event loop (the name server shares this test's loop); and ``slow``'s result."""
    import threading

    done = threading.Event()
    took: list[float] = []

    async def probe() -> None:
        c = RemotingClient(name="probe")
        try:
            while not done.is_set():
                t = time.monotonic()
                resp = await c.invoke(namesrv.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO),
                                      10)
                assert resp.code == ResponseCode.SUCCESS
                took.append(time.monotonic() - t)
                await asyncio.sleep(0.01)
        finally:
            await c.close()

    thread = threading.Thread(target=lambda: asyncio.run(probe()), daemon=True)
    thread.start()
    try:
        await asyncio.sleep(0.05)
        result = await slow
    finally:
        done.set()
        await asyncio.to_thread(thread.join, 15)
    return took, result


async def test_a_slow_kv_write_does_not_hold_up_other_requests(namesrv, client, monkeypatch):
    """kvConfig.json is written with an fsync, which a disk busy with a broker's writes can hold for seconds;
    written on the event loop, it made every other request (mqadmin's, clients' route lookups) wait as long."""
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(1.5)  # the fsync of a busy disk
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    other = RemotingClient(name="kv-writer")
    try:
        put = other.invoke(namesrv.address, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(
            namespace="NS", key="k", value="v").to_ext()), 10)
        took, resp = await _answer_times_while(namesrv, client, put)
    finally:
        await other.close()
    assert resp.code == ResponseCode.SUCCESS and namesrv.kv.get("NS", "k") == "v"
    assert len(took) > 10 and max(took) < 0.5, (len(took), max(took))
    assert orjson.loads(open(namesrv.config.kv_config_path, "rb").read())["configTable"] == {"NS": {"k": "v"}}


async def test_a_large_registration_does_not_hold_up_other_requests(namesrv, client):
    """A broker re-registers its whole topic table every 30 s. Decoding 40,000 topics takes about a second of
    Python: done on the event loop, every other request waited for it; and an unchanged table (same data
    version) is not decoded at all, as RocketMQ's name server ignores its topics."""
    topics = {f"BigT{i}": 8 for i in range(40_000)}
    first = register_command(broker_name="big", broker_addr="127.0.0.1:10911", topics=topics)
    took, resp = await _answer_times_while(namesrv, client, client.invoke(namesrv.address, first, 30))
    assert resp.code == ResponseCode.SUCCESS and len(namesrv.table.topic_queue_table) == 40_000
    assert len(took) > 3 and max(took) < 0.5, (len(took), max(took))
    again = register_command(broker_name="big", broker_addr="127.0.0.1:10911", topics=topics)
    t = time.monotonic()
    assert (await client.invoke(namesrv.address, again, 30)).code == ResponseCode.SUCCESS
    unchanged = time.monotonic() - t
    changed = register_command(broker_name="big", broker_addr="127.0.0.1:10911", topics={**topics, "Extra": 1},
                               counter=2)
    assert (await client.invoke(namesrv.address, changed, 30)).code == ResponseCode.SUCCESS
    assert "Extra" in namesrv.table.topic_queue_table and unchanged < 0.5, unchanged
