"""Reading one consume queue: a run of stored records for a PULL (RocketMQ ``DefaultMessageStore.getMessage``).

``read_queue`` walks the consume-queue units from the requested logical offset, filters them by tag hash code,
and copies the records they point at out of the commit-log segments: adjacent records as one slice (a *run*),
so a PULL body is built with one copy per run. It caps what one read returns as RocketMQ does: by count and by
bytes, with tighter limits when the records are far behind the log's end (no longer likely in memory). The
status and offsets follow ``GetMessageStatus``; the caller (``MessageStore``) checks the store is open and
finds the queue.
"""

from __future__ import annotations

from typing import Callable

from mq.config import StoreConfig
from mq.store.commit_log import CommitLog
from mq.store.consume_queue import CQ_UNIT, FILLER_SIZE, ConsumeQueue
from mq.store.status import GetMessageResult, GetMessageStatus, StoreStats

#: None (all), a set of tag hash codes, or a callable(tags_code) -> bool
TagFilter = Callable[[int], bool] | set | frozenset | None
#: None, or a callable(record bytes) -> bool applied after the tag filter (SQL92 property filters)
MessageFilter = Callable[[bytes], bool] | None
_G = GetMessageStatus


def _slice(mm, start: int, end: int) -> bytes | None:
    """``mm[start:end]``, or None when the segment was unmapped by retention meanwhile."""
    try:
        return mm[start:end]
    except ValueError:
        return None


def _count_records(buf: bytes) -> int:
    """Records in a run of whole records (each starts with its int32 TOTALSIZE)."""
    n = pos = 0
    end = len(buf)
    while pos < end:
        pos += int.from_bytes(buf[pos:pos + 4], "big")
        n += 1
    return n


def read_queue(cq: ConsumeQueue, commit_log: CommitLog, config: StoreConfig, stats: StoreStats, mem_limit: int,
               offset: int, max_count: int, tag_filter: TagFilter = None, max_total_bytes: int | None = None,
               runs: bool = False, message_filter: MessageFilter = None) -> GetMessageResult:
    """Up to ``max_count`` records of ``cq`` from logical ``offset`` (see ``MessageStore.get_message``).

    ``message_filter`` gets a copy of each record that passed ``tag_filter``; a record it refuses is skipped
    as a tag mismatch is (RocketMQ ``isMatchedByCommitLog``). A record it cannot read is left to the checks
    below, which answer MESSAGE_WAS_REMOVING or skip to the next file.

    ``mem_limit``: bytes behind the log's end beyond which records count as on disk (RocketMQ
    ``accessMessageInMemoryMaxRatio`` of the RAM); past it the disk transfer limits apply and the result
    suggests pulling from a slave."""
    min_off, max_off = cq.min_offset, cq.max_offset
    if max_off == 0:
        stats.get_miss += 1
        return GetMessageResult(_G.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
    if offset < min_off:
        return GetMessageResult(_G.OFFSET_TOO_SMALL, min_off, min_off, max_off)
    if offset == max_off:
        stats.get_miss += 1
        return GetMessageResult(_G.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
    if offset > max_off:
        return GetMessageResult(_G.OFFSET_OVERFLOW_BADLY, max_off, min_off, max_off)
    units = cq.read_units(offset, max(800, max_count))
    if units is None:
        return GetMessageResult(_G.OFFSET_FOUND_NULL, cq.next_file_offset(offset), min_off, max_off)
    mem_bytes = config.max_transfer_bytes_on_message_in_memory if max_total_bytes is None else max_total_bytes
    disk_bytes = min(mem_bytes, config.max_transfer_bytes_on_message_in_disk)
    mem_count = config.max_transfer_count_on_message_in_memory
    disk_count = config.max_transfer_count_on_message_in_disk
    codes = tag_filter if isinstance(tag_filter, (set, frozenset)) else None
    func = tag_filter if codes is None and tag_filter is not None else None
    find = commit_log.queue.find_by_offset
    max_phy = commit_log.max_offset
    buffers: list[bytes] = []
    qoffs: list[int] = []
    total = 0
    count = 0
    status = _G.NO_MATCHED_MESSAGE
    next_file_start = -1
    last_phy = 0
    i = 0
    # Adjacent records are copied as one run (one slice of the segment): a run is (mapped file, start
    # relative to it, end physical offset, physical limit of what the segment has written).
    run_mm = None
    run_rel = run_base = run_end = run_limit = 0
    for phy, size, tc in CQ_UNIT.iter_unpack(units):
        if size == FILLER_SIZE and phy == 0:
            i += 1
            continue
        if phy < next_file_start:
            i += 1
            continue
        if count:
            if count >= max_count:
                break
            if max_phy - phy > mem_limit:
                if total + size > disk_bytes or count >= disk_count:
                    break
            elif total + size > mem_bytes or count >= mem_count:
                break
        if codes is not None:
            if tc not in codes and (-0x80000000 <= tc <= 0x7FFFFFFF or
                                    ((tc + 0x80000000) & 0xFFFFFFFF) - 0x80000000 not in codes):
                i += 1
                continue
        elif func is not None and not func(tc):
            i += 1
            continue
        if message_filter is not None:
            rec = commit_log.read(phy, size)
            if rec is not None and not message_filter(rec):
                i += 1
                continue
        if not runs or phy != run_end or phy + size > run_limit:  # not adjacent: start a new run
            mf = find(phy)
            rel = phy - mf.start_offset if mf is not None else 0
            if mf is None or rel + size > mf.wrote_position or rel + size > mf.file_size:
                if not count:
                    status = _G.MESSAGE_WAS_REMOVING
                next_file_start = commit_log.queue.roll_next_file(phy)
                i += 1
                continue
            if run_mm is not None:
                rec = _slice(run_mm, run_rel, run_rel + run_end - run_base)
                if rec is None:  # unmapped meanwhile (retention): keep what was read before this run
                    return _cut_run(stats, offset, buffers, qoffs, min_off, max_off)
                buffers.append(rec)
            run_mm = mf.mm
            run_rel = rel
            run_base = phy
            run_limit = mf.start_offset + mf.wrote_position
        run_end = phy + size
        last_phy = phy
        qoffs.append(offset + i)
        total += size
        count += 1
        i += 1
    if run_mm is not None:
        rec = _slice(run_mm, run_rel, run_rel + run_end - run_base)
        if rec is None:
            return _cut_run(stats, offset, buffers, qoffs, min_off, max_off)
        buffers.append(rec)
    st = stats
    if count:
        status = _G.FOUND
        st.get_found += 1
        st.get_transferred += count
    else:
        st.get_miss += 1
    suggest = bool(count) and (max_phy - last_phy) > mem_limit
    return GetMessageResult(status, offset + i, min_off, max_off, buffers, count, total, qoffs, suggest)


def _cut_run(stats: StoreStats, offset: int, buffers: list[bytes], qoffs: list[int], min_off: int,
             max_off: int) -> GetMessageResult:
    """A run's segment was unmapped (retention) while reading: answer with the runs read before it; the
    next pull starts at the run's first message and sees the segment gone."""
    n = 0
    for b in buffers:
        n += _count_records(b)
    nxt = qoffs[n] if n < len(qoffs) else offset
    st = stats
    if not n:
        st.get_miss += 1
        return GetMessageResult(_G.MESSAGE_WAS_REMOVING, nxt, min_off, max_off)
    st.get_found += 1
    st.get_transferred += n
    return GetMessageResult(_G.FOUND, nxt, min_off, max_off, buffers, n, sum(len(b) for b in buffers),
                            qoffs[:n], False)
