"""Plain ACL rules (mq.daemon.broker.acl): address patterns, permissions, plain_acl.yml, and the check order."""

from __future__ import annotations

import os
import textwrap
import time

import pytest

from mq.daemon.broker.acl import (
    Perm,
    PlainAccessValidator,
    address_matcher,
    check_permission,
    client_ip,
    parse_acl_document,
    parse_perm,
    required_resources,
)
from mq.errors import ConfigError
from mq.protocol.acl import SessionCredentials, sign_request
from mq.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from mq.protocol.codes import RequestCode as R
from mq.protocol.command import RemotingCommand


@pytest.mark.parametrize("pattern, yes, no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("*.*.*.*", ["10.0.0.1"], []),
    ("", [], ["127.0.0.1"]),
    ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1", "10.168.0.1"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
    ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20", "192.168.1.15"], ["192.168.1.9", "192.168.1.21"]),
    ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4"]),
    ("10.0.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "::1"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
    ("1050:0:0:0:5:600:300c:*", ["1050::5:600:300c:326b"], ["1050::5:600:300d:1"]),
])
def test_address_patterns(pattern, yes, no):
    match = address_matcher(pattern)
    assert all(match(a) for a in yes), yes
    assert not any(match(a) for a in no), no


@pytest.mark.parametrize("pattern", ["300.1.1.1", "1.2.3", "*.1.1.1", "1.2.3.20-10", "1.2.3.a-b", "1.2.*.5",
                                     "host.example", "1.2.3.{4,x}"])
def test_bad_address_patterns_are_config_errors(pattern):
    with pytest.raises(ConfigError):
        address_matcher(pattern, "where")


def test_client_ip_strips_the_port():
    assert client_ip("127.0.0.1:5555") == "127.0.0.1"
    assert client_ip("[::1]:5555") == "::1"


def test_permissions():
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == Perm.PUB | Perm.SUB
    assert parse_perm("pub") is Perm.DENY and parse_perm(None) is Perm.DENY
    assert check_permission(Perm.PUB, Perm.PUB | Perm.SUB)
    assert not check_permission(Perm.PUB, Perm.SUB)
    assert not check_permission(Perm.SUB, Perm.SUB | Perm.DENY)
    assert check_permission(Perm.ANY, Perm.SUB) and not check_permission(Perm.ANY, Perm.DENY)


def test_document_errors_name_the_entry():
    with pytest.raises(ConfigError, match=r"accounts\[0\].*longer than 6"):
        parse_acl_document({"accounts": [{"accessKey": "short", "secretKey": "12345678"}]}, "f.yml")
    with pytest.raises(ConfigError, match=r"accounts\[1\].*appears twice"):
        parse_acl_document({"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678"}] * 2}, "f.yml")
    with pytest.raises(ConfigError, match="topicA=WRITE"):
        parse_acl_document({"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678",
                                          "topicPerms": ["topicA=WRITE"]}]}, "f.yml")
    with pytest.raises(ConfigError, match="not 'name=PERM'"):
        parse_acl_document({"accounts": [{"accessKey": "RocketMQ", "secretKey": "12345678",
                                          "groupPerms": ["groupA"]}]}, "f.yml")


def _hb(*groups_topics: tuple[str, list[str]]) -> RemotingCommand:
    body = HeartbeatData(client_id="c", consumer_data_set=[
        ConsumerData(group_name=g, subscription_data_set=[SubscriptionData(topic=t, sub_string="*") for t in topics])
        for g, topics in groups_topics]).to_json()
    return RemotingCommand.request(R.HEART_BEAT, {}, body=body)


def test_required_resources_per_code():
    req = RemotingCommand.request
    assert required_resources(req(R.SEND_MESSAGE_V2, {"a": "PG", "b": "T"})) == {"T": Perm.PUB}
    assert required_resources(req(R.SEND_MESSAGE_V2, {"a": "G", "b": "%RETRY%G"})) == {"%RETRY%G": Perm.SUB}
    assert required_resources(req(R.SEND_MESSAGE, {"topic": "T", "producerGroup": "PG"})) == {"T": Perm.PUB}
    assert required_resources(req(R.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"})) == {
        "T": Perm.SUB, "%RETRY%G": Perm.SUB}
    assert required_resources(req(R.CONSUMER_SEND_MSG_BACK, {"group": "G"})) == {"%RETRY%G": Perm.SUB}
    assert required_resources(req(R.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "G"})) == {
        "T": Perm.SUB, "%RETRY%G": Perm.SUB}
    assert required_resources(_hb(("G1", ["T1", "T2"]), ("G2", []))) == {
        "%RETRY%G1": Perm.SUB, "T1": Perm.SUB, "T2": Perm.SUB, "%RETRY%G2": Perm.SUB}
    assert required_resources(req(R.QUERY_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "G"})) == {}


ACL_YAML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.0.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
"""


@pytest.fixture
def validator(tmp_path) -> PlainAccessValidator:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_YAML)
    return PlainAccessValidator(path)


def _signed(code: int, fields: dict[str, str], ak: str = "RocketMQ", sk: str = "12345678",
            body: bytes | None = None) -> RemotingCommand:
    cmd = RemotingCommand.request(code, dict(fields), body=body)
    sign_request(cmd, SessionCredentials(ak, sk))
    return cmd


def test_check_order_and_messages(validator):
    v, here = validator, "127.0.0.1:40000"
    send = {"a": "PG", "b": "topicB"}
    assert v.check(here, _signed(R.SEND_MESSAGE_V2, send)) is None
    assert v.check(here, RemotingCommand.request(R.SEND_MESSAGE_V2, dict(send))) == "No accessKey is configured"
    assert v.check("10.10.103.7:1", RemotingCommand.request(R.SEND_MESSAGE_V2, dict(send))) is None  # global white
    assert v.check(here, _signed(R.SEND_MESSAGE_V2, send, ak="nobody99")) == "No acl config for nobody99"
    assert v.check(here, _signed(R.SEND_MESSAGE_V2, send, sk="wrongkey")) == \
        "Check signature failed for accessKey=RocketMQ"
    assert v.check("192.168.0.9:1", _signed(R.SEND_MESSAGE_V2, send, sk="wrongkey")) is None  # account white
    assert v.check(here, _signed(R.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"})) == \
        "No default permission for topic:topicA"
    assert v.check(here, _signed(R.SEND_MESSAGE_V2, {"a": "PG", "b": "topicC"})) == \
        "No default permission for topic:topicC"
    assert v.check(here, _signed(R.SEND_MESSAGE_V2, {"a": "PG", "b": "other"})) == \
        "No default permission for topic:other"  # defaultTopicPerm DENY
    assert v.check(here, _signed(R.SEND_MESSAGE_V2, {"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"})) is None
    assert v.check(here, _signed(R.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupB"})) is None
    assert v.check(here, _signed(R.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupA"})) == \
        "No default permission for group:groupA"
    assert v.check(here, _signed(R.UPDATE_AND_CREATE_TOPIC, {"topic": "topicB"})) == \
        "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    assert v.check(here, _signed(R.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, ak="rocketmq2")) is None
    assert v.check(here, _signed(R.PULL_MESSAGE, {"topic": "any", "consumerGroup": "any"}, ak="rocketmq2")) is None
    assert v.check(here, _signed(R.GET_BROKER_RUNTIME_INFO, {})) is None  # signature only
    hb = _hb(("groupB", ["topicB", "topicA"]))
    sign_request(hb, SessionCredentials("RocketMQ", "12345678"))
    assert v.check(here, hb) == "No default permission for topic:topicA"


def test_changed_file_is_reloaded_and_a_broken_one_keeps_the_old_rules(validator, tmp_path):
    v, here = validator, "127.0.0.1:40000"
    cmd = lambda: _signed(R.SEND_MESSAGE_V2, {"a": "PG", "b": "topicC"})  # noqa: E731
    assert v.check(here, cmd()) is not None
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_YAML.replace("topicC=SUB", "topicC=PUB"))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert v.reload_if_changed(now=time.monotonic() + 5)
    assert v.check(here, cmd()) is None
    path.write_text("accounts: [ {accessKey: x} ]\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    assert not v.reload_if_changed(now=time.monotonic() + 10)
    assert v.check(here, cmd()) is None  # the previous rules stay in force


def test_extra_files_in_the_acl_directory_add_accounts(tmp_path):
    (tmp_path / "plain_acl.yml").write_text(ACL_YAML)
    (tmp_path / "acl").mkdir()
    (tmp_path / "acl" / "team.yaml").write_text(textwrap.dedent("""\
        accounts:
          - accessKey: teamkey1
            secretKey: teamsecret
            defaultTopicPerm: PUB
    """))
    v = PlainAccessValidator(tmp_path / "plain_acl.yml")
    assert v.check("127.0.0.1:1", _signed(R.SEND_MESSAGE_V2, {"a": "PG", "b": "x"}, "teamkey1", "teamsecret")) is None
    (tmp_path / "acl" / "dup.yml").write_text("accounts:\n  - {accessKey: teamkey1, secretKey: teamsecret}\n")
    with pytest.raises(ConfigError, match="also defined in"):
        PlainAccessValidator(tmp_path / "plain_acl.yml")


def test_missing_file_is_a_clear_start_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        PlainAccessValidator(tmp_path / "nope.yml")


def test_rocketmqs_stock_plain_acl_yml_loads(tmp_path):
    """RocketMQ's distribution ships ``secretKey: 12345678``, a YAML integer; RocketMQ reads it as the text
    "12345678" (and so the access key, were it a number). The broker must start with that file."""
    path = tmp_path / "plain_acl.yml"
    path.write_text(textwrap.dedent("""\
        globalWhiteRemoteAddresses:
          - 10.10.103.*
          - 192.168.0.*
        accounts:
          - accessKey: RocketMQ
            secretKey: 12345678
            whiteRemoteAddress:
            admin: false
            defaultTopicPerm: DENY
            defaultGroupPerm: SUB
            topicPerms:
              - topicB=PUB|SUB
          - accessKey: 87654321
            secretKey: 12345678
            whiteRemoteAddress: 192.168.1.*
            admin: true
        """))
    v = PlainAccessValidator(path)
    assert v.config.accounts["RocketMQ"].secret_key == "12345678"
    assert v.config.accounts["87654321"].secret_key == "12345678"
    assert v.check("127.0.0.1:1", _signed(R.SEND_MESSAGE_V2, {"a": "PG", "b": "topicB"})) is None
    with pytest.raises(ConfigError, match="longer than 6"):
        parse_acl_document({"accounts": [{"accessKey": "RocketMQ", "secretKey": ["12345678"]}]}, "f.yml")
