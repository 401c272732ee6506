"""Name-server admin commands refuse bad input before touching the network (exit 2, one clear message), and the
order-conf parser they share."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mq.cli.main import COMMANDS, cli
from mq.cli.namesrv_admin import format_order_conf, parse_order_conf

# Nothing listens here: a command that reached the network would fail with exit 1, not 2.
NS = ["-n", "127.0.0.1:1"]

NAMES = ["wipeWritePerm", "addWritePerm", "updateKvConfig", "deleteKvConfig", "getNamesrvConfig",
         "updateNamesrvConfig", "topicClusterList", "updateOrderConf"]


@pytest.mark.parametrize("args, needle", [
    (["wipeWritePerm"], "-b"),
    (["wipeWritePerm", "-b", "   "], "-b/--broker-name must not be blank"),
    (["addWritePerm", "-b", ""], "-b/--broker-name must not be blank"),
    (["updateKvConfig", "-s", "NS", "-k", "k"], "-v"),
    (["updateKvConfig", "-s", " ", "-k", "k", "-v", "v"], "-s/--namespace must not be blank"),
    (["updateKvConfig", "-s", "NS", "-k", "", "-v", "v"], "-k/--key must not be blank"),
    (["deleteKvConfig", "-s", "NS"], "-k"),
    (["deleteKvConfig", "-s", "NS", "-k", " "], "-k/--key must not be blank"),
    (["updateNamesrvConfig", "-k", "orderMessageEnable"], "-v"),
    (["updateNamesrvConfig", "-k", "a=b", "-v", "1"], "not a properties key"),
    (["updateNamesrvConfig", "-k", "two words", "-v", "1"], "not a properties key"),
    (["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true\nlistenPort=1"], "single line"),
    (["topicClusterList"], "-t"),
    (["topicClusterList", "-t", "bad topic!"], "illegal characters"),
    (["updateOrderConf", "-t", "T"], "-m"),
    (["updateOrderConf", "-t", "T", "-m", "post"], "'post' is not one of"),
    (["updateOrderConf", "-t", "T", "-m", "put"], "-m put needs the order conf"),
    (["updateOrderConf", "-t", "T", "-m", "put", "-v", "  "], "-m put needs the order conf"),
    (["updateOrderConf", "-t", "T", "-m", "put", "-v", "brokerA"], "expected brokerName:queueNums"),
    (["updateOrderConf", "-t", "T", "-m", "put", "-v", "brokerA:four"], "positive integer"),
    (["updateOrderConf", "-t", "T", "-m", "put", "-v", "brokerA:0"], "positive integer"),
    (["updateOrderConf", "-t", "T", "-m", "put", "-v", "a:1;;b:2"], "bad order conf entry ''"),
    (["updateOrderConf", "-t", "T", "-m", "put", "-v", "a:1;a:2"], "appears twice"),
    (["updateOrderConf", "-t", "T", "-m", "get", "-v", "a:1"], "only used with -m put"),
    (["updateOrderConf", "-t", "T", "-m", "delete", "-v", "a:1"], "only used with -m put"),
    (["updateOrderConf", "-t", "", "-m", "get"], "blank"),
])
def test_bad_input_is_a_usage_error(args, needle):
    res = CliRunner().invoke(cli, NS + args)
    assert res.exit_code == 2, (args, res.output, res.exception)
    assert needle in res.output, res.output


def test_every_command_is_registered_with_help():
    assert set(NAMES) <= set(COMMANDS)
    listing = CliRunner().invoke(cli, ["--help"]).output
    for name in NAMES:
        assert name in listing
        sub = CliRunner().invoke(cli, [name, "--help"])
        assert sub.exit_code == 0 and "--json" in sub.output, name
    wipe = CliRunner().invoke(cli, ["wipeWritePerm", "--help"]).output
    assert "-b, --broker-name" in wipe
    order = CliRunner().invoke(cli, ["updateOrderConf", "--help"]).output
    assert "-t, --topic" in order and "-m, --method" in order and "-v, --order-conf" in order


def test_parse_order_conf():
    assert parse_order_conf("broker-a:4;broker-b:8") == {"broker-a": 4, "broker-b": 8}
    assert parse_order_conf(" broker-a : 4 ; broker-b:8; ") == {"broker-a": 4, "broker-b": 8}
    assert format_order_conf(parse_order_conf(" broker-a : 4 ; broker-b:8; ")) == "broker-a:4;broker-b:8"
    for bad in ["", ";", "a", "a:", ":4", "a:-1", "a:1:2", "a:1;;b:2", "a:1.5"]:
        with pytest.raises(ValueError):
            parse_order_conf(bad)
