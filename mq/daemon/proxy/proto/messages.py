"""The RocketMQ v2 gRPC messages, built from ``descriptors.py`` in a private descriptor pool.

A private pool, not the default one: the official 5.x Python client ships generated modules for the same
``apache.rocketmq.v2`` symbols under other file names, and two such modules in the default pool fail with
"duplicate symbol". Here the two never meet, so a process may hold both.

Message classes are attributes of this module by their proto name (``messages.SendMessageRequest``); enum
values are plain ints on ``Code``, ``MessageType``, ... (``Code.OK == 20000``).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pool, message_factory

from mq.daemon.proxy.proto.descriptors import FILES

PACKAGE = "apache.rocketmq.v2"
SERVICE = f"{PACKAGE}.MessagingService"

POOL = descriptor_pool.DescriptorPool()
for _serialized in FILES:
    POOL.AddSerializedFile(_serialized)


def message_class(name: str) -> Any:
    """The class of message ``name`` (without the package) of the v2 API, or of ``google.protobuf.*``."""
    full = name if "." in name else f"{PACKAGE}.{name}"
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(full))


class _Enum:
    """The values of one proto enum as int attributes, and ``name(value)``."""

    def __init__(self, name: str) -> None:
        desc = POOL.FindEnumTypeByName(f"{PACKAGE}.{name}")
        self._names = {v.number: v.name for v in desc.values}
        for v in desc.values:
            setattr(self, v.name, v.number)

    def name(self, value: int) -> str:
        return self._names.get(value, str(value))

    def __contains__(self, value: int) -> bool:
        return value in self._names


Code = _Enum("Code")
MessageType = _Enum("MessageType")
ClientType = _Enum("ClientType")
Permission = _Enum("Permission")
FilterType = _Enum("FilterType")
DigestType = _Enum("DigestType")
Encoding = _Enum("Encoding")
AddressScheme = _Enum("AddressScheme")
TransactionResolution = _Enum("TransactionResolution")
TransactionSource = _Enum("TransactionSource")
Language = _Enum("Language")

Timestamp = message_class("google.protobuf.Timestamp")
Duration = message_class("google.protobuf.Duration")
Status = message_class("Status")
Resource = message_class("Resource")
Endpoints = message_class("Endpoints")
Address = message_class("Address")
Broker = message_class("Broker")
MessageQueue = message_class("MessageQueue")
Message = message_class("Message")
SystemProperties = message_class("SystemProperties")
Digest = message_class("Digest")
Assignment = message_class("Assignment")
Settings = message_class("Settings")
RetryPolicy = message_class("RetryPolicy")
FilterExpression = message_class("FilterExpression")

QueryRouteRequest = message_class("QueryRouteRequest")
QueryRouteResponse = message_class("QueryRouteResponse")
HeartbeatRequest = message_class("HeartbeatRequest")
HeartbeatResponse = message_class("HeartbeatResponse")
SendMessageRequest = message_class("SendMessageRequest")
SendMessageResponse = message_class("SendMessageResponse")
SendResultEntry = message_class("SendResultEntry")
QueryAssignmentRequest = message_class("QueryAssignmentRequest")
QueryAssignmentResponse = message_class("QueryAssignmentResponse")
ReceiveMessageRequest = message_class("ReceiveMessageRequest")
ReceiveMessageResponse = message_class("ReceiveMessageResponse")
AckMessageRequest = message_class("AckMessageRequest")
AckMessageResponse = message_class("AckMessageResponse")
AckMessageResultEntry = message_class("AckMessageResultEntry")
ForwardMessageToDeadLetterQueueRequest = message_class("ForwardMessageToDeadLetterQueueRequest")
ForwardMessageToDeadLetterQueueResponse = message_class("ForwardMessageToDeadLetterQueueResponse")
EndTransactionRequest = message_class("EndTransactionRequest")
EndTransactionResponse = message_class("EndTransactionResponse")
TelemetryCommand = message_class("TelemetryCommand")
RecoverOrphanedTransactionCommand = message_class("RecoverOrphanedTransactionCommand")
NotifyClientTerminationRequest = message_class("NotifyClientTerminationRequest")
NotifyClientTerminationResponse = message_class("NotifyClientTerminationResponse")
ChangeInvisibleDurationRequest = message_class("ChangeInvisibleDurationRequest")
ChangeInvisibleDurationResponse = message_class("ChangeInvisibleDurationResponse")
RecallMessageRequest = message_class("RecallMessageRequest")
RecallMessageResponse = message_class("RecallMessageResponse")
PullMessageRequest = message_class("PullMessageRequest")
PullMessageResponse = message_class("PullMessageResponse")
UpdateOffsetRequest = message_class("UpdateOffsetRequest")
UpdateOffsetResponse = message_class("UpdateOffsetResponse")
GetOffsetRequest = message_class("GetOffsetRequest")
GetOffsetResponse = message_class("GetOffsetResponse")
QueryOffsetRequest = message_class("QueryOffsetRequest")
QueryOffsetResponse = message_class("QueryOffsetResponse")
SyncLiteSubscriptionRequest = message_class("SyncLiteSubscriptionRequest")
SyncLiteSubscriptionResponse = message_class("SyncLiteSubscriptionResponse")
