"""The push consumer (RocketMQ ``DefaultMQPushConsumer`` with a concurrent listener).

- ``subscribe(topic, expression)``; in CLUSTERING mode ``%RETRY%<group>`` is subscribed too.
  ``subscribe(topic, selector, expression_type="SQL92")`` filters by message properties on the broker; ``start()``
  then asks a broker of the topic to check it (CHECK_CLIENT_CONFIG, as Java's ``checkClientInBroker``) and
  raises ``BrokerError`` if it refuses (property filter disabled, selector does not compile).
- Rebalance (at start, every 20 s, on NOTIFY_CONSUMER_IDS_CHANGED): the topic's readable queues are split over
  the group's client ids with the allocation strategy (``allocate_averagely``); BROADCASTING takes every queue.
  A queue that is taken away is dropped (its in-flight results no longer move the offset) and its offset persisted.
- One long-polling pull loop per owned queue: PULL_MESSAGE with SUSPEND (15 s) + SUBSCRIPTION (+ COMMIT_OFFSET
  when an offset is known), under flow control: no pull while the queue's cache holds more than
  ``pull_threshold_for_queue`` messages, ``pull_threshold_size_for_queue`` bytes, or spans more than
  ``consume_concurrently_max_span`` offsets (retried after 50 ms).
- ``consume_thread_max`` workers (``mq.client.concurrently``) run the listener: ``listener(msgs, context) ->
  ConsumeStatus`` (plain or ``async def``; a plain one runs on the loop and must not block). RECONSUME_LATER
  or an exception sends each message back (CONSUMER_SEND_MSG_BACK, delay level 0 = broker decides); if that
  fails the message is re-sent to ``%RETRY%<group>`` by the client's inner producer, and if that fails too it
  stays in the cache (the offset cannot pass it) and is consumed again locally after ``local_retry_delay``.
  Never lost.
- Offsets: the lowest offset still cached (or max+1) is recorded after each batch, persisted every 5 s and at
  shutdown (broker for CLUSTERING, local file for BROADCASTING).
- ``orderly=True`` (or ``ConsumerConfig.consume_orderly``): a ``MessageListenerOrderly`` instead; queues are
  locked at the broker and consumed one batch at a time in offset order (``mq.client.orderly``).
- ``suspend()`` / ``resume()`` stop and restart pulling (Java ``DefaultMQPushConsumer.suspend``/``resume``).
- ``reset_offsets(topic, {queue: offset})`` applies an offset reset pushed by the broker (RESET_CONSUMER_CLIENT_OFFSET
  220, from ``mq resetOffsetByTime``): see ``rebalance.apply_offset_reset``.
- ``offset_table(topic)``: the in-memory offsets GET_CONSUMER_STATUS_FROM_CLIENT (221) reports.
- A pulled record that cannot be decoded (a body flagged compressed that does not inflate, a broken record) is
  stepped over, the records around it are delivered, and ``on_undecodable`` gets it (default: a WARNING naming
  its topic, queue, queue offset and commit-log offset); ``counters.skipped_undecodable`` counts them. A pull
  that fails is retried after ``pull_time_delay_when_exception`` and logged at WARNING (throttled per queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence, Union

from mq.client.concurrently import ConcurrentlyService, ConsumeContextInfo, _ReturnedNone
from mq.client.hooks import ConsumeHook, ConsumeStatus, attach_trace
from mq.client.instance import MQClientInstance
from mq.client.offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
from mq.client.process_queue import ProcessQueue
from mq.client.pull_api import (FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, PullAPI, PullStatus, build_subscription,
                                check_client_config)
from mq.client.rebalance import Strategy, allocate_averagely, apply_offset_reset, compute_pull_from_where
from mq.client.undecodable import LogReporter, UndecodableReporter
from mq.common.log_throttle import LogThrottle
from mq.common.message import MessageExt, MessageQueue
from mq.common.record_scan import SkippedRecord
from mq.common.tags import SubscriptionData, parse_subscription
from mq.common.topic import is_retry_topic, retry_topic, validate_group, validate_topic
from mq.config import ClientConfig, ConsumerConfig, OrderlyConfig
from mq.errors import ConfigError, MQError
from mq.protocol import bodies

log = logging.getLogger(__name__)

Listener = Callable[[list[MessageExt], "ConsumeContextInfo"], Union[ConsumeStatus, Awaitable[ConsumeStatus]]]
_FROM_WHERE = {"LAST": bodies.ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
               "FIRST": bodies.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
               "TIMESTAMP": bodies.ConsumeFromWhere.CONSUME_FROM_TIMESTAMP}


@dataclass(slots=True)
class ConsumerCounters:
    consumed_ok: int = 0
    consumed_failed: int = 0
    sent_back: int = 0
    resent_by_producer: int = 0
    local_retries: int = 0
    flow_control_waits: int = 0
    pulls: int = 0
    pull_failures: int = 0
    #: pulled records stepped over because they could not be decoded
    skipped_undecodable: int = 0
    offset_resets: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class PushConsumer:
    def __init__(self, config: ConsumerConfig, listener: Listener, client_config: ClientConfig | None = None, *,
                 instance: MQClientInstance | None = None, hooks: Sequence[ConsumeHook] = (),
                 allocate: Strategy = allocate_averagely, enable_trace: bool = False,
                 trace_topic: str | None = None, orderly: bool | None = None,
                 orderly_config: OrderlyConfig | None = None,
                 on_undecodable: UndecodableReporter | None = None) -> None:
        self.config = config
        self.group = validate_group(config.group)
        if config.message_model not in ("CLUSTERING", "BROADCASTING"):
            raise ConfigError(f"messageModel must be CLUSTERING or BROADCASTING, got {config.message_model!r}")
        if config.consume_from_where not in _FROM_WHERE:
            raise ConfigError(f"consumeFromWhere must be LAST, FIRST or TIMESTAMP, got {config.consume_from_where!r}")
        self.clustering = config.message_model == "CLUSTERING"
        self.listener = listener
        self._async_listener = inspect.iscoroutinefunction(listener)
        self.client_config = client_config or ClientConfig()
        self.instance = instance
        self._own_instance = instance is None
        self.hooks: list[ConsumeHook] = list(hooks)
        self.allocate = allocate
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.sub_version = int(time.time() * 1000)
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task] = {}
        self._rebalance_lock = asyncio.Lock()
        self._pulling = asyncio.Event()  # cleared while suspended
        self._pulling.set()
        self._suspends = 0
        self.counters = ConsumerCounters()
        self._report_undecodable: UndecodableReporter = on_undecodable or LogReporter(log, f"{self.group}: ")
        self._pull_failure_log = LogThrottle(log)
        self.api: PullAPI | None = None
        self.offset_store: RemoteBrokerOffsetStore | LocalFileOffsetStore | None = None
        self._started = False
        self._start_ms = 0
        self.trace_dispatcher: Any = None
        self.orderly: Any = None  # an OrderlyService when consuming orderly
        self.concurrently: ConcurrentlyService | None = None
        if config.consume_orderly if orderly is None else orderly:
            from mq.client.orderly import OrderlyService

            self.orderly = OrderlyService(self, orderly_config or OrderlyConfig())
        else:
            self.concurrently = ConcurrentlyService(self)
        if enable_trace:
            attach_trace(self, trace_topic)

    # -- configuration ----------------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | None = "*", expression_type: str = "TAG") -> None:
        """Subscribe to ``topic``: a tag expression ('TagA || TagB', '*'), or with ``expression_type="SQL92"``
        a property selector ("a BETWEEN 1 AND 3 AND TAGS IN ('TagA')") the broker evaluates."""
        validate_topic(topic)
        self.subscriptions[topic] = build_subscription(topic, expression, expression_type)

    def register_hook(self, hook: ConsumeHook) -> None:
        self.hooks.append(hook)

    # -- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> "PushConsumer":
        if self._started:
            return self
        if not self.subscriptions:
            raise ConfigError("subscribe to at least one topic before start()")
        if self.clustering:
            self.subscriptions.setdefault(retry_topic(self.group), parse_subscription(retry_topic(self.group), "*"))
        if self.instance is None:
            self.instance = await MQClientInstance.acquire(self.client_config)
        else:
            await self.instance.start()
        self.api = PullAPI(self.instance, self._skipped)
        if self.clustering:
            self.offset_store = RemoteBrokerOffsetStore(self.api, self.group)
        else:
            self.offset_store = LocalFileOffsetStore(self.client_config.local_offset_store_dir,
                                                     self.instance.client_id, self.group)
        self.offset_store.load()
        for topic in self.subscriptions:
            try:
                await self.instance.update_route(topic, force=False)
            except MQError as exc:
                if not is_retry_topic(topic):
                    raise
                log.debug("no route yet for %s: %s", topic, exc)
        try:
            await self._check_client_in_broker()
        except MQError:
            if self._own_instance:
                await self.instance.release()
                self.instance = None
            raise
        self.instance.register_consumer(self)
        self._start_ms = int(time.time() * 1000)
        if self.orderly is not None:
            self.orderly.start()
        else:
            assert self.concurrently is not None
            self.concurrently.start()
        self._started = True
        await self.instance.heartbeat_all()
        await self.rebalance()
        return self

    def _skipped(self, skipped: SkippedRecord) -> None:
        self.counters.skipped_undecodable += 1
        self._report_undecodable(skipped)

    async def _check_client_in_broker(self) -> None:
        """Java ``checkClientInBroker``: each non-TAG subscription is checked by one broker of its topic."""
        assert self.instance is not None
        for topic, sub in sorted(self.subscriptions.items()):
            if sub.expression_type == "TAG":
                continue
            route = self.instance.routes.get(topic)
            addrs = [a for bd in (route.broker_datas if route else []) for a in
                     [bd.broker_addrs.get(0) or next(iter(bd.broker_addrs.values()), None)] if a]
            if not addrs:
                raise MQError(f"no broker serves topic {topic}: cannot check its {sub.expression_type} subscription")
            await check_client_config(self.instance, addrs[0], self.group, sub, self.sub_version)

    def stats(self) -> dict[str, Any]:
        """Consume counters; with tracing on, the trace dispatcher's counts (sent, dropped by reason, ...)."""
        from dataclasses import asdict

        return {"group": self.group, **asdict(self.counters),
                "trace": self.trace_dispatcher.stats() if self.trace_dispatcher is not None else None}

    async def shutdown(self, *, grace: float = 5.0) -> None:
        if not self._started:
            return
        self._started = False
        assert self.instance is not None and self.offset_store is not None
        async with self._rebalance_lock:  # no rebalance adds a queue from here on
            for t in self._pull_tasks.values():
                t.cancel()
        if self.orderly is not None:
            await self.orderly.shutdown(grace)
        workers: list[asyncio.Task] = []
        if self.concurrently is not None:
            await self.concurrently.drain(grace)
            workers = self.concurrently.workers
        tasks = [*self._pull_tasks.values(), *workers]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._pull_tasks.clear()
        await self.offset_store.persist_all([mq for mq, pq in self.process_queues.items() if self._owns_offset(pq)])
        if self.orderly is not None:  # after the offsets, so the next owner starts where this one ended
            await self.orderly.unlock_all()
        for pq in self.process_queues.values():
            pq.dropped = True
        await self.instance.unregister(consumer_group=self.group)
        if self._own_instance:
            await self.instance.release()

    async def __aenter__(self) -> "PushConsumer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def suspend(self) -> None:
        """Stop pulling (pulls already at a broker still deliver) until as many ``resume()`` calls."""
        self._suspends += 1
        self._pulling.clear()

    def resume(self) -> None:
        self._suspends = max(0, self._suspends - 1)
        if self._suspends == 0:
            self._pulling.set()

    @property
    def suspended(self) -> bool:
        return not self._pulling.is_set()

    # -- what the instance asks -------------------------------------------------------------------------
    def topics(self) -> set[str]:
        return set(self.subscriptions)

    def consumer_data(self) -> bodies.ConsumerData:
        subs = [bodies.SubscriptionData(topic=s.topic, sub_string=s.sub_string, tags_set=set(s.tags_set),
                                        code_set=set(s.code_set), sub_version=self.sub_version,
                                        expression_type=s.expression_type)
                for _, s in sorted(self.subscriptions.items())]
        return bodies.ConsumerData(
            group_name=self.group, consume_type=bodies.ConsumeType.CONSUME_PASSIVELY,
            message_model=bodies.MessageModel[self.config.message_model],
            consume_from_where=_FROM_WHERE[self.config.consume_from_where], subscription_data_set=subs)

    async def persist_offsets(self) -> None:
        if self.offset_store is not None and self._started:
            await self.offset_store.persist_all([mq for mq, pq in self.process_queues.items()
                                                 if not pq.dropped and self._owns_offset(pq)])

    def _owns_offset(self, pq: ProcessQueue) -> bool:
        """Orderly: not while another client holds (or held, until the offset is re-read) the queue's lock."""
        return self.orderly is None or (pq.locked and not pq.lock_lost)

    def running_info(self) -> dict[str, Any]:
        props = {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
                 "PROP_THREADPOOL_CORE_SIZE": str(self.config.consume_thread_max),
                 "PROP_CONSUMER_START_TIMESTAMP": str(self._start_ms), "messageModel": self.config.message_model,
                 "PROP_CONSUMEORDERLY": "true" if self.orderly is not None else "false",
                 "consumeFromWhere": _FROM_WHERE[self.config.consume_from_where].name,
                 "pullBatchSize": str(self.config.pull_batch_size),
                 "pullThresholdForQueue": str(self.config.pull_threshold_for_queue)}
        mq_table = {}
        for mq, pq in self.process_queues.items():
            info = pq.info()
            info["commitOffset"] = self.offset_store.memory(mq) if self.offset_store else -1
            mq_table[mq] = info
        return {"properties": props, "subscriptionSet": [s.to_json_value() for s in self.consumer_data()
                                                           .subscription_data_set],
                "mqTable": mq_table, "statusTable": {}}

    def offset_table(self, topic: str = "") -> dict[MessageQueue, int]:
        """The in-memory offsets of ``topic``'s queues (every topic when empty)."""
        return self.offset_store.clone_table(topic) if self.offset_store is not None else {}

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> list[MessageQueue]:
        """Apply an offset reset of ``topic`` pushed by the broker (``rebalance.apply_offset_reset``); return the
        owned queues it moved."""
        if not self._started:
            return []
        return await apply_offset_reset(self, topic, offsets)

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, Any]:
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        started = time.monotonic()
        try:
            ctx = ConsumeContextInfo(mq) if self.orderly is None else self.orderly.context(mq)
            status = await self._call_listener([msg], ctx)
            result = "CR_SUCCESS" if status is ConsumeStatus.CONSUME_SUCCESS else "CR_LATER"
            remark = None
        except Exception as exc:
            result, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
        return bodies.ConsumeMessageDirectlyResult(
            order=self.orderly is not None, auto_commit=True, consume_result=result, remark=remark,
            spent_time_mills=int((time.monotonic() - started) * 1000)).to_json_value()

    # -- rebalance --------------------------------------------------------------------------------------
    async def rebalance(self) -> None:
        if not self._started:
            return
        async with self._rebalance_lock:
            assert self.instance is not None
            for topic, sub in list(self.subscriptions.items()):
                try:
                    mq_all = await self.instance.subscribe_queues(topic)
                except MQError as exc:
                    log.debug("%s: no queues for %s yet: %s", self.group, topic, exc)
                    continue
                if self.clustering:
                    cids = await self.instance.find_consumer_ids(topic, self.group)
                    if not cids:
                        log.warning("%s: no consumer ids for %s yet", self.group, topic)
                        continue
                    mine = self.allocate(self.group, self.instance.client_id, mq_all, cids)
                else:
                    mine = list(mq_all)
                await self._update_queues(topic, set(mine))

    async def _update_queues(self, topic: str, mine: set[MessageQueue]) -> None:
        assert self.offset_store is not None and self.api is not None
        # A queue dropped earlier but kept (orderly: its batch was still running) is retried here.
        for mq, pq in [(m, q) for m, q in self.process_queues.items() if m.topic == topic
                       and (m not in mine or q.dropped)]:
            if await self._remove_queue(mq, pq):
                log.info("%s: dropped %s", self.group, mq)
        for mq in sorted(mine - set(self.process_queues)):
            if not self._started:
                return
            if self.orderly is not None and self.clustering and not await self.orderly.lock(mq):
                log.warning("%s: not taking %s: its lock is held by another client", self.group, mq)
                continue
            try:
                offset = await compute_pull_from_where(self.offset_store, self.api, self.config, mq)
            except MQError as exc:
                log.warning("%s: cannot find where to start %s: %s", self.group, mq, exc)
                continue
            if not self._started:
                return
            pq = ProcessQueue()
            if self.orderly is not None:
                pq.mark_locked()
            self.process_queues[mq] = pq
            self._pull_tasks[mq] = asyncio.get_running_loop().create_task(self._pull_loop(mq, pq, offset))
            log.info("%s: pulling %s from offset %d", self.group, mq, offset)

    async def _remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Drop ``mq`` (its results no longer move the offset), persist its offset and forget it. False when
        (orderly) its in-flight batch is still running: it stays, dropped, and the next rebalance tries again."""
        assert self.offset_store is not None
        pq.dropped = True
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        if self.orderly is not None:
            if not await self.orderly.remove_unnecessary(mq, pq):
                return False
        elif self.clustering:
            with contextlib.suppress(MQError):
                await self.offset_store.persist(mq)
            self.offset_store.remove(mq)
        if self.process_queues.get(mq) is pq:
            del self.process_queues[mq]
        return True

    # -- pulling ----------------------------------------------------------------------------------------
    def _flow_controlled(self, pq: ProcessQueue) -> bool:
        c = self.config
        return (pq.msg_count > c.pull_threshold_for_queue or pq.msg_size > c.pull_threshold_size_for_queue
                or (self.orderly is None and pq.max_span() > c.consume_concurrently_max_span))

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        assert self.api is not None and self.offset_store is not None
        cfg, sub = self.config, self.subscriptions[mq.topic]
        while not pq.dropped:
            if not self._pulling.is_set():
                await self._pulling.wait()
                continue
            if self.orderly is not None:  # only a locked queue is pulled
                go, offset = await self.orderly.before_pull(mq, pq, offset)
                if not go:
                    continue
            if self._flow_controlled(pq):
                self.counters.flow_control_waits += 1
                await asyncio.sleep(cfg.flow_control_delay)
                continue
            commit = self.offset_store.memory(mq) if self.clustering else -1
            flag = (FLAG_SUBSCRIPTION if cfg.post_subscription_when_pull else 0) | (
                FLAG_COMMIT_OFFSET if commit > 0 else 0)
            try:
                self.counters.pulls += 1
                res = await self.api.pull(self.group, mq, offset, cfg.pull_batch_size, sub, sys_flag=flag,
                                          commit_offset=max(commit, 0), suspend=cfg.broker_suspend_max_time,
                                          timeout=cfg.consumer_timeout_when_suspend, sub_version=self.sub_version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.counters.pull_failures += 1
                self._pull_failure_log.warning(("pull-failed", mq), "%s: pull of %s from offset %d failed, "
                                               "retrying in %.1f s: %s", self.group, mq, offset,
                                               self.client_config.pull_time_delay_when_exception, exc)
                await asyncio.sleep(self.client_config.pull_time_delay_when_exception)
                continue
            if pq.dropped:
                return
            if res.status is PullStatus.FOUND:
                offset = res.next_begin_offset
                dispatch = pq.put(res.messages)
                if self.orderly is not None:
                    if dispatch:
                        self.orderly.submit(mq, pq)
                elif self.concurrently is not None:
                    self.concurrently.submit(mq, pq, res.messages)
            elif res.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("%s: offset %d of %s is illegal, moving to %d", self.group, offset, mq,
                            res.next_begin_offset)
                offset = res.next_begin_offset
                self.offset_store.update(mq, offset)
                with contextlib.suppress(MQError):
                    await self.offset_store.persist(mq)
            else:
                offset = res.next_begin_offset
                if pq.msg_count == 0:  # correctTagsOffset
                    self.offset_store.update(mq, offset, increase_only=True)
            if cfg.pull_interval > 0:
                await asyncio.sleep(cfg.pull_interval)

    # -- consuming --------------------------------------------------------------------------------------
    async def _call_listener(self, msgs: list[MessageExt], ctx: ConsumeContextInfo) -> ConsumeStatus:
        rv = self.listener(msgs, ctx)
        if inspect.isawaitable(rv):
            rv = await rv
        if rv is None:
            raise _ReturnedNone("the listener returned None (return ConsumeStatus.CONSUME_SUCCESS or "
                                "RECONSUME_LATER)")
        return ConsumeStatus(rv) if not isinstance(rv, ConsumeStatus) else rv
