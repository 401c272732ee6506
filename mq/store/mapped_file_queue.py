"""An ordered run of equal-size segments forming one logical byte stream (RocketMQ ``MappedFileQueue``).

Used for the commit log (1 GiB segments) and every consume queue (6,000,000-byte segments). Segment *k*
covers ``[start_k, start_k + file_size)``; a new segment starts where the last one ends.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable

from mq.store.mapped_file import TMP_SUFFIX, MappedFile, StoreError, offset_to_file_name

log = logging.getLogger(__name__)


class MappedFileQueue:
    def __init__(self, directory: Path, file_size: int, *, reserve_step: int = 0, size_key: str = "") -> None:
        self.directory = Path(directory)
        self.file_size = file_size
        #: the config key (RocketMQ's spelling) that sets ``file_size``, named when a segment on disk differs
        self.size_key = size_key
        #: ``MappedFile.reserve_step`` of every segment (0: segments are reserved whole)
        self.reserve_step = reserve_step
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._graveyard: list[MappedFile] = []

    # -- loading -----------------------------------------------------------------------------------------
    def load(self) -> None:
        """Map every numeric file in the directory; all must be exactly ``file_size`` bytes."""
        if not self.directory.is_dir():
            return
        names = []
        sizes: dict[str, int] = {}
        for entry in os.scandir(self.directory):
            if not entry.is_file():
                continue
            if entry.name.endswith(TMP_SUFFIX):  # a segment whose creation a crash interrupted
                os.unlink(entry.path)
                continue
            if not entry.name.isdigit():
                log.warning("ignoring non-segment file %s", entry.path)
                continue
            names.append(entry.name)
            sizes[entry.name] = entry.stat().st_size
        names.sort(key=int)
        self._check_sizes(names, sizes)
        files = [MappedFile(self.directory / n, self.file_size, reserve_step=self.reserve_step) for n in names]
        for f in files:
            # Positions start at "full"; recovery moves the tail back.
            f.wrote_position = f.flushed_position = self.file_size
        self.files = files

    def _check_sizes(self, names: list[str], sizes: dict[str, int]) -> None:
        """Refuse segments of another size before mapping any, naming the setting that fixes the size."""
        wrong = [n for n in names if sizes[n] != self.file_size]
        if not wrong or not self.size_key:
            return  # MappedFile checks the size too (without a setting to name)
        first = self.directory / wrong[0]
        found = {sizes[n] for n in names}
        head = f"{first} is {sizes[wrong[0]]} bytes, but {self.size_key} is {self.file_size} and every segment " \
               f"must be exactly that size"
        if len(found) == 1 and sizes[wrong[0]] > 0:
            size = sizes[wrong[0]]
            alone = " (it is the only one: it may also be damaged)" if len(names) == 1 else ""
            raise StoreError(
                f"{head}. Every segment in {self.directory} is {size} bytes{alone}: a store written with another "
                f"segment size (e.g. by a RocketMQ broker configured so) opens with {self.size_key}: {size} in "
                f"the broker's config")
        raise StoreError(
            f"{head}; {len(wrong)} of the {len(names)} segments in {self.directory} differ "
            f"({', '.join(str(x) for x in sorted(found))} bytes found): a segment is damaged or was copied from "
            f"another store")

    # -- geometry ----------------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files[0].start_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        if not self.files:
            return 0
        last = self.files[-1]
        return last.start_offset + last.wrote_position

    @property
    def first_file(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    def find_by_offset(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files or offset < files[0].start_offset:
            return None
        idx = offset // self.file_size - files[0].start_offset // self.file_size
        if 0 <= idx < len(files):
            f = files[idx]
            if f.start_offset <= offset < f.start_offset + self.file_size:
                return f
        for f in files:  # fallback after irregular deletions
            if f.start_offset <= offset < f.start_offset + self.file_size:
                return f
        return None

    def get_last_file(self, start_offset: int = 0, *, create: bool = True) -> MappedFile | None:
        """The last segment; creates the next one when it is full or the queue is empty."""
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            return last
        if not create:
            return last
        if last is None:
            create_at = start_offset - start_offset % self.file_size
        else:
            create_at = last.start_offset + self.file_size
        return self.create_file(create_at)

    def create_file(self, start_offset: int) -> MappedFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / offset_to_file_name(start_offset)
        if path.exists():  # a stale file from an earlier truncation
            path.unlink()
        f = MappedFile(path, self.file_size, create=True, reserve_step=self.reserve_step)
        self.files.append(f)
        return f

    # -- flushing ----------------------------------------------------------------------------------------
    def flush(self, least_pages: int = 0, fsync: Callable[[int], None] = os.fdatasync) -> int:
        """fdatasync every segment written past ``flushed_where``; returns the new flushed offset.

        With ``least_pages`` > 0 nothing happens unless that many 4 KiB pages are dirty."""
        target = self.max_offset
        if target <= self.flushed_where:
            return self.flushed_where
        if least_pages > 0 and (target - self.flushed_where) < least_pages * 4096:
            return self.flushed_where
        for f in list(self.files):
            if f.start_offset + f.wrote_position <= self.flushed_where:
                continue
            if f.start_offset >= target:
                break
            f.flush(fsync)
        self.flushed_where = target
        return target

    # -- truncation and deletion -------------------------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Drop everything at and after ``offset``: later segments are deleted, the containing one is
        shortened and its bytes from ``offset`` on are given back (``MappedFile.discard_from``). RocketMQ leaves
        them: records or units there then look valid to the next recovery once new writes have moved the end
        past a shorter rewrite, and come back with queue offsets that were given out again."""
        keep: list[MappedFile] = []
        for f in self.files:
            if f.start_offset + self.file_size <= offset:
                keep.append(f)
            elif f.start_offset <= offset:
                pos = offset - f.start_offset
                f.wrote_position = pos
                f.flushed_position = min(f.flushed_position, pos)
                f.discard_from(pos)
                keep.append(f)
            else:
                self._destroy(f)
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def delete_first(self, count: int = 1) -> list[MappedFile]:
        """Remove and destroy the first ``count`` segments (never the last one)."""
        removed = []
        while count > 0 and len(self.files) > 1:
            f = self.files.pop(0)
            self._destroy(f)
            removed.append(f)
            count -= 1
        return removed

    def delete_expired_by_time(self, reserved_ms: int, now: float, *, force: bool = False,
                               max_files: int = 10) -> int:
        """Delete segments (not the last) whose mtime + reserved <= now, or all if ``force``; stops at the
        first that may not be deleted."""
        deleted = 0
        while len(self.files) > 1 and deleted < max_files:
            f = self.files[0]
            if not force and f.mtime() * 1000 + reserved_ms > now * 1000:
                break
            self.files.pop(0)
            self._destroy(f)
            deleted += 1
        return deleted

    def reset_to(self, offset: int) -> None:
        """Drop every segment: the stream restarts at ``offset`` (a segment boundary), where the next
        ``get_last_file(offset)`` creates its first segment. For an empty replica that the master starts
        somewhere else than where its own (empty) log begins."""
        if offset % self.file_size:
            raise StoreError(f"{offset} is not a segment boundary (segment size {self.file_size})")
        for f in self.files:
            self._destroy(f)
        self.files = []
        self.flushed_where = offset

    def destroy(self) -> None:
        for f in self.files:
            self._destroy(f)
        self.files = []
        self.flushed_where = 0
        try:
            self.directory.rmdir()
        except OSError:
            pass

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.retry_graveyard()

    def _destroy(self, f: MappedFile) -> None:
        if not f.destroy():
            self._graveyard.append(f)

    def retry_graveyard(self) -> None:
        self._graveyard = [f for f in self._graveyard if not f.close()]

