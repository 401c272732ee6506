"""Typed JSON bodies of administration (PROTOCOL.md §6): MessageQueue-keyed statistics, consume stats, offsets,
subscription groups and their retry policies, queue and producer views, broker statistics. Re-exported by
``bodies.py``; ``body_codec.py`` maps them to the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from mq.common.message import MessageQueue
from mq.protocol.bodies import DataVersion, SubscriptionData
from mq.protocol.body_codec import JsonBody
from mq.protocol.codes import LanguageCode


# ---------------------------------------------------------------------------------------------
# admin: MessageQueue-keyed statistics, subscription groups, offsets
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class TopicOffset(JsonBody):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@dataclass(slots=True)
class TopicStatsTable(JsonBody):
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)


@dataclass(slots=True)
class OffsetWrapper(JsonBody):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    #: RocketMQ 5: consumer offset + messages in flight (popped, not yet acked); mqadmin 5.x prints the
    #: difference as #Inflight. None (not written) where nothing is in flight.
    pull_offset: int | None = None


@dataclass(slots=True)
class ConsumeStats(JsonBody):
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0


@dataclass(slots=True)
class ResetOffsetBody(JsonBody):
    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerOffsetSerializeWrapper(JsonBody):
    """GET_ALL_CONSUMER_OFFSET (43): ``{"topic@group": {queueId: offset}}``, unquoted ids from Java."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)


#: CustomizedRetryPolicy's default ``next`` (ms): 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
DEFAULT_RETRY_DELAYS_MS = (1000, 5000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
                           420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)
RETRY_POLICY_TYPES = ("CUSTOMIZED", "EXPONENTIAL")


@dataclass(slots=True)
class CustomizedRetryPolicy(JsonBody):
    """RocketMQ 5: the delay before retry n is ``next[n + 2]`` (the 4.x delay levels 3..18), the last beyond."""

    next: list[int] = field(default_factory=lambda: list(DEFAULT_RETRY_DELAYS_MS))

    def next_delay(self, reconsume_times: int) -> int:
        if not self.next:
            return DEFAULT_RETRY_DELAYS_MS[-1]
        return self.next[min(max(reconsume_times, 0) + 2, len(self.next) - 1)]


@dataclass(slots=True)
class ExponentialRetryPolicy(JsonBody):
    """RocketMQ 5: ``min(max, initial * multiplier ** reconsumeTimes)`` ms (reconsumeTimes capped at 32)."""

    initial: int = 5000
    max: int = 7_200_000
    multiplier: int = 2

    def next_delay(self, reconsume_times: int) -> int:
        return min(self.max, self.initial * self.multiplier ** min(max(reconsume_times, 0), 32))


@dataclass(slots=True)
class GroupRetryPolicy(JsonBody):
    """RocketMQ 5 ``GroupRetryPolicy``: ``type`` CUSTOMIZED (the default) or EXPONENTIAL, each with its own
    parameters (absent: that type's defaults)."""

    type: str = "CUSTOMIZED"
    exponential_retry_policy: ExponentialRetryPolicy | None = None
    customized_retry_policy: CustomizedRetryPolicy | None = None

    def policy(self) -> CustomizedRetryPolicy | ExponentialRetryPolicy:
        """The policy in force (Java ``getRetryPolicy``: an unknown type or missing parameters give the
        default customized policy)."""
        if self.type == "EXPONENTIAL" and self.exponential_retry_policy is not None:
            return self.exponential_retry_policy
        if self.type == "CUSTOMIZED" and self.customized_retry_policy is not None:
            return self.customized_retry_policy
        return CustomizedRetryPolicy()


def retry_policy_problem(p: GroupRetryPolicy | None) -> str | None:
    """Why a group retry policy is unusable (an unknown type, no or negative delays), or None."""
    if p is None:
        return None
    if p.type not in RETRY_POLICY_TYPES:
        return f"type must be one of {', '.join(RETRY_POLICY_TYPES)}, not {p.type[:40]!r}"
    e = p.exponential_retry_policy
    if e is not None and not (0 < e.initial <= e.max and e.multiplier >= 1):
        return "exponentialRetryPolicy needs 0 < initial <= max and multiplier >= 1"
    c = p.customized_retry_policy
    if c is not None and (not c.next or min(c.next) < 0 or len(c.next) > 1024):
        return "customizedRetryPolicy.next needs 1 to 1024 delays, none negative"
    return None


@dataclass(slots=True)
class SubscriptionGroupConfig(JsonBody):
    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: RocketMQ 5: a FIFO group (5.x consumers receive in queue order); None is false and is not written,
    #: so a 4.x group's JSON stays as 4.9 writes it
    consume_message_orderly: bool | None = None
    #: RocketMQ 5: the backoff 5.x consumers apply between attempts; None is the default customized policy
    group_retry_policy: GroupRetryPolicy | None = None

    @property
    def orderly(self) -> bool:
        return bool(self.consume_message_orderly)

    def retry_policy(self) -> GroupRetryPolicy:
        return self.group_retry_policy if self.group_retry_policy is not None else GroupRetryPolicy()


@dataclass(slots=True)
class SubscriptionGroupWrapper(JsonBody):
    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(slots=True)
class ConsumeMessageDirectlyResult(JsonBody):
    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None  # CR_SUCCESS, CR_LATER, CR_ROLLBACK, CR_COMMIT, CR_THROW_EXCEPTION, ...
    remark: str | None = None
    spent_time_mills: int = 0


# -- queue administration: QUERY_CONSUME_QUEUE ---------------------------------------------------------------
@dataclass(slots=True)
class ConsumeQueueData(JsonBody):
    """One consume-queue unit as QUERY_CONSUME_QUEUE shows it (the ext fields stay None: no CQ ext here)."""

    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None


@dataclass(slots=True)
class QueryConsumeQueueResponseBody(JsonBody):
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None
    queue_data: list[ConsumeQueueData] = field(default_factory=list)
    max_queue_index: int = 0
    min_queue_index: int = 0



# -- broker statistics: GET_BROKER_CONSUME_STATS, VIEW_BROKER_STATS_DATA, GET_ALL_PRODUCER_INFO, ... ------------
@dataclass(slots=True)
class ConsumeStatsList(JsonBody):
    """GET_BROKER_CONSUME_STATS (317): one ``{group: [ConsumeStats per topic]}`` map per subscription group."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    broker_addr: str | None = None
    total_diff: int = 0


@dataclass(slots=True)
class ProducerInfo(JsonBody):
    client_id: str = ""
    remote_ip: str = ""  # Java: the channel's remote SocketAddress text, "/127.0.0.1:53422"
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: int = 0
    WIRE_NAMES: ClassVar[dict[str, str]] = {"remote_ip": "remoteIP"}


@dataclass(slots=True)
class ProducerTableInfo(JsonBody):
    """GET_ALL_PRODUCER_INFO (328): producer group -> its connected instances."""

    data: dict[str, list[ProducerInfo]] = field(default_factory=dict)


@dataclass(slots=True)
class BrokerStatsItem(JsonBody):
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@dataclass(slots=True)
class BrokerStatsData(JsonBody):
    """VIEW_BROKER_STATS_DATA (315): one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)


@dataclass(slots=True)
class GetConsumerStatusBody(JsonBody):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) answer (``messageQueueTable``) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    (223) answer (``consumerTable``: client id -> {MessageQueue: offset})."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)
