"""A broker with aclEnable against signed and unsigned clients: the Python client, the CLI and raw requests."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from click.testing import CliRunner

from mq.cli.main import cli as mq_cli
from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.common.message import Message
from mq.config import ConsumerConfig, ProducerConfig
from mq.errors import BrokerError, ConfigError
from mq.protocol.acl import SessionCredentials
from mq.protocol.codes import ResponseCode as C
from mq.remoting import RemotingClient

ACL = """\
accounts:
  - accessKey: appkey01
    secretKey: appsecret01
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclOrders=PUB|SUB
      - AclAudit=SUB
    groupPerms:
      - AclBanned=DENY
  - accessKey: adminkey01
    secretKey: adminsecret01
    admin: true
"""


@pytest.fixture
def acl_broker(broker_factory, tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    return broker_factory(acl_enable=True, acl_file=str(path)), path


def cli(run, namesrv_addr: str, *args: str, creds: tuple[str, str] | None = None):
    opts = ["-n", namesrv_addr] + (["--access-key", creds[0], "--secret-key", creds[1]] if creds else [])
    return run(asyncio.to_thread(CliRunner().invoke, mq_cli, [*opts, *args], env={"COLUMNS": "200"}), timeout=60)


ADMIN = ("adminkey01", "adminsecret01")
APP = ("appkey01", "appsecret01")


def test_admin_codes_need_an_admin_account(acl_broker, namesrv, run):
    broker, _ = acl_broker
    res = cli(run, namesrv.address, "updateTopic", "-t", "AclOrders", "-b", broker.address)
    assert res.exit_code != 0 and "No accessKey is configured" in str(res.exception)
    res = cli(run, namesrv.address, "updateTopic", "-t", "AclOrders", "-b", broker.address, creds=APP)
    assert res.exit_code != 0
    assert "Need admin permission for request code=17, but accessKey=appkey01 is not" in str(res.exception)
    res = cli(run, namesrv.address, "updateTopic", "-t", "AclOrders", "-b", broker.address, creds=ADMIN)
    assert res.exit_code == 0, res.output
    assert broker.topic_config.get("AclOrders") is not None
    res = cli(run, namesrv.address, "updateTopic", "-t", "AclOrders", "-b", broker.address,
              creds=("adminkey01", "wrongsecret"))
    assert "Check signature failed for accessKey=adminkey01" in str(res.exception)


def test_signed_clients_send_and_consume_within_their_permissions(acl_broker, namesrv, run, client_config):
    broker, path = acl_broker
    for topic in ("AclOrders", "AclAudit"):
        assert cli(run, namesrv.address, "updateTopic", "-t", topic, "-b", broker.address, creds=ADMIN).exit_code == 0
    signed = dict(access_key=APP[0], secret_key=APP[1])

    async def scenario():
        producer = await Producer(ProducerConfig(group="PG_ACL"), client_config(**signed)).start()
        unsigned = await Producer(ProducerConfig(group="PG_ACL_NONE", retry_times_when_send_failed=0),
                                  client_config()).start()
        try:
            sent = [await producer.send(Message("AclOrders", f"order-{i}".encode())) for i in range(5)]
            with pytest.raises(BrokerError) as denied:
                await producer.send(Message("AclAudit", b"x"))  # SUB only
            with pytest.raises(BrokerError) as anonymous:
                await unsigned.send(Message("AclOrders", b"x"))
        finally:
            await producer.shutdown()
            await unsigned.shutdown()

        got: list[bytes] = []

        def listener(msgs, ctx):
            got.extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(ConsumerConfig(group="CG_ACL", consume_from_where="FIRST"), listener,
                                client_config(**signed))
        consumer.subscribe("AclOrders")
        await consumer.start()
        try:
            deadline = time.monotonic() + 20
            while len(got) < 5 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            await consumer.shutdown()
        return sent, denied.value, anonymous.value, got

    sent, denied, anonymous, got = run(scenario(), timeout=60)
    assert len(sent) == 5
    assert denied.code == C.SYSTEM_ERROR
    assert "AclException: No default permission for topic:AclAudit" in str(denied)
    assert "No accessKey is configured" in str(anonymous)
    assert sorted(got) == sorted(f"order-{i}".encode() for i in range(5))
    assert "CG_ACL" in broker.offsets.groups_of_topic("AclOrders")  # signed offset commits were accepted


def test_a_denied_group_cannot_pull_and_an_edited_file_applies_without_restart(acl_broker, namesrv, run):
    broker, path = acl_broker
    assert cli(run, namesrv.address, "updateTopic", "-t", "AclOrders", "-b", broker.address, creds=ADMIN).exit_code == 0

    async def pull(group: str):
        c = RemotingClient(name="acl-test")
        c.credentials = SessionCredentials(*APP)
        try:
            from mq.protocol.codes import RequestCode
            from mq.protocol.command import RemotingCommand
            from mq.protocol.headers import PullMessageRequestHeader

            h = PullMessageRequestHeader(consumer_group=group, topic="AclOrders", queue_id=0, queue_offset=0,
                                         max_msg_nums=32, sys_flag=4, commit_offset=0, suspend_timeout_millis=0,
                                         subscription="*", sub_version=0)
            return await c.invoke(broker.address, RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext()))
        finally:
            await c.close()

    resp = run(pull("AclBanned"))
    assert resp.code == C.SYSTEM_ERROR
    # RocketMQ's remark word for word: the exception, its message and the frame that threw it
    assert resp.remark == ("org.apache.rocketmq.acl.common.AclException: No default permission for group:AclBanned, "
                           "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm("
                           "PlainPermissionManager.java:610)")
    path.write_text(ACL.replace("AclBanned=DENY", "AclBanned=SUB"))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    deadline = time.monotonic() + 5
    while True:
        resp = run(pull("AclBanned"))
        if resp.code != C.SYSTEM_ERROR or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert resp.code in (C.PULL_NOT_FOUND, C.PULL_OFFSET_MOVED, C.SUCCESS), resp.remark


def test_broker_refuses_to_start_without_its_acl_file(broker_factory, tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        broker_factory(acl_enable=True, acl_file=str(tmp_path / "missing.yml"))


def test_trace_live_reader_signs_with_credentials_from_its_environment(acl_broker, run, monkeypatch):
    """``mq trace analyze`` hands its --access-key/--secret-key to the Spark job as MQ_ACCESS_KEY/MQ_SECRET_KEY;
    the job's blocking channels sign with them."""
    from mq.protocol.codes import RequestCode
    from mq.protocol.command import RemotingCommand
    from mq.protocol.headers import GetMaxOffsetRequestHeader
    from mq.trace.live_reader import BlockingChannel

    broker, _ = acl_broker
    query = lambda: RemotingCommand.request(  # noqa: E731
        RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic="AclOrders", queue_id=0).to_ext())

    def call() -> RemotingCommand:
        ch = BlockingChannel(broker.address)
        try:
            return ch.call(query())
        finally:
            ch.close()

    monkeypatch.delenv("MQ_ACCESS_KEY", raising=False)
    monkeypatch.delenv("MQ_SECRET_KEY", raising=False)
    refused = run(asyncio.to_thread(call))
    assert refused.code == C.SYSTEM_ERROR and "No accessKey is configured" in refused.remark
    monkeypatch.setenv("MQ_ACCESS_KEY", APP[0])
    monkeypatch.setenv("MQ_SECRET_KEY", APP[1])
    assert run(asyncio.to_thread(call)).code == C.SUCCESS


def test_acl_admin_commands_change_the_file_and_apply_at_once(acl_broker, namesrv, run, broker_factory):
    broker, path = acl_broker
    target = ["-b", broker.address]
    new = ["updateAclConfig", *target, "-a", "teamkey01", "-s", "teamsecret01", "-i", "PUB", "-u", "SUB",
           "-t", "AclAudit=SUB"]
    res = cli(run, namesrv.address, *new, creds=APP)  # changing ACL needs an admin account
    assert res.exit_code == 1 and "Need admin permission for request code=50" in res.output
    res = cli(run, namesrv.address, *new, "--json", creds=ADMIN)
    assert res.exit_code == 0, res.output
    assert "teamkey01" in path.read_text() and "dataVersion" in path.read_text()
    res = cli(run, namesrv.address, "updateTopic", "-t", "AclTeam", *target, creds=ADMIN)
    assert res.exit_code == 0, res.output
    res = cli(run, namesrv.address, "send", "-t", "AclTeam", "--body", "x", creds=("teamkey01", "teamsecret01"))
    assert res.exit_code == 0, res.output  # defaultTopicPerm PUB, in force without a restart

    res = cli(run, namesrv.address, "clusterAclConfigVersion", *target, "--json", creds=APP)
    assert res.exit_code == 0, res.output
    assert '"counter": 1' in res.output

    # mqadmin getAclConfig (54): every account, secret keys included, so an admin account only
    res = cli(run, namesrv.address, "getAclConfig", *target, "--json", creds=APP)
    assert res.exit_code == 1 and "Need admin permission for request code=54" in res.output
    res = cli(run, namesrv.address, "getAclConfig", *target, "--json", creds=ADMIN)
    assert res.exit_code == 0, res.output
    [shown] = json.loads(res.output)["brokers"]
    team = next(a for a in shown["plainAccessConfigs"] if a["accessKey"] == "teamkey01")
    assert team == {"accessKey": "teamkey01", "secretKey": "teamsecret01", "admin": False,
                    "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB", "topicPerms": ["AclAudit=SUB"]}
    # as RocketMQ's: only what is given changes (no -t/-g: the account keeps them; nothing empty is sent)
    res = cli(run, namesrv.address, "updateAclConfig", *target, "-a", "teamkey01", "-s", "teamsecret01", "-i", "SUB",
              creds=ADMIN)
    assert res.exit_code == 0, res.output
    res = cli(run, namesrv.address, "getAclConfig", *target, "--json", creds=ADMIN)
    team = next(a for a in json.loads(res.output)["brokers"][0]["plainAccessConfigs"] if a["accessKey"] == "teamkey01")
    assert team["defaultTopicPerm"] == "SUB" and team["topicPerms"] == ["AclAudit=SUB"] and "groupPerms" not in team
    res = cli(run, namesrv.address, "updateAclConfig", *target, "-a", "teamkey01", "-s", "teamsecret01", "-i", "PUB",
              creds=ADMIN)
    assert res.exit_code == 0, res.output

    res = cli(run, namesrv.address, "updateAclConfig", *target, "-a", "teamkey01", "-s", "teamsecret01",
              "-t", "AclAudit=WRITE", creds=ADMIN)
    assert res.exit_code == 2 and "AclAudit=WRITE" in res.output  # refused before reaching the broker

    res = cli(run, namesrv.address, "deleteAclConfig", *target, "-a", "teamkey01", creds=ADMIN)
    assert res.exit_code == 0, res.output
    res = cli(run, namesrv.address, "send", "-t", "AclTeam", "--body", "x", creds=("teamkey01", "teamsecret01"))
    assert res.exit_code != 0 and "No acl config for teamkey01" in str(res.exception)
    res = cli(run, namesrv.address, "deleteAclConfig", *target, "-a", "teamkey01", creds=ADMIN)
    assert res.exit_code == 1 and "no such account" in res.output

    res = cli(run, namesrv.address, "updateGlobalWhiteAddr", *target, "-g", "127.0.0.1", creds=ADMIN)
    assert res.exit_code == 0, res.output
    res = cli(run, namesrv.address, "topicStatus", "-t", "AclTeam")  # unsigned, from a white-listed address
    assert res.exit_code == 0, res.output

    plain = broker_factory()  # no aclEnable: the ACL codes say so
    res = cli(run, namesrv.address, "clusterAclConfigVersion", "-b", plain.address)
    assert res.exit_code == 1 and "ACL is not enabled on this broker" in res.output
