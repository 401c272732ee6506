"""RocketMQ 5 metadata and the admin CLI around pop: topic message types (``updateTopic -a``), FIFO groups and
retry policies (``updateSubGroup -o -p``), GET_TOPIC_CONFIG / GET_SUBSCRIPTIONGROUP_CONFIG, ``mq consume --pop``,
and pop clients in consumerConnection / consumerProgress."""

from __future__ import annotations

import json

import orjson

from mq.client.pop import PopConsumer
from mq.protocol import headers as H
from mq.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from mq.protocol.codes import RequestCode, ResponseCode as RC

from ..broker.wire import req, send_cmd


def ok(res):
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def test_topic_message_type_attribute(cluster, mq, client, run):
    b = cluster.broker
    addr = b.address
    ok(mq("updateTopic", "-t", "Fifo5", "-b", addr, "-r", "2", "-w", "2", "-a", "+message.type=FIFO"))
    assert b.topic_config.get("Fifo5").attributes == {"message.type": "FIFO"}
    on_disk = json.loads(b.topic_config.file.path.read_text())["topicConfigTable"]["Fifo5"]
    assert on_disk["attributes"] == {"message.type": "FIFO"}
    r = run(client.invoke(addr, req(RequestCode.GET_TOPIC_CONFIG, H.GetTopicConfigRequestHeader("Fifo5"))))
    assert r.code == RC.SUCCESS
    body = orjson.loads(r.body)
    assert body["attributes"] == {"message.type": "FIFO"} and body["readQueueNums"] == 2
    assert b.pop_service.topic_info("Fifo5").message_type == "FIFO"
    ok(mq("updateTopic", "-t", "Fifo5", "-b", addr, "-a", "+message.type=MIXED"))
    assert b.topic_config.get("Fifo5").attributes == {"message.type": "MIXED"}
    ok(mq("updateTopic", "-t", "Fifo5", "-b", addr))  # no -a: the attributes stay
    assert b.topic_config.get("Fifo5").attributes == {"message.type": "MIXED"}
    ok(mq("updateTopic", "-t", "Fifo5", "-b", addr, "-a", "-message.type"))
    assert not b.topic_config.get("Fifo5").attributes
    assert b.pop_service.topic_info("Fifo5").message_type is None
    for bad, needle in ((("-a", "+message.type=ODD"), "value is not in set"),
                        (("-a", "+queue.type=BatchCQ"), "unchangeable"),
                        (("-a", "+no.such=1"), "unsupported key")):
        res = mq("updateTopic", "-t", "Fifo5", "-b", addr, *bad)
        assert res.exit_code != 0 and needle in str(res.exception), (bad, res.output, res.exception)
    res = mq("updateTopic", "-t", "Fifo6", "-b", addr, "-a", "message.type")
    assert res.exit_code != 0 and "format is wrong" in res.output
    r = run(client.invoke(addr, req(RequestCode.GET_TOPIC_CONFIG, H.GetTopicConfigRequestHeader("NoSuch"))))
    assert r.code == RC.TOPIC_NOT_EXIST


def test_fifo_group_and_retry_policy(cluster, mq, client, run):
    b = cluster.broker
    policy = '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3}}'
    ok(mq("updateSubGroup", "-g", "G5", "-b", b.address, "-r", "4", "-o", "true", "-p", policy))
    cfg = b.subscription_groups.get("G5")
    assert cfg.orderly and cfg.group_retry_policy.type == "EXPONENTIAL"
    r = run(client.invoke(b.address, req(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                                         H.GetSubscriptionGroupConfigRequestHeader("G5"))))
    body = orjson.loads(r.body)
    assert body["consumeMessageOrderly"] is True and body["retryMaxTimes"] == 4
    assert body["groupRetryPolicy"] == {"type": "EXPONENTIAL", "exponentialRetryPolicy": {
        "initial": 1000, "max": 60000, "multiplier": 3}}
    gs = b.pop_service.group_settings("G5")
    assert (gs.fifo, gs.max_attempts, gs.retry_policy_type, gs.exponential_multiplier) == (True, 5, "EXPONENTIAL", 3)
    plain = b.pop_service.group_settings("PlainG")  # auto-created, RocketMQ's defaults
    assert (plain.fifo, plain.max_attempts, plain.retry_policy_type) == (False, 17, "CUSTOMIZED")
    assert plain.customized_next_ms[:3] == (1000, 5000, 10000)
    res = mq("updateSubGroup", "-g", "G6", "-b", b.address, "-p", '{"type":"SOMETIMES"}')
    assert res.exit_code != 0 and "type must be one of" in res.output
    # a 4.x group keeps the 4.9 JSON (no 5.x keys written)
    assert b"consumeMessageOrderly" not in SubscriptionGroupConfig("Old").to_json()


def test_consume_pop_from_the_command_line(cluster, mq, client, run):
    b = cluster.broker
    b.topic_config.put(TopicConfig("PopCli", 1, 1))
    run(b.register_all(force=True))
    for i in range(3):
        assert run(client.invoke(b.address, send_cmd("PopCli", b"m%d" % i, tags="T"))).code == RC.SUCCESS
    res = ok(mq("consume", "-t", "PopCli", "-g", "CliPop", "--pop", "--count", "3", "--timeout", "20", "--json"))
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["body"] for r in rows) == ["m0", "m1", "m2"] and {r["deliveryAttempt"] for r in rows} == {1}
    assert run(client.invoke(b.address, send_cmd("PopCli", b"again", tags="T"))).code == RC.SUCCESS
    ok(mq("consume", "-t", "PopCli", "-g", "CliPop", "--pop", "--no-ack", "--invisible-time", "500", "--count", "1",
          "--timeout", "20"))
    res = ok(mq("consume", "-t", "PopCli", "-g", "CliPop", "--pop", "--count", "1", "--timeout", "20", "--json"))
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [(r["body"], r["deliveryAttempt"], r["topic"]) for r in rows] == [("again", 2, "PopCli")]
    res = mq("consume", "-t", "PopCli", "-g", "CliPop", "--no-ack")
    assert res.exit_code != 0 and "--no-ack needs --pop" in res.output


def test_pop_clients_in_consumer_connection_and_progress(cluster, mq, client, run, client_config):
    b = cluster.broker
    b.topic_config.put(TopicConfig("PopConn", 2, 2))
    run(b.register_all(force=True))
    for i in range(4):
        assert run(client.invoke(b.address, send_cmd("PopConn", b"x%d" % i, queue_id=i % 2))).code == RC.SUCCESS

    async def pop_some():
        c = PopConsumer("ConnG", "PopConn", client_config())
        await c.start()
        res = await c.receive(3, 60_000)
        return c, res

    consumer, res = run(pop_some())
    try:
        assert len(res.messages) == 3
        cc = json.loads(ok(mq("consumerConnection", "-g", "ConnG", "--json")).stdout)
        assert cc["consumeType"] == "CONSUME_POP" and len(cc["connectionSet"]) == 1
        text = ok(mq("consumerConnection", "-g", "ConnG")).stdout
        assert "CONSUME_POP" in text
        prog = json.loads(ok(mq("consumerProgress", "-g", "ConnG", "--json")).stdout)
        assert prog["totals"]["inflight"] == 3
        text = ok(mq("consumerProgress", "-g", "ConnG")).stdout
        assert "Inflight" in text
        status = ok(mq("consumerStatus", "-g", "ConnG", "--json"))
        assert "CONSUME_POP" in status.stdout
        run(consumer.ack_all(res.messages))
        prog = json.loads(ok(mq("consumerProgress", "-g", "ConnG", "--json")).stdout)
        assert prog["totals"]["inflight"] == 0
    finally:
        run(consumer.shutdown())


def test_query_assignment_and_message_request_mode(cluster, client, run, mq):
    from mq.common.message import MessageQueue
    from mq.protocol.bodies import MessageModel
    from mq.protocol.command import RemotingCommand
    from mq.protocol.pop_bodies import (MessageRequestMode, QueryAssignmentRequestBody, QueryAssignmentResponseBody,
                                        SetMessageRequestModeRequestBody)

    from ..broker.wire import heartbeat_cmd

    b = cluster.broker
    b.topic_config.put(TopicConfig("AssignT", 4, 4))
    run(b.register_all(force=True))
    from mq.remoting import RemotingClient

    other = RemotingClient(name="second-client")  # a consumer per connection
    for c, cid in ((client, "10.0.0.1@a"), (other, "10.0.0.2@b")):
        assert run(c.invoke(b.address, heartbeat_cmd(cid, consumer_group="AssignG", topic="AssignT"))).code == 0

    def query(cid: str, model=MessageModel.CLUSTERING, strategy="AVG"):
        body = QueryAssignmentRequestBody("AssignT", "AssignG", cid, strategy, model).to_json()
        r = run(client.invoke(b.address, RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, {}, body)))
        assert r.code == RC.SUCCESS, r.remark
        return QueryAssignmentResponseBody.from_json(r.body).message_queue_assignments

    a = query("10.0.0.1@a")
    assert sorted(x.message_queue.queue_id for x in a) == [0, 1] and {x.mode for x in a} == {MessageRequestMode.PULL}
    assert len(query("10.0.0.1@a", MessageModel.BROADCASTING)) == 4
    assert query("10.0.0.1@a", strategy="NO_SUCH") is None
    ok(mq("setConsumeMode", "-g", "AssignG", "-t", "AssignT", "-m", "POP", "-c", "DefaultCluster"))
    a = query("10.0.0.2@b")
    assert [(x.message_queue, x.mode) for x in a] == [(MessageQueue("AssignT", b.broker_name, -1),
                                                       MessageRequestMode.POP)]
    bad = SetMessageRequestModeRequestBody("%RETRY%AssignG", "AssignG", MessageRequestMode.POP).to_json()
    r = run(client.invoke(b.address, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, bad)))
    assert r.code == RC.NO_PERMISSION
    assert b.assignment_processor.modes.file.path.exists()
    run(other.close())
