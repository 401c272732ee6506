"""Admin commands refuse bad input before touching the network (exit 2, one clear message); broker-side
config helpers of the admin processor."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mq.cli.main import COMMANDS, cli
from mq.config import BrokerConfig, StoreConfig
from mq.daemon.broker.processors.admin import (RUNTIME_UPDATABLE, STORE_RUNTIME_UPDATABLE, coerce_updates, config_lines,
                                              parse_properties)

# An address nothing listens on: if a command reached the network the test would fail with exit 1, not 2.
NS = ["-n", "127.0.0.1:1"]


@pytest.mark.parametrize("args, needle", [
    (["updateTopic", "-t", "T"], "exactly one of -c/--cluster and -b/--broker-addr"),
    (["updateTopic", "-t", "T", "-c", "C", "-b", "h:1"], "exactly one of"),
    (["updateTopic", "-t", "T", "-c", "C", "-p", "9"], "-p"),
    (["brokerStatus"], "exactly one of -b/--broker-addr and -c/--cluster"),
    (["updateSubGroup", "-g", "G"], "exactly one of"),
    (["deleteSubGroup", "-g", "G", "-c", "C", "-b", "h:1"], "exactly one of"),
    (["queryMsgById", "-i", "xyz"], "hexadecimal"),
    (["queryMsgById", "-i", "0A000005109200000000000000000001"], "-t"),
    (["resetOffsetByTime", "-g", "G", "-t", "T", "-s", "tomorrow-ish"], "epoch ms"),
    (["queryMsgByKey", "-t", "T", "-k", "k", "--begin", "soon"], "epoch ms"),
    (["queryMsgByOffset", "-t", "T", "-b", "b", "-q", "-1", "-o", "0"], "-q"),
])
def test_bad_input_is_a_usage_error(args, needle):
    res = CliRunner().invoke(cli, NS + args)
    assert res.exit_code == 2, (args, res.output)
    assert needle in res.output


def test_every_admin_command_is_listed_with_help():
    names = {"topicStatus", "updateTopic", "deleteTopic", "brokerStatus", "consumerProgress", "consumerConnection",
             "producerConnection", "resetOffsetByTime", "updateSubGroup", "deleteSubGroup", "queryMsgByKey",
             "queryMsgById", "queryMsgByOffset", "getBrokerConfig", "updateBrokerConfig"}
    assert names <= set(COMMANDS)
    res = CliRunner().invoke(cli, ["--help"])
    for name in names:
        assert name in res.output
        sub = CliRunner().invoke(cli, [name, "--help"])
        assert sub.exit_code == 0 and "--json" in sub.output, name


def test_parse_properties_java_style():
    text = "# comment\n! also\nbrokerPermission=4\n  autoCreateTopicEnable : false \n\nregionId=a=b\n"
    assert parse_properties(text) == {"brokerPermission": "4", "autoCreateTopicEnable": "false", "regionId": "a=b"}
    with pytest.raises(ValueError, match="key=value"):
        parse_properties("justakey\n")


def test_coerce_updates_types_and_refusals():
    cfg = BrokerConfig()
    assert coerce_updates(cfg, {"brokerPermission": "4", "autoCreateTopicEnable": "FALSE", "regionId": "R1"}) == {
        "broker_permission": 4, "auto_create_topic_enable": False, "region_id": "R1"}
    with pytest.raises(ValueError, match="cannot be changed at run time"):
        coerce_updates(cfg, {"brokerName": "x"})
    with pytest.raises(ValueError, match="unknown broker config key"):
        coerce_updates(cfg, {"whatever": "1"})
    with pytest.raises(ValueError, match="bad value"):
        coerce_updates(cfg, {"autoCreateTopicEnable": "maybe"})
    with pytest.raises(ValueError, match="bad value"):
        coerce_updates(cfg, {"defaultTopicQueueNums": "8.5"})
    fields = set(BrokerConfig.__dataclass_fields__)
    assert RUNTIME_UPDATABLE <= fields
    assert STORE_RUNTIME_UPDATABLE <= set(StoreConfig.__dataclass_fields__)
    # MessageStoreConfig keys come back apart, for the store
    assert coerce_updates(cfg, {"fileReservedTime": "48", "regionId": "R2", "cleanFileForciblyEnable": "false"},
                          StoreConfig()) == {"region_id": "R2", "store": {"file_reserved_time": 48,
                                                                            "clean_file_forcibly_enable": False}}
    with pytest.raises(ValueError, match="cannot be changed at run time"):
        coerce_updates(cfg, {"flushDiskType": "SYNC_FLUSH"}, StoreConfig())
    with pytest.raises(ValueError, match="unknown broker config key"):
        coerce_updates(cfg, {"fileReservedTime": "48"})  # without the store config, store keys are unknown


def test_config_lines_uses_rocketmq_names():
    lines = config_lines(BrokerConfig(broker_name="b1"), StoreConfig(flush_disk_type="SYNC_FLUSH")).splitlines()
    kv = dict(line.split("=", 1) for line in lines)
    assert kv["brokerName"] == "b1" and kv["flushDiskType"] == "SYNC_FLUSH"
    assert kv["autoCreateTopicEnable"] == "true" and kv["listenPort"] == str(BrokerConfig().listen_port)
    assert "frameLimits" not in kv  # nested configs are not key=value settings
