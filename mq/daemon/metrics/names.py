"""Metric names and labels: RocketMQ 5.3's, spelled as its Prometheus endpoint spells them.

RocketMQ 5 names its OpenTelemetry instruments in ``BrokerMetricsConstant``, ``RemotingMetricsConstant`` and
``DefaultStoreMetricsConstant``; its Prometheus exporter (opentelemetry-java 1.29, ``PrometheusMetricNameMapper``)
renders an instrument's name by appending its unit, mapped to Prometheus's word (``ms`` -> ``milliseconds``,
``By`` -> ``bytes``; an unknown unit as written), unless the name already contains it, and ``_total`` to a
counter whose name does not contain "total". A histogram's samples are then ``<name>_bucket{le=...}``,
``<name>_sum`` and ``<name>_count``. The dashboards published for RocketMQ 5 query those rendered names::

    +-------------------------------------+-----------+--------------+-----------------------------------------------+
    | instrument (RocketMQ)               | type      | unit         | rendered                                      |
    +-------------------------------------+-----------+--------------+-----------------------------------------------+
    | rocketmq_messages_in_total          | counter   |              | rocketmq_messages_in_total                    |
    | rocketmq_message_size               | histogram |              | rocketmq_message_size_bucket/_sum/_count      |
    | rocketmq_consumer_lag_latency       | gauge     | milliseconds | rocketmq_consumer_lag_latency_milliseconds    |
    | rocketmq_rpc_latency                | histogram | milliseconds | rocketmq_rpc_latency_milliseconds_bucket ...  |
    | rocketmq_storage_size               | gauge     | bytes        | rocketmq_storage_size_bytes                   |
    | rocketmq_storage_flush_behind_bytes | gauge     | bytes        | rocketmq_storage_flush_behind_bytes           |
    +-------------------------------------+-----------+--------------+-----------------------------------------------+

``Spec.name`` applies that rule, so each spec below is written as RocketMQ declares the instrument. Metrics only
``mq`` has are prefixed ``mq_`` and follow Prometheus's naming conventions directly.

Every sample also carries the process's common labels: ``cluster``, ``node_type`` (``broker`` or
``nameserver``), ``node_id`` (a broker's ``brokerName``, as RocketMQ sets it; a name server's ``host:port``)
and the pairs of ``metricsLabel``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mq.protocol.codes import RequestCode, ResponseCode

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

#: opentelemetry-java's unit words (PrometheusUnitsHelper); other units are appended as written.
_UNIT_WORDS = {"ms": "milliseconds", "s": "seconds", "By": "bytes", "B": "bytes", "1": ""}

# -- label names (BrokerMetricsConstant, RemotingMetricsConstant, DefaultStoreMetricsConstant) ----------------
CLUSTER = "cluster"
NODE_TYPE = "node_type"
NODE_ID = "node_id"
TOPIC = "topic"
CONSUMER_GROUP = "consumer_group"
MESSAGE_TYPE = "message_type"
IS_SYSTEM = "is_system"
IS_RETRY = "is_retry"
PROCESSOR = "processor"
LANGUAGE = "language"
VERSION = "version"
CONSUME_MODE = "consume_mode"
PROTOCOL_TYPE = "protocol_type"
REQUEST_CODE = "request_code"
RESPONSE_CODE = "response_code"
IS_LONG_POLLING = "is_long_polling"
RESULT = "result"
STORAGE_TYPE = "storage_type"
STORAGE_MEDIUM = "storage_medium"

NODE_TYPE_BROKER = "broker"
NODE_TYPE_NAMESRV = "nameserver"
PROTOCOL_REMOTING = "remoting"
RESULT_SUCCESS = "success"
RESULT_ONEWAY = "oneway"
#: The store labels of RocketMQ's DefaultStoreMetricsManager.
STORAGE_LABELS = ((STORAGE_TYPE, "local"), (STORAGE_MEDIUM, "disk"))

#: Upper bounds of rocketmq_rpc_latency's buckets, milliseconds (RemotingMetricsManager.getMetricsView).
RPC_LATENCY_BOUNDS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)


def bucket_bound(bound: float) -> str:
    """A histogram bound as the ``le`` label Java's exporter writes (``Double.toString``: 1.0, 1048576.0)."""
    value = float(bound)
    if value == float("inf"):
        return "+Inf"
    if value.is_integer() and abs(value) < 1e7:
        return f"{int(value)}.0"
    return repr(value)


def rendered_name(raw: str, kind: str, unit: str = "") -> str:
    """The name opentelemetry-java's Prometheus exporter gives an instrument (see the module docstring)."""
    word = _UNIT_WORDS.get(unit, unit)
    name = raw
    if word and word not in name:
        name = f"{name}_{word}"
    if kind == COUNTER and "total" not in name:
        name += "_total"
    return name


@dataclass(frozen=True, slots=True)
class Spec:
    """One metric: the instrument's name, type and unit as RocketMQ declares them, and its help text."""

    raw: str
    kind: str
    help: str
    unit: str = ""

    @property
    def name(self) -> str:
        return rendered_name(self.raw, self.kind, self.unit)


# -- broker: BrokerMetricsConstant ----------------------------------------------------------------------------
PROCESSOR_WATERMARK = Spec("rocketmq_processor_watermark", GAUGE, "Requests waiting in each processor's queue")
BROKER_PERMISSION = Spec("rocketmq_broker_permission", GAUGE, "Broker permission (brokerPermission: 2 write, 4 read)")
TOPIC_NUMBER = Spec("rocketmq_topic_number", GAUGE, "Topics in the broker's topic table")
CONSUMER_GROUP_NUMBER = Spec("rocketmq_consumer_group_number", GAUGE, "Subscription groups of the broker")
MESSAGES_IN = Spec("rocketmq_messages_in_total", COUNTER, "Messages stored by sends, by the topic stored")
MESSAGES_OUT = Spec("rocketmq_messages_out_total", COUNTER, "Messages delivered to consumer groups by pulls")
THROUGHPUT_IN = Spec("rocketmq_throughput_in_total", COUNTER, "Bytes of the messages stored by sends")
THROUGHPUT_OUT = Spec("rocketmq_throughput_out_total", COUNTER, "Bytes of the messages delivered by pulls")
MESSAGE_SIZE = Spec("rocketmq_message_size", HISTOGRAM, "Stored size of sent messages (a batch: its average)")
PRODUCER_CONNECTIONS = Spec("rocketmq_producer_connections", GAUGE, "Producer connections")
CONSUMER_CONNECTIONS = Spec("rocketmq_consumer_connections", GAUGE, "Consumer connections")
CONSUMER_LAG_MESSAGES = Spec("rocketmq_consumer_lag_messages", GAUGE, "Messages not yet consumed (acknowledged)")
CONSUMER_LAG_LATENCY = Spec("rocketmq_consumer_lag_latency", GAUGE,
                            "Age of the oldest message not yet consumed", "milliseconds")
CONSUMER_INFLIGHT_MESSAGES = Spec("rocketmq_consumer_inflight_messages", GAUGE,
                                  "Messages pulled and not yet acknowledged")
CONSUMER_QUEUEING_LATENCY = Spec("rocketmq_consumer_queueing_latency", GAUGE,
                                 "Age of the oldest message not yet pulled", "milliseconds")
CONSUMER_READY_MESSAGES = Spec("rocketmq_consumer_ready_messages", GAUGE, "Messages ready and not yet pulled")

# -- remoting: RemotingMetricsConstant ------------------------------------------------------------------------
RPC_LATENCY = Spec("rocketmq_rpc_latency", HISTOGRAM, "Time from a request's arrival to its answer",
                   "milliseconds")

# -- store: DefaultStoreMetricsConstant -----------------------------------------------------------------------
STORAGE_SIZE = Spec("rocketmq_storage_size", GAUGE, "Bytes used on the store's file system", "bytes")
STORAGE_FLUSH_BEHIND = Spec("rocketmq_storage_flush_behind_bytes", GAUGE, "Commit-log bytes not yet flushed",
                            "bytes")
STORAGE_DISPATCH_BEHIND = Spec("rocketmq_storage_dispatch_behind_bytes", GAUGE,
                               "Commit-log bytes not yet in consume queues", "bytes")
STORAGE_MESSAGE_RESERVE_TIME = Spec("rocketmq_storage_message_reserve_time", GAUGE,
                                    "Age of the oldest message kept", "milliseconds")
TIMER_ENQUEUE_LAG = Spec("rocketmq_timer_enqueue_lag", GAUGE, "Timer messages not yet filed by the timer")

# -- only mq ----------------------------------------------------------------------------------------------------
SCHEDULE_PENDING = Spec("mq_schedule_pending_messages", GAUGE,
                        "Delay-level messages not yet delivered, by level (SCHEDULE_TOPIC_XXXX backlog)")
TIMER_PENDING = Spec("mq_timer_pending_messages", GAUGE, "Arbitrary-delay messages parked and not yet delivered")
TRANSACTION_HALF = Spec("mq_transaction_half_messages", GAUGE,
                        "Half messages without a commit or rollback yet (waiting for one, or for a check)")
BUSY_REFUSALS = Spec("mq_broker_busy_refusals_total", COUNTER, "Requests refused for flow control, by reason")
ACL_REFUSALS = Spec("mq_acl_refusals_total", COUNTER, "Requests refused by plain ACL, by reason")
REPLICATION_LAG = Spec("mq_replication_lag_bytes", GAUGE, "Commit-log bytes a slave has not acknowledged")
REPLICATION_SLAVES = Spec("mq_replication_slave_connections", GAUGE, "Slaves connected to this master")
REPLICATION_MASTER_CONNECTED = Spec("mq_replication_master_connected", GAUGE,
                                    "1 when this slave is connected to its master")
DISK_USED_RATIO = Spec("mq_storage_disk_used_ratio", GAUGE, "Fullest store disk, used / size")
DISK_CLEAN_RATIO = Spec("mq_storage_disk_clean_ratio", GAUGE,
                        "Used ratio above which old files are deleted (diskMaxUsedSpaceRatio)")
DISK_WARNING_RATIO = Spec("mq_storage_disk_warning_ratio", GAUGE,
                          "Used ratio above which writes are refused (diskSpaceWarningLevelRatio)")
HELD_PULLS = Spec("mq_consumer_held_pulls", GAUGE, "Pull requests held by long polling")
SCRAPE_DURATION = Spec("mq_metrics_scrape_duration_seconds", GAUGE,
                       "Time the previous scrape took (collection and rendering)")
SCRAPE_CPU = Spec("mq_metrics_scrape_cpu_seconds", GAUGE,
                  "CPU time the previous scrape took in the thread that served it (collection and rendering)")

# -- name server (only mq) -------------------------------------------------------------------------------------
NAMESRV_BROKERS = Spec("mq_namesrv_brokers", GAUGE, "Live broker addresses registered, by cluster")
NAMESRV_TOPICS = Spec("mq_namesrv_topics", GAUGE, "Topics with a route")
NAMESRV_BROKER_AGE = Spec("mq_namesrv_broker_heartbeat_age_seconds", GAUGE,
                          "Seconds since each live broker last registered")

#: Request and response codes by RocketMQ's constant name in lower case (RemotingHelper.getRequestCodeDesc).
REQUEST_CODE_NAMES = {int(c): c.name.lower() for c in RequestCode}
RESPONSE_CODE_NAMES = {int(c): c.name.lower() for c in ResponseCode}


def request_code_name(code: int) -> str:
    return REQUEST_CODE_NAMES.get(code) or str(code)


def response_code_name(code: int) -> str:
    return RESPONSE_CODE_NAMES.get(code) or str(code)


#: Label names the families use themselves: metricsLabel may not take them.
RESERVED_LABELS = frozenset({CLUSTER, NODE_TYPE, NODE_ID, TOPIC, CONSUMER_GROUP, MESSAGE_TYPE, IS_SYSTEM, IS_RETRY,
                             PROCESSOR, LANGUAGE, VERSION, CONSUME_MODE, PROTOCOL_TYPE, REQUEST_CODE, RESPONSE_CODE,
                             IS_LONG_POLLING, RESULT, STORAGE_TYPE, STORAGE_MEDIUM, "le", "quantile", "reason",
                             "slave", "delay_level", "broker_name", "broker_id", "broker_addr"})


def parse_metrics_label(text: str) -> list[tuple[str, str]]:
    """``metricsLabel``: ``k1:v1,k2:v2`` -> [(k1, v1), (k2, v2)]; ValueError names a malformed pair or label."""
    import re

    out: list[tuple[str, str]] = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        parts = item.split(":")
        if len(parts) != 2 or not parts[0].strip():
            raise ValueError(f"metricsLabel: {item!r} is not key:value")
        key = parts[0].strip()
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", key) or key.startswith("__"):
            raise ValueError(f"metricsLabel: {key!r} is not a valid Prometheus label name")
        if key in RESERVED_LABELS or key in (k for k, _ in out):
            raise ValueError(f"metricsLabel: {key!r} is a label the metrics set already")
        out.append((key, parts[1].strip()))
    return out
