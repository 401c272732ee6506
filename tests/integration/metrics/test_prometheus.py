"""A real Prometheus scrapes a running broker and name server while a producer and consumers run; PromQL over
its HTTP API gives the exact number of messages sent, the lag of a stopped group, and that lag back at 0 once
the group consumes again. The alert rules of docs/prometheus are loaded by that server and checked by promtool.

Needs Debian's ``prometheus`` package (``apt-get install prometheus``; .ci/run installs it where it can).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.common.message import Message
from mq.config import ConsumerConfig, NamesrvConfig, ProducerConfig
from mq.protocol.bodies import TopicConfig

from .prometheus_server import PrometheusServer, prometheus_binary

DOCS = Path(__file__).resolve().parents[3] / "docs"
RULES = DOCS / "prometheus" / "mq-alerts.yml"
DASHBOARD = DOCS / "grafana" / "mq-dashboard.json"
PROM = dict(metrics_exporter_type="PROM", metrics_prom_exporter_port=0)
needs_prometheus = pytest.mark.skipif(prometheus_binary() is None,
                                      reason="needs a Prometheus server: Debian's package (apt-get install "
                                             "prometheus), which .ci/run installs where it has root and apt")


async def until(prom: PrometheusServer, promql: str, expected: float, timeout: float = 30.0) -> None:
    """Poll ``promql`` (one sample or none) until it equals ``expected``."""
    end = time.monotonic() + timeout
    last = None
    while True:
        result = await asyncio.to_thread(prom.query, promql)
        last = result[0][1] if result else None
        if last == expected:
            return
        if time.monotonic() > end:
            raise AssertionError(f"{promql} = {last}, expected {expected}\n{prom.log()}")
        await asyncio.sleep(0.5)


@needs_prometheus
def test_prometheus_counts_sends_and_follows_the_lag_of_a_stopped_group(run, tmp_path):
    from mq.config import BrokerConfig, ClientConfig, StoreConfig
    from mq.daemon.broker.controller import BrokerController
    from mq.daemon.namesrv.server import NamesrvServer
    from tests.integration.conftest import TEST_STORE_DEFAULTS

    ns = NamesrvServer(NamesrvConfig(listen_port=0, kv_config_path=str(tmp_path / "kv.json"), **PROM))
    run(ns.start())
    broker = prom = None
    try:
        broker = BrokerController(BrokerConfig(listen_port=0, namesrv_addr=ns.address, **PROM),
                                  store_config=StoreConfig(store_path_root_dir=str(tmp_path / "store"),
                                                           **TEST_STORE_DEFAULTS))
        run(broker.start())
        prom = PrometheusServer(tmp_path / "prom", {"mq-broker": [f"127.0.0.1:{broker.metrics.port}"],
                                                    "mq-namesrv": [f"127.0.0.1:{ns.metrics.port}"]},
                                rule_files=[RULES])
        prom.start()

        def clients(**kw) -> ClientConfig:
            kw.setdefault("instance_name", f"prom{time.monotonic_ns()}")
            return ClientConfig(namesrv_addr=ns.address, client_ip="127.0.0.1",
                                local_offset_store_dir=str(tmp_path / "offsets"), **kw)

        run(_scenario(prom, broker, clients), 180)
    finally:
        if prom is not None:
            prom.stop()
        if broker is not None:
            run(broker.stop())
        run(ns.stop())


async def _scenario(prom: PrometheusServer, broker, client_config) -> None:
    topic, first, more = "PromOrders", 240, 37
    broker.topic_config.put(TopicConfig(topic_name=topic, read_queue_nums=4, write_queue_nums=4, perm=6))
    await broker.register_all(force=True)
    got: dict[str, set[bytes]] = {"Live": set(), "Paused": set()}

    def consumer(group: str) -> PushConsumer:
        def listener(msgs, ctx):
            got[group].update(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS
        c = PushConsumer(ConsumerConfig(group=group, consume_from_where="FIRST"), listener,
                         client_config(instance_name=f"prom-{group}-{time.monotonic_ns()}",
                                       persist_consumer_offset_interval=0.2))
        c.subscribe(topic)
        return c

    live, paused = consumer("Live"), consumer("Paused")
    async with Producer(ProducerConfig(group="PromProducer"), client_config()) as producer:
        await live.start()
        await paused.start()
        try:
            for i in range(first):  # about three seconds of sends, scraped every second
                await producer.send(Message(topic, b"m%d" % i))
                if i % 20 == 19:
                    await asyncio.sleep(0.25)
            everything = {b"m%d" % i for i in range(first)}
            await _wait(lambda: got["Live"] >= everything and got["Paused"] >= everything, 30)
            await paused.shutdown()  # it commits what it consumed and leaves
            for i in range(first, first + more):
                await producer.send(Message(topic, b"m%d" % i))
            await until(prom, f'sum(rocketmq_messages_in_total{{job="mq-broker",topic="{topic}"}})', first + more)
            await until(prom, f'sum(rocketmq_consumer_lag_messages{{topic="{topic}",consumer_group="Paused"}})',
                        more)
            await until(prom, f'sum(rocketmq_consumer_lag_messages{{topic="{topic}",consumer_group="Live"}})', 0)
            lag_age = await asyncio.to_thread(
                prom.query, f'max(rocketmq_consumer_lag_latency_milliseconds{{consumer_group="Paused"}})')
            assert lag_age and lag_age[0][1] > 0
            paused = consumer("Paused")  # the group comes back and consumes what it missed
            await paused.start()
            await until(prom, f'sum(rocketmq_consumer_lag_messages{{topic="{topic}",consumer_group="Paused"}})', 0)
        finally:
            await live.shutdown()
            await paused.shutdown()
    await until(prom, 'sum(up{job=~"mq-broker|mq-namesrv"})', 2)
    await until(prom, 'sum(mq_namesrv_brokers{job="mq-namesrv"})', 1)
    sends = await asyncio.to_thread(prom.query, 'sum(rocketmq_rpc_latency_milliseconds_count{'
                                                'request_code="send_message_v2",response_code="success"})')
    assert sends and sends[0][1] == first + more
    out = await asyncio.to_thread(prom.query, f'sum(rocketmq_messages_out_total{{topic="{topic}"}})')
    assert out and out[0][1] >= 2 * (first + more)
    groups = await asyncio.to_thread(prom.api, "rules")
    names = {g["name"] for g in groups["groups"]}
    assert {"mq-availability", "mq-consumers", "mq-store"} <= names
    health = {r["health"] for g in groups["groups"] for r in g["rules"]}
    assert health <= {"ok", "unknown"}, groups
    await asyncio.to_thread(_dashboard_queries_answer, prom)


def _dashboard_queries_answer(prom: PrometheusServer) -> None:
    """Every query of the Grafana dashboard runs on this Prometheus; those of the panels this scenario feeds
    return data."""
    import json
    import re

    dashboard = json.loads(DASHBOARD.read_text())
    empty = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = re.sub(r"\$__rate_interval", "1m", target["expr"])
            expr = re.sub(r"\$[a-z_]+", ".*", expr)
            if not prom.query(expr):
                empty.append(panel["title"])
    fed = {"Brokers up", "Name servers up", "Messages in / out per broker",
           "Request latency p99 by request", "Lag (messages not yet consumed)", "Consume rate / s by group",
           "Disk used vs. clean and write-refusal ratios", "Flush and dispatch behind", "Live brokers by cluster",
           "Messages in / s by topic (top 10)", "Message size p95 by topic", "Broker memory (RSS)"}
    assert not fed & set(empty), sorted(fed & set(empty))


async def _wait(cond, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (Debian's prometheus package)")
def test_alert_rules_check_and_fire_on_made_up_series(tmp_path):
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    tests = (Path(__file__).parent / "mq_alerts_test.yml").read_text().replace("RULES", str(RULES))
    (tmp_path / "t.yml").write_text(tests)
    res = subprocess.run(["promtool", "test", "rules", str(tmp_path / "t.yml")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
