"""Requests that a RocketMQ 4.9 broker or name server refuses, for comparing refusal texts side by side.

Each probe is one raw request (code, extFields, body) sent with given credentials; what counts is the answer's
code and remark, which operators grep for. ``normalise`` removes what differs between two runs (addresses, times,
the store path), nothing else: a remark must match RocketMQ's word for word, stack-frame suffix included.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from mq.common import properties as P
from mq.protocol.acl import SessionCredentials
from mq.protocol.codes import RequestCode as R

#: the accounts of the plain_acl.yml both brokers load
ACL_YAML = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: refusaladmin
    secretKey: adminsecret
    admin: true
  - accessKey: refusalapp
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - RefT=PUB|SUB
      - RefDenied=DENY
    groupPerms:
      - RefDeniedG=DENY
"""
ADMIN = SessionCredentials("refusaladmin", "adminsecret")
APP = SessionCredentials("refusalapp", "12345678")
WRONG = SessionCredentials("refusalapp", "not-the-secret")
UNKNOWN = SessionCredentials("nobody-here", "12345678")
#: broker config both sides run with (RocketMQ's spelling)
BROKER_CONF = {"aclEnable": "true", "autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "false"}


@dataclass
class Probe:
    name: str
    code: int
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    creds: SessionCredentials | None = ADMIN
    #: "broker" or "namesrv"
    to: str = "broker"


def _send(topic: str, queue_id: int = 0, *, props: str | None = None, group: str = "RefPG") -> dict[str, str]:
    if props is None:
        props = P.encode_properties({P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "0A0B0C0D00002A9F0000000000000001",
                                     P.WAIT_STORE_MSG_OK: "true"})
    return {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}


def _pull(topic: str, group: str, queue_id: int = 0, *, sys_flag: int = 0x4, offset: int = 0) -> dict[str, str]:
    return {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
            "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": "*", "subVersion": "0", "expressionType": "TAG"}


def _create_topic(topic: str, perm: int = 6) -> dict[str, str]:
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
            "perm": str(perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}


#: what both brokers get before the probes (signed by the admin account)
SETUP = [
    Probe("create RefT", R.UPDATE_AND_CREATE_TOPIC, _create_topic("RefT")),
    Probe("create RefRO (read only)", R.UPDATE_AND_CREATE_TOPIC, _create_topic("RefRO", 4)),
    Probe("create RefWO (write only)", R.UPDATE_AND_CREATE_TOPIC, _create_topic("RefWO", 2)),
    Probe("create RefG", R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
          body=b'{"groupName":"RefG","consumeEnable":true,"consumeFromMinEnable":true,'
               b'"consumeBroadcastEnable":true,"retryQueueNums":1,"retryMaxTimes":16,"brokerId":0,'
               b'"whichBrokerWhenConsumeSlowly":1,"notifyConsumerIdsChangedEnable":true}'),
    Probe("create RefOffG (consume disabled)", R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
          body=b'{"groupName":"RefOffG","consumeEnable":false,"consumeFromMinEnable":true,'
               b'"consumeBroadcastEnable":true,"retryQueueNums":1,"retryMaxTimes":16,"brokerId":0,'
               b'"whichBrokerWhenConsumeSlowly":1,"notifyConsumerIdsChangedEnable":true}'),
    Probe("send to RefT", R.SEND_MESSAGE_V2, _send("RefT"), body=b"hello"),
]

PROBES = [
    # -- ACL (PlainPermissionManager.validate / checkPerm) -------------------------------------------------------
    Probe("acl: unsigned", R.SEND_MESSAGE_V2, _send("RefT"), b"x", creds=None),
    Probe("acl: unknown access key", R.SEND_MESSAGE_V2, _send("RefT"), b"x", creds=UNKNOWN),
    Probe("acl: wrong signature", R.SEND_MESSAGE_V2, _send("RefT"), b"x", creds=WRONG),
    Probe("acl: admin code from a plain account", R.UPDATE_AND_CREATE_TOPIC, _create_topic("RefX"), creds=APP),
    Probe("acl: denied topic", R.SEND_MESSAGE_V2, _send("RefDenied"), b"x", creds=APP),
    Probe("acl: topic by default perm", R.SEND_MESSAGE_V2, _send("RefOther"), b"x", creds=APP),
    Probe("acl: denied group", R.PULL_MESSAGE, _pull("RefT", "RefDeniedG"), creds=APP),
    # -- send ----------------------------------------------------------------------------------------------------
    Probe("send: topic not exist", R.SEND_MESSAGE_V2, _send("RefMissing"), b"x"),
    Probe("send: read-only topic", R.SEND_MESSAGE_V2, _send("RefRO"), b"x"),
    Probe("send: queue id too large", R.SEND_MESSAGE_V2, _send("RefT", 9), b"x"),
    Probe("send: illegal topic name", R.SEND_MESSAGE_V2, _send("Ref T!"), b"x"),
    Probe("send: system topic", R.SEND_MESSAGE_V2, _send("SCHEDULE_TOPIC_XXXX"), b"x"),
    Probe("send: body too large", R.SEND_MESSAGE_V2, _send("RefT"), b"x" * (4 * 1024 * 1024 + 1)),
    Probe("send: no topic", R.SEND_MESSAGE_V2, {k: v for k, v in _send("RefT").items() if k != "b"}, b"x"),
    Probe("send: retry topic of an unknown group", R.SEND_MESSAGE_V2, _send("%RETRY%RefNoSuchG"), b"x"),
    Probe("pull: no topic", R.PULL_MESSAGE, {k: v for k, v in _pull("RefT", "RefG").items() if k != "topic"}),
    Probe("send back: unknown group", R.CONSUMER_SEND_MSG_BACK,
          {"offset": "0", "group": "RefNoSuchG", "delayLevel": "0", "originMsgId": "", "originTopic": "RefT",
           "unitMode": "false", "maxReconsumeTimes": "16"}),
    Probe("send back: bad offset", R.CONSUMER_SEND_MSG_BACK,
          {"offset": "99999999", "group": "RefG", "delayLevel": "0", "originMsgId": "", "originTopic": "RefT",
           "unitMode": "false", "maxReconsumeTimes": "16"}),
    # -- pull ----------------------------------------------------------------------------------------------------
    Probe("pull: topic not exist", R.PULL_MESSAGE, _pull("RefMissing", "RefG")),
    Probe("pull: group not exist", R.PULL_MESSAGE, _pull("RefT", "RefNoSuchG")),
    Probe("pull: group cannot consume", R.PULL_MESSAGE, _pull("RefT", "RefOffG")),
    Probe("pull: write-only topic", R.PULL_MESSAGE, _pull("RefWO", "RefG")),
    Probe("pull: queue id too large", R.PULL_MESSAGE, _pull("RefT", "RefG", 9)),
    Probe("pull: group not online", R.PULL_MESSAGE, _pull("RefT", "RefG", sys_flag=0)),
    # -- queries and admin ---------------------------------------------------------------------------------------
    Probe("view message: bad offset", R.VIEW_MESSAGE_BY_ID, {"offset": "99999999"}),
    Probe("query offset: none committed", R.QUERY_CONSUMER_OFFSET,
          {"consumerGroup": "RefG", "topic": "RefT", "queueId": "3"}),
    Probe("consumer connections: group offline", R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "RefG"}),
    Probe("consumer list: group offline", R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "RefG"}),
    Probe("running info: client offline", R.GET_CONSUMER_RUNNING_INFO,
          {"consumerGroup": "RefG", "clientId": "127.0.0.1@nobody", "jstackEnable": "false"}),
    Probe("consume stats: unknown topic", R.GET_CONSUME_STATS, {"consumerGroup": "RefG", "topic": "RefMissing"}),
    Probe("topic stats: unknown topic", R.GET_TOPIC_STATS_INFO, {"topic": "RefMissing"}),
    Probe("create topic: illegal name", R.UPDATE_AND_CREATE_TOPIC, _create_topic("Ref T!")),
    Probe("create topic: system topic", R.UPDATE_AND_CREATE_TOPIC, _create_topic("SCHEDULE_TOPIC_XXXX")),
    Probe("reset offset: group offline", R.INVOKE_BROKER_TO_RESET_OFFSET,
          {"topic": "RefT", "group": "RefG", "timestamp": "0", "isForce": "false"}),
    Probe("consumer status: group offline", R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
          {"topic": "RefT", "group": "RefG", "clientAddr": ""}),
    Probe("end transaction: bad offset", R.END_TRANSACTION,
          {"producerGroup": "RefPG", "tranStateTableOffset": "0", "commitLogOffset": "99999999",
           "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "x"}),
    Probe("unsupported request code", 9999),
    Probe("consume time span: unknown topic", R.QUERY_CONSUME_TIME_SPAN, {"topic": "RefMissing", "group": "RefG"}),
    Probe("consume queue: unknown topic", R.QUERY_CONSUME_QUEUE,
          {"topic": "RefMissing", "queueId": "0", "index": "0", "count": "1", "consumerGroup": "RefG"}),
    Probe("broker stats: unknown key", R.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "nope"}),
    Probe("consume directly: client offline", R.CONSUME_MESSAGE_DIRECTLY,
          {"consumerGroup": "RefG", "clientId": "127.0.0.1@nobody", "msgId": "x"}),
    Probe("search offset: unknown topic", R.SEARCH_OFFSET_BY_TIMESTAMP,
          {"topic": "RefMissing", "queueId": "0", "timestamp": "0"}),
    Probe("delete group: unknown", R.DELETE_SUBSCRIPTIONGROUP, {"groupName": "RefNoSuchG", "removeOffset": "true"}),
    Probe("delete topic: unknown", R.DELETE_TOPIC_IN_BROKER, {"topic": "RefMissing"}),
    Probe("broker config: unknown key", R.UPDATE_BROKER_CONFIG, body=b"noSuchKey=1\n"),
    Probe("broker config: fixed key", R.UPDATE_BROKER_CONFIG, body=b"brokerClusterName=Other\n"),
    Probe("reset offset (old form): group offline", R.INVOKE_BROKER_TO_RESET_OFFSET,
          {"topic": "RefT", "group": "RefG", "timestamp": "0", "isForce": "true"}),
    # -- name server ---------------------------------------------------------------------------------------------
    Probe("namesrv: route of an unknown topic", R.GET_ROUTEINFO_BY_TOPIC, {"topic": "RefMissing"}, to="namesrv"),
    Probe("namesrv: missing kv config", R.GET_KV_CONFIG, {"namespace": "RefNS", "key": "k"}, to="namesrv"),
    Probe("namesrv: unsupported request code", 9999, to="namesrv"),
]

#: probes where mq answers otherwise on purpose (docs/operations.md, "What mq does differently"), and why
KNOWN_DIFFERENCES = {
    "send: read-only topic": "RocketMQ 4.9.7 stores a send to a topic without write permission (its msgCheck "
                             "never looks at the topic's perm); mq refuses it NO_PERMISSION",
    "consumer status: group offline": "RocketMQ 4.9.7 answers a NullPointerException; mq names the group",
    "send: no topic": "a request header without a field RocketMQ needs: RocketMQ answers whatever the missing value "
                      "makes its code do; mq names the header and the missing field",
    "pull: no topic": "the same: RocketMQ answers a NullPointerException",
    "consume directly: client offline": "a message id that is not one: RocketMQ answers a BufferUnderflowException; "
                                        "mq says the id is not a hex message id",
    "broker config: unknown key": "RocketMQ accepts any key, an unknown one too, and writes it to its config file; "
                                  "mq refuses it and names it (a misspelled key would go unnoticed)",
    "broker config: fixed key": "RocketMQ writes a key it reads only at start to its config file for the next start; "
                                "mq refuses it and lists the keys it changes at run time",
    "namesrv: unsupported request code": "RocketMQ's name server never answers an unknown request code (the client "
                                         "times out); mq answers REQUEST_CODE_NOT_SUPPORTED as its broker does",
}


def same_refusal(rocketmq: tuple[int, str | None], ours: tuple[int, str | None]) -> bool:
    """Same code, and our remark is RocketMQ's or RocketMQ's with something added at its end."""
    if rocketmq == ours:
        return True
    (code, remark), (our_code, our_remark) = rocketmq, ours
    return code == our_code and remark is not None and our_remark is not None and our_remark.startswith(remark)


_ADDR = re.compile(r"(?:/?\d{1,3}(?:\.\d{1,3}){3}|localhost):\d+")


def normalise(remark: str | None, store_root: str = "") -> str | None:
    """The remark with addresses and the store path replaced, so two runs compare."""
    if remark is None:
        return None
    text = remark.replace(store_root, "<store>") if store_root else remark
    return _ADDR.sub("<addr>", text)
