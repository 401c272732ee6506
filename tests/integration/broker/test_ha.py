"""Master/slave replication with real brokers on loopback (STORE.md §13, mq.daemon.broker.ha).

Each test starts a master and a slave (brokerName broker-a, brokerId 0 / 1) registered with one name server;
the slave learns the master's HA address from the registration answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from mq.common.message import Message
from mq.common.msg_id import decode_offset_msg_id
from mq.common import properties as P
from mq.daemon.runtime import DaemonError
from mq.protocol import headers as H
from mq.protocol.bodies import TopicRouteData
from mq.protocol.codes import RequestCode, ResponseCode as RC
from mq.store.config_files import DelayOffsetFile

from .wire import batch_cmd, pull_cmd, records, req, send_cmd

SEG = 256 * 1024  # small commit log segments: replication crosses segment ends
HA = dict(ha_listen_port=0, mapped_file_size_commit_log=SEG, slave_sync_interval=200)


def start_master(broker_factory, **kw):
    return broker_factory(**{**HA, **kw})


def start_slave(broker_factory, **kw):
    return broker_factory(**{**HA, "broker_role": "SLAVE", "broker_id": 1, **kw})


async def wait_for(cond, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def caught_up(master, slave, timeout: float = 15.0):
    await wait_for(lambda: slave.store.get_max_phy_offset() == master.store.get_max_phy_offset(), timeout,
                   "the slave to catch up")


def log_bytes(store, start: int) -> bytes:
    out = []
    off = start
    end = store.get_max_phy_offset()
    while off < end:
        chunk = store.read_replica(off, 1 << 20)
        assert chunk, off
        out.append(chunk)
        off += len(chunk)
    return b"".join(out)


async def send_many(client, addr: str, topic: str, n: int, *, size: int = 1024, start: int = 0, queues: int = 4):
    for i in range(start, start + n):
        r = await client.invoke(addr, send_cmd(topic, f"{i:06d}".encode() + b"x" * (size - 6), queue_id=i % queues,
                                                keys=f"key{i}"))
        assert r.code == RC.SUCCESS, (r.code, r.remark)


async def pull_all(client, addr: str, topic: str, qid: int, *, group: str = "CG"):
    out, offset = [], 0
    while True:
        p = await client.invoke(addr, pull_cmd(topic, qid, offset, group=group))
        if p.code != RC.SUCCESS:
            return out, p
        msgs = records(p)
        out += msgs
        offset = int(p.ext_fields["nextBeginOffset"])


def test_async_master_replicates_byte_identical_log_queues_index_and_route(broker_factory, client, run, namesrv):
    master = start_master(broker_factory)
    slave = start_slave(broker_factory)
    assert slave.ha.master_address == master.ha_address

    async def main():
        await send_many(client, master.address, "HaT", 400)
        msgs = [Message("HaT", f"b{i}".encode() * 200, properties={P.KEYS: f"bk{i}",
                                                                  P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}"})
                for i in range(40)]
        for q in range(2):
            r = await client.invoke(master.address, batch_cmd("HaT", msgs, queue_id=q))
            assert r.code == RC.SUCCESS, r.remark
        await caught_up(master, slave)
        mmax = master.store.get_max_phy_offset()
        assert mmax > 2 * SEG  # several segments
        assert log_bytes(slave.store, 0) == log_bytes(master.store, 0)
        for q in range(4):
            assert slave.store.get_max_offset("HaT", q) == master.store.get_max_offset("HaT", q) > 0
        await wait_for(lambda: slave.topic_config.get("HaT") is not None, what="slave sync of the topic")
        for q in (0, 1):
            from_master, _ = await pull_all(client, master.address, "HaT", q)
            from_slave, last = await pull_all(client, slave.address, "HaT", q)
            assert [m.msg_id for m in from_slave] == [m.msg_id for m in from_master]
            assert [m.body for m in from_slave] == [m.body for m in from_master]
            assert last.ext_fields["suggestWhichBrokerId"] == "0"
        found = slave.store.query_message("HaT", "key17", 8)
        assert len(found.buffers) == 1 and b"000017" in found.buffers[0]
        assert len(slave.store.query_message("HaT", "bk3", 8).buffers) == 2
        r = await client.invoke(namesrv.address, req(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                     H.GetRouteInfoRequestHeader(topic="HaT")))
        assert r.code == RC.SUCCESS
        route = TopicRouteData.from_json(r.body)
        assert [bd.broker_addrs for bd in route.broker_datas] == [{0: master.address, 1: slave.address}]

    run(main(), timeout=90)


def test_sync_master_waits_for_the_slave(broker_factory, client, run):
    master = start_master(broker_factory, broker_role="SYNC_MASTER", slave_timeout=800)

    async def main():
        # no slave: stored, but SLAVE_NOT_AVAILABLE
        r = await client.invoke(master.address, send_cmd("SyncT", b"lonely"))
        assert r.code == RC.SLAVE_NOT_AVAILABLE
        _, phy = decode_offset_msg_id(r.ext_fields["msgId"])
        assert phy == 0 and r.ext_fields["queueOffset"] == "0"
        assert master.store.get_max_offset("SyncT", 0) == 1
        # WAIT=false: answered at once
        r = await client.invoke(master.address, send_cmd("SyncT", b"nowait", properties=P.encode_properties(
            {P.WAIT_STORE_MSG_OK: "false", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "AB" * 16})))
        assert r.code == RC.SUCCESS

    run(main())
    slave = start_slave(broker_factory)

    async def with_slave():
        await wait_for(lambda: master.ha.connection_count == 1, what="the slave's HA connection")
        for i in range(20):
            r = await client.invoke(master.address, send_cmd("SyncT", f"m{i}".encode()))
            assert r.code == RC.SUCCESS, (r.code, r.remark)
            # answered only after the slave acked the message's end
            assert slave.store.get_max_phy_offset() >= master.store.get_max_phy_offset()
        msgs = [Message("SyncT", b"x" * 100, properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}"})
                for i in range(10)]
        r = await client.invoke(master.address, batch_cmd("SyncT", msgs))
        assert r.code == RC.SUCCESS, r.remark
        assert slave.store.get_max_phy_offset() >= master.store.get_max_phy_offset()
        # 16 sends in flight at once
        rs = await asyncio.gather(*(client.invoke(master.address, send_cmd("SyncT", b"p" * 512))
                                    for _ in range(16)))
        assert [x.code for x in rs] == [RC.SUCCESS] * 16
        await slave.stop()
        await wait_for(lambda: master.ha.connection_count == 0, what="the HA connection to close")
        # a "slave" that reports once, then never acks again: FLUSH_SLAVE_TIMEOUT after slaveTimeout
        reader, writer = await asyncio.open_connection("127.0.0.1", master.ha.port)
        writer.write(master.store.get_max_phy_offset().to_bytes(8, "big"))
        await writer.drain()
        await wait_for(lambda: master.ha.connection_count == 1, what="the fake slave's connection")
        before = master.store.get_max_offset("SyncT", 0)
        t0 = time.monotonic()
        r = await client.invoke(master.address, send_cmd("SyncT", b"unacked"), 5.0)
        elapsed = time.monotonic() - t0
        assert r.code == RC.FLUSH_SLAVE_TIMEOUT
        assert 0.7 <= elapsed < 2.5
        assert r.ext_fields["queueOffset"] == str(before)  # still stored
        assert master.store.get_max_offset("SyncT", 0) == before + 1
        writer.close()

    run(with_slave(), timeout=60)


def test_slave_refuses_sends_and_runs_no_schedule_or_transaction_check(broker_factory, client, run):
    master = start_master(broker_factory)
    slave = start_slave(broker_factory)

    async def main():
        r = await client.invoke(slave.address, send_cmd("SlaveT", b"no"))
        assert r.code == RC.SERVICE_NOT_AVAILABLE and "SLAVE" in r.remark
        assert slave.topic_config.get("SlaveT") is None
        msgs = [Message("SlaveT", b"x", properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "01" * 16})]
        r = await client.invoke(slave.address, batch_cmd("SlaveT", msgs))
        assert r.code == RC.SERVICE_NOT_AVAILABLE
        assert slave.store.get_max_phy_offset() == 0
        assert slave.schedule_service._tasks == [] and slave.transaction_service._task is None
        assert master.schedule_service._tasks and master.transaction_service._task is not None

    run(main())


def test_role_and_broker_id_must_agree(broker_factory):
    with pytest.raises(DaemonError, match="a SLAVE needs brokerId > 0"):
        broker_factory(broker_role="SLAVE", broker_id=0, ha_listen_port=0)
    with pytest.raises(DaemonError, match="must have brokerId 0"):
        broker_factory(broker_role="SYNC_MASTER", broker_id=2, ha_listen_port=0)


def test_slave_restart_resumes_from_its_max_offset(broker_factory, client, run):
    master = start_master(broker_factory)
    slave = start_slave(broker_factory)
    root = slave.store_config.store_path_root_dir

    async def first():
        await send_many(client, master.address, "ResT", 150, queues=1)
        await caught_up(master, slave)
        await slave.stop()
        await send_many(client, master.address, "ResT", 150, start=150, queues=1)

    run(first(), timeout=60)
    slave2 = start_slave(broker_factory, store_dir=root)

    async def second():
        await caught_up(master, slave2)
        assert slave2.ha.sessions == 1
        assert log_bytes(slave2.store, 0) == log_bytes(master.store, 0)
        assert slave2.store.get_max_offset("ResT", 0) == 300
        await wait_for(lambda: slave2.topic_config.get("ResT") is not None, what="slave sync of the topic")
        got, _ = await pull_all(client, slave2.address, "ResT", 0)
        assert [m.body[:6] for m in got] == [f"{i:06d}".encode() for i in range(300)]

    run(second(), timeout=60)


def test_slave_sync_copies_topics_offsets_groups_and_delay_offsets(broker_factory, client, run):
    master = start_master(broker_factory)
    slave = start_slave(broker_factory)

    async def main():
        r = await client.invoke(master.address, req(RequestCode.UPDATE_AND_CREATE_TOPIC, H.CreateTopicRequestHeader(
            topic="SyncMeta", default_topic="TBW102", read_queue_nums=3, write_queue_nums=3, perm=6,
            topic_filter_type="SINGLE_TAG")))
        assert r.code == RC.SUCCESS, r.remark
        r = await client.invoke(master.address, req(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                    H.UpdateConsumerOffsetRequestHeader("GMeta", "SyncMeta", 2, 42)))
        assert r.code == RC.SUCCESS, r.remark
        master.subscription_groups.find_or_create("GMeta")
        DelayOffsetFile(Path(master.store_config.store_path_root_dir)).save({1: 5, 3: 9})
        slave_delay = DelayOffsetFile(Path(slave.store_config.store_path_root_dir))
        await wait_for(lambda: slave.topic_config.get("SyncMeta") is not None
                       and slave.offsets.query("GMeta", "SyncMeta", 2) == 42
                       and slave.subscription_groups.get("GMeta") is not None
                       and slave_delay.load() == {1: 5, 3: 9}, 10, "slave sync")
        tc = slave.topic_config.get("SyncMeta")
        assert (tc.read_queue_nums, tc.write_queue_nums) == (3, 3)
        assert slave.topic_config.data_version.counter == master.topic_config.data_version.counter
        cfg_dir = Path(slave.store_config.store_path_root_dir) / "config"
        await wait_for(lambda: "SyncMeta@GMeta" in (cfg_dir / "consumerOffset.json").read_text(), 5,
                       "consumerOffset.json")
        assert "SyncMeta" in json.loads((cfg_dir / "topics.json").read_text())["topicConfigTable"]
        assert "GMeta" in (cfg_dir / "subscriptionGroup.json").read_text()
        # a pull's commit offset is not stored on a slave
        r = await client.invoke(slave.address, pull_cmd("SyncMeta", 2, 0, group="GMeta", sys_flag=0x5,
                                                        commit_offset=7))
        assert slave.offsets.query("GMeta", "SyncMeta", 2) == 42

    run(main(), timeout=30)


def test_client_pulls_from_the_suggested_broker(broker_factory, client, run, client_config):
    """slaveReadEnable and a group whose brokerId is 1: the master suggests the slave, the client's next pull of
    that queue goes there (and carries no commit offset); the slave suggests 1 again."""
    from mq.client.pull_api import PullConsumer, PullStatus
    from mq.common.message import MessageQueue
    from mq.protocol.bodies import SubscriptionGroupConfig

    master = start_master(broker_factory, slave_read_enable=True)
    slave = start_slave(broker_factory, slave_read_enable=True)
    master.subscription_groups.put(SubscriptionGroupConfig(group_name="GRead", broker_id=1))

    async def main():
        await send_many(client, master.address, "ReadT", 6, queues=1)
        await caught_up(master, slave)
        await wait_for(lambda: slave.topic_config.get("ReadT") is not None
                       and (g := slave.subscription_groups.get("GRead")) is not None and g.broker_id == 1,
                       what="slave sync")
        async with PullConsumer("GRead", client_config()) as pc:
            mq = MessageQueue("ReadT", "broker-a", 0)
            await pc.instance.update_route("ReadT")
            seen = []
            orig = pc.instance.remoting.invoke

            async def spy(addr, cmd, *a, **kw):
                seen.append(addr)
                return await orig(addr, cmd, *a, **kw)
            pc.instance.remoting.invoke = spy
            res = await pc.pull(mq, 0, 3)
            assert res.status is PullStatus.FOUND and len(res.messages) == 3
            res = await pc.pull(mq, res.next_begin_offset, 3)
            assert res.status is PullStatus.FOUND and len(res.messages) == 3
            assert seen == [master.address, slave.address]
            assert pc.api.pull_from[mq] == 1

    run(main(), timeout=30)


@pytest.mark.parametrize("synced", [True, False], ids=["topic-synced", "topic-not-synced-yet"])
def test_consumers_read_from_the_slave_when_the_master_is_gone(broker_factory, client, run, client_config, synced):
    """Failover for reads: the master stops (and leaves the route); a push consumer of a new group still gets
    every message, from the slave, and its offsets are committed there - also when the master died before the
    slave's next synchronization brought the topic's config (the slave serves its replicated queues)."""
    from mq.client.consumer import PushConsumer
    from mq.client.hooks import ConsumeStatus
    from mq.config import ConsumerConfig

    master = start_master(broker_factory)
    slave = start_slave(broker_factory, **({} if synced else {"slave_sync_interval": 600_000}))

    async def main():
        await send_many(client, master.address, "FailoverT", 40, size=200)
        await caught_up(master, slave)
        if synced:
            await wait_for(lambda: slave.topic_config.get("FailoverT") is not None, what="slave sync")
        else:
            assert slave.topic_config.get("FailoverT") is None
        await master.stop()
        got: list[bytes] = []

        def listener(msgs, ctx):
            got.extend(m.body[:6] for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(ConsumerConfig(group="CG_FAILOVER", consume_from_where="FIRST"), listener,
                                client_config(rebalance_interval=1.0, persist_consumer_offset_interval=0.5))
        consumer.subscribe("FailoverT")
        await consumer.start()
        try:
            await wait_for(lambda: len(got) >= 40, timeout=30, what="consumption from the slave")
            await asyncio.sleep(1.5)  # an offset persist round
        finally:
            await consumer.shutdown()
        return got

    got = run(main(), timeout=60)
    assert sorted(got) == [f"{i:06d}".encode() for i in range(40)]
    committed = sum(max(slave.offsets.query("CG_FAILOVER", "FailoverT", q), 0) for q in range(4))
    assert committed == 40
