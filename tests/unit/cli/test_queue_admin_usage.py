"""The queue-administration commands refuse bad input before touching the network (exit 2, one clear message)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mq.cli.main import COMMANDS, cli
from mq.cli.queue_admin import unit_rows, valid_addr
from mq.protocol.bodies import ConsumeQueueData, QueryConsumeQueueResponseBody

# An address nothing listens on: if a command reached the network the test would fail with exit 1, not 2.
NS = ["-n", "127.0.0.1:1"]
NAMES = ("cloneGroupOffset", "queryCq", "cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog")


@pytest.mark.parametrize("args, needle", [
    (["cloneGroupOffset", "-s", "G1", "-d", "G2"], "-t"),
    (["cloneGroupOffset", "-s", "G1", "-t", "T"], "-d"),
    (["cloneGroupOffset", "-s", "G1", "-d", "G1", "-t", "T"], "must differ"),
    (["cloneGroupOffset", "-s", "bad group!", "-d", "G2", "-t", "T"], "-s"),
    (["cloneGroupOffset", "-s", "G1", "-d", "G2", "-t", "bad/topic"], "-t"),
    (["queryCq", "-t", "T", "-q", "0"], "-i"),
    (["queryCq", "-t", "T", "-i", "0"], "-q"),
    (["queryCq", "-t", "T", "-q", "-1", "-i", "0"], "-q"),
    (["queryCq", "-t", "T", "-q", "0", "-i", "-5"], "-i"),
    (["queryCq", "-t", "T", "-q", "0", "-i", "0", "-c", "0"], "-c"),
    (["queryCq", "-t", "T", "-q", "x", "-i", "0"], "-q"),
    (["queryCq", "-t", "T", "-q", "0", "-i", "0", "-b", "nohostport"], "host:port"),
    (["queryCq", "-t", "T", "-q", "0", "-i", "0", "-b", "h:99999"], "host:port"),
    (["queryCq", "-t", "T", "-q", "0", "-i", "0", "-g", "bad group!"], "-g"),
    (["cleanExpiredCQ", "-b", "h:1", "-c", "C"], "at most one of"),
    (["cleanUnusedTopic", "-b", "h:1", "-c", "C"], "at most one of"),
    (["deleteExpiredCommitLog", "-b", "h:1", "-c", "C"], "at most one of"),
    (["deleteExpiredCommitLog", "-b", "h"], "host:port"),
    (["cleanUnusedTopic", "--bogus"], "--bogus"),
])
def test_bad_input_is_a_usage_error(args, needle):
    res = CliRunner().invoke(cli, NS + args)
    assert res.exit_code == 2, (args, res.output)
    assert needle in res.output


def test_commands_are_listed_with_help():
    res = CliRunner().invoke(cli, ["--help"])
    for name in NAMES:
        assert name in COMMANDS and name in res.output
        sub = CliRunner().invoke(cli, [name, "--help"])
        assert sub.exit_code == 0 and "--json" in sub.output, name


def test_network_failure_is_exit_1_not_a_usage_error():
    res = CliRunner().invoke(cli, NS + ["cleanExpiredCQ"])  # valid input, no name server: a run-time failure
    assert res.exit_code == 1


def test_valid_addr():
    assert valid_addr(None, None, " 10.0.0.1:10911 ") == "10.0.0.1:10911"
    assert valid_addr(None, None, "[::1]:10911") == "[::1]:10911"
    assert valid_addr(None, None, None) is None


def test_unit_rows_number_from_the_index_and_attach_messages():
    class Msg:
        topic, tags, keys, msg_id, store_timestamp, queue_offset = "T", "A", "k1", "ID", 123, 7

    body = QueryConsumeQueueResponseBody(queue_data=[ConsumeQueueData(100, 20, 65, eval=True),
                                                     ConsumeQueueData(120, 30, 66)])
    rows = unit_rows(body, 7, {100: Msg()})
    assert [(r["index"], r["physicOffset"], r["physicSize"], r["tagsCode"], r["eval"]) for r in rows] == [
        (7, 100, 20, 65, True), (8, 120, 30, 66, False)]
    assert rows[0]["message"] == {"topic": "T", "tags": "A", "keys": "k1", "msgId": "ID", "storeTimestamp": 123,
                                  "queueOffset": 7}
    assert "message" not in rows[1]
