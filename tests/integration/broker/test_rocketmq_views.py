"""What RocketMQ 4.9.7's own tools see of our broker: mqadmin topicList (the name server's topics),
exportMetadata (the broker's topics minus its system topics), getBrokerConfig and brokerStatus."""

from __future__ import annotations

import asyncio
import re

from mq.protocol.bodies import KVTable, TopicList
from mq.protocol.codes import RequestCode as R, ResponseCode as RC

from .wire import props, req, send_cmd


def test_the_timer_and_revive_topics_are_not_routed_and_count_as_system_topics(cluster, client, run):
    """rmq_sys_wheel_timer parks timed messages inside this broker, rmq_sys_REVIVE_LOG_<cluster> holds pop's
    state; RocketMQ 4.9.7 has neither topic, so mqadmin topicList and statsAll (the name server's list) must not
    show them, and exportMetadata (which drops what the broker calls a system topic) must not either."""
    b, ns = cluster.broker, cluster.namesrv_addr

    async def main():
        r = await client.invoke(b.address, send_cmd("TimedT", b"later",
                                                     properties=props(TIMER_DELAY_SEC="30")))
        assert r.code == RC.SUCCESS and b.topic_config.get("rmq_sys_wheel_timer") is not None
        await b.register_all(force=True)
        await asyncio.sleep(0.1)
        listed = TopicList.from_json((await client.invoke(ns, req(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))).body)
        revive = f"rmq_sys_REVIVE_LOG_{b.config.broker_cluster_name}"
        assert b.topic_config.get(revive) is not None
        assert "TimedT" in listed.topic_list and "rmq_sys_wheel_timer" not in listed.topic_list
        assert revive not in listed.topic_list
        system = TopicList.from_json((await client.invoke(b.address, req(R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))).body)
        assert {"rmq_sys_wheel_timer", revive} <= set(system.topic_list) and "TimedT" not in system.topic_list

    run(main())


def test_broker_status_measures_puts(cluster, client, run):
    b = cluster.broker

    async def main():
        for _ in range(5):
            assert (await client.invoke(b.address, send_cmd("StatusT", b"x" * 100))).code == RC.SUCCESS
        b.store.stats.slow_put(0.012)  # what a put held up for 12 ms records
        b.store.stats.sample()
        b.store.stats.latency.started -= 61  # a minute has passed: the window rolls at the next sample
        b.store.stats.sample()
        kv = KVTable.from_json((await client.invoke(b.address, req(R.GET_BROKER_RUNTIME_INFO))).body).table
        assert kv["putMessageTimesTotal"] == "5" and float(kv["putMessageAverageSize"]) > 100
        assert int(kv["putMessageEntireTimeMax"]) >= 12 and kv["putMessageFailedTimes"] == "0"
        dist = {k: int(v) for k, v in (part.split(":") for part in kv["putMessageDistributeTime"].split())}
        assert list(dist)[0] == "[<=0ms]" and len(dist) == 13
        assert sum(dist.values()) == 5 and dist["[10~50ms]"] >= 1  # the window's five puts, one of them 12 ms
        assert re.fullmatch(r"\d+\.\d\d", kv["putLatency99"]) and kv["dispatchMaxBuffer"] == "0"
        assert f"commitLogDiskRatio_{b.store_config.commit_log_dir()}" in kv
        assert kv["remainHowManyDataToFlush"].endswith(" B") or "iB" in kv["remainHowManyDataToFlush"]

    run(main())
