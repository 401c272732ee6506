"""Start-up recovery (RocketMQ ``DefaultMessageStore.load/recover``, ``CommitLog.recoverNormally/Abnormally``).

1. Consume queues: each is scanned from its third-to-last segment up to the first invalid unit.
2. Commit log: records are validated (magic, size, PHYSICALOFFSET = position, recomputed length, body CRC):
   - after a clean shutdown (no ``abort`` file) from the third-to-last segment;
   - after a crash from the newest segment whose first record is older than the checkpoint's
     ``min_timestamp`` (or the oldest segment), and every valid record is re-dispatched to the consume
     queues and index (idempotent: both skip what they already hold).
   A record that fails its checks does not end the log while valid records follow it (``mq.store.log_scan``):
   a record whose host-address bits misdescribe its layout is repaired in place; any other bad record is set
   aside (skipped, counted, logged, its consume-queue unit turned into a filler) and the scan resynchronises on
   the next valid record stored no earlier than the last good one. Only where nothing valid follows does the
   log end (the torn tail of a crash): everything after it is cut and its blocks given back, so that no stale
   record can look valid to a later recovery.
3. Consume-queue units and index entries that point at or past the cut are removed.
4. The per-queue next offsets are rebuilt from the consume queues.
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass

from mq.store.commit_log import CommitLog, DispatchRequest
from mq.store.consume_queue import ConsumeQueueTable
from mq.store.dispatcher import Dispatcher
from mq.store.log_scan import check_record, find_resync, misflagged, repair

log = logging.getLogger(__name__)

#: bad records recovery describes one by one before it only counts them (the total is logged at the end)
_LOG_FIRST = 10
_QID_QOFF = struct.Struct(">i4xq")  # QUEUEID at 12, QUEUEOFFSET at 20


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    last_exit_ok: bool
    scan_from: int
    process_offset: int
    #: bytes between the recovered end and the end of the last segment (unused space + any torn tail)
    truncated_bytes: int
    redispatched: int
    duration_ms: float
    #: bad records in the middle of the log that were set aside, and their bytes
    skipped_records: int = 0
    skipped_bytes: int = 0
    #: records whose host-address bits were corrected in place
    repaired_records: int = 0


def choose_abnormal_start(commit_log: CommitLog, min_timestamp: int) -> int:
    """Index of the newest segment whose first record has a store time in (0, min_timestamp]; else 0."""
    files = commit_log.queue.files
    for i in range(len(files) - 1, -1, -1):
        mf = files[i]
        try:
            with memoryview(mf.mm) as buf:
                size, req = check_record(buf[:mf.data_end()], 0, check_crc=True, delay_levels_ms=[],
                                         expect_phy=mf.start_offset)
        except ValueError:  # closed meanwhile
            continue
        ts = req.store_timestamp if size > 0 else 0  # type: ignore[union-attr]
        if ts != 0 and ts <= min_timestamp:
            return i
    return 0


def recover(commit_log: CommitLog, cq_table: ConsumeQueueTable, dispatcher: Dispatcher, *,
            last_exit_ok: bool, min_timestamp: int | None, check_crc: bool = True,
            delay_levels_ms: list[int] | None = None, index=None, redispatch_from: int | None = None,
            ) -> RecoveryReport:
    """Recover ``commit_log`` (already loaded) and ``cq_table`` (already loaded)."""
    t0 = time.monotonic()
    levels = delay_levels_ms or []
    for cq in cq_table:
        cq.recover()
    max_phy_cq = cq_table.max_physic_offset()
    files = commit_log.queue.files
    old_end = files[-1].end_offset if files else 0
    if not files:
        commit_log.queue.flushed_where = 0
        cq_table.destroy_all()
        if index is not None:
            index.truncate_from(0)
        return RecoveryReport(last_exit_ok, 0, 0, 0, 0, (time.monotonic() - t0) * 1000)

    if last_exit_ok:
        start = max(0, len(files) - 3)
    else:
        start = choose_abnormal_start(commit_log, min_timestamp or 0)
        if redispatch_from is not None:
            for i, mf in enumerate(files):
                if mf.start_offset <= redispatch_from < mf.end_offset:
                    start = min(start, i)
                    break
            else:
                if redispatch_from < files[0].start_offset:
                    start = 0
    scan_from = files[start].start_offset
    redispatch = not last_exit_ok
    redispatched = 0
    pending: list[DispatchRequest] = []
    process = scan_from
    skipped = skipped_bytes = repaired = 0
    last_ts = 0  # store time of the last good record: a resync never goes back to an older one
    i = start
    while i < len(files):
        mf = files[i]
        buf = memoryview(mf.mm)
        view = buf[:mf.data_end()]  # never read a hole (``MappedFile.data_end``)
        pos = 0
        base = mf.start_offset
        try:
            while True:
                size, req = check_record(view, pos, check_crc=check_crc, delay_levels_ms=levels,
                                         expect_phy=base + pos)
                if size < 0:
                    fixed = misflagged(view, pos, expect_phy=base + pos, delay_levels_ms=levels)
                    if fixed is not None:
                        flag, size, req = fixed
                        repaired += 1
                        if repaired <= _LOG_FIRST:
                            log.warning("recovery: the record at commit log offset %d said sysFlag %d for a layout "
                                        "of sysFlag %d; corrected", base + pos,
                                        int.from_bytes(buf[pos + 36:pos + 40], "big", signed=True), flag)
                        repair(mf.mm, pos, flag)
                    else:
                        nxt = find_resync(buf, pos, base, end=mf.file_size, min_store_ts=last_ts, check_crc=True,
                                          delay_levels_ms=levels, fd=mf.fd)
                        if nxt < 0:
                            break  # nothing valid follows: the end of the log
                        skipped += 1
                        skipped_bytes += nxt - pos
                        dropped = _forget(cq_table, view, pos, base)
                        if skipped <= _LOG_FIRST:
                            log.warning("recovery: no valid record at commit log offset %d; %d bytes set aside "
                                        "(%s), valid records follow at %d", base + pos, nxt - pos,
                                        "its consume-queue unit is now a filler" if dropped else "no unit",
                                        base + nxt)
                        pos = nxt
                        view.release()
                        view = buf[:mf.data_end(nxt)]
                        continue
                if size > 0:
                    last_ts = req.store_timestamp  # type: ignore[union-attr]
                    if redispatch:
                        pending.append(req)
                        if len(pending) >= 4096:
                            dispatcher.dispatch(pending)
                            redispatched += len(pending)
                            pending = []
                    pos += size
                    continue
                break
        finally:
            view.release()
            buf.release()
        if size == 0:  # BLANK
            if i + 1 < len(files):
                i += 1
                process = files[i].start_offset
                continue
            process = mf.end_offset  # last segment is full: the next append opens a new one
            break
        process = base + pos
        break
    if pending:
        dispatcher.dispatch(pending)
        redispatched += len(pending)
    commit_log.queue.truncate_dirty_files(process)
    commit_log.queue.flushed_where = process
    if max_phy_cq >= process:
        log.info("recovery: truncating consume queues beyond offset %d", process)
        for cq in cq_table:
            cq.truncate_dirty(process)
    if index is not None:
        index.truncate_from(process)
    rebuild_topic_queue_table(commit_log, cq_table, dispatcher)
    if dispatcher.error is None:  # else it stays before the first record waiting in the backlog
        dispatcher.dispatched_offset = process
    report = RecoveryReport(last_exit_ok, scan_from, process, max(0, old_end - process), redispatched,
                            (time.monotonic() - t0) * 1000, skipped, skipped_bytes, repaired)
    if skipped or repaired:
        log.warning("recovery set aside %d bad record(s) (%d bytes) and corrected the layout bits of %d; the "
                    "records after them are kept", skipped, skipped_bytes, repaired)
    log.info("store recovered: %s", report)
    return report


def _forget(cq_table: ConsumeQueueTable, buf, pos: int, base: int) -> bool:
    """Turn the consume-queue unit of the bad record at ``buf[pos]`` into a filler, if its queue id and queue
    offset (fixed positions, whatever else is wrong) lead to a unit pointing at it; True when one was."""
    try:
        qid, qoff = _QID_QOFF.unpack_from(buf, pos + 12)
    except struct.error:
        return False
    phy = base + pos
    for per in list(cq_table.queues.values()):
        cq = per.get(qid)
        if cq is not None and 0 <= qoff < cq.max_offset and cq.blank_unit(qoff, phy):
            return True
    return False


def rebuild_topic_queue_table(commit_log: CommitLog, cq_table: ConsumeQueueTable,
                              dispatcher: Dispatcher | None = None) -> None:
    """Next queue offset of every queue = its consume queue's max offset, or past the records of the queue
    that wait in the dispatcher's backlog (a consume queue a full disk would not let recovery write): those
    offsets are taken, and giving them out again would make two records share one. Min offsets corrected."""
    table: dict[tuple[str, int], int] = {}
    phy_min = commit_log.min_offset
    for cq in cq_table:
        table[(cq.topic, cq.queue_id)] = cq.max_offset
        cq.correct_min_offset(phy_min)
    if dispatcher is not None:
        for key, nxt in dispatcher.waiting_next_offsets().items():
            if nxt > table.get(key, 0):
                table[key] = nxt
    commit_log.topic_queue_table = table
