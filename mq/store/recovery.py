"""Start-up recovery (RocketMQ ``DefaultMessageStore.load/recover``, ``CommitLog.recoverNormally/Abnormally``).

1. Consume queues: each is scanned from its third-to-last segment up to the first invalid unit.
2. Commit log: records are validated (magic, size, PHYSICALOFFSET = position, recomputed length, body CRC):
   - after a clean shutdown (no ``abort`` file) from the third-to-last segment;
   - after a crash from the newest segment whose first record is older than the checkpoint's
     ``min_timestamp`` (or the oldest segment), and every valid record is re-dispatched to the consume
     queues and index (idempotent: both skip what they already hold).
   The first invalid record ends the log: everything after it is cut (the torn tail of a crash).
3. Consume-queue units and index entries that point at or past the cut are removed.
4. The per-queue next offsets are rebuilt from the consume queues.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from mq.common.record import MESSAGE_MAGIC_CODE, RECORD_PREFIX
from mq.store.commit_log import CommitLog, DispatchRequest, check_record
from mq.store.consume_queue import ConsumeQueueTable
from mq.store.dispatcher import Dispatcher

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    last_exit_ok: bool
    scan_from: int
    process_offset: int
    #: bytes between the recovered end and the end of the last segment (unused space + any torn tail)
    truncated_bytes: int
    redispatched: int
    duration_ms: float


def choose_abnormal_start(commit_log: CommitLog, min_timestamp: int) -> int:
    """Index of the newest segment whose first record has a store time in (0, min_timestamp]; else 0."""
    files = commit_log.queue.files
    for i in range(len(files) - 1, -1, -1):
        mf = files[i]
        head = mf.read(0, 64)
        if head is None:
            continue
        magic = RECORD_PREFIX.unpack_from(head, 0)[1]
        if magic != MESSAGE_MAGIC_CODE:
            continue
        sys_flag = int.from_bytes(head[36:40], "big", signed=True)
        ts_pos = 68 if sys_flag & 0x10 else 56
        raw = mf.read(ts_pos, 8)
        ts = int.from_bytes(raw, "big", signed=True) if raw else 0
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
    i = start
    while i < len(files):
        mf = files[i]
        buf = memoryview(mf.mm)
        pos = 0
        base = mf.start_offset
        try:
            while True:
                size, req = check_record(buf, pos, check_crc=check_crc, delay_levels_ms=levels,
                                         expect_phy=base + pos)
                if size > 0:
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
    rebuild_topic_queue_table(commit_log, cq_table)
    dispatcher.dispatched_offset = process
    report = RecoveryReport(last_exit_ok, scan_from, process, max(0, old_end - process), redispatched,
                            (time.monotonic() - t0) * 1000)
    log.info("store recovered: %s", report)
    return report


def rebuild_topic_queue_table(commit_log: CommitLog, cq_table: ConsumeQueueTable) -> None:
    """Next queue offset of every queue = its consume queue's max offset; min offsets corrected."""
    table: dict[tuple[str, int], int] = {}
    phy_min = commit_log.min_offset
    for cq in cq_table:
        table[(cq.topic, cq.queue_id)] = cq.max_offset
        cq.correct_min_offset(phy_min)
    commit_log.topic_queue_table = table
