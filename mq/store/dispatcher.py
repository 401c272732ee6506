"""Dispatch: turn stored records into consume-queue units and index entries (RocketMQ ReputMessageService).

Design (measured, see benchmarks/store_dispatch.py): the append path already knows everything a consume-queue
unit needs (topic, queue, offsets, size, tags code), so dispatch is driven by the append path from those
``DispatchRequest`` tuples instead of re-parsing the log:

- ASYNC_FLUSH: requests are dispatched inline, under the put lock, right after the append (the flush mode
  promises nothing beyond the page cache, so the record is as durable as it will get).
- SYNC_FLUSH: requests wait in the group-commit queue and are dispatched by the flush thread only after the
  fdatasync covering them returned, so a reader never sees a message that a crash could still lose
  (RocketMQ #8239).

Index entries (keys, UNIQ_KEY) cost several microseconds each in Python, so they are built by a background
``IndexDispatcher`` thread, in log order, right behind the consume queues (RocketMQ also builds the index
asynchronously). ``reput`` re-parses the log; recovery and start-up use it to rebuild what is missing.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Protocol

from mq.common import sysflag as SF
from mq.common.log_throttle import DEFAULT_INTERVAL, LogThrottle
from mq.errors import InvalidTopicError
from mq.store.commit_log import CommitLog, DispatchRequest
from mq.store.log_scan import check_record, find_resync
from mq.store.consume_queue import PUT_UNITS, ConsumeQueueTable

log = logging.getLogger(__name__)

OnDispatch = Callable[[str, int, int, int], None]
_ROLLBACK = SF.TRANSACTION_ROLLBACK_TYPE


class IndexLike(Protocol):  # mq.store.index_service.IndexService
    def build_index(self, topic: str, keys: str | None, uniq_key: str | None, phy_offset: int,
                    store_timestamp: int) -> None: ...


class Dispatcher:
    """Writes consume-queue units, queues index work, notifies long polling."""

    def __init__(self, cq_table: ConsumeQueueTable, *, index: "IndexDispatcher | None" = None,
                 on_dispatch: OnDispatch | None = None, log_interval: float = DEFAULT_INTERVAL) -> None:
        self.cq_table = cq_table
        self.index = index
        self.on_dispatch = on_dispatch
        #: physical offset up to which records are dispatched
        self.dispatched_offset = 0
        #: store time of the last unit written (checkpoint logicsMsgTimestamp)
        self.last_timestamp = 0
        self.lock = threading.Lock()
        #: records a failed consume-queue write holds back, in log order (``retry``)
        self._backlog: list[DispatchRequest] = []
        #: why records wait in the backlog; None when none do
        self.error: str | None = None
        #: (record, OSError) of the consume-queue write that failed last (``_put_slow``)
        self._stall: tuple[DispatchRequest, OSError] | None = None
        #: records given no consume-queue unit because their topic or queue id cannot name one
        self.unqueued = 0
        self._throttle = LogThrottle(log, log_interval)
        #: the bound methods handed to the unit writer on every dispatch, made once
        self._slow, self._failed = self._put_slow, self._notify_failed

    def dispatch(self, requests: list[DispatchRequest]) -> None:
        """Dispatch records in log order. Callers serialise calls (put lock or flush thread).

        A consume queue that cannot be written (its next segment cannot be created: a full disk) does not
        lose the record: it and everything after it wait in a backlog, ``error`` says why (the store refuses
        writes meanwhile) and ``retry`` dispatches them once it can."""
        if not requests:
            return
        with self.lock:
            if self._backlog:
                self._backlog.extend(requests)
                return
            # the usual outcome decided inline (this runs once per put under ASYNC_FLUSH); _done the rest
            done = PUT_UNITS(requests, self.cq_table.queues, self._slow, self.on_dispatch, self._failed)
            if done < len(requests):
                written = self._done(requests, done)
                if written and self.index is not None:  # hand the index what was done while still in order
                    self.index.submit(written)
                return
            last = requests[-1]
            self.dispatched_offset = last.phy_offset + last.size
            self.last_timestamp = last.store_timestamp
        index = self.index
        if index is not None:  # IndexDispatcher.submit, inline
            index.queue.append(requests)
            if index.sleeping:
                index.wake()

    def _done(self, requests: list[DispatchRequest], done: int) -> list[DispatchRequest]:
        """(Lock held.) Account the first ``done`` of ``requests`` as dispatched and return them. When that is
        not all, the consume-queue write of ``requests[done]`` failed (``_stall`` says why): it and the rest
        wait in the backlog and ``error`` is set."""
        if done < len(requests):
            (topic, qid, _q, phy, *_rest), exc = self._stall  # type: ignore[misc]
            self._stall = None
            self._backlog = requests[done:]
            if self.error is None:
                log.error("cannot write consume queue %s-%d at commit log offset %d (%s); %d record(s) wait to "
                          "be dispatched and the store refuses writes until they are", topic, qid, phy,
                          exc.strerror or exc, len(self._backlog))
            self.error = f"cannot write consume queue {topic}-{qid}: {exc.strerror or exc}"
            requests = requests[:done]
            if not requests:
                return requests
        last = requests[-1]
        self.dispatched_offset = last.phy_offset + last.size
        self.last_timestamp = last.store_timestamp
        return requests

    def _put_slow(self, r: DispatchRequest) -> bool:
        """A unit off the writer's usual path (a new queue or segment, a gap); False when its consume queue
        cannot be written (``_stall`` then says which record and why). A record whose topic or queue id cannot
        name a consume queue (``consume_queue.check_queue_name``: the store refuses to write one, but a replica
        or an old log may hold one) stays in the log without a unit, counted and logged."""
        try:
            cq = self.cq_table.find(r.topic, r.queue_id)
        except InvalidTopicError as exc:
            self.unqueued += 1
            self._throttle.warning("unqueued", "record at commit log offset %d gets no consume queue: %s",
                                   r.phy_offset, exc)
            return True
        try:
            cq.put(r.queue_offset, r.phy_offset, r.size, r.tags_code)  # type: ignore[union-attr]
        except OSError as exc:
            self._stall = (r, exc)
            return False
        return True

    def _notify_failed(self, exc: Exception) -> None:
        self._throttle.error("notify", "on_dispatch callback failed", exc_info=exc)

    def waiting_next_offsets(self) -> dict[tuple[str, int], int]:
        """(topic, queue id) -> the queue offset after the last record of that queue waiting in the backlog."""
        with self.lock:
            out: dict[tuple[str, int], int] = {}
            for r in self._backlog:
                if r.tran_type == SF.TRANSACTION_NOT_TYPE or r.tran_type == SF.TRANSACTION_COMMIT_TYPE:
                    key = (r.topic, r.queue_id)
                    if r.queue_offset + 1 > out.get(key, 0):
                        out[key] = r.queue_offset + 1
            return out

    def retry(self) -> bool:
        """Dispatch the records a failed consume-queue write held back; True when none wait any more."""
        with self.lock:
            pending = self._backlog
            if not pending:
                return True
            self._backlog = []
            done = self._done(pending, PUT_UNITS(pending, self.cq_table.queues, self._slow, self.on_dispatch,
                                                 self._failed))
            if done and self.index is not None:
                self.index.submit(done)
            if self._backlog:
                return False
            log.info("consume queues writable again; %d waiting record(s) dispatched", len(pending))
            self.error = None
            return True

    def reput(self, commit_log: CommitLog, from_offset: int, *, check_crc: bool = False,
              delay_levels_ms: list[int] | None = None, batch: int = 1024) -> int:
        """Re-parse the log from ``from_offset`` to its end and dispatch every record; returns the offset
        reached. Used at start-up, after abnormal recovery and by the dispatch benchmark."""
        offset = max(from_offset, commit_log.min_offset)
        levels = delay_levels_ms or []
        pending: list[DispatchRequest] = []
        while offset < commit_log.max_offset:
            view = commit_log.segment_view(offset)
            if view is None:
                break
            buf, start, pos = view
            last_ts = 0
            while True:
                size, req = check_record(buf, pos, check_crc=check_crc, delay_levels_ms=levels,
                                         expect_phy=start + pos)
                if size > 0:
                    pending.append(req)
                    if len(pending) >= batch:
                        self.dispatch(pending)
                        pending = []
                    last_ts = req.store_timestamp  # type: ignore[union-attr]
                    pos += size
                    continue
                if size < 0 and pos < len(buf):  # a bad record below the write position: go on after it
                    nxt = find_resync(buf, pos, start, end=len(buf), min_store_ts=last_ts, check_crc=True,
                                      delay_levels_ms=levels, whole_to_end=True)
                    if nxt > pos:
                        self._throttle.error("reput-skip", "reput: no valid record at commit log offset %d; "
                                             "%d bytes skipped", start + pos, nxt - pos)
                        pos = nxt
                        continue
                break
            del buf
            if size == 0:  # BLANK: continue in the next segment
                offset = commit_log.queue.roll_next_file(start + pos)
                continue
            offset = start + pos
            if offset < commit_log.max_offset:
                log.error("reput: invalid record at offset %d; dispatch stops there", offset)
            break
        self.dispatch(pending)
        return offset


class IndexDispatcher:
    """Builds index entries in a background thread, in log order, from dispatched requests.

    ``submit`` only appends to a deque; the thread is woken (one Condition round trip) only when it sleeps,
    so under load it takes everything queued since its last pass and indexes it as one batch (one lock,
    one header write per batch: ``IndexService.build_batch``). After a wake-up it lingers ``LINGER_S``
    before its pass unless ``LINGER_BATCHES`` submissions are already queued: at a few thousand puts a
    second (one RPC per message, as gRPC sends come) a 1 ms linger still meant a wake-up, with its GIL
    hand-over, every two or three puts; 5 ms cut the broker's CPU per gRPC send by about a tenth, and a key
    becomes searchable at most that much later."""

    LINGER_S = 0.005
    LINGER_BATCHES = 64
    #: how often entries held back by a failed index-file creation are retried
    RETRY_S = 1.0

    def __init__(self, index: IndexLike) -> None:
        self.index = index
        #: submissions waiting for the thread, in log order
        self.queue: collections.deque[list[DispatchRequest]] = collections.deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        #: True while no thread takes submissions on its own: it is (about to be) waiting for work, or none
        #: runs. A submitter that sees it calls ``wake``, which clears it, so one sleep costs one wake-up.
        self.sleeping = True
        #: store time / end offset of the last record whose keys are indexed
        self.last_timestamp = 0
        self.indexed_offset = 0
        self._idle = threading.Event()
        self._idle.set()

    def submit(self, requests: list[DispatchRequest]) -> None:
        """Queue ``requests`` for indexing (``Dispatcher.dispatch`` does the same two steps inline)."""
        self.queue.append(requests)
        if self.sleeping:
            self.wake()

    def wake(self) -> None:
        """After a submission that found ``sleeping`` set: wake the thread or, when none runs (not started,
        as in recovery, or stopped), index what is queued in this thread. The thread sets ``sleeping`` before
        it last checks the queue, so either it sees the submission or the submitter sees the flag and wakes it
        (the notify waits for it to release the condition in wait())."""
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

    def _build(self, requests: list[DispatchRequest]) -> None:
        batch = getattr(self.index, "build_batch", None)
        if batch is not None:
            try:
                batch(requests)
            except OSError:
                pass  # the index keeps the entries it could not write (``pending``); _run retries them
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
            work: list[DispatchRequest] = []
            while q:
                work += q.popleft()
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
        return self._idle.wait(timeout)

    @property
    def backlog(self) -> int:
        return sum(len(r) for r in list(self.queue))

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._drain()  # anything submitted while the thread was stopping
