"""The write half of ``MessageStore``: checks, encodes and appends sends and batches, and answers them as the
flush mode requires (RocketMQ ``DefaultMessageStore.putMessage``/``putMessages`` and ``CommitLog.asyncPutMessage``).

``PutPath`` is a base class of ``MessageStore`` and works on the state ``MessageStore.__init__`` and ``load`` set
up (annotated below): the commit log, the put lock, the group commit service (SYNC_FLUSH) or the dispatcher
(ASYNC_FLUSH), the cleaner's disk verdict and the store's counters. Under ASYNC_FLUSH a put is answered as soon as
its records are appended and dispatched; under SYNC_FLUSH it joins the current flush group and is answered when
that group's fdatasync completes (``put_messages`` blocks; ``put_messages_nowait`` takes a callback run in the
flush thread, or returns a Future), except for a message with WAIT=false.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Callable, Sequence

from mq.common.message import MessageExtBrokerInner
from mq.config import StoreConfig
from mq.store.cleaner import Cleaner
from mq.store.commit_log import CommitLog, Prepared, waits_for_flush
from mq.store.dispatcher import Dispatcher
from mq.store.flush import FlushGroup, FlushWaiter, GroupCommitService
from mq.store.status import PutMessageResult, PutMessageStatus, StoreStats

_S = PutMessageStatus


class PutPath:
    """Puts into the store (see the module docstring); mixed into ``MessageStore``."""

    config: StoreConfig
    commit_log: CommitLog
    dispatcher: Dispatcher
    cleaner: Cleaner
    group_commit: GroupCommitService | None
    put_lock: threading.Lock
    stats: StoreStats
    flush_error: str | None
    now: Callable[[], float]
    _shutdown: bool
    _loaded: bool
    _slave: bool
    _begin_in_lock: float

    @property
    def acks_on_append(self) -> bool:
        """ASYNC_FLUSH: a put is answered as soon as it is appended and dispatched (no group commit to wait for),
        so ``put_message``/``put_messages`` never block on the disk."""
        return self.group_commit is None

    def _check_writable(self) -> tuple[PutMessageStatus, str] | None:
        if self._shutdown or not self._loaded:
            return _S.SERVICE_NOT_AVAILABLE, "message store is shut down" if self._shutdown else "not started"
        if self._slave:
            return _S.SERVICE_NOT_AVAILABLE, "message store is in slave mode, so putMessage is forbidden"
        if self.flush_error is not None:
            return _S.SERVICE_NOT_AVAILABLE, self.flush_error
        if self.dispatcher.error is not None:
            return _S.SERVICE_NOT_AVAILABLE, self.dispatcher.error
        if self.cleaner.disk_full:
            return _S.SERVICE_NOT_AVAILABLE, f"disk full ({self.cleaner.last_ratio:.0%} used)"
        b = self._begin_in_lock
        if b and (time.monotonic() - b) * 1000 > self.config.os_page_cache_busy_timeout_mills:
            return _S.OS_PAGECACHE_BUSY, "put lock held too long"
        return None

    def _rejected(self, status: PutMessageStatus, remark: str) -> PutMessageResult:
        self.stats.put_failures += 1
        return PutMessageResult(status, remark=remark)

    def _put_failed(self, status: PutMessageStatus, topic: str) -> PutMessageResult:
        """The result of a put that ``CommitLog.prepare`` rejected or ``CommitLog.append`` could not store."""
        if status is _S.MESSAGE_ILLEGAL or status is _S.PROPERTIES_SIZE_EXCEEDED:  # prepare's verdicts
            why = self.commit_log.reject_reason or status.name
            return self._rejected(status, f"message to {topic} rejected: {why}")
        why = (self.commit_log.create_error if status is _S.CREATE_MAPPED_FILE_FAILED or status is _S.UNKNOWN_ERROR
               else "append failed")
        self.stats.put_failures += 1
        return PutMessageResult(status, remark=why)

    def _prepare_batch(self, msgs: Sequence[MessageExtBrokerInner]) -> list[Prepared] | PutMessageResult:
        prepare = self.commit_log.prepare
        out = []
        for m in msgs:
            p = prepare(m)
            if p.__class__ is PutMessageStatus:
                why = self.commit_log.reject_reason or p.name  # type: ignore[union-attr]
                return self._rejected(p, f"message to {m.topic} rejected: {why}")  # type: ignore[arg-type]
            out.append(p)
        if not out:
            return self._rejected(_S.MESSAGE_ILLEGAL, "empty batch")
        first = out[0]
        for p in out:
            if p.topic != first.topic or p.queue_id != first.queue_id or p.delay_ms:
                return self._rejected(_S.MESSAGE_ILLEGAL, "a batch needs one topic and queue, no delay")
        return out

    def _put(self, msgs: Sequence[MessageExtBrokerInner], waiter: object = None
             ) -> tuple[PutMessageResult, FlushGroup | None]:
        """Check, encode and append one message or a batch under the put lock. Under ASYNC_FLUSH the records
        are dispatched at once and the group is None. Under SYNC_FLUSH they join the current flush group, which
        is returned when the first message asks to wait for it (WAIT != false), and ``waiter`` (a Future or a
        ``FlushWaiter``) is then resolved with the result when the group completes. One frame for the whole
        put: this is the hot path of every send."""
        bad = self._check_writable()
        if bad is not None:
            return self._rejected(*bad), None
        cl = self.commit_log
        one = msgs[0] if len(msgs) == 1 else None  # the common case: no batch checks, one C call (put_one)
        if one is not None:
            wait = waits_for_flush(one)
        else:
            prepared = self._prepare_batch(msgs)
            if prepared.__class__ is PutMessageResult:
                return prepared, None  # type: ignore[return-value]
            wait = prepared[0].wait  # type: ignore[index]
        with self.put_lock:
            self._begin_in_lock = time.monotonic()
            try:
                ts = int(self.now() * 1000)
                reqs = cl.put_one(one, ts) if one is not None else cl.append(prepared, ts)  # type: ignore
                if reqs.__class__ is PutMessageStatus:
                    return self._put_failed(reqs, msgs[0].topic), None  # type: ignore[arg-type]
                first = reqs[0]
                if len(reqs) == 1:
                    wrote = first.size
                    phys = [first.phy_offset]
                else:
                    last = reqs[-1]
                    wrote = last.phy_offset + last.size - first.phy_offset
                    phys = [r.phy_offset for r in reqs]
                res = PutMessageResult(_S.PUT_OK, first.phy_offset, wrote, first.queue_offset, phys,
                                       first.store_timestamp, len(reqs), "", cl.store_host, first.topic)
                gc = self.group_commit
                if gc is not None:
                    group = gc.add(reqs)
                    if not wait:
                        group = None  # answered now, so its bytes go to the OS now (a crash must not lose it)
                        if not cl.try_commit():
                            res.status = _S.FLUSH_DISK_TIMEOUT
                            res.remark = cl.create_error
                    elif waiter is not None:
                        group.futures.append((waiter, res))
                else:
                    group = None
                    self.dispatcher.dispatch(reqs)
            finally:
                held = time.monotonic() - self._begin_in_lock
                self._begin_in_lock = 0.0
                if held >= 0.001:  # brokerStatus's put latency: the rare slow puts one by one
                    self.stats.slow_put(held)
        st = self.stats
        st.put_count += len(reqs)
        st.put_bytes += wrote
        return res, group

    def put_messages(self, msgs: Sequence[MessageExtBrokerInner]) -> PutMessageResult:
        """Append one message or a batch (one topic and queue; all-or-nothing) and wait as the flush
        mode requires. Under SYNC_FLUSH the wait is skipped when the first message has WAIT=false."""
        res, group = self._put(msgs)
        return res if group is None else self._wait(res, group)

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Append one message and wait as the flush mode requires (``put_messages`` of one message).

        Under ASYNC_FLUSH this is ``_put`` without its batch and SYNC_FLUSH cases, inline: the hot path of
        every send there, one frame of glue around the commit log's encoder and writer and the dispatcher."""
        if self.group_commit is not None:
            res, group = self._put((msg,))
            return res if group is None else self._wait(res, group)
        bad = self._check_writable()
        if bad is not None:
            return self._rejected(*bad)
        cl = self.commit_log
        with self.put_lock:
            self._begin_in_lock = time.monotonic()
            try:
                reqs = cl.put_one(msg, int(self.now() * 1000))
                if reqs.__class__ is PutMessageStatus:
                    return self._put_failed(reqs, msg.topic)  # type: ignore[arg-type]
                r = reqs[0]
                res = PutMessageResult(_S.PUT_OK, r.phy_offset, r.size, r.queue_offset, [r.phy_offset],
                                       r.store_timestamp, 1, "", cl.store_host, r.topic)
                self.dispatcher.dispatch(reqs)  # type: ignore[arg-type]
            finally:
                held = time.monotonic() - self._begin_in_lock
                self._begin_in_lock = 0.0
                if held >= 0.001:
                    self.stats.slow_put(held)
        st = self.stats
        st.put_count += 1
        st.put_bytes += r.size
        return res

    def _wait(self, res: PutMessageResult, group: FlushGroup) -> PutMessageResult:
        """Block until the group commit covering ``res`` completes; FLUSH_DISK_TIMEOUT (or the flush error)
        when it does not in ``syncFlushTimeout``."""
        status = group.wait(self.config.sync_flush_timeout / 1000.0)
        if status is not _S.PUT_OK:
            res.status = status
            res.remark = "flush did not complete in time" if self.flush_error is None else self.flush_error
        return res

    def put_messages_nowait(self, msgs: Sequence[MessageExtBrokerInner],
                            callback: Callable[[PutMessageResult], None] | None = None
                            ) -> PutMessageResult | concurrent.futures.Future | None:
        """Non-blocking put without a Future where none is needed (the broker's send path).

        Returns the ``PutMessageResult`` when the answer is known at once (ASYNC_FLUSH, WAIT=false, a failed
        precondition). Otherwise the put waits for its group commit: with ``callback`` it returns None and
        ``callback(result)`` runs exactly once in the flush thread when the group completes (or times out);
        without one it returns a ``concurrent.futures.Future`` of the result."""
        if self.group_commit is None:
            return self.put_message(msgs[0]) if len(msgs) == 1 else self._put(msgs)[0]
        waiter: object = FlushWaiter(callback) if callback is not None else concurrent.futures.Future()
        res, group = self._put(msgs, waiter)
        if group is None:  # failed, or WAIT=false: nothing to wait for
            return res
        return None if callback is not None else waiter  # type: ignore[return-value]

    def put_messages_async(self, msgs: Sequence[MessageExtBrokerInner]) -> concurrent.futures.Future:
        """Non-blocking put: a Future resolved with the PutMessageResult once the group commit covering it
        completes (at once under ASYNC_FLUSH or for a failed precondition)."""
        r = self.put_messages_nowait(msgs)
        if r.__class__ is PutMessageResult:
            fut: concurrent.futures.Future = concurrent.futures.Future()
            fut.set_result(r)
            return fut
        return r  # type: ignore[return-value]

    def put_message_async(self, msg: MessageExtBrokerInner) -> concurrent.futures.Future:
        return self.put_messages_async((msg,))


__all__ = ["PutPath"]
