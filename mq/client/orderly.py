"""Orderly push consumption: RocketMQ's ``ConsumeMessageOrderlyService`` with a ``MessageListenerOrderly``
(FEATURES.md §5.5 and §3.4), used by ``PushConsumer(..., orderly=True)`` or ``ConsumerConfig.consume_orderly``.

Locks (CLUSTERING; ``QueueLocker`` does the calls):

- a rebalance locks a newly assigned queue with LOCK_BATCH_MQ before its first pull, and skips it when the
  broker refuses (another client still holds it; the next rebalance tries again);
- every ``lock_interval`` (20 s) every owned queue is locked again: this renews the client-side lock, which
  allows consuming for ``lock_max_live_time`` (30 s) after the last renewal, and marks unlocked the queues
  another client holds; a consume run that finds its queue unlocked or its lock expired stops and locks it
  again itself (then every ``lock_retry_delay`` while the broker refuses);
- a queue that is not locked is not pulled (retried ``lock_retry_delay``, 3 s, later), and not consumed; a queue
  whose renewal the broker refused (another client took it: ``lock_lost``) does not persist its offset, and
  when its lock comes back the next pull restarts from the committed offset (the broker's, or ours when it is
  further), dropping what was cached, so nothing is consumed twice or out of order (Java's
  ``previouslyLocked``, which Java applies to the first pull only);
- a queue taken away by a rebalance waits up to ``consume_lock_wait`` (1 s) for its in-flight batch, then its
  offset is persisted and it is unlocked (``unlock_delay``, 20 s, later when messages were still cached); if the
  batch is still running the queue stays, dropped, and the next rebalance tries again;
- at shutdown the in-flight batches finish, offsets are persisted, then every queue is unlocked.

Consumption: one consume run per queue at a time (a per-queue lock), each taking
``consume_message_batch_max_size`` messages in offset order while the queue is locked and the lock not expired;
queues run in parallel, at most ``consume_thread_max`` listener calls at once. A run yields after
``max_time_consume_continuously`` (60 s).

- CONSUME_SUCCESS: the batch is committed (offset = highest consumed + 1).
- SUSPEND_CURRENT_QUEUE_A_MOMENT (or RECONSUME_LATER, None, an exception): each message's ``reconsume_times``
  grows and the batch goes back to the head of the queue, which pauses ``suspend_current_queue_time`` (1 s; the
  listener may set ``context.suspend_current_queue_time``). A message already consumed ``maxReconsumeTimes``
  times (-1: Integer.MAX_VALUE) is sent to ``%RETRY%<group>`` (``retry.send_back_orderly``; the broker moves
  it to the DLQ) and counts as consumed; it is put back instead if that send fails.

BROADCASTING takes no broker locks: every queue is always consumable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from mq.client.concurrently import CONSUME_CONTEXT_TYPE, CONSUME_TIMEOUT_MS, _ReturnedNone
from mq.client.hooks import ConsumeContext, ConsumeStatus, run_hooks
from mq.client.offset_store import ReadOffsetType
from mq.client.queue_lock import QueueLocker
from mq.client.retry import SendBackResult, reset_retry_topic, send_back_orderly
from mq.common import properties as P
from mq.common.message import MessageExt, MessageQueue
from mq.config import OrderlyConfig
from mq.errors import MQError

if TYPE_CHECKING:
    from mq.client.consumer import PushConsumer
    from mq.client.process_queue import ProcessQueue

log = logging.getLogger(__name__)

#: Java's Integer.MAX_VALUE: the orderly default when maxReconsumeTimes is -1.
MAX_RECONSUME_TIMES_ORDERLY = 2**31 - 1
#: Delays of the internal re-scheduling (Java's 10 ms and 100 ms).
SOON = 0.01
RELOCK_SOON = 0.1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """What an orderly listener gets besides the messages (Java ``ConsumeOrderlyContext``)."""

    queue: MessageQueue
    #: Seconds to pause this queue after a suspend; -1: ``OrderlyConfig.suspend_current_queue_time``.
    suspend_current_queue_time: float = -1.0


async def _try_acquire(lock: asyncio.Lock, timeout: float) -> bool:
    """Acquire ``lock`` within ``timeout`` seconds; True if it is now held by the caller."""
    task = asyncio.ensure_future(lock.acquire())
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if task in done:
        return True
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return False
    return True  # acquired just as it was cancelled


class OrderlyService:
    def __init__(self, consumer: "PushConsumer", config: OrderlyConfig) -> None:
        self.c = consumer
        self.config = config
        self.locker: QueueLocker | None = None
        self.stopped = False
        self._mq_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._pending_unlocks: dict[MessageQueue, asyncio.TimerHandle] = {}
        self._lock_task: asyncio.Task | None = None
        self._slots: asyncio.Semaphore | None = None

    def context(self, mq: MessageQueue) -> ConsumeOrderlyContext:
        return ConsumeOrderlyContext(mq)

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        assert self.c.instance is not None
        self.stopped = False
        self.locker = QueueLocker(self.c.instance, self.c.group)
        self._slots = asyncio.Semaphore(max(1, self.c.config.consume_thread_max))
        if self.c.clustering:
            self._lock_task = asyncio.get_running_loop().create_task(self._lock_periodically())

    async def _lock_periodically(self) -> None:
        # Java's first lockAll is after 1 s because its new queues start unlocked; ours start locked.
        while not self.stopped:
            await asyncio.sleep(self.config.lock_interval)
            try:
                await self.lock_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: periodic lockAll failed", self.c.group)

    async def shutdown(self, grace: float) -> None:
        """Stop scheduling; let in-flight batches finish (up to ``grace`` seconds), then cancel the rest."""
        self.stopped = True
        if self._lock_task is not None:
            self._lock_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._lock_task
            self._lock_task = None
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        running = [t for t in self._tasks if not t.done()]
        if running:
            await asyncio.wait(running, timeout=grace)
        for t in list(self._tasks):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def unlock_all(self) -> None:
        """UNLOCK_BATCH_MQ every owned queue and every queue still waiting for a delayed unlock."""
        if self.locker is None or not self.c.clustering:
            return
        pending = [mq for mq in self._pending_unlocks if mq not in self.c.process_queues]
        for handle in self._pending_unlocks.values():
            handle.cancel()
        self._pending_unlocks.clear()
        await self.locker.unlock_all(self.c.process_queues)
        for mq in pending:
            await self.locker.unlock(mq)

    # -- locks ------------------------------------------------------------------------------------------
    async def lock(self, mq: MessageQueue) -> bool:
        if self.stopped or self.locker is None:
            return False
        ok = await self.locker.lock(mq, self.c.process_queues)
        if ok:
            handle = self._pending_unlocks.pop(mq, None)
            if handle is not None:
                handle.cancel()
        return ok

    async def lock_all(self) -> None:
        if not self.stopped and self.locker is not None:
            await self.locker.lock_all(self.c.process_queues)

    async def before_pull(self, mq: MessageQueue, pq: "ProcessQueue", offset: int) -> tuple[bool, int]:
        """Asked by the pull loop before each pull: (pull now?, from which offset). CLUSTERING pulls only a
        locked queue (else it waits ``lock_retry_delay``); a queue locked again after its lock was lost first
        re-reads the committed offset."""
        if not self.c.clustering:
            return True, offset
        if not pq.locked:
            await asyncio.sleep(self.config.lock_retry_delay)
            return False, offset
        if pq.lock_lost:
            return False, await self.fix_offset(mq, pq, offset)
        return True, offset

    async def fix_offset(self, mq: MessageQueue, pq: "ProcessQueue", offset: int) -> int:
        """The lock came back: restart from the committed offset (the broker's, or ours if further), dropping
        the cache, so messages another client consumed meanwhile are not consumed again."""
        assert self.c.offset_store is not None
        async with pq.consume_lock:
            ours = self.c.offset_store.memory(mq)
            try:
                broker = await self.c.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
            except MQError as exc:
                log.warning("%s: cannot read the offset of %s after re-locking it: %s", self.c.group, mq, exc)
                await asyncio.sleep(self.config.lock_retry_delay)
                return offset
            pq.lock_lost = False
            new = max(ours, broker)
            if new < 0:
                return offset
            self.c.offset_store.update(mq, new)
            log.info("%s: %s locked again, pulling from offset %d (was %d)", self.c.group, mq, new, offset)
            pq.clear()
            return new

    async def remove_unnecessary(self, mq: MessageQueue, pq: "ProcessQueue") -> bool:
        """A rebalance took ``mq`` away: once its in-flight batch is done persist the offset and unlock it.
        False (try again at the next rebalance) if the batch did not finish within ``consume_lock_wait``."""
        assert self.c.offset_store is not None
        if not await _try_acquire(pq.consume_lock, self.config.consume_lock_wait):
            pq.try_unlock_times += 1
            log.warning("%s: %s is still consuming, cannot unlock it yet (try %d)", self.c.group, mq,
                        pq.try_unlock_times)
            return False
        try:
            if self.c.clustering:
                if pq.locked and not pq.lock_lost:  # else another client's offset is the right one
                    with contextlib.suppress(MQError):
                        await self.c.offset_store.persist(mq)
                self.c.offset_store.remove(mq)
                if pq.has_temp_message() and self.config.unlock_delay > 0:
                    self._unlock_later(mq)
                elif self.locker is not None:
                    await self.locker.unlock(mq)
        finally:
            pq.consume_lock.release()
        return True

    def _unlock_later(self, mq: MessageQueue) -> None:
        old = self._pending_unlocks.pop(mq, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self._pending_unlocks.pop(mq, None)
            if mq not in self.c.process_queues and self.locker is not None:
                self._spawn(self.locker.unlock, mq)
        self._pending_unlocks[mq] = asyncio.get_running_loop().call_later(self.config.unlock_delay, fire)

    # -- scheduling -------------------------------------------------------------------------------------
    def _spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        task = asyncio.get_running_loop().create_task(fn(*args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            if not self.stopped:
                self._spawn(fn, *args)
        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._timers.add(handle)

    def submit(self, mq: MessageQueue, pq: "ProcessQueue") -> None:
        """Start a consume run for ``mq`` (it waits for the queue's previous run to end)."""
        if not self.stopped:
            self._spawn(self._consume_request, mq, pq)

    def submit_later(self, mq: MessageQueue, pq: "ProcessQueue", delay: float) -> None:
        self._later(min(max(delay, SOON), 30.0), self._consume_request, mq, pq)

    def try_lock_later(self, mq: MessageQueue, pq: "ProcessQueue", delay: float) -> None:
        self._later(delay, self._relock_then_consume, mq, pq)

    async def _relock_then_consume(self, mq: MessageQueue, pq: "ProcessQueue") -> None:
        ok = await self.lock(mq)
        self.submit_later(mq, pq, SOON if ok else self.config.lock_retry_delay)

    # -- consuming --------------------------------------------------------------------------------------
    def _consumable(self, pq: "ProcessQueue") -> bool:
        return not self.c.clustering or (pq.locked and not pq.lock_lost
                                         and not pq.lock_expired(self.config.lock_max_live_time))

    async def _consume_request(self, mq: MessageQueue, pq: "ProcessQueue") -> None:
        if pq.dropped:
            return
        async with self._mq_locks.setdefault(mq, asyncio.Lock()):
            if pq.lock_lost and pq.locked:  # re-locked: the pull loop re-reads the offset; its put dispatches
                pq.consuming = False
                return
            if not self._consumable(pq):
                if not pq.dropped:
                    self.try_lock_later(mq, pq, RELOCK_SOON)
                return
            began = time.monotonic()
            batch = max(1, self.c.config.consume_message_batch_max_size)
            while not pq.dropped and not self.stopped:
                if not self._consumable(pq):
                    log.warning("%s: %s is not locked (or its lock expired): consuming later", self.c.group, mq)
                    self.try_lock_later(mq, pq, SOON)
                    return
                if time.monotonic() - began > self.config.max_time_consume_continuously:
                    self.submit_later(mq, pq, SOON)
                    return
                msgs = pq.take_messages(batch)
                if not msgs or not await self._consume_batch(mq, pq, msgs):
                    return

    async def _consume_batch(self, mq: MessageQueue, pq: "ProcessQueue", msgs: list[MessageExt]) -> bool:
        c = self.c
        reset_retry_topic(msgs, c.group)
        ctx = ConsumeOrderlyContext(mq)
        hook_ctx: ConsumeContext | None = None
        if c.hooks:
            hook_ctx = ConsumeContext(c.group, msgs, mq)
            run_hooks(c.hooks, "consume_before", hook_ctx)
        assert self._slots is not None
        async with self._slots, pq.consume_lock:
            if pq.dropped:
                return False
            began = time.monotonic()
            status: ConsumeStatus | None = None
            outcome = ""
            try:
                status = await c._call_listener(msgs, ctx)  # type: ignore[arg-type]
            except _ReturnedNone as exc:
                log.warning("%s: %s", c.group, exc)
                outcome = "RETURNNULL"
            except Exception as exc:
                log.warning("%s: orderly listener raised on %s: %s", c.group, mq, exc)
                outcome = "EXCEPTION"
            success = status is ConsumeStatus.CONSUME_SUCCESS
            if not success:
                log.warning("%s: consuming %d message(s) of %s was suspended", c.group, len(msgs), mq)
            if hook_ctx is not None:
                if not outcome:
                    if (time.monotonic() - began) * 1000 >= CONSUME_TIMEOUT_MS:
                        outcome = "TIME_OUT"
                    else:
                        outcome = "SUCCESS" if success else "FAILED"
                hook_ctx.props[CONSUME_CONTEXT_TYPE] = outcome
                hook_ctx.success = success
                hook_ctx.status = "SUCCESS" if success else ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT.value
                run_hooks(c.hooks, "consume_after", hook_ctx)
            return await self._process_result(mq, pq, msgs, success, ctx)

    async def _process_result(self, mq: MessageQueue, pq: "ProcessQueue", msgs: list[MessageExt], success: bool,
                              ctx: ConsumeOrderlyContext) -> bool:
        """Commit or put back (under the queue's consume lock); True to go on with the next batch."""
        c = self.c
        assert c.offset_store is not None
        go_on = True
        if success:
            c.counters.consumed_ok += len(msgs)
            commit = pq.commit()
        else:
            c.counters.consumed_failed += len(msgs)
            again = await self._check_reconsume_times(msgs)
            if again:
                # Messages sent to the retry topic stay in the consuming map: the next commit covers them.
                pq.make_messages_consume_again(again)
                pause = ctx.suspend_current_queue_time
                self.submit_later(mq, pq, self.config.suspend_current_queue_time if pause < 0 else pause)
                commit, go_on = -1, False
            else:
                commit = pq.commit()
        if commit >= 0:
            # Also when the queue was just dropped: its remover waits for this lock, then persists this offset.
            c.offset_store.update(mq, commit)
        return go_on

    def max_reconsume_times(self) -> int:
        mx = self.c.config.max_reconsume_times
        return MAX_RECONSUME_TIMES_ORDERLY if mx == -1 else mx

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """Return the messages to consume again (their reconsume_times grown); the others were sent back."""
        c = self.c
        assert c.instance is not None
        mx = self.max_reconsume_times()
        again = []
        for m in msgs:
            if m.reconsume_times >= mx:
                m.properties[P.RECONSUME_TIME] = str(m.reconsume_times)
                if await send_back_orderly(c.instance, c.group, m, mx) is not SendBackResult.FAILED:
                    c.counters.resent_by_producer += 1
                    continue
            m.reconsume_times += 1
            again.append(m)
        if again:
            c.counters.local_retries += len(again)
        return again
