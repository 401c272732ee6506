"""The timer's durable structure: append-only time-bucket files, a near-window wheel in memory, a checkpoint.

Synchronous and socket-free (the asyncio service in ``service.py`` drives it). Every pending timer is one
28-byte entry appended to the file of the bucket holding its fire time (``<dir>/buckets/<bucket start ms>``,
one file per ``bucket_span_ms``)::

    +--------+------+--------------------------------------------------------------+
    | offset | size | field                                                        |
    +--------+------+--------------------------------------------------------------+
    |      0 |    8 | fire time, epoch ms (int64)                                  |
    |      8 |    8 | commit-log offset of the parked message (int64)              |
    |     16 |    4 | its size in bytes (int32)                                    |
    |     20 |    8 | its offset in the timer topic's consume queue (int64)        |
    +--------+------+--------------------------------------------------------------+

Entries reach a bucket file only in consume-queue order, so each file is sorted by that last field.

Memory holds only the *near window*: the buckets whose span starts before ``now + bucket_span_ms`` are loaded
into ``precision_ms`` slots (packed bytes, 28 per entry); far buckets stay on disk. A slot is due once its end
has passed; after the caller has delivered it, ``finish`` moves the *watermark* past it, and a bucket the
watermark has passed is deleted.

``<dir>/checkpoint.json`` = ``{"watermarkMs": W, "enqueueOffset": E}``, written after the dirty bucket files are
fsynced: every entry fired before W is delivered, and every consume-queue unit before E is in a bucket file (or
was delivered). On open, each bucket file is cut back to its entries below E (a suffix, as files are sorted by
consume-queue offset) and to whole entries; the caller then re-enqueues from E. Bucket files before W are deleted;
entries before W in the current bucket are skipped. Entries that arrive already overdue (fire < W) are kept in
memory only and hold E back (``checkpoint_offset``) until they are delivered.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

ENTRY_FORMAT = ">qqiq"
ENTRY = struct.Struct(ENTRY_FORMAT)
ENTRY_SIZE = ENTRY.size  # 28
CHECKPOINT = "checkpoint.json"

Entry = tuple[int, int, int, int]  # fire_ms, phy, size, cq_offset


class TimerStore:
    def __init__(self, directory: Path, *, precision_ms: int = 100, bucket_span_ms: int = 60_000,
                 fsync: bool = True) -> None:
        if bucket_span_ms % precision_ms:
            raise ValueError("the bucket span must be a multiple of the precision")
        self.dir = Path(directory)
        self.bucket_dir = self.dir / "buckets"
        self.precision = precision_ms
        self.span = bucket_span_ms
        self.fsync = fsync
        self.watermark = 0
        self.enqueue_offset = 0
        #: bucket start -> entries on disk (pending buckets, loaded or not)
        self.buckets: dict[int, int] = {}
        self.loaded: set[int] = set()
        #: slot index -> packed entries (near window only)
        self.slots: dict[int, bytearray] = {}
        #: entries that arrived with a fire time below the watermark (deliver at once)
        self.overdue: list[Entry] = []
        self._dirty: set[int] = set()
        self._in_memory = 0

    # -- open / checkpoint -------------------------------------------------------------------------------------
    def open(self, now_ms: int) -> None:
        self.bucket_dir.mkdir(parents=True, exist_ok=True)
        ck = self._read_checkpoint()
        if ck is None:
            self.watermark = now_ms - now_ms % self.precision
            self.enqueue_offset = 0
        else:
            self.watermark, self.enqueue_offset = ck
        for f in self.bucket_dir.iterdir():
            try:
                start = int(f.name)
            except ValueError:
                continue
            if start + self.span <= self.watermark:
                f.unlink()
                continue
            n = self._cut(f)
            if n:
                self.buckets[start] = n
            else:
                f.unlink()

    def _read_checkpoint(self) -> tuple[int, int] | None:
        for name in (CHECKPOINT, CHECKPOINT + ".bak"):
            try:
                obj = json.loads((self.dir / name).read_text())
                return int(obj["watermarkMs"]), int(obj["enqueueOffset"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return None

    def _cut(self, f: Path) -> int:
        """Cut ``f`` back to whole entries below the enqueue offset; return how many remain."""
        size = f.stat().st_size
        keep = size - size % ENTRY_SIZE
        with open(f, "r+b") as fh:
            while keep:  # entries are sorted by cq offset: drop the suffix at or beyond the enqueue offset
                fh.seek(keep - ENTRY_SIZE)
                if ENTRY.unpack(fh.read(ENTRY_SIZE))[3] < self.enqueue_offset:
                    break
                keep -= ENTRY_SIZE
            if keep != size:
                fh.truncate(keep)
        return keep // ENTRY_SIZE

    def checkpoint_offset(self) -> int:
        """The enqueue offset it is safe to record: not past an overdue entry still waiting in memory."""
        if self.overdue:
            return min(self.enqueue_offset, min(e[3] for e in self.overdue))
        return self.enqueue_offset

    def dirty_files(self) -> list[Path]:
        out = [self.bucket_dir / str(b) for b in self._dirty if b in self.buckets]
        self._dirty.clear()
        return out

    def sync_files(self, files: Iterable[Path]) -> None:
        """fdatasync the given bucket files (safe to run in a worker thread)."""
        if not self.fsync:
            return
        for p in files:
            try:
                fd = os.open(p, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def write_checkpoint(self, watermark: int, enqueue_offset: int) -> None:
        path = self.dir / CHECKPOINT
        tmp = path.with_name(CHECKPOINT + ".tmp")
        data = json.dumps({"watermarkMs": watermark, "enqueueOffset": enqueue_offset}).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if path.exists():
            os.replace(path, path.with_name(CHECKPOINT + ".bak"))
        os.replace(tmp, path)

    def checkpoint(self) -> None:
        """Synchronously: sync dirty files, then record (watermark, safe enqueue offset)."""
        self.sync_files(self.dirty_files())
        self.write_checkpoint(self.watermark, self.checkpoint_offset())

    # -- add ---------------------------------------------------------------------------------------------------
    def add(self, entries: Iterable[Entry], next_enqueue_offset: int) -> None:
        """Record entries (in consume-queue order) and move the enqueue offset to ``next_enqueue_offset``."""
        by_bucket: dict[int, list[Entry]] = {}
        span = self.span
        w = self.watermark
        for e in entries:
            if e[0] < w:
                self.overdue.append(e)
                continue
            by_bucket.setdefault(e[0] - e[0] % span, []).append(e)
        pack = ENTRY.pack
        for b, es in by_bucket.items():
            with open(self.bucket_dir / str(b), "ab") as fh:
                fh.write(b"".join(pack(*e) for e in es))
            self.buckets[b] = self.buckets.get(b, 0) + len(es)
            self._dirty.add(b)
            if b in self.loaded:
                self._to_slots(es)
        self.enqueue_offset = max(self.enqueue_offset, next_enqueue_offset)

    def _to_slots(self, es: Iterable[Entry]) -> None:
        prec = self.precision
        slots = self.slots
        w = self.watermark
        for e in es:
            if e[0] < w:
                continue
            k = e[0] // prec
            buf = slots.get(k)
            if buf is None:
                slots[k] = buf = bytearray()
            buf += ENTRY.pack(*e)
            self._in_memory += 1

    # -- near window -------------------------------------------------------------------------------------------
    def load_ahead(self, now_ms: int) -> int:
        """Load every pending bucket starting before ``now + span``; returns how many were loaded."""
        limit = now_ms + self.span
        n = 0
        for b in sorted(self.buckets):
            if b >= limit:
                break
            if b in self.loaded:
                continue
            data = (self.bucket_dir / str(b)).read_bytes()
            data = data[:len(data) - len(data) % ENTRY_SIZE]
            self._to_slots(ENTRY.iter_unpack(data))
            self.loaded.add(b)
            n += 1
        return n

    def next_due(self, now_ms: int) -> tuple[int, list[Entry]] | None:
        """The earliest slot whose end has passed (overdue entries first, as slot -1); None if nothing is due.

        Its entries are sorted by fire time. The caller delivers them, then calls ``finish(slot)``."""
        if self.overdue:
            return -1, sorted(self.overdue)
        if not self.slots:
            return None
        k = min(self.slots)
        if (k + 1) * self.precision > now_ms:
            return None
        return k, sorted(ENTRY.iter_unpack(self.slots[k]))

    def finish(self, slot: int) -> None:
        if slot == -1:
            self.overdue.clear()
            return
        buf = self.slots.pop(slot, None)
        if buf is not None:
            self._in_memory -= len(buf) // ENTRY_SIZE
        self.advance((slot + 1) * self.precision)

    def advance(self, now_ms: int) -> None:
        """Move the watermark to ``now`` (floored to the precision) if no loaded slot before it is pending,
        and delete the buckets it has passed. Every bucket starting before ``now`` must be loaded."""
        w = now_ms - now_ms % self.precision
        if self.slots:
            w = min(w, min(self.slots) * self.precision)
        if self.buckets:
            first_unloaded = min((b for b in self.buckets if b not in self.loaded), default=None)
            if first_unloaded is not None:
                w = min(w, first_unloaded)
        if w <= self.watermark:
            return
        self.watermark = w
        for b in [b for b in self.buckets if b + self.span <= w]:
            del self.buckets[b]
            self.loaded.discard(b)
            self._dirty.discard(b)
            try:
                (self.bucket_dir / str(b)).unlink()
            except FileNotFoundError:
                pass

    # -- figures -----------------------------------------------------------------------------------------------
    @property
    def in_memory(self) -> int:
        return self._in_memory + len(self.overdue)

    def pending(self) -> int:
        """Entries on disk not yet delivered (approximate for the current bucket)."""
        return sum(self.buckets.values()) + len(self.overdue)
