"""RocketMQ 5 metadata reads: GET_TOPIC_CONFIG (351) and GET_SUBSCRIPTIONGROUP_CONFIG (352).

GET_TOPIC_CONFIG answers one topic's ``TopicConfig`` JSON (RocketMQ 5's ``TopicConfigAndQueueMapping``: the
topic config, with ``attributes`` when it has any; no static-topic mapping here) or TOPIC_NOT_EXIST
"No topic in this broker. topic: T". GET_SUBSCRIPTIONGROUP_CONFIG answers the group's
``SubscriptionGroupConfig`` JSON (with ``consumeMessageOrderly`` / ``groupRetryPolicy`` when set), creating the
group first when ``autoCreateSubscriptionGroup`` is on, as RocketMQ's ``findSubscriptionGroupConfig`` does, or
SUBSCRIPTION_GROUP_NOT_EXIST "No group in this broker".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController


class MetadataProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    def get_topic_config(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetTopicConfigRequestHeader.from_ext(cmd.ext_fields)
        tc = self.c.topic_config.get(hd.topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {hd.topic}")
        return cmd.response(ResponseCode.SUCCESS, body=tc.to_json())

    def get_subscription_group_config(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetSubscriptionGroupConfigRequestHeader.from_ext(cmd.ext_fields)
        cfg = self.c.subscription_groups.find_or_create(hd.group)
        if cfg is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return cmd.response(ResponseCode.SUCCESS, body=cfg.to_json())


def register(controller: "BrokerController") -> None:
    p = MetadataProcessor(controller)
    controller.server.register(RequestCode.GET_TOPIC_CONFIG, p.get_topic_config)
    controller.server.register(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, p.get_subscription_group_config)
