"""The broker's and the name server's /metrics over HTTP after a known sequence of requests on the wire: sends
(plain, batch, delay level, timer, transaction), pulls, acks, a held pull, and refusals (ACL)."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.message import Message
from mq.common.msg_id import decode_offset_msg_id
from mq.config import NamesrvConfig
from mq.daemon.runtime import DaemonError
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode, ResponseCode as RC
from mq.protocol.command import RemotingCommand
from tests.integration.broker.wire import batch_cmd, heartbeat_cmd, props, pull_cmd, req, send_cmd

from .scrape import scrape

PROM = dict(metrics_exporter_type="PROM", metrics_prom_exporter_port=0)


async def wait_until(pred, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while True:
        value = await pred()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("condition not met")
        await asyncio.sleep(0.05)


def test_a_known_sequence_of_sends_pulls_and_acks(broker_factory, client, run):
    b = broker_factory(**PROM)
    assert b.metrics is not None and b.metrics.port > 0

    async def main():
        addr = b.address
        assert (await client.invoke(addr, heartbeat_cmd("cid-1", producer_group="PG"))).code == RC.SUCCESS
        assert (await client.invoke(addr, heartbeat_cmd("cid-1", consumer_group="CG", topic="Orders"))).code == 0
        for i in range(10):  # ten sends to queue 0: nine small, one of 5000 bytes
            body = b"x" * (5000 if i == 9 else 10)
            assert (await client.invoke(addr, send_cmd("Orders", body, queue_id=0))).code == RC.SUCCESS
        msgs = [Message("Orders", b"b%d" % i, properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{i:032X}"})
                for i in range(3)]
        assert (await client.invoke(addr, batch_cmd("Orders", msgs, queue_id=1))).code == RC.SUCCESS
        delayed = send_cmd("Later", b"d", properties=props(**{P.DELAY_TIME_LEVEL: "3"}))
        assert (await client.invoke(addr, delayed)).code == RC.SUCCESS
        timed = send_cmd("Later", b"t", properties=props(TIMER_DELAY_SEC="3600"))
        assert (await client.invoke(addr, timed)).code == RC.SUCCESS
        half = send_cmd("Payments", b"h", sys_flag=SF.TRANSACTION_PREPARED_TYPE,
                        properties=props(**{P.TRANSACTION_PREPARED: "true", P.PRODUCER_GROUP: "PG"}))
        half_resp = await client.invoke(addr, half)
        assert half_resp.code == RC.SUCCESS
        # the group pulls 4 messages of queue 0 from its start, acks 2 of them
        p = await client.invoke(addr, pull_cmd("Orders", 0, 0, max_nums=4))
        assert p.code == RC.SUCCESS and p.ext_fields["nextBeginOffset"] == "4"
        ack = req(RequestCode.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader("CG", "Orders", 0, 2))
        assert (await client.invoke(addr, ack)).code == RC.SUCCESS
        # a held pull on an empty queue, answered when its hold time runs out
        held = await client.invoke(addr, pull_cmd("Orders", 2, 0, sys_flag=0x4 | 0x2, suspend_ms=300), 5)
        assert held.code == RC.PULL_NOT_FOUND
        await asyncio.sleep(0.05)
        s = await scrape(b.metrics.url)

        common = dict(cluster="DefaultCluster", node_type="broker", node_id="broker-a")
        orders_in = dict(topic="Orders", message_type="normal", is_system="false", **common)
        assert s.value("rocketmq_messages_in_total", **orders_in) == 13
        assert s.value("rocketmq_message_size_count", **orders_in) == 11
        assert s.value("rocketmq_message_size_bucket", le="1024.0", **orders_in) == 10
        assert s.value("rocketmq_message_size_bucket", le="524288.0", **orders_in) == 11
        assert s.value("rocketmq_throughput_in_total", **orders_in) == b.store.get_max_phy_offset() - sum(
            x.value for x in s.find("rocketmq_throughput_in_total") if x.labels["topic"] != "Orders")
        assert s.value("rocketmq_messages_in_total", topic="SCHEDULE_TOPIC_XXXX", message_type="delay") == 1
        assert s.value("rocketmq_messages_in_total", topic="rmq_sys_wheel_timer", message_type="delay") == 1
        assert s.value("rocketmq_messages_in_total", topic="RMQ_SYS_TRANS_HALF_TOPIC",
                       message_type="transaction") == 1
        out = dict(topic="Orders", consumer_group="CG", is_system="false")
        assert s.value("rocketmq_messages_out_total", **out) == 4
        assert s.value("rocketmq_throughput_out_total", **out) == len(p.body)
        lag = dict(topic="Orders", consumer_group="CG", is_retry="false", is_system="false")
        # queue 0: 10 stored, committed 2, pulled 4; queues 1-7: nothing committed, nothing owed
        assert s.value("rocketmq_consumer_lag_messages", **lag) == 8
        assert s.value("rocketmq_consumer_inflight_messages", **lag) == 2
        assert s.value("rocketmq_consumer_ready_messages", **lag) == 6
        assert s.value("rocketmq_consumer_lag_latency_milliseconds", **lag) > 0
        assert s.value("rocketmq_consumer_queueing_latency_milliseconds", **lag) > 0
        count = "rocketmq_rpc_latency_milliseconds_count"
        assert s.value(count, request_code="send_message_v2", response_code="success", result="success",
                       is_long_polling="false") == 13
        assert s.value(count, request_code="send_batch_message", response_code="success") == 1
        assert s.value(count, request_code="pull_message", response_code="success", is_long_polling="false") == 1
        held_labels = dict(request_code="pull_message", response_code="pull_not_found", is_long_polling="true")
        assert s.value(count, **held_labels) == 1
        assert s.value("rocketmq_rpc_latency_milliseconds_bucket", le="100.0", **held_labels) == 0
        assert s.value("rocketmq_rpc_latency_milliseconds_bucket", le="1000.0", **held_labels) == 1
        assert s.value(count, request_code="update_consumer_offset", response_code="success") == 1
        assert s.value(count, request_code="heart_beat", response_code="success") == 2
        assert s.value("rocketmq_producer_connections", language="java", version="v4_9_7") == 1
        assert s.value("rocketmq_consumer_connections", consumer_group="CG", language="java") == 1
        assert s.value("rocketmq_topic_number", **common) == len(b.topic_config.all())
        assert s.value("rocketmq_consumer_group_number", **common) == len(b.subscription_groups.all())
        assert s.value("rocketmq_broker_permission", **common) == 6
        assert s.value("rocketmq_processor_watermark", processor="send") == 0
        assert s.value("mq_schedule_pending_messages", delay_level="3") == 1
        assert s.value("mq_transaction_half_messages") == 1
        assert s.value("rocketmq_storage_dispatch_behind_bytes", storage_type="local", storage_medium="disk") == 0
        assert s.value("rocketmq_storage_size_bytes") > 0
        assert s.value("rocketmq_storage_message_reserve_time_milliseconds") >= 0
        assert 0 < s.value("mq_storage_disk_used_ratio") < 1
        assert s.value("mq_storage_disk_clean_ratio") == 0.75
        assert s.value("mq_replication_slave_connections") == 0
        assert s.find("process_resident_memory_bytes")
        # the timer files its message within a tick or two
        s = await wait_until(lambda: _scrape_when(b, "mq_timer_pending_messages", 1))
        assert s.value("rocketmq_timer_enqueue_lag") == 0
        # the half message is committed: no longer waiting
        _host, phy = decode_offset_msg_id(half_resp.ext_fields["msgId"])
        end = H.EndTransactionRequestHeader(producer_group="PG", commit_or_rollback=8, commit_log_offset=phy,
                                            tran_state_table_offset=int(half_resp.ext_fields["queueOffset"]),
                                            msg_id=half_resp.ext_fields["msgId"])
        done = await client.invoke(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext()))
        assert done.code == RC.SUCCESS, done.remark
        await wait_until(lambda: _scrape_when(b, "mq_transaction_half_messages", 0))
        # the rest is acked: the lag goes back to 0
        for q, off in ((0, 10),):
            h = H.UpdateConsumerOffsetRequestHeader("CG", "Orders", q, off)
            assert (await client.invoke(addr, req(RequestCode.UPDATE_CONSUMER_OFFSET, h))).code == 0
        await asyncio.sleep(b.metrics.collector.lag_min_interval)
        s = await scrape(b.metrics.url)
        assert s.value("rocketmq_consumer_lag_messages", **lag) == 0
        assert s.value("rocketmq_consumer_lag_latency_milliseconds", **lag) == 0
        assert s.value("rocketmq_consumer_inflight_messages", **lag) == 0

    run(main(), 60)


async def _scrape_when(broker, name: str, value: float):
    s = await scrape(broker.metrics.url)
    return s if s.value(name, default=-1) == value else None


def test_acl_refusals_are_counted_by_reason(broker_factory, client, run, tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts:\n  - accessKey: appkey01\n    secretKey: appsecret01\n    admin: false\n")
    b = broker_factory(acl_enable=True, acl_file=str(path), **PROM)

    async def main():
        for _ in range(3):
            r = await client.invoke(b.address, send_cmd("Orders", b"x"))
            assert r.code == RC.SYSTEM_ERROR and "No accessKey" in r.remark
        s = await scrape(b.metrics.url)
        assert s.value("mq_acl_refusals_total", reason="no_access_key") == 3
        assert s.value("rocketmq_rpc_latency_milliseconds_count", request_code="send_message_v2",
                       response_code="system_error") == 3

    run(main())


def test_name_server_metrics(run, tmp_path):
    from mq.config import BrokerConfig, StoreConfig
    from mq.daemon.broker.controller import BrokerController
    from mq.daemon.namesrv.server import NamesrvServer
    from tests.integration.conftest import TEST_STORE_DEFAULTS

    ns = NamesrvServer(NamesrvConfig(listen_port=0, kv_config_path=str(tmp_path / "kv.json"),
                                     metrics_exporter_type="PROM", metrics_prom_exporter_port=0,
                                     metrics_label="env:test"))
    run(ns.start())
    try:
        b = BrokerController(BrokerConfig(listen_port=0, namesrv_addr=ns.address),
                             store_config=StoreConfig(store_path_root_dir=str(tmp_path / "store"),
                                                      **TEST_STORE_DEFAULTS))
        run(b.start())

        async def main():
            s = await scrape(ns.metrics.url)
            common = dict(node_type="nameserver", node_id=ns.address, env="test")
            assert s.value("mq_namesrv_brokers", cluster="DefaultCluster", **common) == 1
            assert s.value("mq_namesrv_topics", **common) == len(ns.table.topic_queue_table) > 0
            age = s.value("mq_namesrv_broker_heartbeat_age_seconds", broker_addr=b.address, broker_name="broker-a",
                          broker_id="0", cluster="DefaultCluster")
            assert 0 <= age < 30
            assert s.value("rocketmq_rpc_latency_milliseconds_count", request_code="register_broker",
                           response_code="success") >= 1

        try:
            run(main())
        finally:
            run(b.stop())
        s = run(scrape(ns.metrics.url))
        assert s.value("mq_namesrv_brokers", cluster="DefaultCluster", default=0) == 0
    finally:
        run(ns.stop())


def test_off_by_default_and_settings_checked(broker_factory, run):
    b = broker_factory()
    assert b.metrics is None and b.server.registry.observer is None
    with pytest.raises(DaemonError, match="OTLP_GRPC is not supported"):
        broker_factory(metrics_exporter_type="OTLP_GRPC")
    with pytest.raises(DaemonError, match="metricsLabel"):
        broker_factory(metrics_exporter_type="PROM", metrics_label="cluster:x")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(DaemonError, match=f"metricsPromExporterPort.*{port}.*already in use"):
            broker_factory(metrics_exporter_type="prom", metrics_prom_exporter_port=port)


def test_the_endpoint_bounds_its_connections(broker_factory, run, monkeypatch):
    from mq.daemon.metrics import exporter

    monkeypatch.setattr(exporter, "MAX_CONCURRENT", 2)
    monkeypatch.setattr(exporter._QuietHandler, "timeout", 1.0)
    b = broker_factory(**PROM)
    idle = [socket.create_connection(("127.0.0.1", b.metrics.port)) for _ in range(2)]  # say nothing
    try:
        time.sleep(0.2)
        extra = socket.create_connection(("127.0.0.1", b.metrics.port))
        extra.settimeout(5)
        extra.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert extra.recv(100) == b""  # closed without an answer
        extra.close()
        time.sleep(1.5)  # the silent ones time out and free their places
        assert "rocketmq_topic_number" in run(scrape(b.metrics.url)).text
    finally:
        for s in idle:
            s.close()


def test_answers_are_not_compressed_even_when_gzip_is_accepted(broker_factory):
    import urllib.request

    b = broker_factory(**PROM)
    req = urllib.request.Request(b.metrics.url, headers={"Accept-Encoding": "gzip",
                                                         "Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers.get("Content-Encoding") is None
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        text = resp.read().decode()
    assert "# TYPE rocketmq_topic_number gauge" in text and text.endswith("# EOF\n")


def test_each_scrape_reports_the_previous_ones_time(broker_factory, run):
    b = broker_factory(**PROM)

    async def main():
        await scrape(b.metrics.url)
        s = await scrape(b.metrics.url)
        wall = s.value("mq_metrics_scrape_duration_seconds")
        cpu = s.value("mq_metrics_scrape_cpu_seconds")
        assert 0 < cpu <= wall < 10

    run(main())


def test_popped_and_unacked_messages_are_in_flight(broker_factory, client, run):
    """A pop consumer's messages count as in flight (and as lag) until acked, as RocketMQ 5's calculator counts
    its PopInflightMessageCounter."""
    from tests.integration.delivery.delivery_helpers import make_topic
    from tests.integration.pop.test_pop_remoting import ack_cmd, handles, pop_cmd

    b = broker_factory(**PROM)
    b.metrics.collector.lag_min_interval = 0.0  # every scrape computes the lag again

    async def main():
        await make_topic(b, "PopM", 1)
        for i in range(5):
            assert (await client.invoke(b.address, send_cmd("PopM", b"p%d" % i, queue_id=0))).code == RC.SUCCESS
        r = await client.invoke(b.address, pop_cmd("PopM", group="PG1", n=3))
        got = handles(r, b.broker_name)
        assert r.code == RC.SUCCESS and len(got) == 3
        pair = dict(topic="PopM", consumer_group="PG1", is_retry="false", is_system="false")
        s = await scrape(b.metrics.url)
        assert s.value("rocketmq_consumer_inflight_messages", **pair) == 3
        assert s.value("rocketmq_consumer_ready_messages", **pair) == 2
        assert s.value("rocketmq_consumer_lag_messages", **pair) == 5
        for _m, ck in got[:2]:
            assert (await client.invoke(b.address, ack_cmd("PopM", ck, group="PG1"))).code == RC.SUCCESS
        s = await scrape(b.metrics.url)
        assert s.value("rocketmq_consumer_inflight_messages", **pair) == 1
        assert s.value("rocketmq_consumer_lag_messages", **pair) == 3

    run(main(), 60)
