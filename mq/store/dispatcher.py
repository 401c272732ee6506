"""Dispatch: turn stored records into consume-queue units and index entries (RocketMQ ReputMessageService).

Design (measured, see benchmarks/store_dispatch.py): the append path already knows everything a consume-queue
unit needs (topic, queue, offsets, size, tags code), so dispatch is driven by the append path from those
``DispatchRequest`` tuples instead of re-parsing the log:

- ASYNC_FLUSH: requests are dispatched inline, under the put lock, right after the append (the flush mode
  promises nothing beyond the page cache, so the record is as durable as it will get).
- SYNC_FLUSH: requests wait in the group-commit queue and are dispatched by the flush thread only after the
  fdatasync covering them returned, so a reader never sees a message that a crash could still lose
  (RocketMQ #8239).

Index entries (keys, UNIQ_KEY) are built in batches by ``IndexDispatcher`` (``mq.store.index_dispatcher``), in
log order, right behind the consume queues (RocketMQ also builds the index asynchronously). ``reput`` re-parses
the log; recovery and start-up use it to rebuild what is missing.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from mq.common import sysflag as SF
from mq.common.log_throttle import DEFAULT_INTERVAL, LogThrottle
from mq.errors import InvalidTopicError
from mq.store.commit_log import CommitLog, DispatchRequest
from mq.store.log_scan import check_record, find_resync
from mq.store.consume_queue import PUT_UNITS, ConsumeQueueTable
from mq.store.index_dispatcher import IndexDispatcher

log = logging.getLogger(__name__)

OnDispatch = Callable[[str, int, int, int], None]


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
