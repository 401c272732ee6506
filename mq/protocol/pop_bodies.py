"""JSON bodies of RocketMQ 5's pop requests: BATCH_ACK_MESSAGE (200151), QUERY_ASSIGNMENT (400) and
SET_MESSAGE_REQUEST_MODE (401). Same conventions as ``mq.protocol.bodies``.

A ``BatchAck`` names one checkpoint (retry flag, queue, start offset, pop time) and the messages of it that are
acked as a Java ``BitSet`` of ``offset - startOffset``, serialised as fastjson serialises a ``byte[]``: the
Base64 of ``BitSet.toByteArray()`` (little-endian bytes, bit i of byte k is index 8k + i).
"""

from __future__ import annotations

import base64
import binascii
import enum
from dataclasses import dataclass, field
from typing import ClassVar

from mq.common.message import MessageQueue
from mq.errors import RemoteProtocolError
from mq.protocol.bodies import JsonBody, MessageModel

#: Largest index a batch ack may set (a checkpoint holds at most 32 messages; 8 KiB of bits is plenty).
MAX_BITSET_BYTES = 8192


class MessageRequestMode(enum.IntEnum):
    PULL = 0
    POP = 1


def encode_bitset(indexes: list[int] | set[int]) -> str:
    """Java ``BitSet.toByteArray`` of ``indexes``, Base64-encoded."""
    if not indexes:
        return ""
    top = max(indexes)
    raw = bytearray(top // 8 + 1)
    for i in indexes:
        if i < 0:
            raise ValueError(f"a bit index cannot be negative: {i}")
        raw[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(raw)).decode("ascii")


def decode_bitset(text: str | None) -> list[int]:
    """The set bit indexes of a Base64 ``BitSet.toByteArray``; RemoteProtocolError when it is not one."""
    if not text:
        return []
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise RemoteProtocolError(f"the batch ack bit set {text[:40]!r} is not Base64") from None
    if len(raw) > MAX_BITSET_BYTES:
        raise RemoteProtocolError(f"the batch ack bit set has {len(raw)} bytes; at most {MAX_BITSET_BYTES}")
    return [k * 8 + i for k, byte in enumerate(raw) if byte for i in range(8) if byte >> i & 1]


@dataclass(slots=True)
class BatchAck(JsonBody):
    consumer_group: str = ""
    topic: str = ""
    retry: str = "0"
    start_offset: int = 0
    queue_id: int = 0
    revive_queue_id: int = 0
    pop_time: int = 0
    invisible_time: int = 0
    bit_set: str = ""
    WIRE_NAMES: ClassVar[dict[str, str]] = {
        "consumer_group": "c", "topic": "t", "retry": "r", "start_offset": "so", "queue_id": "q",
        "revive_queue_id": "rq", "pop_time": "pt", "invisible_time": "it", "bit_set": "b"}
    WIRE_ALIASES: ClassVar[dict[str, str]] = {
        "consumerGroup": "consumer_group", "topic": "topic", "retry": "retry", "startOffset": "start_offset",
        "queueId": "queue_id", "reviveQueueId": "revive_queue_id", "popTime": "pop_time",
        "invisibleTime": "invisible_time", "bitSet": "bit_set"}

    def offsets(self) -> list[int]:
        """The acked queue offsets."""
        return [self.start_offset + i for i in decode_bitset(self.bit_set)]


@dataclass(slots=True)
class BatchAckMessageRequestBody(JsonBody):
    broker_name: str | None = None
    acks: list[BatchAck] = field(default_factory=list)


@dataclass(slots=True)
class QueryAssignmentRequestBody(JsonBody):
    topic: str = ""
    consumer_group: str = ""
    client_id: str = ""
    strategy_name: str | None = None
    message_model: MessageModel | None = None


@dataclass(slots=True)
class MessageQueueAssignment(JsonBody):
    message_queue: MessageQueue | None = None
    mode: MessageRequestMode = MessageRequestMode.PULL
    attachments: dict[str, str] | None = None


@dataclass(slots=True)
class QueryAssignmentResponseBody(JsonBody):
    #: None (not written): no valid answer, the client keeps what it has; [] : nothing assigned
    message_queue_assignments: list[MessageQueueAssignment] | None = None


@dataclass(slots=True)
class SetMessageRequestModeRequestBody(JsonBody):
    topic: str = ""
    consumer_group: str = ""
    mode: MessageRequestMode = MessageRequestMode.PULL
    pop_share_queue_num: int = 0
