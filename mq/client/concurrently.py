"""Concurrent consumption for the push consumer (RocketMQ ``ConsumeMessageConcurrentlyService``).

``consume_thread_max`` workers take batches of at most ``consume_message_batch_max_size`` messages from one
queue and run the listener on them. RECONSUME_LATER or an exception sends each message back
(CONSUMER_SEND_MSG_BACK, delay level 0 = broker decides); if that fails the message is re-sent to
``%RETRY%<group>`` by the client's inner producer, and if that fails too it stays in the cache (the offset
cannot pass it) and is consumed again locally after ``local_retry_delay``. After each batch the lowest offset
still cached (or max + 1) is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mq.client.hooks import ConsumeContext, ConsumeStatus, run_hooks
from mq.client.process_queue import ProcessQueue
from mq.client.retry import SendBackResult, reset_retry_topic, send_back_concurrently
from mq.common.message import MessageExt, MessageQueue
from mq.errors import MQError

if TYPE_CHECKING:
    from mq.client.consumer import PushConsumer

log = logging.getLogger(__name__)

#: Java's consumeTimeout default (15 minutes): a listener slower than this is reported TIME_OUT to hooks.
CONSUME_TIMEOUT_MS = 15 * 60 * 1000
#: Hook property carrying the ConsumeReturnType (MixAll.CONSUME_CONTEXT_TYPE).
CONSUME_CONTEXT_TYPE = "ConsumeContextType"


class _ReturnedNone(MQError):
    """The listener returned None: retried like a failure, reported RETURNNULL."""


@dataclass(slots=True)
class ConsumeContextInfo:
    """What the listener gets besides the messages (Java ``ConsumeConcurrentlyContext``)."""

    queue: MessageQueue
    delay_level_when_next_consume: int = 0


@dataclass(slots=True)
class _Task:
    mq: MessageQueue
    pq: ProcessQueue
    msgs: list[MessageExt]


class ConcurrentlyService:
    """The workers of one push consumer that consumes concurrently."""

    def __init__(self, consumer: "PushConsumer") -> None:
        self.c = consumer
        self.queue: asyncio.Queue[_Task] = asyncio.Queue()
        self.later: set[asyncio.TimerHandle] = set()
        self.workers: list[asyncio.Task] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.workers = [loop.create_task(self._worker()) for _ in range(max(1, self.c.config.consume_thread_max))]

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Queue ``msgs`` (pulled from ``mq``, already cached in ``pq``) in batches for the workers."""
        bs = max(1, self.c.config.consume_message_batch_max_size)
        for i in range(0, len(msgs), bs):
            self.queue.put_nowait(_Task(mq, pq, msgs[i:i + bs]))

    async def drain(self, grace: float) -> None:
        """Cancel pending local retries and wait up to ``grace`` seconds for queued batches."""
        for h_ in self.later:
            h_.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.queue.join(), grace)

    async def _worker(self) -> None:
        c = self.c
        while True:
            task = await self.queue.get()
            try:
                await self._consume(task)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: consuming from %s failed", c.group, task.mq)
            finally:
                self.queue.task_done()

    async def _consume(self, task: _Task) -> None:
        c = self.c
        if task.pq.dropped:
            return
        reset_retry_topic(task.msgs, c.group)
        ctx = ConsumeContextInfo(task.mq)
        hook_ctx: ConsumeContext | None = None
        if c.hooks:
            hook_ctx = ConsumeContext(c.group, task.msgs, task.mq)
            run_hooks(c.hooks, "consume_before", hook_ctx)
        began = time.monotonic()
        outcome = ""
        try:
            status = await c._call_listener(task.msgs, ctx)
        except _ReturnedNone as exc:
            log.warning("%s: %s", c.group, exc)
            status, outcome = ConsumeStatus.RECONSUME_LATER, "RETURNNULL"
        except Exception as exc:
            log.warning("%s: listener raised on %s: %s", c.group, task.mq, exc)
            status, outcome = ConsumeStatus.RECONSUME_LATER, "EXCEPTION"
        if hook_ctx is not None:
            # ConsumeReturnType as Java's ConsumeMessageConcurrentlyService reports it to the trace hook.
            if not outcome:
                if (time.monotonic() - began) * 1000 >= CONSUME_TIMEOUT_MS:
                    outcome = "TIME_OUT"
                else:
                    outcome = "SUCCESS" if status is ConsumeStatus.CONSUME_SUCCESS else "FAILED"
            hook_ctx.props[CONSUME_CONTEXT_TYPE] = outcome
            hook_ctx.success = status is ConsumeStatus.CONSUME_SUCCESS
            hook_ctx.status = status.value
            run_hooks(c.hooks, "consume_after", hook_ctx)
        if task.pq.dropped:
            return
        failed: list[MessageExt] = []
        if status is ConsumeStatus.CONSUME_SUCCESS:
            c.counters.consumed_ok += len(task.msgs)
        else:
            c.counters.consumed_failed += len(task.msgs)
            if c.clustering:
                for m in task.msgs:
                    if not await self._send_back(m, ctx.delay_level_when_next_consume):
                        m.reconsume_times += 1
                        failed.append(m)
            else:
                log.warning("%s: BROADCASTING drops %d failed message(s)", c.group, len(task.msgs))
        failed_ids = {id(m) for m in failed}
        done = [m for m in task.msgs if id(m) not in failed_ids] if failed else task.msgs
        offset = task.pq.remove(done)
        if offset >= 0 and not task.pq.dropped:
            assert c.offset_store is not None
            c.offset_store.update(task.mq, offset, increase_only=True)
        if failed:
            c.counters.local_retries += len(failed)
            loop = asyncio.get_running_loop()
            retry = _Task(task.mq, task.pq, failed)

            def again(handle_ref: list) -> None:
                self.later.discard(handle_ref[0])
                if not task.pq.dropped and c._started:
                    self.queue.put_nowait(retry)
            ref: list = []
            handle = loop.call_later(c.config.local_retry_delay, again, ref)
            ref.append(handle)
            self.later.add(handle)

    def _max_reconsume(self) -> int:
        c = self.c
        return 16 if c.config.max_reconsume_times == -1 else c.config.max_reconsume_times

    async def _send_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the message's broker; on failure a plain send to %RETRY%<group>."""
        c = self.c
        assert c.instance is not None
        res = await send_back_concurrently(c.instance, c.group, msg, delay_level, self._max_reconsume())
        if res is SendBackResult.SENT_BACK:
            c.counters.sent_back += 1
        elif res is SendBackResult.RESENT:
            c.counters.resent_by_producer += 1
        return res is not SendBackResult.FAILED
