"""Scrapes of a broker with 1,000 topics and 200 consumer groups, its figures moving between scrapes: every value
is the one a model of the sends, pulls and acks predicts, and the same as a collector that keeps nothing from
earlier scrapes gives (what the endpoint keeps between scrapes must never show an old value)."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from mq.common.message import Message
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand
from tests.integration.broker.wire import batch_cmd, pull_cmd

from .scrape import Scrape, scrape

PROM = dict(metrics_exporter_type="PROM", metrics_prom_exporter_port=0)
TOPICS, GROUPS, PER_GROUP, QUEUES = 1000, 200, 5, 4
#: families whose every sample is a function of the sends, pulls and acks (not of the clock or the disk)
EXACT = ("rocketmq_messages_in_total", "rocketmq_throughput_in_total", "rocketmq_message_size_bucket",
         "rocketmq_message_size_count", "rocketmq_message_size_sum", "rocketmq_messages_out_total",
         "rocketmq_throughput_out_total", "rocketmq_consumer_lag_messages", "rocketmq_consumer_inflight_messages",
         "rocketmq_consumer_ready_messages", "rocketmq_topic_number", "rocketmq_consumer_group_number")


class Model:
    """What the broker was told: messages per topic, and per (group, topic, queue) the pulled and acked offsets."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, int], int] = defaultdict(int)
        self.pulled: dict[tuple[str, str, int], int] = {}
        self.acked: dict[tuple[str, str, int], int] = {}

    def pair(self, group: str, topic: str) -> tuple[int, int, int]:
        """lag, in flight, ready"""
        lag = inflight = ready = 0
        for q in range(QUEUES):
            top, acked = self.stored[(topic, q)], self.acked[(group, topic, q)]
            pulled = max(self.pulled[(group, topic, q)], acked)
            lag, inflight, ready = lag + top - acked, inflight + pulled - acked, ready + top - pulled
        return lag, inflight, ready


def pairs() -> list[tuple[str, str]]:
    return [(f"LargeGroup{g:03d}", f"LargeTopic{(g * PER_GROUP + k) % TOPICS:04d}")
            for g in range(GROUPS) for k in range(PER_GROUP)]


def fresh_samples(b) -> dict[tuple[str, tuple], float]:
    """The broker's samples from a collector made now (nothing kept from earlier scrapes), rendered by
    prometheus_client itself."""
    from mq.daemon.metrics.broker import BrokerCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(b, b.metrics.rpc))
    return exact(Scrape(generate_latest(registry).decode()))


def exact(s: Scrape) -> dict[tuple[str, tuple], float]:
    return {(x.name, tuple(sorted(x.labels.items()))): x.value for x in s.samples if x.name in EXACT}


@pytest.mark.slow
def test_scrapes_of_a_large_broker_follow_its_changes(broker_factory, client, run):
    b = broker_factory(**PROM)
    b.metrics.collector.lag_min_interval = 0.0  # every scrape computes the lag again
    model = Model()
    sem = asyncio.Semaphore(64)

    async def call(cmd: RemotingCommand) -> RemotingCommand:
        async with sem:
            resp = await client.invoke(b.address, cmd, 30)
        assert resp.code == 0, (cmd.code, resp.code, resp.remark)
        return resp

    async def send(topic: str, q: int, n: int, size: int = 100) -> None:
        await call(batch_cmd(topic, [Message(topic, b"x" * size) for _ in range(n)], queue_id=q))
        model.stored[(topic, q)] += n

    async def consume(group: str, topic: str, q: int, pull: int, ack: int) -> None:
        start = model.pulled.get((group, topic, q), 0)
        if pull:
            await call(pull_cmd(topic, q, start, group=group, max_nums=pull))
        model.pulled[(group, topic, q)] = start + pull
        header = H.UpdateConsumerOffsetRequestHeader(group, topic, q, ack)
        await call(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext()))
        model.acked[(group, topic, q)] = ack

    def check(s: Scrape) -> None:
        lag = {(x.labels["consumer_group"], x.labels["topic"]): x.value for x in s.find(
            "rocketmq_consumer_lag_messages")}
        inflight = {(x.labels["consumer_group"], x.labels["topic"]): x.value for x in s.find(
            "rocketmq_consumer_inflight_messages")}
        ready = {(x.labels["consumer_group"], x.labels["topic"]): x.value for x in s.find(
            "rocketmq_consumer_ready_messages")}
        expected = {p: model.pair(*p) for p in pairs()}
        assert {p: (lag[p], inflight[p], ready[p]) for p in expected} == expected
        for t in range(TOPICS):
            topic = f"LargeTopic{t:04d}"
            sent = sum(model.stored[(topic, q)] for q in range(QUEUES))
            assert s.value("rocketmq_messages_in_total", topic=topic) == sent
        assert exact(s) == fresh_samples(b)

    async def main() -> None:
        await asyncio.gather(*(send(f"LargeTopic{t:04d}", q, 10) for t in range(TOPICS) for q in range(QUEUES)))
        await asyncio.gather(*(consume(g, t, q, 5, 3) for g, t in pairs() for q in range(QUEUES)))
        first = await scrape(b.metrics.url)
        assert len(first.find("rocketmq_consumer_lag_messages")) == GROUPS * PER_GROUP
        check(first)
        # move a tenth of the topics and of the pairs, one of each queue, then scrape again
        await asyncio.gather(*(send(f"LargeTopic{t:04d}", t % QUEUES, 3, size=2000) for t in range(0, TOPICS, 10)))
        moved = pairs()[::10]
        await asyncio.gather(*(consume(g, t, 1, 2, 6) for g, t in moved))
        await asyncio.gather(*(consume(g, t, 2, 0, 0) for g, t in pairs()[5::10]))  # acks reset to 0
        second = await scrape(b.metrics.url)
        check(second)
        exposition = b.metrics.endpoint.exposition
        # most series kept, the moved ones rebuilt from their line prefixes (their labels are the same)
        assert exposition.reused > exposition.relabelled > 0
        third = await scrape(b.metrics.url)  # nothing moved
        check(third)
        assert exact(third) == exact(second)

    run(main(), timeout=600)
