"""PopService: RocketMQ 5 pop consumption in the broker, one object every front end calls in-process.

``controller.pop_service`` is built with the broker and started after the store. Its API (types in
``contract.py``), all on the broker's event loop:

    await pop(PopRequest) -> PopResult                          receive with an invisible time (long polling)
    await ack(group, topic, handle, queue_offset=None) -> AckResult
    await batch_ack(group, topic, handles) -> list[AckResult]   one result per handle, in order
    await change_invisible_time(group, topic, handle, invisible_time_ms, queue_offset=None)
                                                                -> ChangeInvisibleResult (a new handle)
    await forward_to_dead_letter(group, topic, handle) -> AckResult
    group_settings(group) -> GroupSettings;  topic_info(topic) -> TopicInfo | None

``topic`` is the consumed topic (a pop retry topic name is accepted too); ``handle`` the message's extra info
(POP_CK) or 5.x receipt handle. The remoting processors use the callback forms (``pop_cb``, ``ack_cb``, ...),
which answer synchronously when nothing has to wait, so an ASYNC_FLUSH broker pops and acks with no task.

State (all derived from the revive log, ``records.py``): group offsets move when a pop's checkpoint is stored;
an ack is stored before it is answered and only while its handle is valid (popTime + invisibleTime not yet
passed), so an acked message never comes back; un-acked ones are revived by ``PopReviveService``. FIFO pops keep
``OrderInfoManager`` state instead of checkpoints. In-flight counts (popped, not yet acked or revived) per
group and queue bound what one group may hold (``popInflightMessageThreshold``); they start at zero after a
restart, as RocketMQ's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mq.common.hosts import pack_host
from mq.daemon.broker.pop import records as R
from mq.daemon.broker.pop.acks import AckHandler
from mq.daemon.broker.pop.contract import (AckResult, ChangeInvisibleResult, GroupSettings, PopRequest,
                                           PopResult, PopStatus)
from mq.daemon.broker.pop.handles import FinishedHandles
from mq.daemon.broker.pop.order import OrderInfoManager
from mq.daemon.broker.pop.polling import PopPollingService
from mq.daemon.broker.pop.reader import Filter, PopPlan, PopReader
from mq.daemon.broker.pop.revive import RETRY_QUEUE_NUMS, PopReviveService
from mq.daemon.broker.requeue import STORED
from mq.protocol import extra_info as X
from mq.protocol.bodies import CustomizedRetryPolicy, ExponentialRetryPolicy, SubscriptionGroupConfig
from mq.store.status import PutMessageResult

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

MESSAGE_TYPE_ATTRIBUTE = "message.type"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    #: the ``message.type`` attribute (NORMAL, FIFO, DELAY, TRANSACTION, MIXED); None when the topic has none
    message_type: str | None


def _wall_ms() -> int:
    return int(time.time() * 1000)


class PopService:
    def __init__(self, controller: "BrokerController", *, clock: Callable[[], int] | None = None) -> None:
        self.c = controller
        self.now: Callable[[], int] = clock or _wall_ms
        self.revive_topic = R.revive_topic(controller.config.broker_cluster_name)
        self.order = OrderInfoManager(Path(controller.store_config.store_path_root_dir))
        self.reader = PopReader(self)
        self.acks = AckHandler(self)
        self.finished = FinishedHandles(controller.config.pop_finished_handles)
        self.revive = PopReviveService(self)
        self.polling: PopPollingService | None = None
        #: (topic, group, queue) -> un-acked messages of non-FIFO pops
        self.inflight: Counter[tuple[str, str, int]] = Counter()
        #: queues a pop is reading (until its records are stored)
        self.busy: set[tuple[str, str, int]] = set()
        #: revive time -> acks to checkpoints of that time still being written
        self._pending: Counter[int] = Counter()
        self._order_dirty = False
        self._born: bytes | None = None
        self._fifo_time = 0
        #: revive-log puts waiting for their flush: token -> the revive queue's max offset when issued
        self._unsettled: dict[int, int] = {}
        self._tokens = itertools.count()
        self.started = False
        #: run the revive loop as a task (tests with an injected clock turn it off and call ``revive.tick``)
        self.auto_revive = True

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self, *, loop_task: bool = True) -> None:
        """Open the revive buckets, replay the log into the state and start reviving (masters only)."""
        c = self.c
        self.open_polling()
        if c.is_slave:
            return
        c.topic_config.create_system(self.revive_topic, 1, 6)
        self.order.load()
        self.revive.open(self.now())
        self._fifo_time = max((i.pop_time for i in self.order.table.values()), default=0)
        self.started = True
        if loop_task and self.auto_revive:
            self.revive.start_loop()

    def open_polling(self) -> PopPollingService:
        """The long-polling table (made once, on the running loop, before the store dispatches)."""
        if self.polling is None:
            cfg = self.c.config
            self.polling = PopPollingService(asyncio.get_running_loop(), self.c.poster, cfg.max_pop_polling_size,
                                             cfg.pop_polling_size)
        return self.polling

    async def stop(self) -> None:
        """Answer held pops (UNAVAILABLE), finish the slot being revived and write a last checkpoint."""
        self.started = False
        if self.polling is not None:
            self.polling.drop_all()
        await self.revive.stop()

    def connection_closed(self, conn: Any) -> None:
        if self.polling is not None:
            self.polling.drop_connection(conn)

    # -- the in-process API ------------------------------------------------------------------------------------
    async def pop(self, req: PopRequest) -> PopResult:
        fut = asyncio.get_running_loop().create_future()
        self.pop_cb(req, lambda r: fut.done() or fut.set_result(r))
        return await fut

    async def ack(self, group: str, topic: str, handle: str, queue_offset: int | None = None) -> AckResult:
        return (await self.batch_ack(group, topic, [handle], [queue_offset]))[0]

    async def batch_ack(self, group: str, topic: str, handles: list[str],
                        queue_offsets: list[int | None] | None = None) -> list[AckResult]:
        fut = asyncio.get_running_loop().create_future()
        self.acks.ack_cb(group, topic, handles, queue_offsets, lambda r: fut.done() or fut.set_result(r))
        return await fut

    async def change_invisible_time(self, group: str, topic: str, handle: str, invisible_time_ms: int,
                                    queue_offset: int | None = None) -> ChangeInvisibleResult:
        fut = asyncio.get_running_loop().create_future()
        self.acks.change_cb(group, topic, handle, invisible_time_ms, queue_offset,
                            lambda r: fut.done() or fut.set_result(r))
        return await fut

    async def forward_to_dead_letter(self, group: str, topic: str, handle: str) -> AckResult:
        """Move the handle's message to ``%DLQ%{group}`` and ack it (5.x ForwardMessageToDeadLetterQueue)."""
        return await self.acks.forward_to_dead_letter(group, topic, handle)

    def group_settings(self, group: str) -> GroupSettings:
        """The group's FIFO flag, max attempts and retry backoff (the group is created as a pop would)."""
        sgc = self.c.subscription_groups.find_or_create(group) or SubscriptionGroupConfig(group_name=group)
        gp = sgc.retry_policy()
        cust = gp.customized_retry_policy or CustomizedRetryPolicy()
        expo = gp.exponential_retry_policy or ExponentialRetryPolicy()
        return GroupSettings(sgc.orderly, sgc.retry_max_times + 1, gp.type, tuple(cust.next), expo.initial,
                             expo.max, expo.multiplier)

    def topic_info(self, topic: str) -> TopicInfo | None:
        tc = self.c.topic_config.get(topic)
        if tc is None:
            return None
        return TopicInfo(tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                         (tc.attributes or {}).get(MESSAGE_TYPE_ATTRIBUTE))

    def max_attempts(self, group: str) -> int:
        sgc = self.c.subscription_groups.get(group)
        return (sgc.retry_max_times if sgc is not None else 16) + 1

    # -- pop ---------------------------------------------------------------------------------------------------
    def pop_cb(self, req: PopRequest, done: Callable[[PopResult], None], conn: Any = None) -> None:
        """Pop, then ``done(result)`` exactly once (before returning when nothing has to wait). A pop that finds
        nothing waits up to ``poll_time_ms`` for a message (``conn``: dropped when it closes)."""
        bad, flt = self.reader.check(req)
        if bad is not None:
            done(bad)
            return
        sgc = self.c.subscription_groups.get(req.group)
        if sgc is not None and sgc.orderly and not req.order:  # a FIFO group pops FIFO, whatever the request says
            req = dataclasses.replace(req, order=True)
        cfg = self.c.config
        poll = min(max(req.poll_time_ms, 0), cfg.pop_max_poll_time_ms)
        deadline = time.monotonic() + poll / 1000.0
        self._attempt(req, flt, done, conn, deadline, poll > 0)

    def _attempt(self, req: PopRequest, flt: Filter, done: Callable[[PopResult], None], conn: Any,
                 deadline: float, may_hold: bool) -> None:
        if not self.started:  # stopped while the pop was held
            done(PopResult(PopStatus.UNAVAILABLE, pop_time=self.now(), invisible_time=req.invisible_time_ms,
                           remark="the broker is stopping"))
            return
        now = self.now()
        plan = self.reader.read(req, flt, now)
        if plan.result.status is PopStatus.NO_NEW_MSG and not plan.records and not plan.dlq and may_hold:
            left = deadline - time.monotonic()
            if left > 0:
                retry_topics = tuple(self.retry_topics(req.topic, req.group)) if not req.order else ()
                if req.order:  # a blocked FIFO queue frees itself when its time passes: look again then
                    free = self.order.next_unblock(req.topic, req.group, req.queue_id, now)
                    if free is not None:
                        left = min(left, max(0.0, free - now) / 1000.0 + 0.01)

                def retry(_timed_out: bool) -> None:
                    self._attempt(req, flt, done, conn, deadline, deadline - time.monotonic() > 0.005)
                assert self.polling is not None
                if self.polling.hold(req.topic, req.group, req.queue_id, retry_topics, left, retry, conn):
                    return
                plan.result.status = PopStatus.POLLING_FULL
                plan.result.remark = "too many pop requests are waiting for messages"
        self._store_plan(plan, done)

    def _store_plan(self, plan: PopPlan, done: Callable[[PopResult], None]) -> None:
        """Write the plan's records (DLQ moves first), then commit its state changes and answer."""
        if not plan.records and not plan.dlq:
            done(plan.result)
            return
        self.busy.update(plan.busy)
        dlq = [self.reader.dlq_input(buf, topic, group) for buf, topic, group in plan.dlq]
        born = self.store_host
        batch = [R.build(rec, kind, self.revive_topic, born, fire) for rec, kind, fire in plan.records]

        waited = False  # whether the answer waits for a flush (then other pops saw these queues busy)

        def finish(ok: bool, why: str) -> None:
            self.busy.difference_update(plan.busy)
            if ok:
                plan.commit()
                if waited and plan.result.rest_num > 0 and self.polling is not None:  # held pops: messages left
                    key = plan.busy[0]
                    self.polling.wake(X.origin_topic(key[0], key[1]), key[1])
                msgs = plan.result.messages
                if msgs:
                    self.c.stats.on_group_get(msgs[0].topic, plan.busy[0][1], len(msgs),
                                              sum(len(m.record) for m in msgs))
            else:
                log.warning("a pop of %s could not store its state (%s): nothing handed out", plan.busy, why)
                plan.result.status = PopStatus.UNAVAILABLE
                plan.result.messages = []
                plan.result.remark = f"pop state could not be stored: {why}"
            done(plan.result)

        def after_dlq(res: PutMessageResult | None) -> None:
            nonlocal waited
            if res is not None and res.status not in STORED:
                finish(False, res.status.name)
                return
            if dlq_left:
                waited |= self.put(dlq_left.pop(0), after_dlq)
            else:
                waited |= self.put_batch(batch, lambda r: finish(r.status in STORED, r.status.name))

        dlq_left = list(dlq)
        after_dlq(None)

    # -- shared helpers ----------------------------------------------------------------------------------------
    @property
    def store_host(self) -> bytes:
        """The broker's address packed as a record's BORNHOST (what the store's C encoder takes)."""
        h = self._born
        if h is None:
            h = self._born = pack_host(self.c.config.advertised_host, self.c.port)
        return h

    def put(self, msg: Any, then: Callable[[PutMessageResult], None]) -> bool:
        return self.put_batch([msg], then)

    def put_batch(self, msgs: list[Any], then: Callable[[PutMessageResult], None]) -> bool:
        """Store ``msgs`` (one topic and queue) and call ``then(result)`` on the event loop once durable as the
        flush mode promises: at once (returns False) when nothing has to wait, else later (returns True).

        A revive-log put that waits is *unsettled* until ``then`` has run: the revive checkpoint stays below
        where its records land (``unsettled_floor``), so a restart replays the state change it makes."""
        poster = self.c.poster
        store = self.c.store
        token = None
        if msgs and msgs[0].topic == self.revive_topic and store.group_commit is not None:
            cq = store.cq_table.find(self.revive_topic, R.REVIVE_QUEUE, create=False)
            token = next(self._tokens)
            self._unsettled[token] = cq.max_offset if cq is not None else 0

        def settled(r: PutMessageResult) -> None:
            try:
                then(r)
            finally:
                self._unsettled.pop(token, None)  # type: ignore[arg-type]
        res = store.put_messages_nowait(msgs, lambda r: poster.post(settled, r))
        if res is not None:
            settled(res)
            return False
        return True

    def unsettled_floor(self) -> int | None:
        """The lowest revive-log position a put still waiting for its flush may write (None: none waits)."""
        return min(self._unsettled.values()) if self._unsettled else None

    def commit_offset(self, host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Move a group's pop offset forward (never back: a late commit of an older pop changes nothing)."""
        if offset > self.c.offsets.query(group, topic, queue_id):
            self.c.offsets.commit(host or "pop", group, topic, queue_id, offset)

    def retry_topics(self, topic: str, group: str) -> list[str]:
        """The group's pop retry topics of ``topic`` that a pop reads (the configured naming first)."""
        v2 = self.c.config.enable_retry_topic_v2
        names = [X.pop_retry_topic(topic, group, v2), X.pop_retry_topic(topic, group, not v2)]
        return [n for n in names if self.c.topic_config.get(n) is not None]

    def ensure_retry_topic(self, topic: str, group: str) -> None:
        """Create a pop retry topic (1 queue, perm 6) with the group's offset at 0 (``addRetryTopicIfNotExist``)."""
        if self.c.topic_config.get(topic) is None:
            self.c.topic_config.create_system(topic, RETRY_QUEUE_NUMS, 6)
        if self.c.offsets.query(group, topic, 0) < 0:
            self.c.offsets.commit("initPopRetryOffset", group, topic, 0, 0)

    def first_in_memory(self, topic: str, queue_id: int) -> bool:
        store = self.c.store
        cq = store.cq_table.find(topic, queue_id, create=False)
        unit = cq.get_unit(0) if cq is not None else None
        if not unit:
            return False
        limit = getattr(self.c.client_processor, "mem_limit", 0)
        return store.get_max_phy_offset() - unit[0] <= limit

    def inflight_exceeded(self, topic: str, group: str, queue_id: int) -> bool:
        cfg = self.c.config
        return cfg.enable_pop_message_threshold and \
            self.inflight[(topic, group, queue_id)] > cfg.pop_inflight_message_threshold

    def add_inflight(self, topic: str, group: str, queue_id: int, n: int) -> None:
        key = (topic, group, queue_id)
        v = self.inflight[key] + n
        if v > 0:
            self.inflight[key] = v
        else:
            self.inflight.pop(key, None)

    def inflight_of(self, group: str, topic: str | None = None) -> dict[tuple[str, int], int]:
        """(real topic, queue) -> un-acked messages of ``group`` (non-FIFO pops; FIFO batches added)."""
        out: dict[tuple[str, int], int] = {}
        for (t, g, q), n in self.inflight.items():
            if g == group and (topic is None or t == topic or X.origin_topic(t, g) == topic):
                out[(t, q)] = out.get((t, q), 0) + n
        for (t, g, q), info in self.order.table.items():
            if g == group and (topic is None or t == topic):
                n = len([o for o in info.offsets if o not in info.acked])
                if n:
                    out[(t, q)] = out.get((t, q), 0) + n
        return out

    def on_revived(self, ck: R.CheckPoint, n: int) -> None:
        self.add_inflight(ck.topic, ck.group, ck.queue_id, -n)

    def fifo_pop_time(self, now: int) -> int:
        """A FIFO pop's time: ``now``, or one past the previous FIFO pop's when that is not before it."""
        t = self._fifo_time = max(now, self._fifo_time + 1)
        return t

    def order_changed(self) -> None:
        self._order_dirty = True

    def pending_add(self, revive_time: int) -> None:
        self._pending[revive_time] += 1

    def pending_done(self, revive_time: int) -> None:
        n = self._pending[revive_time] - 1
        if n > 0:
            self._pending[revive_time] = n
        else:
            del self._pending[revive_time]

    def pending_revive_min(self) -> int | None:
        return min(self._pending) if self._pending else None

    def wake_fifo(self, topic: str, group: str, queue_id: int) -> None:
        if self.polling is not None:
            self.polling.wake(X.origin_topic(topic, group), group, queue_id)

    # -- durable state -----------------------------------------------------------------------------------------
    def replay(self, kind: int, rec: R.Record, now: int) -> None:
        """A revive-log record after the checkpoint (``PopReviveService.replay``): redo its state change."""
        if isinstance(rec, R.CheckPoint):
            if rec.next_offset >= 0:
                self.commit_offset("replay", rec.group, rec.topic, rec.queue_id, rec.next_offset)
        elif isinstance(rec, R.OrderRecord):
            nxt = self.order.apply(rec, now)
            if nxt is not None:
                self.commit_offset("replay", rec.group, rec.topic, rec.queue_id, nxt)
            self._order_dirty = True

    def persist_state(self) -> None:
        """Write what the revive checkpoint relies on: group offsets and FIFO order info."""
        self.c.offsets.persist()
        if self._order_dirty:
            self._order_dirty = False
            try:
                self.order.persist(self.now())
            except OSError:
                self._order_dirty = True
                raise
