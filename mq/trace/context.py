"""The message-trace data model of RocketMQ 4.9 (TRACE.md §1-§2).

A ``TraceContext`` is one trace event (a send, the start or end of a consume call, a transaction decision)
and carries one or more ``TraceBean`` s, one per message. The wire encoding lives in ``encoder.py``; this
module only holds the values.

Java leaves ``tags``, ``keys`` and ``regionId`` null when the message has none; those fields are
``str | None`` here and the encoder prints ``None`` as the four letters ``null`` exactly as Java's
``StringBuilder.append`` does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

#: Separator between the fields of one record (TraceConstants.CONTENT_SPLITOR, char 1).
CONTENT_SPLITOR = "\x01"
#: Terminator written after every record, including the last (TraceConstants.FIELD_SPLITOR, char 2).
FIELD_SPLITOR = "\x02"
#: Default trace topic (TopicValidator.RMQ_SYS_TRACE_TOPIC).
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: Producer group prefix of the internal trace producer (TraceConstants.GROUP_NAME_PREFIX).
TRACE_GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
#: Cloud access channel topic prefix (TraceConstants.TRACE_TOPIC_PREFIX) + regionId.
TRACE_TOPIC_PREFIX = "rmq_sys_TRACE_DATA_"
#: Region the client assumes when a send response carries no MSG_REGION.
DEFAULT_REGION = "DefaultRegion"


class TraceType(enum.Enum):
    """``TraceType``; the *name* is what is encoded (ordinals 0-3 are never written)."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """``MessageType``; the *ordinal* is encoded."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class LocalTransactionState(enum.Enum):
    """``LocalTransactionState``; the *name* is encoded (note Java's spelling ``UNKNOW``)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


class ConsumeReturnType(enum.IntEnum):
    """``ConsumeReturnType``; its ordinal is the SubAfter ``contextCode`` (TRACE.md §6.3)."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(frozen=True, slots=True)
class TraceBean:
    """Per-message trace data (``TraceBean``). ``store_time`` and ``client_host`` are not encoded by 4.9.4."""

    topic: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str = ""
    client_host: str | None = None
    store_time: int | None = None
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    transaction_state: LocalTransactionState | None = None
    transaction_id: str | None = None
    from_transaction_check: bool = False


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One trace event (``TraceContext``).

    ``timestamp`` is ``None`` only for SubAfter records decoded from clients older than 4.9 that did not
    write it (TRACE.md §8); Java leaks the decoder's construction time there, we keep "unknown".
    """

    trace_type: TraceType
    timestamp: int | None = 0
    region_id: str | None = ""
    region_name: str = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    beans: tuple[TraceBean, ...] = field(default_factory=tuple)

    @property
    def bean(self) -> TraceBean:
        """The first bean (Pub and EndTransaction carry exactly one; decoded contexts always carry one)."""
        return self.beans[0]
