"""Send and consume hooks (RocketMQ ``SendMessageHook`` / ``ConsumeMessageHook``), used by tracing.

A hook is any object with the two methods of its protocol; hooks run inline on the event loop, so they must be
quick and must not block. An exception in a hook is logged and never fails the send or the consume.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from mq.common.message import Message, MessageExt, MessageQueue

log = logging.getLogger(__name__)


class CommunicationMode(enum.Enum):
    SYNC = "SYNC"
    ASYNC = "ASYNC"
    ONEWAY = "ONEWAY"


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class ConsumeStatus(enum.Enum):
    """What a listener returns: a concurrent one ``CONSUME_SUCCESS`` or ``RECONSUME_LATER``
    (``ConsumeConcurrentlyStatus``); an orderly one ``CONSUME_SUCCESS`` (Java ``SUCCESS``) or
    ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (``ConsumeOrderlyStatus``; RECONSUME_LATER counts as a suspend there)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class SendResult:
    status: SendStatus
    #: UNIQ_KEY (batches: members' UNIQ_KEYs joined by ",")
    msg_id: str
    #: the broker's offsetMsgId (batches: comma-joined)
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    transaction_id: str | None = None
    broker_addr: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "msgId": self.msg_id, "offsetMsgId": self.offset_msg_id,
                "topic": self.queue.topic, "broker": self.queue.broker_name, "queueId": self.queue.queue_id,
                "queueOffset": self.queue_offset}


@dataclass(slots=True)
class SendContext:
    producer_group: str
    message: Message
    queue: MessageQueue
    broker_addr: str
    mode: CommunicationMode
    born_host: str = ""
    result: SendResult | None = None
    exception: BaseException | None = None
    #: free slot for a hook's own state between before and after (Java ``mqTraceContext``)
    trace: Any = None
    props: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumeContext:
    consumer_group: str
    messages: Sequence[MessageExt]
    queue: MessageQueue
    success: bool = False
    status: str = ""
    trace: Any = None
    props: dict[str, str] = field(default_factory=dict)


class SendHook(Protocol):
    def send_before(self, ctx: SendContext) -> None: ...

    def send_after(self, ctx: SendContext) -> None: ...


class ConsumeHook(Protocol):
    def consume_before(self, ctx: ConsumeContext) -> None: ...

    def consume_after(self, ctx: ConsumeContext) -> None: ...


def run_hooks(hooks: Sequence[Any], method: str, ctx: Any) -> None:
    for hook in hooks:
        try:
            getattr(hook, method)(ctx)
        except Exception:
            log.exception("%s.%s failed", type(hook).__name__, method)


@dataclass(slots=True)
class EndTransactionContext:
    """What a transaction producer reports when it ends a transaction (Java ``EndTransactionContext``): after
    its own END_TRANSACTION and after answering a broker's check (``from_transaction_check``). ``state`` is a
    ``LocalTransactionState`` (values are the Java names)."""

    producer_group: str
    message: Message
    broker_addr: str
    msg_id: str
    transaction_id: str | None
    state: Any
    from_transaction_check: bool = False


def attach_trace(client: Any, trace_topic: str | None = None) -> None:
    """The ``enable_trace=True`` switch of Producer, PushConsumer and TransactionProducer: attach RocketMQ's
    trace hooks and an async trace dispatcher (``mq.trace.enable``). This is the one place the client reaches up
    into ``mq.trace``, lazily and only when tracing is asked for; the import contract names it."""
    from mq.trace.enable import enable_trace

    enable_trace(client, trace_topic)
