"""Requests a broker sends to a client (RocketMQ ``ClientRemotingProcessor``), answered for one
``MQClientInstance``:

- NOTIFY_CONSUMER_IDS_CHANGED (40): rebalance soon;
- CHECK_TRANSACTION_STATE (39): handed to the producer's ``check_transaction_state`` when it has one;
- GET_CONSUMER_RUNNING_INFO (307), GET_CONSUMER_STATUS_FROM_CLIENT (221: GetConsumerStatusBody
  ``messageQueueTable`` = the group's in-memory offsets of the topic, every topic when it is empty; an unknown
  group gets an empty table, as in Java);
- CONSUME_MESSAGE_DIRECTLY (309): the group's consumer consumes the message now; a message that cannot be
  decoded is answered SYSTEM_ERROR saying why, and logged;
- RESET_CONSUMER_CLIENT_OFFSET (220): the push consumer of the header's group resets the header's topic to the
  body's offsets (``PushConsumer.reset_offsets``); the body is a ResetOffsetBody
  ``{"offsetTable":{{MessageQueue}:offset}}`` or the C++ list form ``{"offsetTable":[{"brokerName":..,
  "offset":..,"queueId":..,"topic":..}]}``; oneway, as Java nothing is answered;
- PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply to a ``Producer.request``, matched by CORRELATION_ID in the
  instance's ``request_futures``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mq.client.request_reply import reply_from_push
from mq.common.fastjson import ObjectKey, dumps, loads
from mq.common.message import MessageQueue
from mq.common.record import decode_record
from mq.errors import BrokerError, MQError, RemoteProtocolError
from mq.protocol import headers as h
from mq.protocol.bodies import GetConsumerStatusBody, ResetOffsetBody
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import Connection, RemotingClient

if TYPE_CHECKING:
    from mq.client.instance import MQClientInstance

log = logging.getLogger(__name__)


def reset_offset_table(body: bytes | None) -> dict[MessageQueue, int]:
    """The offsets of a RESET_CONSUMER_CLIENT_OFFSET body, Java map form or C++ list form (RemoteProtocolError
    when it is neither); no body: an empty table."""
    if not body:
        return {}
    obj = loads(body)
    items = obj.get("offsetTable") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return dict(ResetOffsetBody.from_json_value(obj).offset_table)
    table = {}
    for item in items:
        try:
            table[MessageQueue(str(item["topic"]), str(item["brokerName"]), int(item["queueId"]))] = int(item["offset"])
        except (KeyError, TypeError, ValueError):
            raise RemoteProtocolError(f"reset offset item {str(item)[:80]!r}: needs topic, brokerName, queueId "
                                      "and offset") from None
    return table


class ClientRemotingProcessor:
    """The handlers of broker-initiated requests for one client instance."""

    def __init__(self, instance: "MQClientInstance") -> None:
        self.c = instance

    def register(self, remoting: RemotingClient) -> None:
        remoting.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self.on_ids_changed)
        remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self.on_check_transaction)
        remoting.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.on_running_info)
        remoting.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.on_consume_directly)
        remoting.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.on_reset_offset)
        remoting.register(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self.on_consumer_status)
        remoting.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self.on_push_reply)

    def on_ids_changed(self, conn: Connection, cmd: RemotingCommand) -> None:
        group = cmd.ext_fields.get("consumerGroup")
        log.info("%s: consumer ids of %s changed (from %s), rebalancing", self.c.client_id, group, conn)
        self.c.rebalance_soon()
        return None

    async def on_check_transaction(self, conn: Connection, cmd: RemotingCommand) -> None:
        hdr = h.CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
        try:
            msg = decode_record(cmd.body or b"") if cmd.body else None
        except RemoteProtocolError as exc:
            log.warning("%s: CHECK_TRANSACTION_STATE from %s with a message that cannot be decoded: %s",
                        self.c.client_id, conn, exc)
            return None
        group = msg.properties.get("PGROUP") if msg else None
        producer = self.c.producers.get(group or "")
        checker = getattr(producer, "check_transaction_state", None)
        if checker is None:
            log.warning("%s: CHECK_TRANSACTION_STATE for group %s with no transaction producer", self.c.client_id,
                        group)
            return None
        await checker(conn, hdr, msg)
        return None

    def on_running_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetConsumerRunningInfoRequestHeader.from_ext(cmd.ext_fields)
        consumer = self.c.consumers.get(hdr.consumer_group)
        if consumer is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer Group <{hdr.consumer_group}> not exist in this consumer")
        info = consumer.running_info()
        info.setdefault("properties", {})["PROP_CLIENT_VERSION"] = "V4_9_4"
        mq_table = {ObjectKey.from_dict({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}): v
                    for mq, v in info.pop("mqTable", {}).items()}
        info["mqTable"] = mq_table
        return cmd.response(ResponseCode.SUCCESS, body=dumps(info))

    async def on_consume_directly(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.ConsumeMessageDirectlyResultRequestHeader.from_ext(cmd.ext_fields)
        consumer = self.c.consumers.get(hdr.consumer_group)
        if consumer is None or not cmd.body:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer Group <{hdr.consumer_group}> not exist in this consumer")
        try:
            msg = decode_record(cmd.body, decompress=True, max_inflated=self.c.config.max_inflated_body_size)
        except RemoteProtocolError as exc:  # a body that does not inflate, a broken record: said, not consumed
            log.warning("%s: CONSUME_MESSAGE_DIRECTLY from %s for %s: the message cannot be decoded: %s",
                        self.c.client_id, conn, hdr.consumer_group, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the message cannot be decoded: {exc}")
        try:
            result = await consumer.consume_directly(msg, hdr.broker_name)
        except BrokerError as exc:
            return cmd.response(exc.code, exc.remark)
        return cmd.response(ResponseCode.SUCCESS, body=dumps(result))

    async def on_reset_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            hdr = h.ResetOffsetRequestHeader.from_ext(cmd.ext_fields)
            table = reset_offset_table(cmd.body)
        except MQError as exc:
            log.warning("%s: unreadable RESET_CONSUMER_CLIENT_OFFSET from %s: %s", self.c.client_id, conn, exc)
            return None if cmd.is_oneway else cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("%s: offset reset of %s on %s to %s from %s (%d queue(s))", self.c.client_id, hdr.group, hdr.topic,
                 hdr.timestamp, conn, len(table))
        consumer = self.c.consumers.get(hdr.group)
        reset = getattr(consumer, "reset_offsets", None)
        if reset is None:
            log.info("%s: [reset-offset] no push consumer of group %s here", self.c.client_id, hdr.group)
        else:
            try:
                await reset(hdr.topic, table)
            except MQError as exc:
                log.warning("%s: offset reset of %s on %s failed: %s", self.c.client_id, hdr.group, hdr.topic, exc)
        return None if cmd.is_oneway else cmd.response(ResponseCode.SUCCESS)

    def on_consumer_status(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetConsumerStatusRequestHeader.from_ext(cmd.ext_fields)
        consumer = self.c.consumers.get(hdr.group)
        table = consumer.offset_table(hdr.topic or "") if hasattr(consumer, "offset_table") else {}
        body = GetConsumerStatusBody(message_queue_table=dict(sorted(table.items())))
        return cmd.response(ResponseCode.SUCCESS, body=body.to_json())

    # -- request-reply ----------------------------------------------------------------------------------
    def on_push_reply(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326): SUCCESS once decoded (matched or not), as Java answers."""
        try:
            hdr = h.ReplyMessageRequestHeader.from_ext(cmd.ext_fields)
            reply = reply_from_push(hdr, bytes(cmd.body) if cmd.body else b"")
        except (MQError, ValueError) as exc:
            log.warning("%s: unknown err when receiveReplyMsg from %s: %s", self.c.client_id, conn, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        self.c.request_futures.complete(reply)
        return cmd.response(ResponseCode.SUCCESS)
