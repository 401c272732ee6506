"""One RocketMQ index file: a hash table of message keys -> commit log offsets (STORE.md §6).

The layout is exactly RocketMQ 4.9's ``IndexFile`` / ``IndexHeader``, big-endian, so a Java broker reads our
files and we read theirs::

    offset                                   size  field
    +---------------------------------------+-----+---------------------------------------------------------+
    | 0                                     |  8  | beginTimestamp   store time (ms) of entry 1              |
    | 8                                     |  8  | endTimestamp     store time (ms) of the newest entry     |
    | 16                                    |  8  | beginPhyOffset   commit log offset of entry 1            |
    | 24                                    |  8  | endPhyOffset     commit log offset of the newest entry   |
    | 32                                    |  4  | hashSlotCount    slots in use                            |
    | 36                                    |  4  | indexCount       NEXT entry number; starts at 1 (<=0 = 1)|
    +---------------------------------------+-----+---------------------------------------------------------+
    | 40 + s*4            (s < hashSlotNum) |  4  | slot s: number of the newest entry hashed to s; 0 empty  |
    +---------------------------------------+-----+---------------------------------------------------------+
    | 40 + hashSlotNum*4 + n*20   (n >= 1)  |  4  | keyHash    abs(String.hashCode(topic#key)), MIN_VALUE->0 |
    |                              +4       |  8  | phyOffset  commit log offset of the message              |
    |                              +12      |  4  | timeDiff   SECONDS since beginTimestamp, in [0, 2^31-1]  |
    |                              +16      |  4  | prevIndex  older entry in the same slot; 0 ends the chain|
    +---------------------------------------+-----+---------------------------------------------------------+

File size = 40 + hashSlotNum*4 + indexNum*20 (420,000,040 bytes with the defaults), created at full length but
sparse: the header and the hash slots (20 MB with the defaults: slots are written anywhere) have their blocks
reserved at creation, entries ``INDEX_RESERVE_STEP`` bytes at a time ahead of the writer
(``mapped_file.reserve_range``: a store into a hole a full disk cannot fill kills the process, so nothing is
stored past the reserved bytes; a step the disk cannot give is ``OSError(ENOSPC)`` before anything of the batch
is written). Entry 0 is never written, so a file holds at most ``indexNum - 1`` entries. A slot or prevIndex value
``<= 0`` or ``> indexCount`` reads as empty.

Reading a chain (``iter_phy_offsets``) follows Java's ``selectPhyOffset``: the time of an entry is
``beginTimestamp + timeDiff*1000`` (whole seconds after the file's first entry), matching entries must have the
same keyHash and a time inside [begin, end], and the walk stops at a time before ``begin``. Matching is on the
31-bit hash only: different keys collide, so callers re-check the key against the record (RocketMQ #3613).

One deliberate difference on write: Java computes entry 1's timeDiff against the timestamp a rolled file
inherits from its predecessor, then sets beginTimestamp to entry 1's time, so entry 1 reads back later than it
was stored. We write timeDiff 0 for entry 1, which Java reads as the true time.

The header is rewritten in the mapping on every put (as Java's ``IndexHeader`` setters do), so the file is
coherent after a process crash; ``flush`` makes it durable with ``os.fdatasync`` (on Linux that writes back
pages dirtied through the shared mapping, and it releases the GIL, unlike ``mmap.flush``).
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

from mq.errors import MQError
from mq.store import native
from mq.store.index_hash import index_key_hash
from mq.store.mapped_file import reserve_range

(_c_put_entries,) = native.load("mq.store._index", "put_entries")  # the entry writer in C, or None

#: Header: beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset (int64), hashSlotCount, indexCount (int32).
HEADER_FORMAT = ">qqqqii"
#: A hash slot: the number of the newest entry in its chain.
SLOT_FORMAT = ">i"
#: An entry: keyHash (int32), phyOffset (int64), timeDiff (int32 seconds), prevIndex (int32).
ENTRY_FORMAT = ">iqii"

HEADER_SIZE = struct.calcsize(HEADER_FORMAT)
SLOT_SIZE = struct.calcsize(SLOT_FORMAT)
ENTRY_SIZE = struct.calcsize(ENTRY_FORMAT)
assert (HEADER_SIZE, SLOT_SIZE, ENTRY_SIZE) == (40, 4, 20)

#: Entries are reserved this many bytes at a time (about 210,000 entries) ahead of the writer.
INDEX_RESERVE_STEP = 4 * 1024 * 1024

#: Slot / prevIndex value meaning "none".
INVALID_INDEX = 0
#: Length of an index file name, ``yyyyMMddHHmmssSSS``.
FILE_NAME_LENGTH = 17
_INT32_MAX = 0x7FFFFFFF

log = logging.getLogger(__name__)

_HEADER = struct.Struct(HEADER_FORMAT)
_SLOT = struct.Struct(SLOT_FORMAT)
_ENTRY = struct.Struct(ENTRY_FORMAT)


class IndexFileError(MQError):
    """An index file cannot be used as it is (wrong size for the configured slot/entry counts)."""


# ---------------------------------------------------------------------------------------------------------
# names and sizes
# ---------------------------------------------------------------------------------------------------------
def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def file_name_for(ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` of epoch milliseconds ``ms`` in local time (Java ``timeMillisToHumanString``)."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


def is_index_file_name(name: str) -> bool:
    return len(name) == FILE_NAME_LENGTH and name.isdigit()


def next_file_name(after: str | None, now_ms: int) -> str:
    """A name for a file created at ``now_ms`` that sorts strictly after ``after`` (two rolls in one ms)."""
    name = file_name_for(now_ms)
    if after is None or name > after:
        return name
    stamp = datetime.strptime(after[:14], "%Y%m%d%H%M%S") + timedelta(milliseconds=int(after[14:]) + 1)
    return stamp.strftime("%Y%m%d%H%M%S") + f"{stamp.microsecond // 1000:03d}"


# ---------------------------------------------------------------------------------------------------------
# typed views (tests, tools)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class IndexHeader:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1

    def pack(self) -> bytes:
        return _HEADER.pack(self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                            self.end_phy_offset, self.hash_slot_count, self.index_count)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview | mmap.mmap, offset: int = 0) -> "IndexHeader":
        bt, et, bp, ep, slots, count = _HEADER.unpack_from(data, offset)
        return cls(bt, et, bp, ep, slots, count if count > 0 else 1)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    number: int
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


# ---------------------------------------------------------------------------------------------------------
# the file
# ---------------------------------------------------------------------------------------------------------
class IndexFile:
    """A memory-mapped index file. Not thread-safe on its own: ``IndexService`` serializes access."""

    __slots__ = ("path", "hash_slot_num", "index_num", "_fd", "_mm", "_entries_at", "_dirty",
                 "begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset",
                 "hash_slot_count", "index_count", "reserved_to", "_c_put")

    def __init__(self, path: Path, hash_slot_num: int, index_num: int, fd: int) -> None:
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError(f"hash_slot_num must be > 0 and index_num > 1, got {hash_slot_num}, {index_num}")
        self.path = Path(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self._fd = fd
        self._mm = mmap.mmap(fd, index_file_size(hash_slot_num, index_num))
        self._entries_at = HEADER_SIZE + hash_slot_num * SLOT_SIZE
        self._dirty = False
        #: bytes ``[0, reserved_to)`` have their blocks (``_reserve_entries``)
        self.reserved_to = 0
        #: ``mq.store._index.put_entries`` where built; None: the Python loop in ``put_hashes``
        self._c_put = _c_put_entries
        h = IndexHeader.unpack(self._mm)
        self.begin_timestamp = h.begin_timestamp
        self.end_timestamp = h.end_timestamp
        self.begin_phy_offset = h.begin_phy_offset
        self.end_phy_offset = h.end_phy_offset
        self.hash_slot_count = h.hash_slot_count
        self.index_count = h.index_count

    @classmethod
    def create(cls, path: Path, hash_slot_num: int, index_num: int, *, end_phy_offset: int = 0,
               end_timestamp: int = 0) -> "IndexFile":
        """A new, empty file that continues from a predecessor's end offset and timestamp (as Java's)."""
        size = index_file_size(hash_slot_num, index_num)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, size)
            f = cls(path, hash_slot_num, index_num, fd)
            try:
                f._reserve_entries(1)  # the header, every slot and the first step of entries
            except BaseException:
                f._mm.close()
                raise
        except BaseException:
            os.close(fd)
            Path(path).unlink(missing_ok=True)
            raise
        if end_phy_offset > 0:
            f.begin_phy_offset = f.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            f.begin_timestamp = f.end_timestamp = end_timestamp
        f._write_header()
        return f

    @classmethod
    def open(cls, path: Path, hash_slot_num: int, index_num: int) -> "IndexFile":
        """Map an existing file; its size must match the configured slot and entry counts."""
        size = index_file_size(hash_slot_num, index_num)
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual != size:
                raise IndexFileError(
                    f"index file {path} is {actual} bytes, expected {size} for maxHashSlotNum={hash_slot_num} "
                    f"and maxIndexNum={index_num}; was it written with other settings?")
            f = cls(path, hash_slot_num, index_num, fd)
        except BaseException:
            os.close(fd)
            raise
        written = f._entries_at + f.index_count * ENTRY_SIZE
        try:
            f._reserve_entries(f.index_count)  # slots (a Java file may hold holes) and entries written
        except OSError as exc:
            log.warning("cannot reserve the blocks of index file %s (%s); its holes could not be filled if the "
                        "disk fills", path, exc.strerror)
            f.reserved_to = written
        return f

    def _reserve_entries(self, count: int) -> None:
        """Reserve the blocks of every byte up to entry number ``count`` (exclusive), a step ahead;
        ``OSError(ENOSPC)`` when the disk is full."""
        need = self._entries_at + count * ENTRY_SIZE
        if need <= self.reserved_to:
            return
        size = index_file_size(self.hash_slot_num, self.index_num)
        end = min(size, -(-need // INDEX_RESERVE_STEP) * INDEX_RESERVE_STEP)
        self.reserved_to = reserve_range(self._fd, self.reserved_to, end, size, self.path, need=need,
                                         keep=self._entries_at + self.index_count * ENTRY_SIZE)

    # -- header ------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def entry_count(self) -> int:
        return self.index_count - 1

    def header(self) -> IndexHeader:
        return IndexHeader(self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
                           self.hash_slot_count, self.index_count)

    def _write_header(self) -> None:
        _HEADER.pack_into(self._mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset, self.hash_slot_count, self.index_count)
        self._dirty = True

    # -- write -------------------------------------------------------------------------------------------
    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add ``key`` (already ``topic#key``); False when the file is full (the caller rolls)."""
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        return self.put_hashes([(key_hash, phy_offset, store_timestamp)]) == 1

    def put_hashes(self, items: list[tuple[int, int, int]], start: int = 0) -> int:
        """Add ``items[start:]`` (key hash, phyOffset, storeTimestamp) in order while the file has room;
        returns the index of the first item not added (``len(items)`` when all were). The header is written
        once, after the last entry."""
        n = self.index_count
        limit = self.index_num
        if start >= len(items) or n >= limit:
            return start
        self._reserve_entries(min(limit, n + len(items) - start))  # before any store: a full disk writes nothing
        mm = self._mm
        put = self._c_put if self._c_put is not None else self._put_entries  # C: its stores without the GIL
        i, n, bt, self.begin_phy_offset, hsc = put(mm, items, start, n, limit, self.hash_slot_num, self._entries_at,
                                                   self.begin_timestamp, self.begin_phy_offset, self.hash_slot_count)
        _h, phy, ts = items[i - 1]
        self.begin_timestamp = bt
        self.hash_slot_count = hsc
        self.index_count = n
        self.end_phy_offset = phy
        self.end_timestamp = ts
        _HEADER.pack_into(mm, 0, bt, ts, self.begin_phy_offset, phy, hsc, n)
        self._dirty = True
        return i

    @staticmethod
    def _put_entries(mm: mmap.mmap, items: list[tuple[int, int, int]], i: int, n: int, limit: int, slots: int,
                     base: int, bt: int, begin_phy: int, hsc: int) -> tuple[int, int, int, int, int]:
        """Write ``items[i:]`` as entries numbered from ``n`` while ``n < limit``; returns (next item, next
        entry number, beginTimestamp, beginPhyOffset, hashSlotCount). The Python twin of
        ``mq.store._index.put_entries``."""
        unpack_slot = _SLOT.unpack_from
        pack_slot = _SLOT.pack_into
        pack_entry = _ENTRY.pack_into
        end = len(items)
        while i < end and n < limit:
            key_hash, phy, ts = items[i]
            slot_pos = HEADER_SIZE + (key_hash % slots) * SLOT_SIZE
            prev = unpack_slot(mm, slot_pos)[0]
            if prev <= INVALID_INDEX or prev > n:
                prev = INVALID_INDEX
                hsc += 1
            if n <= 1:
                # First entry: it defines the file's start (see the module docstring for the Java quirk we skip).
                bt = ts
                begin_phy = phy
                time_diff = 0
            elif bt <= 0:
                time_diff = 0
            else:
                delta = ts - bt
                time_diff = min(delta // 1000, _INT32_MAX) if delta > 0 else 0  # Java truncates; <0 clamps to 0
            pack_entry(mm, base + n * ENTRY_SIZE, key_hash, phy, time_diff, prev)
            pack_slot(mm, slot_pos, n)
            n += 1
            i += 1
        return i, n, bt, begin_phy, hsc

    def truncate_from(self, phy_offset: int) -> int:
        """Undo the newest entries whose phyOffset >= ``phy_offset``; returns how many were removed.

        Entries are appended in commit-log order, so they form a suffix. Each put set its slot to itself
        and remembered the old slot value in prevIndex, so undoing them newest first restores the slots
        exactly. The new endTimestamp is the last kept entry's recorded time (whole seconds, so at most
        999 ms earlier than the true store time).
        """
        mm, base = self._mm, self._entries_at
        n = self.index_count - 1
        removed = 0
        while n >= 1:
            key_hash, phy, _diff, prev = _ENTRY.unpack_from(mm, base + n * ENTRY_SIZE)
            if phy < phy_offset:
                break
            slot_pos = HEADER_SIZE + (key_hash % self.hash_slot_num) * SLOT_SIZE
            _SLOT.pack_into(mm, slot_pos, prev if INVALID_INDEX < prev < n else INVALID_INDEX)
            if not INVALID_INDEX < prev < n:
                self.hash_slot_count = max(0, self.hash_slot_count - 1)
            mm[base + n * ENTRY_SIZE:base + (n + 1) * ENTRY_SIZE] = bytes(ENTRY_SIZE)
            removed += 1
            n -= 1
        if removed:
            self.index_count = n + 1
            if n >= 1:
                _h, phy, diff, _p = _ENTRY.unpack_from(mm, base + n * ENTRY_SIZE)
                self.end_phy_offset = phy
                self.end_timestamp = self.begin_timestamp + diff * 1000
            self._write_header()
        return removed

    # -- read --------------------------------------------------------------------------------------------
    def is_time_matched(self, begin: int, end: int) -> bool:
        """Java's ``isTimeMatched``: [begin, end] covers, or has an end inside, [beginTs, endTs]."""
        bt, et = self.begin_timestamp, self.end_timestamp
        return (begin < bt and end > et) or (bt <= begin <= et) or (bt <= end <= et)

    def iter_phy_offsets(self, key_hash: int, begin: int, end: int) -> Iterator[int]:
        """Offsets of entries with ``key_hash`` stored in [begin, end], newest first (Java's chain walk).

        Stricter than Java in one way: the walk also stops when prevIndex is not older than the current
        entry, so a damaged chain cannot loop.
        """
        count = self.index_count
        mm, base, bt = self._mm, self._entries_at, self.begin_timestamp
        n = _SLOT.unpack_from(mm, HEADER_SIZE + (key_hash % self.hash_slot_num) * SLOT_SIZE)[0]
        if n <= INVALID_INDEX or n > count or count <= 1:
            return
        while True:
            h, phy, diff, prev = _ENTRY.unpack_from(mm, base + n * ENTRY_SIZE)
            if diff < 0:
                return
            t = bt + diff * 1000
            if h == key_hash and begin <= t <= end:
                yield phy
            if prev <= INVALID_INDEX or prev > count or prev >= n or t < begin:
                return
            n = prev

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Up to ``max_num`` candidate offsets for ``key`` (already ``topic#key``), newest first."""
        out: list[int] = []
        if max_num <= 0:
            return out
        for phy in self.iter_phy_offsets(index_key_hash(key), begin, end):
            out.append(phy)
            if len(out) >= max_num:
                break
        return out

    def entry(self, n: int) -> IndexEntry:
        if not 1 <= n < self.index_count:
            raise IndexError(f"entry {n} not in [1, {self.index_count})")
        return IndexEntry(n, *_ENTRY.unpack_from(self._mm, self._entries_at + n * ENTRY_SIZE))

    def slot(self, s: int) -> int:
        return _SLOT.unpack_from(self._mm, HEADER_SIZE + s * SLOT_SIZE)[0]

    # -- lifecycle ---------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the header and make the file durable."""
        if self._mm.closed:
            return
        self._write_header()
        os.fdatasync(self._fd)
        self._dirty = False

    @property
    def dirty(self) -> bool:
        return self._dirty

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return (f"IndexFile({self.name}, entries={self.entry_count}/{self.index_num - 1}, "
                f"ts=[{self.begin_timestamp},{self.end_timestamp}], "
                f"phy=[{self.begin_phy_offset},{self.end_phy_offset}])")
