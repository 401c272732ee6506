"""Offline inspection of a store directory (``mq store verify|print``), ours or one written by RocketMQ 4.9.

Everything here opens files read-only and needs no running broker. Segment sizes are taken from the files
themselves (every commit-log segment of a store has the same size).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from mq.common import sysflag as SF
from mq.common.record import decode_record
from mq.common.message import MessageExt
from mq.store.log_scan import check_record, find_resync, misflagged
from mq.store.consume_queue import CQ_UNIT, CQ_UNIT_SIZE, FILLER_SIZE

DEFAULT_DELAY_LEVELS_MS = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000,
                           480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000]


@dataclass(slots=True)
class RecordInfo:
    phy_offset: int
    size: int
    ok: bool
    message: MessageExt | None = None
    error: str = ""
    #: a bad record after which nothing valid follows in its segment (a torn tail or the unused end)
    tail: bool = False


@dataclass(slots=True)
class VerifyReport:
    segments: int = 0
    records: int = 0
    bad_records: int = 0
    end_offset: int = 0
    consume_queues: int = 0
    cq_units: int = 0
    #: where the data of the last segment ends in bytes that are not a record (a crash's torn tail or the
    #: stale bytes RocketMQ leaves after a recovered end); None if it ends cleanly
    tail_end: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.bad_records == 0


def _segments(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.iterdir() if p.is_file() and p.name.isdigit()), key=lambda p: int(p.name))


def _map(path: Path) -> mmap.mmap | None:
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)


def _data_end(fd: int, start: int, size: int) -> int:
    """The first hole at or after ``start`` (``size`` when none): nothing past it is read, since reading a hole of
    a full tmpfs through a mapping is SIGBUS (``MappedFile.data_end``)."""
    try:
        return min(size, os.lseek(fd, start, os.SEEK_HOLE))
    except OSError:
        return size


def commit_log_dir(root: Path) -> Path:
    root = Path(root)
    return root / "commitlog" if (root / "commitlog").is_dir() else root


def iter_records(root: Path, *, check_crc: bool = True, decode: bool = True,
                 start: int = 0) -> Iterator[RecordInfo]:
    """Every record of the commit log in order. A bad record is reported once; the walk goes on at the next
    valid record after it (``log_scan.find_resync``, as recovery does), or ends its segment when none follows
    (a torn tail, or the unused end of the last segment)."""
    for path in _segments(commit_log_dir(root)):
        base = int(path.name)
        mm = _map(path)
        if mm is None:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            if base + len(mm) <= start:
                continue
            pos = max(0, start - base) if start > base else 0
            whole = memoryview(mm)
            view = whole[:_data_end(fd, 0, len(mm))]
            last_ts = 0
            try:
                while pos + 8 <= len(mm):
                    size, req = check_record(view, pos, check_crc=check_crc, delay_levels_ms=DEFAULT_DELAY_LEVELS_MS,
                                             expect_phy=base + pos)
                    if size == 0:
                        break  # BLANK: next segment
                    if size < 0:
                        fixed = misflagged(view, pos, expect_phy=base + pos, delay_levels_ms=DEFAULT_DELAY_LEVELS_MS)
                        if fixed is not None:
                            yield RecordInfo(base + pos, fixed[1], False, None,
                                             f"its sysFlag's host-address bits do not match its layout (sysFlag "
                                             f"{fixed[0]} does; recovery corrects it)")
                            pos += fixed[1]
                            continue
                        nxt = find_resync(whole, pos, base, end=len(mm), min_store_ts=last_ts, check_crc=True,
                                          delay_levels_ms=DEFAULT_DELAY_LEVELS_MS, fd=fd)
                        if nxt < 0:  # nothing valid follows: the end of the data (zeros), or a torn tail
                            if any(view[pos:pos + 8]):
                                yield RecordInfo(base + pos, 0, False, None, "invalid record (magic, size or CRC)",
                                                 tail=True)
                            break
                        yield RecordInfo(base + pos, 0, False, None,
                                         f"invalid record (magic, size or CRC); valid records follow at {base + nxt}")
                        pos = nxt
                        view.release()
                        view = whole[:_data_end(fd, nxt, len(mm))]
                        continue
                    last_ts = req.store_timestamp  # type: ignore[union-attr]
                    msg = decode_record(view, pos) if decode else None
                    yield RecordInfo(base + pos, size, True, msg)
                    pos += size
            finally:
                view.release()
                whole.release()
        finally:
            os.close(fd)
            mm.close()


def read_record(root: Path, phy: int) -> MessageExt | None:
    """Decode the record at a physical offset, or None."""
    for path in _segments(commit_log_dir(root)):
        base = int(path.name)
        size = path.stat().st_size
        if base <= phy < base + size:
            mm = _map(path)
            if mm is None:
                return None
            try:
                return decode_record(mm, phy - base)
            except Exception:
                return None
            finally:
                mm.close()
    return None


def iter_consume_queue(root: Path, topic: str, queue_id: int) -> Iterator[tuple[int, int, int, int]]:
    """(queue offset, commit-log offset, size, tags code) of every non-empty unit of one queue."""
    qdir = Path(root) / "consumequeue" / topic / str(queue_id)
    for path in _segments(qdir):
        base = int(path.name)
        mm = _map(path)
        if mm is None:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            end = _data_end(fd, 0, len(mm))
            for i, (phy, size, tc) in enumerate(CQ_UNIT.iter_unpack(mm[:end - end % CQ_UNIT_SIZE])):
                if size <= 0 or phy < 0:
                    break
                if size == FILLER_SIZE and phy == 0:
                    continue
                yield (base // CQ_UNIT_SIZE + i, phy, size, tc)
        finally:
            os.close(fd)
            mm.close()


def verify_store(root: Path, *, check_crc: bool = True, max_problems: int = 100) -> VerifyReport:
    """Check every record (magic, size, CRC) and that every consume-queue unit points at a record of its
    topic and queue with the right queue offset and size."""
    root = Path(root)
    rep = VerifyReport()
    rep.segments = len(_segments(commit_log_dir(root)))
    segs = _segments(commit_log_dir(root))
    log_min = int(segs[0].name) if segs else 0
    records: dict[int, tuple[str, int, int, int]] = {}
    queue_offsets: dict[tuple[str, int], dict[int, int]] = {}  # per queue: queue offset -> commit log offset
    for info in iter_records(root, check_crc=check_crc, decode=True):
        if not info.ok:
            if info.tail and segs and info.phy_offset >= int(segs[-1].name):
                rep.tail_end = info.phy_offset  # end of the log, not corruption
                continue
            rep.bad_records += 1
            if len(rep.problems) < max_problems:
                rep.problems.append(f"commit log offset {info.phy_offset}: {info.error}")
            continue
        m = info.message
        assert m is not None
        rep.records += 1
        records[info.phy_offset] = (m.topic, m.queue_id, m.queue_offset, info.size)
        if m.sys_flag & SF.TRANSACTION_MASK in (SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE):
            queue = (m.topic, m.queue_id)
            if m.queue_offset == 0:  # a deleted and re-created topic starts its queues at 0 again
                queue_offsets[queue] = {}
            other = queue_offsets.setdefault(queue, {}).setdefault(m.queue_offset, info.phy_offset)
            if other != info.phy_offset and len(rep.problems) < max_problems:
                rep.problems.append(f"commit log offsets {other} and {info.phy_offset} both hold {m.topic}/"
                                    f"{m.queue_id} queue offset {m.queue_offset}")
        rep.end_offset = info.phy_offset + info.size
    cq_root = root / "consumequeue"
    if cq_root.is_dir():
        for tdir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in tdir.iterdir() if p.is_dir() and p.name.lstrip("-").isdigit()):
                rep.consume_queues += 1
                qid = int(qdir.name)
                for qoff, phy, size, _tc in iter_consume_queue(root, tdir.name, qid):
                    rep.cq_units += 1
                    rec = records.get(phy)
                    problem = None
                    if rec is None:
                        if phy >= log_min:  # below the log's start: deleted by retention
                            problem = f"points at {phy}, where no valid record starts"
                    elif rec != (tdir.name, qid, qoff, size):
                        problem = f"points at {phy} holding {rec[0]}/{rec[1]} offset {rec[2]} size {rec[3]}"
                    if problem and len(rep.problems) < max_problems:
                        rep.problems.append(f"consume queue {tdir.name}/{qid} unit {qoff} {problem}")
    return rep


def describe(info: RecordInfo) -> dict[str, object]:
    """One record as a flat dict (for ``mq store print``)."""
    m = info.message
    if m is None:
        return {"offset": info.phy_offset, "error": info.error}
    return {
        "offset": info.phy_offset, "size": info.size, "msgId": m.msg_id, "topic": m.topic, "queueId": m.queue_id,
        "queueOffset": m.queue_offset, "sysFlag": m.sys_flag, "flag": m.flag,
        "bornTimestamp": m.born_timestamp, "bornHost": f"{m.born_host[0]}:{m.born_host[1]}",
        "storeTimestamp": m.store_timestamp, "storeHost": f"{m.store_host[0]}:{m.store_host[1]}",
        "reconsumeTimes": m.reconsume_times, "preparedTransactionOffset": m.prepared_transaction_offset,
        "bodyCRC": m.body_crc, "bodyLength": len(m.body), "properties": dict(m.properties),
    }


def store_size(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass
    return total
