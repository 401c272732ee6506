"""The broker's metrics: a prometheus_client collector over the broker's own services, run when scraped.

Nothing here is counted per message. Message and byte counters are the broker's per-topic and per-topic@group
stats items (``BrokerStats``: what VIEW_BROKER_STATS_DATA and ``mq statsAll`` read), request latencies come
from the remoting server's observer (``rpc.py``), and every gauge is read from the broker's tables and store at
scrape time. The lag pass (``lag.py``), the costly part, is computed at most once per ``LAG_MIN_INTERVAL``
seconds, however many scrapers ask.

Families and their labels (besides cluster, node_type, node_id and metricsLabel's)::

    rocketmq_messages_in_total, rocketmq_throughput_in_total,     topic, message_type, is_system
    rocketmq_message_size (histogram)
    rocketmq_messages_out_total, rocketmq_throughput_out_total    topic, consumer_group, is_system
    rocketmq_consumer_{lag,inflight,ready}_messages,              topic, consumer_group, is_retry, is_system
    rocketmq_consumer_{lag,queueing}_latency_milliseconds
    rocketmq_rpc_latency_milliseconds (histogram)                 protocol_type, request_code, response_code,
                                                                  is_long_polling, result
    rocketmq_producer_connections                                 language, version, protocol_type
    rocketmq_consumer_connections                                 consumer_group, language, version,
                                                                  consume_mode, protocol_type, is_system
    rocketmq_processor_watermark                                  processor
    rocketmq_broker_permission, rocketmq_topic_number, rocketmq_consumer_group_number
    rocketmq_storage_{size,flush_behind,dispatch_behind}_bytes,   storage_type, storage_medium
    rocketmq_storage_message_reserve_time_milliseconds, rocketmq_timer_enqueue_lag
    mq_schedule_pending_messages                                  delay_level
    mq_timer_pending_messages, mq_transaction_half_messages, mq_consumer_held_pulls
    mq_storage_disk_{used,clean,warning}_ratio
    mq_broker_busy_refusals_total, mq_acl_refusals_total          reason
    mq_replication_lag_bytes                                      slave (a master, per connected slave)
    mq_replication_slave_connections (a master), mq_replication_master_connected (a slave)
    mq_metrics_scrape_duration_seconds, mq_metrics_scrape_cpu_seconds (the previous scrape's, as ``rendered``
                                                                  is told by the endpoint)

Counting rules, as RocketMQ 5's: the messages-in family counts sends under the topic stored (a delay-level
message under SCHEDULE_TOPIC_XXXX, an arbitrary-delay one under rmq_sys_wheel_timer, a half message under
RMQ_SYS_TRANS_HALF_TOPIC); its ``message_type`` follows from that topic (``delay``, ``transaction``), else
``fifo`` for an order topic, else ``normal``. ``%RETRY%`` and ``%DLQ%`` topics are left out of the in and out
families. A half message waiting is estimated from the half and op queues: (half queue max - checked offset) -
(op queue max - op offset).

Thread safety: collection runs in the HTTP server's thread while the event loop changes the tables. It reads
dicts through C-level copies (``dict(...)``, ``list(...)``), which the GIL makes atomic, and a pair or queue whose
segment vanishes under it is skipped.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterator

from mq.common import topic as T
from mq.common.log_throttle import LogThrottle
from mq.daemon.broker.stats import SIZE_BOUNDS
from mq.daemon.metrics import names as N
from mq.daemon.metrics.families import Families
from mq.daemon.metrics.lag import ConsumerLagCalculator, GroupLag, collect_lag, is_system_group
from mq.daemon.metrics.rpc import RpcMetrics
from mq.protocol.versions import version_desc

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)
#: a part that fails fails on every scrape: one record per minute per part
_throttle = LogThrottle(log, interval=60.0)

#: The lag pass runs at most once per this many seconds; scrapes in between reuse its rows.
LAG_MIN_INTERVAL = 1.0
#: The timer's topic (mq.daemon.broker.timer): its sends are delay messages.
TIMER_TOPIC = "rmq_sys_wheel_timer"
#: Worker groups by RocketMQ's processor label (BrokerMetricsManager.initStatsMetrics).
PROCESSOR_NAMES = {"send": "send", "query": "query_message", "admin": "admin", "default": "default"}
#: ConsumeType by RocketMQ's consume_mode label (ConsumeType.getTypeCN, lower case).
CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}
SIZE_LES = [N.bucket_bound(b) for b in SIZE_BOUNDS] + ["+Inf"]
_TRUE, _FALSE = "true", "false"


def broker_labels(controller: "BrokerController") -> list[tuple[str, str]]:
    """cluster, node_type, node_id (the broker name, as RocketMQ labels it), then metricsLabel's pairs."""
    extra = N.parse_metrics_label(controller.config.metrics_label)
    return [(N.CLUSTER, controller.cluster), (N.NODE_TYPE, N.NODE_TYPE_BROKER),
            (N.NODE_ID, controller.broker_name), *extra]


def message_type(topic: str, order: bool) -> str:
    if topic == T.TRANS_HALF_TOPIC:
        return "transaction"
    if topic == T.SCHEDULE_TOPIC or topic == TIMER_TOPIC:
        return "delay"
    return "fifo" if order else "normal"


def _lower_name(value: Any) -> str:
    return str(getattr(value, "name", value)).lower()


class BrokerCollector:
    """A prometheus_client collector (``collect()``) of one broker."""

    def __init__(self, controller: "BrokerController", rpc: RpcMetrics, *,
                 lag_min_interval: float = LAG_MIN_INTERVAL) -> None:
        self.c = controller
        self.rpc = rpc
        self.families = Families(broker_labels(controller))
        self.lag = ConsumerLagCalculator(controller)
        pop = getattr(controller, "pop_service", None)
        if pop is not None:  # messages popped and not yet acked count as in flight, as RocketMQ 5 counts them
            inflight = pop.inflight  # (topic, group, queue id) -> count; read with dict.get, atomic under the GIL
            self.lag.pop_inflight = lambda group, topic, qid: inflight.get((topic, group, qid), 0)
        self.lag_min_interval = lag_min_interval
        self._lag_rows: list[GroupLag] = []
        self._lag_at = float("-inf")
        self._lock = threading.Lock()
        #: the previous scrape's wall and CPU time: its collection's, then (``rendered``) the endpoint's figures
        self.last_duration = 0.0
        self.last_cpu = 0.0

    # -- prometheus_client --------------------------------------------------------------------------------
    def collect(self) -> list[Any]:
        with self._lock:
            t0, c0 = time.perf_counter(), time.thread_time()
            out: list[Any] = []
            for part in (self._traffic, self._lag, self._rpc, self._connections, self._broker, self._store,
                         self._backlogs, self._replication, self._refusals):
                try:
                    out.extend(part())
                except Exception:  # one broken part must not take the others down
                    _throttle.error(part.__name__, "metrics: %s failed", part.__name__, exc_info=True)
            for spec, value in ((N.SCRAPE_DURATION, self.last_duration), (N.SCRAPE_CPU, self.last_cpu)):
                fam = self.families.family(spec)
                fam.add((), value)
                out.append(fam)
            self.last_duration = time.perf_counter() - t0
            self.last_cpu = time.thread_time() - c0
            return out

    def rendered(self, wall: float, cpu: float) -> None:
        """The endpoint served a scrape in ``wall`` seconds, ``cpu`` of them on its thread's CPU."""
        self.last_duration, self.last_cpu = wall, cpu

    def is_system_topic(self, topic: str) -> bool:
        return self.c.topic_config.is_system_topic(topic)

    # -- messages in and out (BrokerStats items) ------------------------------------------------------------
    def _traffic(self) -> Iterator[Any]:
        f = self.families
        stats = self.c.stats
        topics = self.c.topic_config.all()
        labels_in = (N.TOPIC, N.MESSAGE_TYPE, N.IS_SYSTEM)
        msgs_in, bytes_in = f.family(N.MESSAGES_IN, labels_in), f.family(N.THROUGHPUT_IN, labels_in)
        size = f.family(N.MESSAGE_SIZE, labels_in)
        for topic, it in sorted(list(stats.topic_put.items())):
            if T.is_retry_topic(topic) or T.is_dlq_topic(topic):
                continue
            tc = topics.get(topic)
            values = (topic, message_type(topic, bool(tc is not None and tc.order)),
                      _TRUE if self.is_system_topic(topic) else _FALSE)
            msgs_in.add(values, it.nums)
            bytes_in.add(values, it.size)
            size.add_histogram(values, SIZE_LES, list(it.size_hist), it.size_sum)
        labels_out = (N.TOPIC, N.CONSUMER_GROUP, N.IS_SYSTEM)
        msgs_out, bytes_out = f.family(N.MESSAGES_OUT, labels_out), f.family(N.THROUGHPUT_OUT, labels_out)
        for topic, groups in sorted(list(stats.group_get.items())):
            if T.is_retry_topic(topic) or T.is_dlq_topic(topic):
                continue
            system_topic = self.is_system_topic(topic)
            for group, it in sorted(list(groups.items())):
                values = (topic, group, _TRUE if system_topic or is_system_group(group) else _FALSE)
                msgs_out.add(values, it.nums)
                bytes_out.add(values, it.size)
        yield from (msgs_in, bytes_in, size, msgs_out, bytes_out)

    # -- consumer lag (computed here, at most once per lag_min_interval) -----------------------------------
    def _lag(self) -> Iterator[Any]:
        now = time.monotonic()
        if now - self._lag_at >= self.lag_min_interval:
            self._lag_rows = self.lag.calculate()
            self._lag_at = now
        yield from collect_lag(self._lag_rows, self.families, self.is_system_topic)

    def _rpc(self) -> Iterator[Any]:
        yield from self.rpc.collect(self.families)

    # -- clients ----------------------------------------------------------------------------------------------
    def _connections(self) -> Iterator[Any]:
        c = self.c
        f = self.families
        producers: Counter[tuple[str, str]] = Counter()
        for group in c.producers.groups():
            for ch in c.producers.channels(group).values():
                producers[(_lower_name(ch.language), version_desc(ch.version).lower())] += 1
        fam = f.family(N.PRODUCER_CONNECTIONS, (N.LANGUAGE, N.VERSION, N.PROTOCOL_TYPE))
        for (language, version), n in sorted(producers.items()):
            fam.add((language, version, N.PROTOCOL_REMOTING), n)
        yield fam
        consumers: Counter[tuple[str, str, str, str]] = Counter()
        for group in c.consumers.groups():
            info = c.consumers.get(group)
            if info is None:
                continue
            kind = info.consume_type
            mode = CONSUME_MODES.get(getattr(kind, "name", ""), _lower_name(kind)) if kind is not None else "unknown"
            for ch in list(info.channels.values()):
                consumers[(group, _lower_name(ch.language), version_desc(ch.version).lower(), mode)] += 1
        fam = f.family(N.CONSUMER_CONNECTIONS, (N.CONSUMER_GROUP, N.LANGUAGE, N.VERSION, N.CONSUME_MODE,
                                                N.PROTOCOL_TYPE, N.IS_SYSTEM))
        for (group, language, version, mode), n in sorted(consumers.items()):
            fam.add((group, language, version, mode, N.PROTOCOL_REMOTING,
                     _TRUE if is_system_group(group) else _FALSE), n)
        yield fam

    # -- the broker's own figures -------------------------------------------------------------------------
    def _broker(self) -> Iterator[Any]:
        c = self.c
        f = self.families
        fam = f.family(N.PROCESSOR_WATERMARK, (N.PROCESSOR,))
        for name, group in sorted(c.server.registry.groups.items()):
            fam.add((PROCESSOR_NAMES.get(name, name),), group.queued)
        yield fam
        for spec, value in ((N.BROKER_PERMISSION, c.config.broker_permission),
                            (N.TOPIC_NUMBER, len(c.topic_config.all())),
                            (N.CONSUMER_GROUP_NUMBER, len(c.subscription_groups.all())),
                            (N.HELD_PULLS, c.hold_service.held_count if c.hold_service is not None else 0)):
            fam = f.family(spec)
            fam.add((), value)
            yield fam

    def _store(self) -> Iterator[Any]:
        c = self.c
        store = c.store
        if store is None:
            return
        f = self.families
        const = N.STORAGE_LABELS
        log_ = store.commit_log
        figures: list[tuple[N.Spec, float]] = [
            (N.STORAGE_FLUSH_BEHIND, max(0, log_.max_offset - log_.queue.flushed_where)),
            (N.STORAGE_DISPATCH_BEHIND, store.dispatch_behind_bytes()),
        ]
        try:
            figures.insert(0, (N.STORAGE_SIZE, shutil.disk_usage(c.store_config.store_path_root_dir).used))
        except OSError:
            pass
        earliest = c.earliest_message_time()
        if earliest > 0:
            figures.append((N.STORAGE_MESSAGE_RESERVE_TIME, max(0, int(time.time() * 1000) - earliest)))
        for spec, value in figures:
            fam = f.family(spec, const=const)
            fam.add((), value)
            yield fam
        scfg = c.store_config
        for spec, value in ((N.DISK_USED_RATIO, store.cleaner.last_ratio),
                            (N.DISK_CLEAN_RATIO, scfg.disk_max_used_space_ratio / 100.0),
                            (N.DISK_WARNING_RATIO, scfg.disk_space_warning_level_ratio)):
            fam = f.family(spec, const=const)
            fam.add((), value)
            yield fam

    # -- delivery backlogs: delay levels, timer, transactions ---------------------------------------------------
    def _backlogs(self) -> Iterator[Any]:
        c = self.c
        store = c.store
        if store is None:
            return
        f = self.families
        schedule = c.schedule_service
        if schedule is not None:
            fam = f.family(N.SCHEDULE_PENDING, ("delay_level",))
            offsets = dict(schedule.offsets)
            for level in range(1, schedule.max_level + 1):
                cq = store.cq_table.find(T.SCHEDULE_TOPIC, level - 1, create=False)
                if cq is None:
                    continue
                done = max(offsets.get(level, 0), cq.min_offset)
                fam.add((str(level),), max(0, cq.max_offset - done))
            yield fam
        timer = c.timer_service
        if timer is not None and c.config.timer_enable and not c.is_slave:
            cq = store.cq_table.find(TIMER_TOPIC, 0, create=False)
            enqueue_lag = max(0, cq.max_offset - max(timer.store.enqueue_offset, cq.min_offset)) if cq else 0
            fam = f.family(N.TIMER_ENQUEUE_LAG, const=N.STORAGE_LABELS)
            fam.add((), enqueue_lag)
            yield fam
            fam = f.family(N.TIMER_PENDING)
            fam.add((), timer.store.pending() + enqueue_lag)
            yield fam
        fam = f.family(N.TRANSACTION_HALF)
        fam.add((), self._half_waiting())
        yield fam

    def _half_waiting(self) -> int:
        from mq.daemon.broker.transaction import HALF_QUEUE, SYS_TRANS_GROUP

        store, offsets = self.c.store, self.c.offsets
        half = store.cq_table.find(T.TRANS_HALF_TOPIC, HALF_QUEUE, create=False)
        if half is None:
            return 0
        half_done = max(offsets.query(SYS_TRANS_GROUP, T.TRANS_HALF_TOPIC, HALF_QUEUE), half.min_offset)
        waiting = half.max_offset - half_done
        op = store.cq_table.find(T.TRANS_OP_HALF_TOPIC, HALF_QUEUE, create=False)
        if op is not None:
            op_done = max(offsets.query(SYS_TRANS_GROUP, T.TRANS_OP_HALF_TOPIC, HALF_QUEUE), op.min_offset)
            waiting -= op.max_offset - op_done
        return max(0, waiting)

    # -- replication --------------------------------------------------------------------------------------
    def _replication(self) -> Iterator[Any]:
        from mq.daemon.broker.ha.master import HAService
        from mq.daemon.broker.ha.slave import HAClient

        c = self.c
        f = self.families
        ha = c.ha
        if isinstance(ha, HAService) and c.store is not None:
            top = c.store.get_max_phy_offset()
            conns = list(ha.connections)
            lag = f.family(N.REPLICATION_LAG, ("slave",))
            for conn in sorted(conns, key=lambda x: x.remote_addr):
                lag.add((conn.remote_addr,), max(0, top - max(conn.slave_ack_offset, 0)))
            count = f.family(N.REPLICATION_SLAVES)
            count.add((), len(conns))
            yield from (lag, count)
        elif isinstance(ha, HAClient):
            fam = f.family(N.REPLICATION_MASTER_CONNECTED)
            fam.add((), 1 if ha.connected else 0)
            yield fam

    # -- refusals -----------------------------------------------------------------------------------------------
    def _refusals(self) -> Iterator[Any]:
        yield from self.rpc.collect_busy(self.families)
        acl = self.c.acl
        if acl is not None:
            fam = self.families.family(N.ACL_REFUSALS, ("reason",))
            for reason, n in sorted(list(acl.refusals.items())):
                fam.add((reason,), n)
            yield fam
