"""Consume queue of one topic/queue (RocketMQ ``ConsumeQueue``): a dense array of 20-byte units.

Unit *i* (queue offset *i*) lives at logical byte ``i * 20``; segments are named by that byte offset::

    +--------+------+-----------------+------------------------------------------+
    | offset | size | field           | meaning                                  |
    +--------+------+-----------------+------------------------------------------+
    |      0 |    8 | commitLogOffset | physical offset of the record            |
    |      8 |    4 | size            | TOTALSIZE of the record                  |
    |     12 |    8 | tagsCode        | hashCode(TAGS), or deliver time (delay)  |
    +--------+------+-----------------+------------------------------------------+

A filler unit ``(0, 0x7FFFFFFF, 0)`` pads a queue whose first segment starts above offset 0.

Segments are sparse files whose blocks are reserved ``CQ_RESERVE_STEP`` bytes at a time ahead of the writer
(``MappedFile.reserve_to``), so a queue takes the disk its units need; a full disk fails a ``put`` with
``OSError`` before anything is stored, which the dispatcher holds back and retries.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any, Callable, Sequence

from mq.common import sysflag as SF
from mq.common.topic import is_valid_topic
from mq.errors import InvalidTopicError
from mq.store import native
from mq.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

CQ_UNIT_FORMAT = ">qiq"
CQ_UNIT = struct.Struct(CQ_UNIT_FORMAT)
CQ_UNIT_SIZE = 20
FILLER_SIZE = 0x7FFFFFFF
_FILLER = CQ_UNIT.pack(0, FILLER_SIZE, 0)
#: blocks of a consume-queue segment are reserved this many bytes (3,276 units) at a time
CQ_RESERVE_STEP = 64 * 1024
#: most missing units a put fills with fillers (records set aside by recovery); beyond, a gap is a bug
MAX_GAP_UNITS = 65_536
_NOT, _COMMIT = SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE


def check_queue_name(topic: object, queue_id: object) -> None:
    """The one check before a topic and queue id become a directory, ``<root>/<topic>/<queueId>``: a valid topic
    name (``mq.common.topic.is_valid_topic``: no "..", "/" or NUL can leave the store) and a queue id in
    [0, 2^31). ``InvalidTopicError`` otherwise, whoever produced the name (a send, the timer or schedule
    service, a transaction, a retry, a replica's record, a config file, a directory found at start)."""
    if not is_valid_topic(topic):
        raise InvalidTopicError(f"{str(topic)[:200]!r} is not a valid topic name: no consume queue is made for it")
    if queue_id.__class__ is not int or not 0 <= queue_id <= 0x7FFFFFFF:  # type: ignore[operator]
        raise InvalidTopicError(f"queue id {queue_id!r} of topic {topic} is not in [0, 2^31)")


class ConsumeQueue:
    __slots__ = ("topic", "queue_id", "queue", "file_size", "max_physic_offset", "min_logic_offset",
                 "_pack_into")

    def __init__(self, topic: str, queue_id: int, root: Path, file_size: int) -> None:
        check_queue_name(topic, queue_id)
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.queue = MappedFileQueue(Path(root) / topic / str(queue_id), file_size, reserve_step=CQ_RESERVE_STEP,
                                     size_key="mappedFileSizeConsumeQueue")
        #: End (offset + size) of the last unit's record; -1 when empty.
        self.max_physic_offset = -1
        #: Byte position of the first valid unit.
        self.min_logic_offset = 0
        self._pack_into = CQ_UNIT.pack_into

    # -- offsets -----------------------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """Next queue offset to be written (RocketMQ ``getMaxOffsetInQueue``)."""
        return self.queue.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    # -- writing -----------------------------------------------------------------------------------------
    def put(self, cq_offset: int, phy: int, size: int, tags_code: int) -> bool:
        """Append the unit for queue offset ``cq_offset``; duplicates (re-dispatch) are ignored."""
        return self.put_fast(cq_offset, phy, size, tags_code) or self._put(cq_offset, phy, size, tags_code)

    def put_fast(self, cq_offset: int, phy: int, size: int, tags_code: int) -> bool:
        """``put`` in the usual case: a duplicate, or the next unit of the last segment with its blocks already
        reserved. False, having written nothing, otherwise (``put`` then takes the slow path). The C writer
        (``mq.store._consume_queue``) does the same."""
        if phy + size <= self.max_physic_offset:
            return True
        files = self.queue.files
        if files:
            mf = files[-1]
            pos = mf.wrote_position
            if pos + CQ_UNIT_SIZE <= mf.reserved_to and cq_offset * CQ_UNIT_SIZE == mf.start_offset + pos:
                self._pack_into(mf.mm, pos, phy, size, tags_code)
                mf.wrote_position = pos + CQ_UNIT_SIZE
                self.max_physic_offset = phy + size
                return True
        return False

    def _put(self, cq_offset: int, phy: int, size: int, tags_code: int) -> bool:
        """``put`` at a segment's end or start, past a gap, or for a unit already written."""
        expected = cq_offset * CQ_UNIT_SIZE
        q = self.queue
        files = q.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote_position >= mf.file_size:
            first = mf is None
            mf = q.get_last_file(expected)
            if first and cq_offset != 0 and mf.wrote_position == 0:
                self._fill_before(mf, expected)
        cur = mf.start_offset + mf.wrote_position
        if cq_offset != 0:
            if expected < cur:
                return True
            if expected != cur:
                if expected - cur > MAX_GAP_UNITS * CQ_UNIT_SIZE:
                    log.warning("[BUG] consume queue %s-%d: logic offset %d but write position %d", self.topic,
                                self.queue_id, expected, cur)
                else:  # offsets of records recovery set aside (``mq.store.log_scan``): they read as fillers
                    log.warning("consume queue %s-%d: offsets %d to %d have no record (set aside); filled",
                                self.topic, self.queue_id, cur // CQ_UNIT_SIZE, cq_offset - 1)
                    mf = self._fill_gap(mf, expected)
        pos = mf.wrote_position
        if pos + CQ_UNIT_SIZE > mf.reserved_to:
            mf.reserve_to(pos + CQ_UNIT_SIZE)
        self._pack_into(mf.mm, pos, phy, size, tags_code)
        mf.wrote_position = pos + CQ_UNIT_SIZE
        self.max_physic_offset = phy + size
        return True

    def _fill_gap(self, mf, expected: int):
        """Write filler units from the write position up to logical byte ``expected`` (segments roll as needed);
        returns the segment the unit at ``expected`` goes to. ``OSError`` when a block cannot be reserved."""
        q = self.queue
        while True:
            pos = mf.wrote_position
            stop = min(mf.file_size, expected - mf.start_offset)
            if stop > pos:
                if stop > mf.reserved_to:
                    mf.reserve_to(stop)
                mf.mm[pos:stop] = _FILLER * ((stop - pos) // CQ_UNIT_SIZE)
                mf.wrote_position = stop
            if mf.start_offset + mf.wrote_position >= expected and mf.wrote_position < mf.file_size:
                return mf
            mf = q.get_last_file(expected)

    def blank_unit(self, index: int, phy: int) -> bool:
        """Turn unit ``index`` into a filler if it points at ``phy`` (a record recovery set aside: readers skip
        it); True when it did."""
        pos = index * CQ_UNIT_SIZE
        mf = self.queue.find_by_offset(pos)
        if mf is None:
            return False
        rel = pos - mf.start_offset
        if rel + CQ_UNIT_SIZE > mf.wrote_position or CQ_UNIT.unpack_from(mf.mm, rel)[0] != phy:
            return False
        mf.mm[rel:rel + CQ_UNIT_SIZE] = _FILLER
        return True

    def _fill_before(self, mf, expected: int) -> None:
        end = expected - mf.start_offset
        if end > mf.reserved_to:
            mf.reserve_to(end)
        mm = mf.mm
        for pos in range(0, end, CQ_UNIT_SIZE):
            mm[pos:pos + CQ_UNIT_SIZE] = _FILLER
        mf.wrote_position = mf.flushed_position = end
        self.queue.flushed_where = expected
        self.min_logic_offset = expected

    # -- reading -----------------------------------------------------------------------------------------
    def read_units(self, index: int, max_units: int) -> bytes | None:
        """Units from queue offset ``index`` up to the end of its segment (at most ``max_units``);
        None when the segment is gone."""
        pos = index * CQ_UNIT_SIZE
        mf = self.queue.find_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.start_offset
        end = min(mf.wrote_position, rel + max_units * CQ_UNIT_SIZE)
        if end <= rel:
            return b""
        return mf.read(rel, end - rel)

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        raw = self.read_units(index, 1)
        if not raw:
            return None
        return CQ_UNIT.unpack(raw)

    def next_file_offset(self, index: int) -> int:
        """Queue offset at which the segment after the one holding ``index`` starts."""
        pos = index * CQ_UNIT_SIZE
        return (pos + self.file_size - pos % self.file_size) // CQ_UNIT_SIZE

    def search_offset_by_timestamp(self, timestamp: int, store_time_of: Callable[[int, int], int | None]) -> int:
        """RocketMQ ``getOffsetInQueueByTime``: binary search on store time; nearest unit when no exact hit."""
        lo, hi = self.min_offset, self.max_offset - 1
        left = right = -1
        left_t = right_t = 0
        while lo <= hi:
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            t = store_time_of(unit[0], unit[1]) if unit else None
            if t is None:  # record already removed: look at newer units
                lo = mid + 1
                continue
            if t >= timestamp:
                right, right_t, hi = mid, t, mid - 1
            else:
                left, left_t, lo = mid, t, mid + 1
        if right != -1 and right_t == timestamp:
            return right
        if right == -1:
            return left if left != -1 else 0
        if left == -1:
            return right
        return right if abs(timestamp - left_t) > abs(timestamp - right_t) else left

    # -- recovery and retention --------------------------------------------------------------------------
    def load(self) -> None:
        self.queue.load()

    def recover(self) -> None:
        """Scan from the third-to-last segment; the first invalid unit (offset < 0 or size <= 0) ends it."""
        files = self.queue.files
        if not files:
            return
        start = max(0, len(files) - 3)
        process = files[start].start_offset
        max_phy = -1
        for mf in files[start:]:
            end = mf.data_end()  # units are written from the start: none lies past the first hole
            data = mf.mm[:end - end % CQ_UNIT_SIZE]
            valid = 0
            for phy, size, _tags in CQ_UNIT.iter_unpack(data):
                if phy < 0 or size <= 0:
                    break
                valid += CQ_UNIT_SIZE
                if size != FILLER_SIZE or phy != 0:
                    max_phy = phy + size
            process = mf.start_offset + valid
            if valid < mf.file_size:
                break
        self.queue.truncate_dirty_files(process)
        self.queue.flushed_where = process
        self.max_physic_offset = max_phy

    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop every unit whose record starts at or after ``phy_offset`` (RocketMQ truncateDirtyLogicFiles)."""
        files = self.queue.files
        while files:
            mf = files[-1]
            data = mf.mm[:mf.wrote_position]
            cut = None
            last_end = -1
            for i, (phy, size, _t) in enumerate(CQ_UNIT.iter_unpack(data)):
                if size == FILLER_SIZE and phy == 0:
                    continue
                if phy >= phy_offset:
                    cut = i * CQ_UNIT_SIZE
                    break
                last_end = phy + size
            if cut is None:
                self.max_physic_offset = last_end if last_end >= 0 else self.max_physic_offset
                break
            if cut == 0 and len(files) > 1:
                self.queue.truncate_dirty_files(mf.start_offset)
                files = self.queue.files
                continue
            self.queue.truncate_dirty_files(mf.start_offset + cut)
            self.max_physic_offset = last_end
            break
        if self.min_logic_offset > self.queue.max_offset:
            self.min_logic_offset = self.queue.max_offset

    def correct_min_offset(self, phy_min: int) -> None:
        """Set min offset to the first unit (in the first segment) whose record is still in the log."""
        mf = self.queue.first_file
        if mf is None:
            return
        data = mf.mm[:mf.wrote_position]
        base = mf.start_offset
        for i, (phy, size, _t) in enumerate(CQ_UNIT.iter_unpack(data)):
            if size == FILLER_SIZE and phy == 0:
                continue
            if phy >= phy_min:
                self.min_logic_offset = max(self.min_logic_offset, base + i * CQ_UNIT_SIZE)
                return
        # every unit of the first file is gone: min is the end of the first file's data
        self.min_logic_offset = max(self.min_logic_offset, base + mf.wrote_position)

    def delete_expired(self, phy_min: int) -> int:
        """Delete segments (not the last) whose last unit points below the commit log's min offset."""
        deleted = 0
        files = self.queue.files
        while len(files) > 1:
            mf = files[0]
            if mf.wrote_position < CQ_UNIT_SIZE:
                break
            phy, size, _ = CQ_UNIT.unpack(mf.mm[mf.wrote_position - CQ_UNIT_SIZE:mf.wrote_position])
            if phy >= phy_min:
                break
            self.queue.delete_first(1)
            deleted += 1
        if deleted:
            self.min_logic_offset = max(self.min_logic_offset, self.queue.min_offset)
        self.correct_min_offset(phy_min)
        return deleted

    # -- admin: QUERY_CONSUME_QUEUE (321), CLEAN_EXPIRED_CONSUMEQUEUE (306) --------------------------------
    def last_unit_end(self) -> int:
        """End (offset + size) of the record the last written unit points at; -1 when the last segment holds
        no real unit (RocketMQ ``getLastOffset``: a queue "created just now")."""
        files = self.queue.files
        if not files:
            return -1
        mf = files[-1]
        pos = mf.wrote_position - CQ_UNIT_SIZE
        raw = mf.read(pos, CQ_UNIT_SIZE) if pos >= 0 else None
        if not raw:
            return -1
        phy, size, _tags = CQ_UNIT.unpack(raw)
        if phy < 0 or size <= 0 or (size == FILLER_SIZE and phy == 0):
            return -1
        return phy + size

    def units_at(self, index: int, count: int) -> list[tuple[int, int, int]] | None:
        """Up to ``count`` units ``(commitLogOffset, size, tagsCode)`` from queue offset ``index``, never past
        the end of the segment holding it (RocketMQ ``getIndexBuffer``). None when ``index`` is below the min
        offset, in no segment, or at/after the segment's write position."""
        if index < 0 or index < self.min_offset:
            return None
        raw = self.read_units(index, max(count, 0))
        if raw is None:
            return None
        if not raw and count > 0:
            return None
        if not raw:  # count <= 0 on a valid index: an empty answer, as Java's loop gives
            pos = index * CQ_UNIT_SIZE
            mf = self.queue.find_by_offset(pos)
            return [] if mf is not None and pos - mf.start_offset < mf.wrote_position else None
        return list(CQ_UNIT.iter_unpack(raw))

    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    def destroy(self) -> None:
        self.queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0

    def close(self) -> None:
        self.queue.close()


def put_units(requests: Sequence[tuple], queues: dict[str, dict[int, ConsumeQueue]],
              slow: Callable[[Any], bool], notify: Callable[[str, int, int, int], None] | None,
              notify_failed: Callable[[Exception], None]) -> int:
    """Write the units of dispatched records (``commit_log.DispatchRequest``, in log order) whose transaction
    type takes a queue offset: ``ConsumeQueue.put_fast`` where the queue is in ``queues`` and the unit is the
    usual case, else ``slow(request)``, which returns False when the queue cannot be written; the walk then
    stops. After each unit ``notify(topic, queue_id, queue_offset + 1, tags_code)`` runs (when not None); an
    Exception from it goes to ``notify_failed``. Returns how many requests were done (``len(requests)``: all).
    The Python twin of ``mq.store._consume_queue.put_units``."""
    for i, r in enumerate(requests):
        topic, qid, qoff, phy, size, tc, _ts, _k, _u, tran = r
        if tran == _NOT or tran == _COMMIT:
            per = queues.get(topic)
            cq = per.get(qid) if per is not None else None
            if (cq is None or not cq.put_fast(qoff, phy, size, tc)) and not slow(r):
                return i
            if notify is not None:
                try:
                    notify(topic, qid, qoff + 1, tc)
                except Exception as exc:  # the broker's callback must not break the store
                    notify_failed(exc)
    return len(requests)


(_c_put_units,) = native.load("mq.store._consume_queue", "put_units")  # the C unit writer, or None
#: what the dispatcher writes units with: the C writer where built, else the Python twin
PUT_UNITS: Callable[..., int] = _c_put_units or put_units


class ConsumeQueueTable:
    """All consume queues of a store: ``<root>/consumequeue/<topic>/<queueId>/``."""

    def __init__(self, root: Path, file_size: int) -> None:
        self.root = Path(root)
        self.file_size = file_size
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}

    def find(self, topic: str, queue_id: int, *, create: bool = True) -> ConsumeQueue | None:
        """The queue, made when missing and ``create``: ``InvalidTopicError`` then for a name that cannot be a
        directory (``check_queue_name``)."""
        per = self.queues.get(topic)
        cq = per.get(queue_id) if per is not None else None
        if cq is None and create:
            cq = ConsumeQueue(topic, queue_id, self.root, self.file_size)
            if per is None:
                per = self.queues[topic] = {}
            per[queue_id] = cq
        return cq

    def __iter__(self):
        for per in list(self.queues.values()):
            yield from list(per.values())

    def load(self) -> None:
        """Map every ``<topic>/<int queueId>`` directory (others are skipped, as in RocketMQ)."""
        if not self.root.is_dir():
            return
        for tdir in sorted(self.root.iterdir()):
            if not tdir.is_dir():
                continue
            if not is_valid_topic(tdir.name):
                log.warning("skipping consume queue directory %s: not a valid topic name", tdir)
                continue
            for qdir in sorted(tdir.iterdir()):
                try:
                    qid = int(qdir.name)
                except ValueError:
                    qid = -1
                if not qdir.name.isdigit() or not 0 <= qid <= 0x7FFFFFFF:
                    log.warning("skipping consume queue directory %s", qdir)
                    continue
                cq = self.find(tdir.name, qid)
                cq.load()

    def max_physic_offset(self) -> int:
        return max((cq.max_physic_offset for cq in self), default=-1)

    def delete_topic(self, topic: str) -> bool:
        per = self.queues.pop(topic, None)
        if per is None:
            return False
        for cq in per.values():
            cq.destroy()
        try:
            (self.root / topic).rmdir()
        except OSError:
            pass
        return True

    def delete_queue(self, topic: str, queue_id: int) -> bool:
        """Destroy one queue's files (and the topic directory once it has no queue left). Callers hold the
        dispatcher lock so no dispatch writes the queue meanwhile."""
        per = self.queues.get(topic)
        cq = per.pop(queue_id, None) if per is not None else None
        if cq is None:
            return False
        cq.destroy()
        if not per:
            del self.queues[topic]
            try:
                (self.root / topic).rmdir()
            except OSError:
                pass
        return True

    def destroy_all(self) -> None:
        for topic in list(self.queues):
            self.delete_topic(topic)

    def close(self) -> None:
        for cq in self:
            cq.close()
