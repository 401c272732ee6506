"""Index entries for dispatched records, built in batches behind the consume queues (RocketMQ builds its index
asynchronously too).

``Dispatcher.dispatch`` appends each put's ``DispatchRequest`` list to ``IndexDispatcher.queue`` and calls
``wake`` only when ``sleeping`` is set, so a burst of puts costs one wake-up. A pass takes everything queued
and indexes it as one batch (one lock, one header write: ``IndexService.build_batch``). Passes run one of two
ways:

- **driven** (``drive``, before ``start``): as callbacks of the store's owner, through an ``IndexScheduler``.
  The broker hands its event loop's: a pass runs on the loop ``LINGER_S`` after the first put it covers, so
  the index costs the loop one C-heavy call per 5 ms instead of a thread that takes the interpreter lock from
  it. Measured under RocketMQ's benchmark Producer on 2 CPUs, the thread's lock hand-overs cost the loop more
  than the pass itself (docs/performance.md). A pass takes at most ``MAX_PASS`` records; the rest goes to the
  next callback, so a backlog never stops the loop for long.
- **threaded** (the default, for the store used on its own): a background thread that waits for ``wake``.
  After a wake-up it lingers ``LINGER_S`` before its pass unless ``LINGER_BATCHES`` submissions are already
  queued: at a few thousand puts a second a 1 ms linger still meant a wake-up, with its lock hand-over,
  every two or three puts.

Either way a key becomes searchable at most about ``LINGER_S`` after its put (``wait_idle`` lets a query wait
for it), and entries an index file could not take (a full disk) are retried every ``RETRY_S`` before new work.
Before ``start`` and after ``stop``, ``wake`` indexes in the calling thread (recovery's reput).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Protocol

from mq.common import sysflag as SF
from mq.store.commit_log import DispatchRequest

log = logging.getLogger(__name__)

_ROLLBACK = SF.TRANSACTION_ROLLBACK_TYPE


class IndexLike(Protocol):  # mq.store.index_service.IndexService
    def build_index(self, topic: str, keys: str | None, uniq_key: str | None, phy_offset: int,
                    store_timestamp: int) -> None: ...


class IndexScheduler(Protocol):
    """Runs the index passes for a store that is driven by its owner (the broker's ``LoopPoster``)."""

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` in the owner's thread about ``delay`` seconds from now; callable from any thread."""

    def on_owner_thread(self) -> bool:
        """True in the thread that runs the callbacks."""


class IndexDispatcher:
    """Builds index entries in log order from dispatched requests: in its own thread, or driven (``drive``)."""

    LINGER_S = 0.005
    LINGER_BATCHES = 64
    #: how often entries held back by a failed index-file creation are retried
    RETRY_S = 1.0
    #: records one driven pass indexes at most (a few ms of the owner's thread)
    MAX_PASS = 8192

    def __init__(self, index: IndexLike) -> None:
        self.index = index
        #: submissions waiting for the thread, in log order
        self.queue: collections.deque[list[DispatchRequest]] = collections.deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        #: set by ``drive``: passes run as the owner's callbacks, no thread
        self._scheduler: IndexScheduler | None = None
        #: driven and started: ``wake`` schedules a pass
        self._driven = False
        self._retry_scheduled = False
        #: True while no pass is due: a pass is not scheduled (driven), the thread is (about to be) waiting for
        #: work, or none runs. A submitter that sees it calls ``wake``, which clears it, so one sleep costs one
        #: wake-up.
        self.sleeping = True
        #: store time / end offset of the last record whose keys are indexed
        self.last_timestamp = 0
        self.indexed_offset = 0
        self._idle = threading.Event()
        self._idle.set()

    def drive(self, scheduler: IndexScheduler) -> None:
        """Run the passes through ``scheduler`` instead of a thread, from ``start`` on."""
        self._scheduler = scheduler

    def submit(self, requests: list[DispatchRequest]) -> None:
        """Queue ``requests`` for indexing (``Dispatcher.dispatch`` does the same two steps inline)."""
        self.queue.append(requests)
        if self.sleeping:
            self.wake()

    def wake(self) -> None:
        """After a submission that found ``sleeping`` set: schedule a pass (driven), wake the thread, or, when
        neither runs (not started, as in recovery, or stopped), index what is queued in this thread. The pass
        sets ``sleeping`` before it last checks the queue, so either it sees the submission or the submitter
        sees the flag and wakes it."""
        if self._driven:
            with self._cond:
                if not self.sleeping:
                    return
                self.sleeping = False
                self._idle.clear()
            self._later(self.LINGER_S, self._pass)
            return
        if self._thread is None:
            self._drain()
            return
        with self._cond:
            if not self.sleeping:  # another submission woke it already, and it has not taken the GIL yet
                return
            # Cleared here, not by the woken thread: until that thread gets the GIL back (up to the switch
            # interval while the loop is busy) every submission would otherwise find the flag set and wake again.
            self.sleeping = False
            self._idle.clear()
            self._cond.notify()

    def _drain(self) -> None:
        q = self.queue
        while q:
            self._build(q.popleft())

    def _later(self, delay: float, fn: Callable[[], None]) -> None:
        assert self._scheduler is not None  # driven only
        self._scheduler.call_later(delay, fn)

    def _take(self, limit: int | None = None) -> list[DispatchRequest]:
        """Queued requests in log order: whole submissions until ``limit`` records are taken (None: all)."""
        q = self.queue
        work: list[DispatchRequest] = []
        while q and (limit is None or len(work) < limit):
            work += q.popleft()
        return work

    def _pass(self) -> None:
        """One driven pass, in the owner's thread."""
        if not self._driven:  # stopped meanwhile: ``stop`` indexed what was queued
            return
        self.sleeping = True
        work = self._take(self.MAX_PASS)
        if work:
            self._build(work)
        with self._cond:
            if self.queue:
                if self.sleeping:  # more than one pass holds: the rest in the next callback
                    self.sleeping = False
                    self._later(0.0, self._pass)
                return
        self._settle()

    def _settle(self) -> None:
        """After a driven pass that emptied the queue: idle, or a retry of held-back entries is due."""
        if getattr(self.index, "pending", 0):  # entries wait for an index file: not idle until they are in
            if not self._retry_scheduled:
                self._retry_scheduled = True
                self._later(self.RETRY_S, self._retry_pass)
            return
        with self._cond:
            if self.sleeping and not self.queue:
                self._idle.set()

    def _retry_pass(self) -> None:
        self._retry_scheduled = False
        if not self._driven:
            return
        if not self.queue:  # new work retries first by itself (``IndexService._put_items``)
            self._retry()
            self._settle()

    def _build(self, requests: list[DispatchRequest]) -> None:
        batch = getattr(self.index, "build_batch", None)
        if batch is not None:
            try:
                batch(requests)
            except OSError:
                pass  # the index keeps the entries it could not write (``pending``); they are retried
            except Exception:
                log.exception("index build failed between offsets %d and %d", requests[0].phy_offset,
                              requests[-1].phy_offset)
        else:
            build = self.index.build_index
            for r in requests:
                if (r.keys or r.uniq_key) and r.tran_type != _ROLLBACK:
                    try:
                        build(r.topic, r.keys, r.uniq_key, r.phy_offset, r.store_timestamp)
                    except Exception:
                        log.exception("index build failed at offset %d", r.phy_offset)
        last = requests[-1]
        self.last_timestamp = last.store_timestamp
        self.indexed_offset = last.phy_offset + last.size

    def start(self) -> None:
        self._stopped = False
        if self._scheduler is not None:
            self._driven = True
            self.sleeping = True
            if self.queue:
                self.wake()
            return
        self.sleeping = True  # until the thread runs, submit must wake it (and clear _idle)
        self._thread = threading.Thread(target=self._run, name="mq-store-index", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        q = self.queue
        while True:
            woken = False
            with self._cond:
                self.sleeping = True
                if not q and not self._stopped:
                    woken = True
                while not q and not self._stopped:
                    if getattr(self.index, "pending", 0):
                        self._cond.wait(self.RETRY_S)  # entries wait for an index file: retry them
                        if not q and not self._stopped:
                            self._retry()
                        continue
                    self._idle.set()
                    self._cond.wait()
                if not q and self._stopped:
                    self._idle.set()
                    return
                self.sleeping = False
                woken = woken and not self._stopped
            if woken and len(q) < self.LINGER_BATCHES:
                # Woken for a few puts: let more arrive before taking the GIL for a pass, so a steady stream
                # costs one wake-up per LINGER_S rather than one per put.
                time.sleep(self.LINGER_S)
            work = self._take()
            if work:
                self._build(work)

    def _retry(self) -> None:
        try:
            self.index.retry_pending()  # type: ignore[attr-defined]
        except OSError:
            pass  # still no room; logged by the index
        except Exception:
            log.exception("retrying held-back index entries failed")

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until what was submitted is indexed. Driven, in the owner's thread (which runs the passes),
        it indexes what is queued at once instead."""
        if self._driven and self._scheduler.on_owner_thread():  # type: ignore[union-attr]
            work = self._take()
            if work:
                self._build(work)
            return True
        return self._idle.wait(timeout)

    @property
    def backlog(self) -> int:
        return sum(len(r) for r in list(self.queue))

    def stop(self) -> None:
        self._driven = False
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._drain()  # anything submitted while the thread was stopping, or not yet passed (driven)
        self.sleeping = True
        self._idle.set()
