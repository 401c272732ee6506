"""Send and pull against a real broker over raw RemotingClient calls with typed headers."""

from __future__ import annotations

import asyncio
import time

from mq.common import properties as P
from mq.common.message import Message
from mq.common.msg_id import decode_offset_msg_id
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode, ResponseCode as RC

from .wire import batch_cmd, heartbeat_cmd, pull_cmd, props, records, req, send_cmd


def test_send_then_pull_round_trip_v2_and_v1(cluster, client, run):
    b = cluster.broker

    async def main():
        r = await client.invoke(b.address, send_cmd("RoundTrip", b"one", tags="A", keys="k1 k2"))
        assert r.code == RC.SUCCESS, r.remark
        assert set(r.ext_fields) >= {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
        assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("0", "0")
        host, phy = decode_offset_msg_id(r.ext_fields["msgId"])
        assert host == ("127.0.0.1", b.port) and phy == 0
        r2 = await client.invoke(b.address, send_cmd("RoundTrip", b"two", code=RequestCode.SEND_MESSAGE))
        assert r2.code == RC.SUCCESS and r2.ext_fields["queueOffset"] == "1"
        p = await client.invoke(b.address, pull_cmd("RoundTrip", 0, 0))
        assert p.code == RC.SUCCESS
        assert p.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "2", "minOffset": "0",
                                "maxOffset": "2"}
        msgs = records(p)
        assert [m.body for m in msgs] == [b"one", b"two"]
        assert msgs[0].properties[P.KEYS] == "k1 k2" and msgs[0].properties["CLUSTER"] == "DefaultCluster"
        assert P.WAIT_STORE_MSG_OK not in msgs[0].properties
        assert msgs[0].msg_id == r.ext_fields["msgId"]
        # VIEW_MESSAGE_BY_ID returns that exact record
        v = await client.invoke(b.address, req(RequestCode.VIEW_MESSAGE_BY_ID, H.ViewMessageRequestHeader(phy)))
        assert v.code == RC.SUCCESS and records(v)[0].body == b"one"
        v = await client.invoke(b.address, req(RequestCode.VIEW_MESSAGE_BY_ID,
                                               H.ViewMessageRequestHeader(10**9)))
        assert v.code == RC.SYSTEM_ERROR and "can not find message by the offset" in v.remark

    run(main())


def test_batch_send_and_cpp_style_batch_flag(cluster, client, run):
    b = cluster.broker

    async def main():
        msgs = [Message("Batchy", f"m{i}".encode(), properties={P.TAGS: "T", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX:
                                                               f"{i:032X}"}) for i in range(32)]
        r = await client.invoke(b.address, batch_cmd("Batchy", msgs))
        assert r.code == RC.SUCCESS, r.remark
        assert len(r.ext_fields["msgId"].split(",")) == 32 and r.ext_fields["queueOffset"] == "0"
        cmd = batch_cmd("Batchy", msgs[:3])
        cmd.code = RequestCode.SEND_MESSAGE_V2
        cmd.ext_fields["m"] = "1"  # the C++ client's spelling of true
        r = await client.invoke(b.address, cmd)
        assert r.code == RC.SUCCESS and r.ext_fields["queueOffset"] == "32"
        p = await client.invoke(b.address, pull_cmd("Batchy", 0, 30))
        assert [m.body for m in records(p)] == [b"m30", b"m31", b"m0", b"m1", b"m2"]
        bad = [Message("Batchy", b"x", properties={P.DELAY_TIME_LEVEL: "3"})]
        r = await client.invoke(b.address, batch_cmd("Batchy", bad))
        assert r.code == RC.MESSAGE_ILLEGAL

    run(main())


def test_error_codes_for_bad_sends(broker_factory, client, run):
    b = broker_factory(max_message_size=64 * 1024)

    async def main():
        r = await client.invoke(b.address, send_cmd("bad topic!", b"x"))
        assert r.code == RC.SYSTEM_ERROR and "illegal characters" in r.remark
        r = await client.invoke(b.address, send_cmd("x" * 128, b"x"))
        assert r.code == RC.SYSTEM_ERROR and "longer than" in r.remark
        r = await client.invoke(b.address, send_cmd("SCHEDULE_TOPIC_XXXX", b"x"))
        assert r.code == RC.NO_PERMISSION
        r = await client.invoke(b.address, send_cmd("Q", b"x", queue_id=99))
        assert r.code == RC.SYSTEM_ERROR and "queueId[99] is illegal" in r.remark
        r = await client.invoke(b.address, send_cmd("Q", b"y", queue_id=-1))
        assert r.code == RC.SUCCESS and 0 <= int(r.ext_fields["queueId"]) < 4
        r = await client.invoke(b.address, send_cmd("Q", b"z" * (64 * 1024 + 1)))
        assert r.code == RC.MESSAGE_ILLEGAL and "65536" in r.remark
        huge_props = props(tags="A", pad="p" * 33000)
        r = await client.invoke(b.address, send_cmd("Q", b"z", properties=huge_props))
        assert r.code == RC.MESSAGE_ILLEGAL
        r = await client.invoke(b.address, send_cmd("Fresh", b"z", default_topic="NoSuchTemplate"))
        assert r.code == RC.TOPIC_NOT_EXIST
        r = await client.invoke(b.address, pull_cmd("NeverSeen", 0, 0))
        assert r.code == RC.TOPIC_NOT_EXIST
        r = await client.invoke(b.address, pull_cmd("Q", 7, 0))
        assert r.code == RC.SYSTEM_ERROR
        r = await client.invoke(b.address, req(9999))
        assert r.code == RC.REQUEST_CODE_NOT_SUPPORTED

    run(main())


def test_auto_create_disabled(broker_factory, client, run):
    b = broker_factory(auto_create_topic_enable=False)

    async def main():
        assert b.topic_config.get("TBW102") is None
        r = await client.invoke(b.address, send_cmd("AutoNo", b"x"))
        assert r.code == RC.TOPIC_NOT_EXIST
        # %RETRY% topics are still created on demand with one queue
        r = await client.invoke(b.address, send_cmd("%RETRY%G1", b"x", reconsume_times=0))
        assert r.code == RC.SUCCESS
        assert b.topic_config.get("%RETRY%G1").write_queue_nums == 1

    run(main())


def test_auto_created_topic_is_registered_with_namesrv(cluster, client, run):
    async def main():
        r = await client.invoke(cluster.broker_addr, send_cmd("RouteMe", b"x"))
        assert r.code == RC.SUCCESS
        for _ in range(100):
            route = await client.invoke(cluster.namesrv_addr, req(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  H.GetRouteInfoRequestHeader("RouteMe")))
            if route.code == RC.SUCCESS:
                break
            await asyncio.sleep(0.02)
        assert route.code == RC.SUCCESS and b'"writeQueueNums":4' in route.body

    run(main())


def test_tag_filtering_uses_broker_computed_hash_codes(cluster, client, run):
    b = cluster.broker

    async def main():
        for i, tag in enumerate(["TagA", "TagB", "TagC", "TagA", None]):
            r = await client.invoke(b.address, send_cmd("Tags", f"{i}".encode(), tags=tag))
            assert r.code == RC.SUCCESS
        p = await client.invoke(b.address, pull_cmd("Tags", 0, 0, subscription="TagA || TagC"))
        assert [m.body for m in records(p)] == [b"0", b"2", b"3"]
        assert p.ext_fields["nextBeginOffset"] == "5"
        p = await client.invoke(b.address, pull_cmd("Tags", 0, 4, subscription="TagA"))
        assert p.code == RC.PULL_RETRY_IMMEDIATELY and p.ext_fields["nextBeginOffset"] == "5"
        # heartbeat subscription with a bogus codeSet (what the C++ client sends): the broker recomputes
        hb = heartbeat_cmd("c1@1", consumer_group="TagGroup", topic="Tags", expression="TagB")
        r = await client.invoke(b.address, hb)
        assert r.code == RC.SUCCESS
        assert b.consumers.get("TagGroup").subscriptions["Tags"].code_set == {hash_of("TagB")}
        p = await client.invoke(b.address, pull_cmd("Tags", 0, 0, group="TagGroup", sys_flag=0,
                                                    subscription=None))
        assert [m.body for m in records(p)] == [b"1"]
        p = await client.invoke(b.address, pull_cmd("Tags", 0, 0, group="Nobody", sys_flag=0, subscription=None))
        assert p.code == RC.SUBSCRIPTION_NOT_EXIST

    run(main())


def hash_of(tag: str) -> int:
    from mq.common.tags import java_hash_code

    return java_hash_code(tag)


def test_pull_status_mapping(cluster, client, run):
    b = cluster.broker

    async def main():
        await client.invoke(b.address, send_cmd("Map", b"a"))
        r = await client.invoke(b.address, pull_cmd("Map", 0, 5))
        assert r.code == RC.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "1"
        r = await client.invoke(b.address, pull_cmd("Map", 0, 1))
        assert r.code == RC.PULL_NOT_FOUND and r.ext_fields["nextBeginOffset"] == "1"
        r = await client.invoke(b.address, pull_cmd("Map", 1, 0))  # empty queue, offset 0
        assert r.code == RC.PULL_NOT_FOUND
        r = await client.invoke(b.address, pull_cmd("Map", 1, 3))  # empty queue, offset != 0
        assert r.code == RC.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"
        for resp in (r,):
            assert set(resp.ext_fields) == {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}

    run(main())


def test_offset_moved_stores_an_offset_moved_event(cluster, client, run):
    """RocketMQ's generateOffsetMovedEvent: each PULL_OFFSET_MOVED answer leaves an OffsetMovedEvent in
    OFFSET_MOVED_EVENT queue 0 (TAGS and KEYS = the group, fastjson body)."""
    import json

    b = cluster.broker

    async def main():
        await client.invoke(b.address, send_cmd("Moved", b"a"))
        await client.invoke(b.address, send_cmd("Moved", b"b"))
        r = await client.invoke(b.address, pull_cmd("Moved", 0, 9, group="MovedCG"))
        assert r.code == RC.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "2"
        ev = await client.invoke(b.address, pull_cmd("OFFSET_MOVED_EVENT", 0, 0, group="Watcher",
                                                     subscription="MovedCG"))
        assert ev.code == RC.SUCCESS
        [m] = records(ev)
        assert m.properties[P.TAGS] == "MovedCG" and m.properties[P.KEYS] == "MovedCG"
        assert json.loads(m.body) == {
            "consumerGroup": "MovedCG", "offsetNew": 2, "offsetRequest": 9,
            "messageQueue": {"brokerName": b.config.broker_name, "queueId": 0, "topic": "Moved"}}
        assert list(json.loads(m.body)) == ["consumerGroup", "messageQueue", "offsetNew", "offsetRequest"]
        # a normal pull leaves no event
        r = await client.invoke(b.address, pull_cmd("Moved", 0, 0, group="MovedCG"))
        assert r.code == RC.SUCCESS
        ev = await client.invoke(b.address, pull_cmd("OFFSET_MOVED_EVENT", 0, 1, group="Watcher"))
        assert ev.code == RC.PULL_NOT_FOUND

    run(main())


def test_long_polling_wakes_on_dispatch_and_times_out(cluster, client, run):
    b = cluster.broker

    async def main():
        await client.invoke(b.address, send_cmd("LP", b"first"))
        t0 = time.monotonic()
        fut = asyncio.ensure_future(client.invoke(b.address, pull_cmd("LP", 0, 1, sys_flag=0x6, suspend_ms=5000),
                                                  timeout=10))
        await asyncio.sleep(0.2)
        assert not fut.done() and b.hold_service.held_count == 1
        t_send = time.monotonic()
        await client.invoke(b.address, send_cmd("LP", b"second"))
        r = await fut
        latency = time.monotonic() - t_send
        assert r.code == RC.SUCCESS and [m.body for m in records(r)] == [b"second"]
        assert latency < 0.1, latency
        # non-matching tag does not wake it; the hold ends at its timeout with PULL_NOT_FOUND
        t0 = time.monotonic()
        fut = asyncio.ensure_future(client.invoke(b.address, pull_cmd("LP", 0, 2, sys_flag=0x6, suspend_ms=600,
                                                                      subscription="Wanted"), timeout=10))
        await asyncio.sleep(0.1)
        await client.invoke(b.address, send_cmd("LP", b"other", tags="Other"))
        r = await fut
        waited = time.monotonic() - t0
        assert r.code in (RC.PULL_NOT_FOUND, RC.PULL_RETRY_IMMEDIATELY) and 0.5 < waited < 2.0
        assert b.hold_service.held_count == 0

    run(main())


def test_long_polling_under_sync_flush(broker_factory, client, run):
    b = broker_factory(flush_disk_type="SYNC_FLUSH")

    async def main():
        await client.invoke(b.address, send_cmd("LPS", b"x"))
        fut = asyncio.ensure_future(client.invoke(b.address, pull_cmd("LPS", 0, 1, sys_flag=0x2 | 0x4,
                                                                      suspend_ms=5000), timeout=10))
        await asyncio.sleep(0.1)
        t = time.monotonic()
        r = await client.invoke(b.address, send_cmd("LPS", b"y"))
        assert r.code == RC.SUCCESS
        p = await fut
        assert p.code == RC.SUCCESS and records(p)[0].body == b"y" and time.monotonic() - t < 0.2

    run(main())


def test_held_pulls_of_closed_connection_are_dropped(cluster, run):
    from mq.remoting import RemotingClient

    b = cluster.broker

    async def main():
        c = RemotingClient()
        await c.invoke(b.address, send_cmd("Drop", b"x"))
        fut = asyncio.ensure_future(c.invoke(b.address, pull_cmd("Drop", 0, 1, sys_flag=0x6, suspend_ms=10000),
                                             timeout=20))
        await asyncio.sleep(0.1)
        assert b.hold_service.held_count == 1
        await c.close()
        for _ in range(100):
            if b.hold_service.held_count == 0:
                break
            await asyncio.sleep(0.01)
        assert b.hold_service.held_count == 0
        fut.cancel()

    run(main())


def test_slave_without_offset_check_retries_instead_of_moving(broker_factory, client, run):
    """On a slave (brokerRole SLAVE, offsetCheckInSlave off) a moved offset is PULL_RETRY_IMMEDIATELY and no
    OffsetMovedEvent is stored; with offsetCheckInSlave on the offset is corrected as on a master (the event
    itself is refused by the slave's store, as in RocketMQ, whose slave store takes no local writes)."""
    from mq.protocol.bodies import TopicConfig

    for check, expect in ((False, RC.PULL_RETRY_IMMEDIATELY), (True, RC.PULL_OFFSET_MOVED)):
        b = broker_factory(register=False, broker_role="SLAVE", broker_id=1, offset_check_in_slave=check)
        b.topic_config.put(TopicConfig("OnSlave", 1, 1))

        async def main():
            r = await client.invoke(b.address, pull_cmd("OnSlave", 0, 5, group="SlaveCG"))
            assert r.code == expect, r
            assert b.store.get_max_offset("OFFSET_MOVED_EVENT", 0) == 0

        run(main())


def test_an_empty_pull_is_held_for_the_clients_suspend_time(cluster, client, run):
    """RocketMQ 4.9.7's PullMessageProcessor holds an empty pull for the request's suspendTimeoutMillis, with no
    broker-side cap: the pull and lite pull consumers ask for 20 s (their brokerSuspendMaxTimeMillis), and get
    PULL_NOT_FOUND only then. A broker that cut it at 15 s made them pull again 5 s early."""
    b = cluster.broker

    async def main():
        await client.invoke(b.address, send_cmd("LP20", b"first"))
        t0 = time.monotonic()
        r = await client.invoke(b.address, pull_cmd("LP20", 0, 1, sys_flag=0x6, suspend_ms=16_000), timeout=30)
        waited = time.monotonic() - t0
        assert r.code == RC.PULL_NOT_FOUND and r.ext_fields["nextBeginOffset"] == "1"
        assert 16.0 <= waited < 17.0, waited

    run(main(), timeout=40)


def test_a_new_groups_retry_topic_is_routed_before_the_heartbeat_is_answered(cluster, client, run):
    """RocketMQ's heartbeat creates ``%RETRY%<group>`` and registers it with the name servers before it registers
    the consumer (whose "consumer ids changed" notice makes the client rebalance at once) and answers. With the
    registration left for later, that first rebalance found no route for the retry topic and the group's first
    retries waited for the next rebalance, 20 s later."""
    b, ns = cluster.broker, cluster.namesrv_addr

    async def main():
        for n in range(3):
            group = f"BrandNewG{n}"
            r = await client.invoke(b.address, heartbeat_cmd(f"c{n}", consumer_group=group, topic="AnyT"))
            assert r.code == RC.SUCCESS
            route = await client.invoke(ns, req(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                H.GetRouteInfoRequestHeader(topic=f"%RETRY%{group}")))
            assert route.code == RC.SUCCESS, route.remark

    run(main())


def test_sends_to_a_known_topic_answer_alike_and_see_every_change(broker, client, run):
    """After its first send a topic's sends take ``SendProcessor._send_direct``: they answer and store like
    the first (and like SEND_MESSAGE, which always takes the checked path), and a change to the topic or to
    the broker applies to the very next send."""
    from mq.protocol.bodies import TopicConfig

    async def send(*args, **kw):  # type: ignore[no-untyped-def]
        return await client.invoke(broker.address, send_cmd("Known", *args, **kw))

    async def main():
        broker.topic_config.put(TopicConfig("Known", 2, 2))
        first, direct = await send(b"a", tags="T", keys="k"), await send(b"b", tags="T", keys="k")
        v1 = await send(b"c", tags="T", keys="k", code=RequestCode.SEND_MESSAGE)
        for r in (first, direct, v1):
            assert r.code == RC.SUCCESS, r.remark
        assert list(direct.ext_fields) == list(first.ext_fields) == list(v1.ext_fields)
        for r in (first, direct, v1):  # the fields written out are the typed header's
            typed = H.SendMessageResponseHeader.from_ext(r.ext_fields).to_ext()
            assert list(typed.items()) == list(r.ext_fields.items())
        assert [r.ext_fields["queueOffset"] for r in (first, direct, v1)] == ["0", "1", "2"]
        assert {r.ext_fields["MSG_REGION"] for r in (first, direct, v1)} == {"DefaultRegion"}
        assert {r.ext_fields["TRACE_ON"] for r in (first, direct, v1)} == {"true"}
        got = records(await client.invoke(broker.address, pull_cmd("Known", 0, 0)))
        assert [m.body for m in got] == [b"a", b"b", b"c"]
        assert [m.msg_id for m in got] == [r.ext_fields["msgId"] for r in (first, direct, v1)]
        same = lambda m: (m.sys_flag, m.flag, m.born_host, m.reconsume_times,  # noqa: E731
                          {k: v for k, v in m.properties.items() if k != P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX})
        assert same(got[0]) == same(got[1]) == same(got[2])

        r = await send(b"x", queue_id=2)
        assert r.code == RC.SYSTEM_ERROR and "queueId[2] is illegal" in r.remark
        r = await send(b"x", queue_id=-1)
        assert r.code == RC.SUCCESS and r.ext_fields["queueId"] in ("0", "1")
        r = await send(b"x", sys_flag=0x2 | 0x4 | 0x8 | 0x10)  # MULTI_TAGS kept, transaction and layout bits not
        assert r.code == RC.SUCCESS
        stored = records(await client.invoke(broker.address, pull_cmd("Known", 0, int(r.ext_fields["queueOffset"]))))
        assert stored[0].sys_flag & 0x2 and not stored[0].sys_flag & (0x4 | 0x8 | 0x10)

        broker.topic_config.put(TopicConfig("Known", 2, 2, perm=4))  # read-only from now
        r = await send(b"x")
        assert r.code == RC.NO_PERMISSION and "sending message is forbidden" in r.remark
        broker.topic_config.put(TopicConfig("Known", 1, 1))
        r = await send(b"x", queue_id=1)
        assert r.code == RC.SYSTEM_ERROR and "queueId[1] is illegal" in r.remark
        broker.replace_config(broker_permission=4)
        r = await send(b"x")
        assert r.code == RC.NO_PERMISSION and "sending message is forbidden" in r.remark
        broker.replace_config(broker_permission=6)
        tx = await send(b"half", properties=props(**{P.TRANSACTION_PREPARED: "true", P.PRODUCER_GROUP: "PG"}))
        assert tx.code == RC.SUCCESS
        assert records(await client.invoke(broker.address, pull_cmd("Known", 0, 0, max_nums=64)))[-1].body != b"half"

    run(main())
