"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): RocketMQ 5's broker-side load balancing, which a
5.x remoting push consumer uses with ``clientRebalance=false`` (and which switches a group to pop).

SET_MESSAGE_REQUEST_MODE (body ``SetMessageRequestModeRequestBody``: topic, consumerGroup, mode PULL|POP,
popShareQueueNum) records the mode of a (topic, group) in ``<store>/config/messageRequestMode.json``; a retry
topic refuses (NO_PERMISSION), an unknown topic TOPIC_NOT_EXIST, an unknown group SUBSCRIPTION_GROUP_NOT_EXIST.

QUERY_ASSIGNMENT (body ``QueryAssignmentRequestBody``) answers the queues of the topic's route (asked of the name
servers; without any, this broker's queues) assigned to the client, each with the mode: BROADCASTING gets every
queue; CLUSTERING divides them among the group's clients (heartbeats to this broker) with the named strategy
(AVG, AVG_BY_CIRCLE, CONSISTENT_HASH), except in POP mode with ``popShareQueueNum`` <= 0 (or at least the
number of other clients): then every client gets one assignment per broker with queueId -1 (pop any queue).
An unknown strategy, topic or group answers ``messageQueueAssignments`` null, which the client ignores.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mq.client.rebalance import STRATEGIES
from mq.common.message import MessageQueue
from mq.common.topic import RETRY_GROUP_TOPIC_PREFIX
from mq.daemon.broker.topic_config import PERM_READ
from mq.errors import MQError
from mq.protocol import headers as h
from mq.protocol.bodies import MessageModel, TopicRouteData
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.pop_bodies import (MessageQueueAssignment, MessageRequestMode, QueryAssignmentRequestBody,
                                    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody)
from mq.store.config_files import JsonConfigFile, config_path

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)
RC = ResponseCode
MODE_FILE = "messageRequestMode.json"
ROUTE_TIMEOUT = 3.0


class MessageRequestModes:
    """(topic, group) -> SetMessageRequestModeRequestBody, persisted as RocketMQ's ``messageRequestModeMap``."""

    def __init__(self, store_root: str) -> None:
        self.file = JsonConfigFile(config_path(store_root, MODE_FILE))
        self.table: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}
        obj = self.file.load() or {}
        for topic, per in (obj.get("messageRequestModeMap") or {}).items():
            for group, body in (per or {}).items():
                try:
                    self.table.setdefault(str(topic), {})[str(group)] = SetMessageRequestModeRequestBody \
                        .from_json_value(body)
                except MQError as exc:
                    log.warning("message request mode of %s/%s is unreadable (%s); dropped", topic, group, exc)

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        return self.table.get(topic, {}).get(group)

    def put(self, body: SetMessageRequestModeRequestBody) -> None:
        self.table.setdefault(body.topic, {})[body.consumer_group] = body
        self.file.save({"messageRequestModeMap": {t: {g: b.to_json_value() for g, b in per.items()}
                                                  for t, per in self.table.items()}})


class AssignmentProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.modes = MessageRequestModes(controller.store_config.store_path_root_dir)

    def register(self, server: Any) -> None:
        server.register(RequestCode.SET_MESSAGE_REQUEST_MODE, self.set_mode)
        server.register(RequestCode.QUERY_ASSIGNMENT, self.query_assignment, group="admin")

    def set_mode(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        body = SetMessageRequestModeRequestBody.from_json(cmd.body or b"")
        if body.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return cmd.response(RC.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.c.topic_config.get(body.topic) is None:
            return cmd.response(RC.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist")
        if self.c.subscription_groups.find_or_create(body.consumer_group) is None:
            return cmd.response(RC.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        self.modes.put(body)
        log.info("message request mode of %s/%s set to %s (popShareQueueNum %d) by %s", body.topic,
                 body.consumer_group, body.mode.name, body.pop_share_queue_num, conn.remote_addr)
        return cmd.response(RC.SUCCESS)

    async def query_assignment(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        req = QueryAssignmentRequestBody.from_json(cmd.body or b"")
        mode = self.modes.get(req.topic, req.consumer_group)
        if mode is None:
            mode = SetMessageRequestModeRequestBody(req.topic, req.consumer_group)
        queues = await self._assign(req, mode)
        assignments = None if queues is None else [MessageQueueAssignment(q, mode.mode) for q in queues]
        return cmd.response(RC.SUCCESS, body=QueryAssignmentResponseBody(assignments).to_json())

    async def _assign(self, req: QueryAssignmentRequestBody, mode: SetMessageRequestModeRequestBody
                      ) -> list[MessageQueue] | None:
        mq_all = await self._route_queues(req.topic)
        if mq_all is None:
            return None
        if req.message_model == MessageModel.BROADCASTING:
            return mq_all
        info = self.c.consumers.get(req.consumer_group)
        cid_all = sorted(info.client_ids()) if info is not None else []
        strategy = STRATEGIES.get(req.strategy_name or "AVG")
        if not cid_all or strategy is None or not mq_all:
            log.warning("query assignment of %s/%s: no clients, no queues or an unsupported strategy %r",
                        req.topic, req.consumer_group, req.strategy_name)
            return None
        if mode.mode == MessageRequestMode.POP:
            share = mode.pop_share_queue_num
            if share <= 0 or share >= len(cid_all) - 1:
                return sorted({MessageQueue(q.topic, q.broker_name, -1) for q in mq_all})
            if len(cid_all) <= len(mq_all):
                out = list(strategy(req.consumer_group, req.client_id, mq_all, cid_all))
                if req.client_id in cid_all:
                    idx = cid_all.index(req.client_id)
                    for i in range(1, share + 1):
                        out += strategy(req.consumer_group, cid_all[(idx + i) % len(cid_all)], mq_all, cid_all)
                return out
            if req.client_id not in cid_all:
                return []
            return [mq_all[cid_all.index(req.client_id) % len(mq_all)]]
        return list(strategy(req.consumer_group, req.client_id, mq_all, cid_all))

    async def _route_queues(self, topic: str) -> list[MessageQueue] | None:
        """The topic's readable queues over every broker of its route (this broker's alone without name servers)."""
        c = self.c
        for addr in c.registrar.namesrv_addrs:
            cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          h.GetRouteInfoRequestHeader(topic).to_ext())
            try:
                resp = await c.registrar.client.invoke(addr, cmd, timeout=ROUTE_TIMEOUT)
            except MQError as exc:
                log.debug("route of %s from %s failed: %s", topic, addr, exc)
                continue
            if resp.code != RC.SUCCESS or not resp.body:
                return None
            route = TopicRouteData.from_json(resp.body)
            return sorted(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas if qd.perm & PERM_READ
                          for i in range(qd.read_queue_nums))
        tc = c.topic_config.get(topic)
        if tc is None or not tc.perm & PERM_READ:
            return None
        return [MessageQueue(topic, c.broker_name, i) for i in range(tc.read_queue_nums)]
