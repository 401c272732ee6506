"""`mq brokerConsumeStats / producer / statsAll / getConsumerStatus`: usage errors before any network call
(exit 2), and the pure helpers that shape their tables."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mq.cli.main import COMMANDS, cli
from mq.cli.stats_admin import consume_stats_rows, consumer_status_rows, producer_rows, sum_24h
from mq.common.message import MessageQueue
from mq.protocol.bodies import (BrokerStatsData, BrokerStatsItem, ConsumeStats, ConsumeStatsList, OffsetWrapper,
                                ProducerInfo, ProducerTableInfo)
from mq.protocol.codes import LanguageCode

# Nothing listens here: a command that reached the network would exit 1, not 2.
NS = ["-n", "127.0.0.1:1"]


@pytest.mark.parametrize("args, needle", [
    (["brokerConsumeStats"], "Missing option '-b'"),
    (["brokerConsumeStats", "-b", "10.0.0.1"], "must be host:port"),
    (["brokerConsumeStats", "-b", "10.0.0.1:99999"], "must be host:port"),
    (["brokerConsumeStats", "-b", "10.0.0.1:10911", "-o", "maybe"], "is not a valid boolean"),
    (["brokerConsumeStats", "-b", "10.0.0.1:10911", "-l", "many"], "'-l'"),
    (["brokerConsumeStats", "-b", "10.0.0.1:10911", "-t", "0"], "'-t'"),
    (["producer"], "Missing option '-b'"),
    (["producer", "-b", ":10911"], "must be host:port"),
    (["getConsumerStatus", "-t", "T"], "Missing option '-g'"),
    (["getConsumerStatus", "-g", "G"], "Missing option '-t'"),
    (["statsAll", "-x"], "No such option"),
])
def test_bad_input_is_a_usage_error(args, needle):
    res = CliRunner().invoke(cli, NS + args)
    assert res.exit_code == 2, (args, res.output)
    assert needle in res.output


def test_commands_are_listed_with_help_and_json():
    for name in ("brokerConsumeStats", "producer", "statsAll", "getConsumerStatus"):
        assert COMMANDS[name][0].startswith("mq.cli.stats_admin:")
        sub = CliRunner().invoke(cli, [name, "--help"])
        assert sub.exit_code == 0 and "--json" in sub.output, name


def test_unreachable_broker_exits_1():
    res = CliRunner().invoke(cli, NS + ["producer", "-b", "127.0.0.1:1"])
    assert res.exit_code == 1 and "cannot reach broker 127.0.0.1:1" in str(res.exception)


def test_consume_stats_rows_filter_by_level_and_sort_queues():
    b = "broker-a"
    cs = ConsumeStats({MessageQueue("T", b, 1): OffsetWrapper(10, 4, 1700000000000),
                       MessageQueue("T", b, 0): OffsetWrapper(5, 5, 0)}, 1.5)
    other = ConsumeStats({MessageQueue("U", b, 0): OffsetWrapper(3, 0, 0)})
    csl = ConsumeStatsList([{"G1": [cs]}, {"G0": [other]}, {"G2": []}], "1.2.3.4:10911", 9)
    rows = consume_stats_rows(csl)
    assert [(r["group"], r["topic"], r["queueId"], r["diff"]) for r in rows] == [
        ("G1", "T", 0, 0), ("G1", "T", 1, 6), ("G0", "U", 0, 3)]
    assert rows[1] == {"topic": "T", "group": "G1", "brokerName": b, "queueId": 1, "brokerOffset": 10,
                       "consumerOffset": 4, "diff": 6, "lastTimestamp": 1700000000000}
    assert [(r["group"], r["queueId"]) for r in consume_stats_rows(csl, 4)] == [("G1", 1)]
    assert consume_stats_rows(csl, 7) == []


def test_sum_24h_prefers_day_then_hour_then_minute():
    def bsd(m: int, h: int, d: int) -> BrokerStatsData:
        return BrokerStatsData(BrokerStatsItem(m), BrokerStatsItem(h), BrokerStatsItem(d))
    assert sum_24h(bsd(1, 2, 3)) == 3
    assert sum_24h(bsd(1, 2, 0)) == 2
    assert sum_24h(bsd(1, 0, 0)) == 1
    assert sum_24h(bsd(0, 0, 0)) == 0


def test_producer_and_consumer_status_rows():
    table = ProducerTableInfo({"PG2": [ProducerInfo("c2", "/10.0.0.2:5", LanguageCode.CPP, 400, 7)],
                               "PG1": [ProducerInfo("c1", "/10.0.0.1:5", LanguageCode.JAVA, 401, 9)]})
    assert [(r["group"], r["clientId"], r["language"], r["lastUpdateTimestamp"]) for r in producer_rows(table)] == [
        ("PG1", "c1", "JAVA", 9), ("PG2", "c2", "CPP", 7)]
    st = {"z": {MessageQueue("T", "b", 1): 4, MessageQueue("T", "b", 0): 2}, "a": {MessageQueue("T", "b", 3): 8}}
    assert [(r["clientId"], r["queueId"], r["offset"]) for r in consumer_status_rows(st)] == [
        ("a", 3, 8), ("z", 0, 2), ("z", 1, 4)]
