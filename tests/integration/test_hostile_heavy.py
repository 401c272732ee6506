"""One client sends a request with a body of several MB (RocketMQ clients have sent 12-14 MB ones; the figures at
that size come from benchmarks/hostile_clients_bench.py); the others must keep being served while the daemon works
on it (raw sockets against the in-process daemons).

Each test sends the large request, gives the daemon time to read it, then makes round trips on another
connection and checks that each of them was answered while the large request was still unanswered.
"""

from __future__ import annotations

import select
import time

import orjson

from mq.protocol import headers as H
from mq.protocol.acl import SessionCredentials, sign_request
from mq.protocol.bodies import RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

from .broker.wire import send_cmd
from .hostile import Raw, frame, json_header, serving

#: A round trip answered after the large request must have taken less than this (else it waited for it).
QUICK = 0.5
ROUND_TRIPS = 5


def _unanswered(r: Raw) -> bool:
    """True while nothing has arrived on ``r`` (the large request's answer)."""
    readable, _, _ = select.select([r.sock], [], [], 0)
    return not readable


def _others_served_meanwhile(addr: str, big: bytes, probe) -> tuple[RemotingCommand, Raw]:
    """The large request's answer, and its connection (still open: the caller closes it)."""
    hog = Raw(addr, timeout=120)
    hog.send(big)
    time.sleep(0.3)  # the daemon reads the frame (a few ms on loopback) and starts on it
    other = Raw(addr)
    for i in range(ROUND_TRIPS):
        started = time.monotonic()
        resp = other.call(probe(), opaque=100 + i)
        took = time.monotonic() - started
        assert resp is not None and resp.code == ResponseCode.SUCCESS, resp
        if not _unanswered(hog):  # the large request is done (a fast machine): this round trip did not wait for it
            assert took < QUICK, f"round trip {i} took {took:.2f} s and was answered only after the large request"
            break
    other.close()
    answer = hog.response()
    assert answer is not None
    return answer, hog


def _lock_body(n: int, fastjson_style: bool = False) -> bytes:
    mqs = [{"brokerName": "broker-a", "queueId": i % 8, "topic": f"LockTopic{i:07d}"} for i in range(n)]
    body = orjson.dumps({"clientId": "hog@1", "consumerGroup": "HogGroup", "mqSet": mqs})
    if fastjson_style:  # fastjson's lenient reader takes bare keys: the tolerant (slow) path must read them
        body = body.replace(b'"brokerName":', b"brokerName:")
    return body


def test_others_are_served_while_a_large_lock_batch_is_processed(broker, loop):
    body = _lock_body(100_000)
    assert len(body) > 6 * 1024 * 1024
    with serving(loop):
        answer, hog = _others_served_meanwhile(broker.address, frame(json_header(RequestCode.LOCK_BATCH_MQ), body),
                                               lambda: send_cmd("Probe", b"p"))
        hog.close()
    assert answer.code == ResponseCode.SUCCESS
    assert len(orjson.loads(answer.body)["lockOKMQSet"]) == 100_000


def test_others_are_served_while_a_fastjson_style_lock_batch_is_processed(broker, loop):
    body = _lock_body(60_000, fastjson_style=True)
    with serving(loop):
        answer, hog = _others_served_meanwhile(broker.address, frame(json_header(RequestCode.LOCK_BATCH_MQ), body),
                                               lambda: send_cmd("Probe", b"p"))
        hog.close()
    assert answer.code == ResponseCode.SUCCESS
    assert len(orjson.loads(answer.body)["lockOKMQSet"]) == 60_000


def test_others_are_served_while_a_large_heartbeat_is_processed(broker, loop):
    subs = [{"topic": f"HbTopic{i:07d}", "subString": "a || b", "subVersion": 1, "expressionType": "TAG"}
            for i in range(60_000)]
    body = orjson.dumps({"clientID": "hog@1", "producerDataSet": [],
                         "consumerDataSet": [{"groupName": "HogConsumers", "consumeType": "CONSUME_PASSIVELY",
                                              "messageModel": "CLUSTERING",
                                              "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                              "subscriptionDataSet": subs, "unitMode": False}]})
    assert len(body) > 4 * 1024 * 1024
    with serving(loop):
        answer, hog = _others_served_meanwhile(broker.address, frame(json_header(RequestCode.HEART_BEAT), body),
                                               lambda: send_cmd("Probe", b"p"))
        assert answer.code == ResponseCode.SUCCESS
        info = broker.consumers.get("HogConsumers")
        assert info is not None and len(info.subscriptions) == 60_000
        assert info.filters["HbTopic0000001"].tags_set == {"a", "b"}
        hog.close()


def test_name_server_serves_others_while_a_large_registration_is_decoded(namesrv, loop):
    table = {f"RegTopic{i:07d}": TopicConfig(topic_name=f"RegTopic{i:07d}", read_queue_nums=8, write_queue_nums=8)
             for i in range(100_000)}  # the largest that fits a frame: its decoding must outlast 0.3 s
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table)).to_json()
    assert 14 * 1024 * 1024 < len(body) < 16 * 1024 * 1024 - 4096
    hdr = H.RegisterBrokerRequestHeader("broker-hog", "127.0.0.1:1", "HogCluster", "127.0.0.1:2", 0).to_ext()
    big = frame(orjson.dumps({"code": RequestCode.REGISTER_BROKER, "language": "JAVA", "version": 401,
                              "opaque": 1, "flag": 0, "extFields": hdr}), body)
    with serving(loop):  # the probe does no disk work, so only the decoding could hold it up
        answer, hog = _others_served_meanwhile(
            namesrv.address, big, lambda: RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {}))
        assert answer.code == ResponseCode.SUCCESS
        assert namesrv.table.pickup_route("RegTopic0000001") is not None
        hog.close()


ACL = """\
accounts:
  - accessKey: hogkey01
    secretKey: hogsecret01
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Allowed0000000=SUB
      - Allowed0000001=SUB
"""


def _signed_heartbeat(topics: list[str]) -> RemotingCommand:
    subs = [{"topic": t, "subString": "*", "subVersion": 1, "expressionType": "TAG"} for t in topics]
    body = orjson.dumps({"clientID": "hog@1", "producerDataSet": [],
                         "consumerDataSet": [{"groupName": "AclConsumers", "subscriptionDataSet": subs}]})
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
    sign_request(cmd, SessionCredentials("hogkey01", "hogsecret01"))
    return cmd


def test_a_large_heartbeat_under_acl_is_decoded_off_the_loop_and_still_checked(broker_factory, loop, tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    broker = broker_factory(acl_enable=True, acl_file=str(path), heavy_body_threshold=1024)
    with serving(loop):
        r = Raw(broker.address)
        denied = r.call(_signed_heartbeat(["Allowed0000000"] + [f"Denied{i:07d}" for i in range(100)]))
        assert denied.code == ResponseCode.SYSTEM_ERROR and "No default permission for topic:Denied" in denied.remark
        assert broker.consumers.get("AclConsumers") is None
        ok = r.call(_signed_heartbeat(["Allowed0000000", "Allowed0000001"] * 30))
        assert ok.code == ResponseCode.SUCCESS
        assert set(broker.consumers.get("AclConsumers").subscriptions) == {"Allowed0000000", "Allowed0000001"}
        unsigned = RemotingCommand.request(RequestCode.HEART_BEAT, {}, _signed_heartbeat(["Allowed0000000"] * 80).body)
        assert r.call(unsigned).code == ResponseCode.SYSTEM_ERROR
        r.close()
