"""What an ACL check needs (RocketMQ ``PlainAccessResource.parse``): the permission model and, per request, the
resources it touches. ``%RETRY%<group>`` stands for the group::

    SEND_MESSAGE (10) / V2 (310)  topic: PUB; a %RETRY% topic: its group: SUB
    CONSUMER_SEND_MSG_BACK (36)   group: SUB
    PULL_MESSAGE (11)             topic: SUB, consumerGroup: SUB
    QUERY_MESSAGE (12)            topic: SUB
    HEART_BEAT (34)               each consumer group: SUB, each subscribed topic: SUB
    UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38)   consumerGroup: SUB
    UPDATE_CONSUMER_OFFSET (15)   consumerGroup: SUB, topic: SUB
    POP_MESSAGE, PEEK_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, BATCH_ACK_MESSAGE (RocketMQ 5)
                                  consumerGroup: SUB, topic: SUB (not for a pop retry topic)
    anything else                 a valid signature only
"""

from __future__ import annotations

import enum

from mq.protocol.bodies import HeartbeatData
from mq.protocol.codes import RequestCode as R
from mq.protocol.command import RemotingCommand
from mq.protocol.pop_bodies import BatchAckMessageRequestBody

RETRY_PREFIX = "%RETRY%"


class Perm(enum.IntFlag):
    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


def parse_perm(text: object) -> Perm:
    """``PUB``, ``SUB``, ``PUB|SUB`` / ``SUB|PUB`` or ``DENY``; anything else is DENY, as in RocketMQ."""
    value = str(text).strip() if text is not None else ""
    return {"PUB": Perm.PUB, "SUB": Perm.SUB, "PUB|SUB": Perm.PUB | Perm.SUB,
            "SUB|PUB": Perm.PUB | Perm.SUB}.get(value, Perm.DENY)


def check_permission(needed: Perm, owned: Perm) -> bool:
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


def required_resources(cmd: RemotingCommand) -> dict[str, Perm]:
    """Resource -> permission the request needs (PlainAccessValidator.parse); ValueError if its body is bad."""
    f = cmd.ext_fields
    code = cmd.code
    need: dict[str, Perm] = {}
    if code == R.SEND_MESSAGE or code == R.SEND_MESSAGE_V2:
        topic, group = (f.get("topic"), f.get("group")) if code == R.SEND_MESSAGE else (f.get("b"), f.get("a"))
        if topic and topic.startswith(RETRY_PREFIX):
            need[RETRY_PREFIX + str(group)] = Perm.SUB
        else:
            need[str(topic)] = Perm.PUB
    elif code == R.CONSUMER_SEND_MSG_BACK:
        need[RETRY_PREFIX + str(f.get("group"))] = Perm.SUB
    elif code == R.PULL_MESSAGE:
        need[str(f.get("topic"))] = Perm.SUB
        need[RETRY_PREFIX + str(f.get("consumerGroup"))] = Perm.SUB
    elif code == R.QUERY_MESSAGE:
        need[str(f.get("topic"))] = Perm.SUB
    elif code == R.HEART_BEAT:
        need.update(heartbeat_resources(HeartbeatData.from_json(cmd.body or b"{}")))
    elif code in (R.UNREGISTER_CLIENT, R.GET_CONSUMER_LIST_BY_GROUP):
        need[RETRY_PREFIX + str(f.get("consumerGroup"))] = Perm.SUB
    elif code == R.UPDATE_CONSUMER_OFFSET:
        need[RETRY_PREFIX + str(f.get("consumerGroup"))] = Perm.SUB
        need[str(f.get("topic"))] = Perm.SUB
    elif code in (R.POP_MESSAGE, R.PEEK_MESSAGE, R.ACK_MESSAGE, R.CHANGE_MESSAGE_INVISIBLETIME):
        _pop_resources(need, str(f.get("consumerGroup")), str(f.get("topic")))
    elif code == R.BATCH_ACK_MESSAGE:
        for ack in BatchAckMessageRequestBody.from_json(cmd.body or b"{}").acks:
            _pop_resources(need, ack.consumer_group, ack.topic)
    return need


def heartbeat_resources(heartbeat: HeartbeatData) -> dict[str, Perm]:
    """What a heartbeat needs: SUB on each consumer group (its retry topic) and each subscribed topic."""
    need: dict[str, Perm] = {}
    for consumer in heartbeat.consumer_data_set:
        need[RETRY_PREFIX + consumer.group_name] = Perm.SUB
        for sub in consumer.subscription_data_set:
            need[sub.topic] = Perm.SUB
    return need


def _pop_resources(need: dict[str, Perm], group: str, topic: str) -> None:
    """RocketMQ 5: pop, peek, ack and change-invisible-time need SUB on the group and on the topic (an ack of a
    retried message names the group's pop retry topic, which the group's permission covers)."""
    need[RETRY_PREFIX + group] = Perm.SUB
    if not topic.startswith(RETRY_PREFIX):
        need[topic] = Perm.SUB


def describe(resource: str) -> str:
    if resource.startswith(RETRY_PREFIX):
        return f"group:{resource[len(RETRY_PREFIX):]}"
    return f"topic:{resource}"
