"""Flushing the commit log and consume queues (RocketMQ FlushRealTimeService, GroupCommitService,
FlushDiskWatcher, FlushConsumeQueueService).

- ASYNC_FLUSH: ``AsyncFlushService`` wakes every ``flush_interval_commit_log`` ms and fdatasyncs when at
  least ``flush_commit_log_least_pages`` pages are dirty (everything every thorough interval).
- SYNC_FLUSH: ``GroupCommitService``. Appends join the current ``FlushGroup``; the flush thread swaps the
  group out and writes the records staged for it (``CommitLog.commit``: one pwrite) under the put lock, runs
  one ``os.fdatasync`` for everything written so far (new appends pile up in the next group meanwhile), then
  dispatches the group's records and completes it: blocking callers wake from one Event, non-blocking callers
  get their ``concurrent.futures.Future`` resolved. A group older than ``sync_flush_timeout`` is answered
  FLUSH_DISK_TIMEOUT by the watcher; a failed write or fdatasync is answered FLUSH_DISK_TIMEOUT and the store
  stops accepting writes - never PUT_OK.
"""

from __future__ import annotations

import abc
import concurrent.futures
import logging
import os
import threading
from _thread import allocate_lock as _allocate_lock
import time
from typing import Callable

from mq.store.commit_log import CommitLog, DispatchRequest
from mq.store.status import PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

Fsync = Callable[[int], None]


class PeriodicService(abc.ABC):
    """A daemon thread calling ``run_once`` every ``interval_ms`` until stopped (then once more)."""

    name = "mq-store-service"

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.wait_s()):
            try:
                self.run_once()
            except Exception:
                log.exception("%s pass failed", self.name)

    def wait_s(self) -> float:
        """Seconds from the end of one pass to the next: ``interval_ms``."""
        return self.interval_ms / 1000.0

    @abc.abstractmethod
    def run_once(self) -> None:
        """One pass of the service's work."""

    def stop(self, *, final_pass: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if final_pass:
            try:
                self.run_once()
            except Exception:
                log.exception("%s final pass failed", self.name)


class PagedFlushService(PeriodicService):
    """A periodic flush that writes back only when ``least_pages`` pages are dirty, and everything once every
    ``thorough_ms`` (RocketMQ's flushLeastPages / flushThoroughInterval)."""

    def __init__(self, interval_ms: int, least_pages: int, thorough_ms: int) -> None:
        super().__init__(interval_ms)
        self.least_pages = least_pages
        self.thorough_ms = thorough_ms
        self._last_thorough = time.monotonic()

    def pages_due(self, force: bool) -> int:
        """How many dirty pages this pass needs before it flushes (0: flush whatever is dirty)."""
        now = time.monotonic()
        if force or (now - self._last_thorough) * 1000 >= self.thorough_ms:
            self._last_thorough = now
            return 0
        return self.least_pages


class AsyncFlushService(PagedFlushService):
    name = "mq-store-flush-commitlog"

    def __init__(self, commit_log: CommitLog, *, interval_ms: int, least_pages: int, thorough_ms: int,
                 on_flushed: Callable[[int], None], on_error: Callable[[BaseException], None],
                 fsync: Fsync = os.fdatasync) -> None:
        super().__init__(interval_ms, least_pages, thorough_ms)
        self.commit_log = commit_log
        self.on_flushed = on_flushed
        self.on_error = on_error
        self.fsync = fsync

    def run_once(self, *, force: bool = False) -> None:
        pages = self.pages_due(force)
        ts = self.commit_log.last_store_timestamp
        q = self.commit_log.queue
        before = q.flushed_where
        try:
            after = q.flush(pages, self.fsync)
        except OSError as exc:
            self.on_error(exc)
            return
        if after > before:
            self.on_flushed(ts)

    def stop(self, *, final_pass: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if final_pass:
            self.run_once(force=True)


class FlushWaiter:
    """A non-blocking put waiting for its group commit: ``callback(result)`` runs once, in the flush thread
    (or the watcher's, on timeout). Cheaper than a ``concurrent.futures.Future`` (no Condition per put)."""

    __slots__ = ("callback", "done")

    def __init__(self, callback: Callable[[PutMessageResult], None]) -> None:
        self.callback = callback
        self.done = False


class FlushGroup:
    """The appends that one fdatasync will cover.

    Blocked putters wait on ``gate``, a lock held from the group's creation until it completes; each waiter
    that gets it releases it at once for the next one. That wakes the waiters one after another with a single
    lock operation each, where an ``Event`` makes every woken thread take the condition's lock again."""

    __slots__ = ("gate", "status", "futures", "created", "count", "lock")

    def __init__(self) -> None:
        self.gate = _allocate_lock()
        self.gate.acquire()
        self.status: PutMessageStatus | None = None
        #: (Future or FlushWaiter, result) of the non-blocking puts in the group
        self.futures: list[tuple[concurrent.futures.Future | FlushWaiter, PutMessageResult]] = []
        self.created = 0.0
        self.count = 0
        #: serialises completion and the watcher's timeout answers
        self.lock = threading.Lock()

    def complete(self, status: PutMessageStatus) -> None:
        with self.lock:
            if self.status is None:
                self.status = status
                self.gate.release()
            _resolve_all(self.futures, status)

    def wait(self, timeout: float) -> PutMessageStatus:
        if not self.gate.acquire(True, timeout):
            return PutMessageStatus.FLUSH_DISK_TIMEOUT
        self.gate.release()
        return self.status or PutMessageStatus.FLUSH_DISK_TIMEOUT


def _failed(res: PutMessageResult, status: PutMessageStatus) -> PutMessageResult:
    return PutMessageResult(status, res.wrote_offset, res.wrote_bytes, res.queue_offset, res.phy_offsets,
                            res.store_timestamp, res.msg_num, "flush did not complete", res.store_host, res.topic)


def _resolve_all(waiters: list, status: PutMessageStatus) -> None:
    """Answer every waiter not answered yet; the caller holds the group's lock."""
    ok = status is PutMessageStatus.PUT_OK
    for w, res in waiters:
        if w.__class__ is FlushWaiter:
            if w.done:
                continue
            w.done = True
            try:
                w.callback(res if ok else _failed(res, status))
            except Exception:
                log.exception("put completion callback failed")
        else:
            _resolve(w, res, status)


def _resolve(fut: concurrent.futures.Future, res: PutMessageResult, status: PutMessageStatus) -> None:
    if fut.done():
        return
    if status is not PutMessageStatus.PUT_OK:
        res = _failed(res, status)
    try:
        fut.set_result(res)
    except concurrent.futures.InvalidStateError:  # raced with the watcher
        pass


class GroupCommitService:
    """SYNC_FLUSH group commit; ``add`` is called by the appender while it holds ``put_lock``."""

    def __init__(self, commit_log: CommitLog, put_lock: threading.Lock,
                 dispatch: Callable[[list[DispatchRequest]], None], *, timeout_ms: int,
                 on_flushed: Callable[[int], None], on_error: Callable[[BaseException], None],
                 fsync: Fsync = os.fdatasync) -> None:
        self.commit_log = commit_log
        self.put_lock = put_lock
        self.dispatch = dispatch
        self.timeout_ms = timeout_ms
        self.on_flushed = on_flushed
        self.on_error = on_error
        self.fsync = fsync
        self._group = FlushGroup()
        self._pending: list[DispatchRequest] = []
        self._inflight: list[FlushGroup] = []
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._watcher: threading.Thread | None = None
        self.failed = False
        self.flush_count = 0

    # -- appender side (under put_lock) ------------------------------------------------------------------
    def add(self, requests: list[DispatchRequest]) -> FlushGroup:
        g = self._group
        if not g.count:
            g.created = time.monotonic()
        g.count += len(requests)
        self._pending.extend(requests)
        wake = self._wake
        if not wake.is_set():  # the flush thread clears it before it swaps the group out (under put_lock)
            wake.set()
        return g

    # -- flush thread ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="mq-store-group-commit", daemon=True)
        self._thread.start()
        self._watcher = threading.Thread(target=self._watch, name="mq-store-flush-watcher", daemon=True)
        self._watcher.start()

    def _run(self) -> None:
        # An append sets _wake after adding its work; clearing before the swap in flush_once means no work
        # is ever left behind. The timeout only bounds how long a stop request can go unnoticed.
        while True:
            self._wake.wait(0.2)
            self._wake.clear()
            if not self.flush_once() and self._stopped:
                return

    def flush_once(self) -> bool:
        """One group commit; False when there was nothing to do."""
        with self.put_lock:
            g = self._group
            reqs = self._pending
            if not g.count and not reqs:
                return False
            self._group = FlushGroup()
            self._pending = []
            ts = self.commit_log.last_store_timestamp
            self._inflight.append(g)
            error: OSError | None = None
            if not self.failed:  # the staged records go to the OS (CommitLog.staging)
                try:
                    self.commit_log.commit()
                except OSError as exc:
                    error = exc
        status = PutMessageStatus.PUT_OK
        if self.failed:
            status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        else:
            if error is None:
                try:
                    self.commit_log.queue.flush(0, self.fsync)
                    self.flush_count += 1
                except OSError as exc:
                    error = exc
            if error is not None:  # a failed write or fdatasync fails the group and every write after it
                self.failed = True
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
                self.on_error(error)
        if status is PutMessageStatus.PUT_OK:
            try:
                self.dispatch(reqs)
            except Exception:
                log.exception("dispatch after group commit failed")
            self.on_flushed(ts)
        g.complete(status)
        try:
            self._inflight.remove(g)
        except ValueError:
            pass
        return True

    def _watch(self) -> None:
        period = min(0.1, self.timeout_ms / 4000.0)
        while not self._stopped:
            time.sleep(period)
            limit = time.monotonic() - self.timeout_ms / 1000.0
            for g in list(self._inflight) + [self._group]:
                if g.count and g.created < limit and g.futures and g.status is None:
                    with g.lock:
                        if g.status is None:
                            _resolve_all(list(g.futures), PutMessageStatus.FLUSH_DISK_TIMEOUT)

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        while self.flush_once():
            pass


class ConsumeQueueFlushService(PagedFlushService):
    """Flush dirty consume queues and then the checkpoint (RocketMQ FlushConsumeQueueService)."""

    name = "mq-store-flush-cq"

    def __init__(self, queues: Callable[[], list], *, interval_ms: int, least_pages: int, thorough_ms: int,
                 after: Callable[[], None]) -> None:
        super().__init__(interval_ms, least_pages, thorough_ms)
        self.queues = queues
        self.after = after

    def run_once(self, *, force: bool = False) -> None:
        pages = self.pages_due(force)
        for cq in self.queues():
            try:
                cq.flush(pages)
            except (OSError, ValueError):
                log.exception("consume queue %s-%s flush failed", cq.topic, cq.queue_id)
        self.after()

    def stop(self, *, final_pass: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if final_pass:
            self.run_once(force=True)
