"""The typed in-process contract of pop consumption: what ``PopService`` takes and gives back.

The remoting processors (POP_MESSAGE, ACK_MESSAGE, ...) and the gRPC endpoint both call the service with these
dataclasses; neither builds RemotingCommands for the other. Statuses are enums, so each front end maps them to
its own codes (remoting ``ResponseCode``; gRPC ``apache.rocketmq.v2.Code``):

==============================  ================================  ==================================
status                          remoting                          gRPC (as Apache's proxy maps it)
==============================  ================================  ==================================
PopStatus.FOUND                 SUCCESS                           OK
PopStatus.NO_NEW_MSG            POLLING_TIMEOUT (210)             MESSAGE_NOT_FOUND
PopStatus.POLLING_FULL          POLLING_FULL (209)                TOO_MANY_REQUESTS
PopStatus.TOPIC_NOT_EXIST       TOPIC_NOT_EXIST                   TOPIC_NOT_FOUND
PopStatus.GROUP_NOT_EXIST       SUBSCRIPTION_GROUP_NOT_EXIST      CONSUMER_GROUP_NOT_FOUND
PopStatus.NO_PERMISSION         NO_PERMISSION                     FORBIDDEN
PopStatus.INVALID_PARAMETER     INVALID_PARAMETER                 BAD_REQUEST / ILLEGAL_INVISIBLE_TIME
PopStatus.FILTER_ERROR          SUBSCRIPTION_PARSE_FAILED         ILLEGAL_FILTER_EXPRESSION
PopStatus.UNAVAILABLE           SERVICE_NOT_AVAILABLE             INTERNAL_SERVER_ERROR
AckStatus.OK                    SUCCESS                           OK
AckStatus.EXPIRED / INVALID     NO_MESSAGE                        INVALID_RECEIPT_HANDLE
AckStatus.TOPIC_NOT_EXIST       TOPIC_NOT_EXIST                   TOPIC_NOT_FOUND
AckStatus.UNAVAILABLE           SYSTEM_ERROR                      INTERNAL_SERVER_ERROR
==============================  ================================  ==================================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from mq.common import properties as P
from mq.common.message import MessageExt
from mq.common.record import decode_record


class InitMode(enum.IntEnum):
    """Where a group with no offset starts (RocketMQ ``ConsumeInitMode``)."""

    MIN = 0
    MAX = 1


class PopStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    TOPIC_NOT_EXIST = "TOPIC_NOT_EXIST"
    GROUP_NOT_EXIST = "GROUP_NOT_EXIST"
    NO_PERMISSION = "NO_PERMISSION"
    INVALID_PARAMETER = "INVALID_PARAMETER"
    FILTER_ERROR = "FILTER_ERROR"
    UNAVAILABLE = "UNAVAILABLE"


class AckStatus(enum.Enum):
    OK = "OK"
    #: the handle's invisible time has passed: the message is back (or on its way back) for another attempt
    EXPIRED = "EXPIRED"
    #: the handle is malformed, names another broker, or does not match the topic, queue or offset
    INVALID = "INVALID"
    TOPIC_NOT_EXIST = "TOPIC_NOT_EXIST"
    #: the record could not be stored (disk full, a slave, ...); nothing changed
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(slots=True)
class PopRequest:
    group: str
    topic: str
    #: -1: any readable queue of this broker
    queue_id: int = -1
    max_messages: int = 32
    invisible_time_ms: int = 60_000
    #: long polling: wait up to this long for a message when none is there (0: answer at once)
    poll_time_ms: int = 0
    init_mode: InitMode = InitMode.MAX
    #: "TAG" or "SQL92"
    expression_type: str = "TAG"
    expression: str = "*"
    #: a FIFO pop: the queue stays blocked until its popped messages are acked or come back
    order: bool = False
    #: a retried FIFO receive with the same attempt id gets the same messages back
    attempt_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    #: when the client sent the request (epoch ms; 0: unknown); informational (RocketMQ's "timeout too much"
    #: check against it is not made: a client clock behind the broker's would have every pop refused)
    born_time_ms: int = 0


@dataclass(slots=True, eq=False)
class PoppedMessage:
    """One message handed out by a pop, with everything a front end needs and nothing re-read.

    ``record`` is the message as stored (for a message from the pop retry topic: re-encoded with ``topic`` set
    back to the consumed topic and ``POP_CK`` = ``extra_info``, as RocketMQ 5 answers remoting clients);
    ``message`` decodes it once, on first use, with ``reconsume_times`` set to this delivery's count."""

    topic: str
    #: where the message is stored: ``topic``, or the group's pop retry topic for a redelivery
    real_topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    #: RocketMQ's POP_CK extra info (8 fields); what ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME take
    extra_info: str
    #: deliveries before this one (delivery attempt = reconsume_times + 1)
    reconsume_times: int
    record: bytes
    _decoded: MessageExt | None = field(default=None, repr=False)

    @property
    def receipt_handle(self) -> str:
        """The 5.x receipt handle: the extra info and the commit-log offset (Apache's ``ReceiptHandle``)."""
        return f"{self.extra_info} {self.commit_log_offset}"

    @property
    def delivery_attempt(self) -> int:
        return self.reconsume_times + 1

    @property
    def message(self) -> MessageExt:
        """The decoded message: topic = the consumed topic, body as stored (see ``sys_flag`` for
        compression), properties, tags, keys, msg id (``uniq_key`` is the client's id), born/store
        timestamps and hosts, queue id/offset of ``real_topic``."""
        m = self._decoded
        if m is None:
            m = decode_record(self.record)
            m.topic = self.topic
            m.reconsume_times = self.reconsume_times
            m.properties.setdefault(P.POP_CK, self.extra_info)
            self._decoded = m
        return m


@dataclass(slots=True)
class PopResult:
    status: PopStatus
    messages: list[PoppedMessage] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    #: 0, or 999 for a FIFO pop
    revive_qid: int = 0
    #: messages left in the queues read (a hint for the client)
    rest_num: int = 0
    remark: str = ""
    #: PopMessageResponseHeader's per-queue lists (remoting clients build each message's POP_CK from them)
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str = ""


@dataclass(frozen=True, slots=True)
class AckResult:
    status: AckStatus
    remark: str = ""


@dataclass(frozen=True, slots=True)
class ChangeInvisibleResult:
    status: AckStatus
    #: the new extra info (the old handle no longer acks the message); "" unless OK
    extra_info: str = ""
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    remark: str = ""

    def receipt_handle(self, commit_log_offset: int) -> str:
        """The new 5.x receipt handle of a message whose old handle carried ``commit_log_offset``."""
        return f"{self.extra_info} {commit_log_offset}"


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What a 5.x consumer's Settings carry for its group."""

    #: consumeMessageOrderly: receive FIFO (per queue)
    fifo: bool
    #: deliveries before a message goes to %DLQ%{group}: retryMaxTimes + 1
    max_attempts: int
    #: "CUSTOMIZED" or "EXPONENTIAL"
    retry_policy_type: str
    #: CUSTOMIZED: the delay (ms) before each retry, as RocketMQ's ``next`` list
    customized_next_ms: tuple[int, ...]
    #: EXPONENTIAL: initial and max delay (ms) and multiplier
    exponential_initial_ms: int
    exponential_max_ms: int
    exponential_multiplier: int
