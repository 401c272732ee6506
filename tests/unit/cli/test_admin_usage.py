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
    (["startMonitoring", "-i", "0"], "-i"),
    (["startMonitoring", "-r", "-1"], "-r"),
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


def _all_commands():
    """(path, command) of every command and sub-command, as ``mq`` builds them (with the -n added after the name)."""
    import click

    ctx = click.Context(cli)
    out = []

    def walk(path: str, command: click.Command) -> None:
        out.append((path, command))
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(f"{path} {name}", sub)

    for name in COMMANDS:
        walk(name, cli.get_command(ctx, name))
    return out


def test_no_command_has_two_options_sharing_a_name():
    commands = _all_commands()
    assert len(commands) > len(COMMANDS)  # groups' sub-commands are walked too
    for path, command in commands:
        seen: dict[str, str] = {}
        for param in command.params:
            for opt in [*param.opts, *param.secondary_opts]:
                assert opt not in seen, f"{path}: {opt} is both {seen[opt]} and {param.name}"
                seen[opt] = param.name


# (command, mqadmin's long option, the option it is an alias of): checked against RocketMQ 4.9's mqadmin sources.
MQADMIN_LONG_NAMES = [
    ("topicList", "--clusterModel", "cluster_detail"),
    ("updateTopic", "--brokerAddr", "broker"), ("updateTopic", "--clusterName", "cluster"),
    ("updateTopic", "--readQueueNums", "read_queue_nums"), ("updateTopic", "--writeQueueNums", "write_queue_nums"),
    ("deleteTopic", "--clusterName", "cluster"),
    ("updateTopicPerm", "--brokerAddr", "broker"), ("updateTopicPerm", "--clusterName", "cluster"),
    ("brokerStatus", "--brokerAddr", "broker"), ("brokerStatus", "--clusterName", "cluster"),
    ("getBrokerConfig", "--brokerAddr", "broker"), ("getBrokerConfig", "--clusterName", "cluster"),
    ("updateBrokerConfig", "--brokerAddr", "broker"), ("updateBrokerConfig", "--clusterName", "cluster"),
    ("consumerProgress", "--groupName", "group"),
    ("consumerConnection", "--consumerGroup", "group"), ("consumerConnection", "--brokerAddr", "broker"),
    ("producerConnection", "--producerGroup", "group"),
    ("updateSubGroup", "--groupName", "group"), ("updateSubGroup", "--clusterName", "cluster"),
    ("updateSubGroup", "--brokerAddr", "broker"), ("updateSubGroup", "--consumeEnable", "consume_enable"),
    ("updateSubGroup", "--consumeFromMinEnable", "consume_from_min_enable"),
    ("updateSubGroup", "--consumeBroadcastEnable", "consume_broadcast_enable"),
    ("updateSubGroup", "--retryQueueNums", "retry_queue_nums"),
    ("updateSubGroup", "--retryMaxTimes", "retry_max_times"), ("updateSubGroup", "--brokerId", "broker_id"),
    ("updateSubGroup", "--whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly"),
    ("updateSubGroup", "--notifyConsumerIdsChanged", "notify_consumer_ids_changed"),
    ("deleteSubGroup", "--groupName", "group"), ("deleteSubGroup", "--clusterName", "cluster"),
    ("deleteSubGroup", "--brokerAddr", "broker"), ("deleteSubGroup", "--removeOffset", "remove_offset"),
    ("queryMsgByKey", "--msgKey", "key"), ("queryMsgById", "--msgId", "msg_id"),
    ("queryMsgByOffset", "--brokerName", "broker"), ("queryMsgByOffset", "--queueId", "queue_id"),
    ("wipeWritePerm", "--brokerName", "broker_name"), ("addWritePerm", "--brokerName", "broker_name"),
    ("updateOrderConf", "--orderConf", "order_conf"),
    ("consumerStatus", "--consumerGroup", "group"), ("consumerStatus", "--clientId", "client_id"),
    ("consumerStatus", "--brokerAddr", "broker"),
    ("allocateMQ", "--ipList", "ip_list"),
    ("sendMsgStatus", "--brokerName", "broker_name"), ("sendMsgStatus", "--messageSize", "size"),
    ("cloneGroupOffset", "--srcGroup", "src_group"), ("cloneGroupOffset", "--destGroup", "dest_group"),
    ("cleanExpiredCQ", "--brokerAddr", "broker"), ("cleanUnusedTopic", "--brokerAddr", "broker"),
    ("deleteExpiredCommitLog", "--brokerAddr", "broker"),
    ("brokerConsumeStats", "--brokerAddr", "broker"), ("brokerConsumeStats", "--timeoutMillis", "timeout_millis"),
    ("producer", "--broker", "broker"), ("statsAll", "--activeTopic", "active_only"),
    ("getConsumerStatus", "--originClientId", "client_id"),
    ("updateTopic", "--namesrvAddr", "namesrv"), ("clusterList", "--namesrvAddr", "namesrv"),
]


@pytest.mark.parametrize("name, long_name, dest", MQADMIN_LONG_NAMES)
def test_mqadmin_long_names_are_aliases(name, long_name, dest):
    import click

    command = cli.get_command(click.Context(cli), name)
    params = [p for p in command.params if long_name in p.opts]
    assert [p.name for p in params] == [dest], (name, long_name)
    first_long = [o for o in params[0].opts if o.startswith("--")][0]
    assert first_long != long_name  # ours stays the first long name, as --help shows it first


def test_mqadmin_long_names_parse_to_the_same_values():
    import click

    from mq.cli.consumer_admin import update_sub_group

    ctx = update_sub_group.make_context("updateSubGroup", [
        "--groupName", "G", "--brokerAddr", "h:1", "--consumeEnable", "false", "--consumeBroadcastEnable", "false",
        "--retryQueueNums", "3", "--retryMaxTimes", "7", "--brokerId", "1", "--whichBrokerWhenConsumeSlowly", "2",
        "--notifyConsumerIdsChanged", "false", "--consumeFromMinEnable", "false", "--consumeMessageOrderly", "true",
        "--groupRetryPolicy", '{"type":"CUSTOMIZED"}'])
    assert ctx.params == {"group": "G", "cluster": None, "broker": "h:1", "consume_enable": False,
                          "consume_from_min_enable": False, "consume_broadcast_enable": False,
                          "retry_queue_nums": 3, "retry_max_times": 7, "broker_id": 1,
                          "which_broker_when_consume_slowly": 2, "notify_consumer_ids_changed": False,
                          "consume_message_orderly": True, "group_retry_policy": '{"type":"CUSTOMIZED"}',
                          "json_mode": False}
    with pytest.raises(click.NoSuchOption):
        update_sub_group.make_context("updateSubGroup", ["--group-name", "G"])


@pytest.mark.parametrize("args, rounds", [
    ([], 1),                      # one round, as before
    (["-i", "5"], 0),             # mqadmin's clusterRT -i N: every N seconds until stopped
    (["--interval", "0.5"], 0),
    (["-i", "5", "-r", "3"], 3),  # -r still says how many
    (["-r", "2"], 2),
    (["-i", "5", "--rounds", "1"], 1),
])
def test_cluster_rt_interval_without_rounds_loops_until_stopped(args, rounds):
    from mq.cli.send_rt import cluster_rt, effective_rounds

    ctx = cluster_rt.make_context("clusterRT", list(args))
    assert effective_rounds(ctx, ctx.params["rounds"]) == rounds


@pytest.mark.parametrize("args, needle", [
    (["getBrokerConfig"], "exactly one of -b/--broker-addr and -c/--cluster"),
    (["getBrokerConfig", "-b", "h:1", "--clusterName", "C"], "exactly one of"),
    (["updateBrokerConfig", "-k", "k", "-v", "v"], "exactly one of -b/--broker-addr and -c/--cluster"),
    (["updateBrokerConfig", "--brokerAddr", "h:1", "-c", "C", "-k", "k", "-v", "v"], "exactly one of"),
    (["consumerConnection", "-g", "G", "-b", "nohost"], "not a broker address"),
    (["queryMsgById", "-i", "0A000005109200000000000000000001,xyz"], "'xyz' is not a message id"),
    (["queryMsgById", "--msgId", " , "], "no message id"),
    (["queryMsgById", "-i", "0A000005109200000000000000000001,0A000005109200000000000000000002"],
     "0A000005109200000000000000000001, 0A000005109200000000000000000002 does not decode"),
])
def test_bad_input_of_the_mqadmin_options_is_a_usage_error(args, needle):
    res = CliRunner().invoke(cli, NS + args)
    assert res.exit_code == 2, (args, res.output)
    assert needle in res.output
