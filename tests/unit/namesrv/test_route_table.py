"""The pure route table: registration rules, expiry by an injected clock, channel close, versioning."""

from __future__ import annotations

from mq.daemon.namesrv.route_table import RouteTable
from mq.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper


def wrapper(topics: dict[str, int], counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={t: TopicConfig(topic_name=t, read_queue_nums=n, write_queue_nums=n)
                            for t, n in topics.items()},
        data_version=DataVersion(timestamp=1, counter=counter))


def register(table: RouteTable, name: str, addr: str, *, bid: int = 0, topics=None, counter=1, now=0,
             channel=None, cluster="C"):
    return table.register_broker(cluster=cluster, broker_addr=addr, broker_name=name, broker_id=bid,
                                 ha_server_addr="", wrapper=wrapper(topics or {}, counter), filter_servers=None,
                                 channel=channel, now_ms=now)


def test_unchanged_data_version_does_not_rewrite_queue_data():
    t = RouteTable()
    register(t, "a", "h:1", topics={"T": 4}, counter=1)
    t.set_write_perm("a", writable=False)
    register(t, "a", "h:1", topics={"T": 4}, counter=1)  # same version: queue data kept as it is
    assert t.topic_queue_table["T"]["a"].perm == 4
    register(t, "a", "h:1", topics={"T": 4}, counter=2)  # a new version rewrites it
    assert t.topic_queue_table["T"]["a"].perm == 6


def test_slave_topic_configs_do_not_touch_queue_data():
    t = RouteTable()
    register(t, "a", "h:1", topics={"T": 4})
    register(t, "a", "h:2", bid=1, topics={"T": 8, "SlaveOnly": 1})
    assert t.topic_queue_table["T"]["a"].write_queue_nums == 4
    assert "SlaveOnly" not in t.topic_queue_table


def test_address_moving_to_a_new_id_drops_the_old_id():
    t = RouteTable()
    register(t, "a", "h:2", bid=1)
    register(t, "a", "h:2", bid=0)
    assert t.broker_addr_table["a"].broker_addrs == {0: "h:2"}


def test_expiry_uses_the_given_clock():
    t = RouteTable()
    register(t, "a", "h:1", topics={"T": 1}, now=1000)
    register(t, "b", "h:2", topics={"T": 1}, now=5000)
    assert t.expire(now_ms=120_500, expired_after_ms=120_000) == []
    assert t.expire(now_ms=121_001, expired_after_ms=120_000) == ["h:1"]
    assert [q.broker_name for q in t.pickup_route("T").queue_datas] == ["b"]
    assert "a" not in t.broker_addr_table and t.cluster_addr_table == {"C": {"b"}}


def test_channel_close_removes_only_that_channels_brokers():
    t = RouteTable()
    ch1, ch2 = object(), object()
    register(t, "a", "h:1", topics={"T": 1}, channel=ch1)
    register(t, "b", "h:2", topics={"T": 1}, channel=ch2)
    assert t.on_channel_closed(ch1) == ["h:1"]
    assert [b.broker_name for b in t.pickup_route("T").broker_datas] == ["b"]


def test_every_mutation_bumps_the_version():
    t = RouteTable()
    v0 = t.version
    register(t, "a", "h:1", topics={"T": 1})
    v1 = t.version
    t.delete_topic("T")
    assert v0 < v1 < t.version


def test_route_without_live_broker_data_is_none():
    t = RouteTable()
    register(t, "a", "h:1", topics={"T": 1})
    del t.broker_addr_table["a"]
    assert t.pickup_route("T") is None


def test_delete_topic_for_one_cluster_only():
    t = RouteTable()
    register(t, "a", "h:1", topics={"T": 1}, cluster="C1")
    register(t, "b", "h:2", topics={"T": 1}, cluster="C2")
    t.delete_topic("T", "C1")
    assert [q.broker_name for q in t.pickup_route("T").queue_datas] == ["b"]


def test_adding_write_perm_sets_read_write_as_rocketmq_does():
    t = RouteTable()
    register(t, "a", "h:1", topics={"T": 4})
    t.topic_queue_table["T"]["a"].perm = 2  # write only
    assert t.set_write_perm("a", writable=False) == 1
    assert t.topic_queue_table["T"]["a"].perm == 0
    assert t.set_write_perm("a", writable=True) == 1
    assert t.topic_queue_table["T"]["a"].perm == 6  # RouteInfoManager: perm = READ | WRITE
