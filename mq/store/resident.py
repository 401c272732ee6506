"""Keeping the store's mapped pages out of the broker's resident set (``residentBehindWriterBytes``).

Every page the broker writes or reads through a shared mapping stays mapped in its address space, and so in
its RSS, until the segment is unmapped: after a few minutes of sends a broker holding a 1 GiB commit-log
segment shows nearly a gigabyte resident although it needs a few megabytes of its own. RocketMQ's broker
behaves the same way; operators and container limits read RSS, and the kernel reclaims a process's mapped
pages later than plain page cache.

``ResidentTrimmer`` is a daemon thread that, every ``interval_ms`` (200), releases from the mappings
(``madvise(MADV_DONTNEED)`` through libc, which lets go of the GIL while the kernel works):

- the commit log's pages further than ``keep_bytes`` behind the writer's position in its last segment, and
  the whole of the ``RECENT`` segments before it (where a backlog drains);
- every ``cq_every``-th pass (10 s at the usual interval): every older segment, and every consume-queue segment
  but the last of its queue.

On a shared file mapping the advice only unmaps: the page stays in the page cache, a dirty page stays dirty
and is written back as before, and the next read of it maps it again with a minor fault (the kernel maps the
neighbouring cached pages with it, 64 KiB at a time by default). Nothing is lost and nothing is read from disk
that was cached. The pages ahead of the writer, which the warm-ahead thread populates so puts do not fault,
are never released. A pass over an unpopulated 1 GiB segment costs about 15 µs; releasing 300 MiB about 8 ms,
off the event loop's thread.

A consumer draining a backlog maps the log far faster than a writer fills it: RocketMQ's benchmark Consumer
draining 8 queues at 250-270 k messages a second mapped up to 106 MiB between two passes 200 ms apart (its
queues read the same pages at different offsets), and the broker's RSS reached 345 MiB. So a pass after which the
process's resident set is at least ``BUSY_RELEASE`` smaller is followed by the next after ``interval_ms /
BUSY_DIVISOR``, until a pass finds little to release.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
from typing import Callable, Iterable

import psutil

from mq.store.flush import PeriodicService
from mq.store.mapped_file import MappedFile
from mq.store.mapped_file_queue import MappedFileQueue
from mq.store.warm import libc_madvise

log = logging.getLogger(__name__)

PAGE = mmap.PAGESIZE
#: <sys/mman.h>
MADV_DONTNEED = 4
#: segments before the last released on every pass (the rest every ``cq_every`` passes)
RECENT = 3
#: a pass that shrinks the resident set by this much is followed by the next sooner, ``interval_ms / BUSY_DIVISOR``
BUSY_RELEASE = 8 << 20
BUSY_DIVISOR = 4

Release = Callable[[mmap.mmap, int, int], None]


def make_release() -> Release | None:
    """``release(mm, start, end)``: MADV_DONTNEED over ``mm[start:end]`` (``start`` rounded up to a page),
    raising ``OSError``; None where there is no C library to call."""
    madvise = libc_madvise()
    if madvise is None:  # pragma: no cover - every Linux has one
        return None

    def release(mm: mmap.mmap, start: int, end: int) -> None:
        start = -(-start // PAGE) * PAGE
        if end <= start:
            return
        view = (ctypes.c_char * (end - start)).from_buffer(mm, start)  # holds the mapping open during the call
        try:
            if madvise(ctypes.addressof(view), end - start, MADV_DONTNEED) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
        finally:
            del view

    return release


class ResidentTrimmer(PeriodicService):
    name = "mq-store-trim"

    def __init__(self, commit_log: MappedFileQueue, consume_queues: Callable[[], Iterable], *, keep_bytes: int,
                 interval_ms: int = 200, cq_every: int = 50, release: Release | None = None) -> None:
        super().__init__(interval_ms)
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.keep_bytes = keep_bytes
        self.cq_every = max(1, cq_every)
        self.release = release or make_release()
        self.passes = 0
        self._warned = False
        #: the last pass shrank the resident set by at least ``BUSY_RELEASE``: the next comes sooner
        self.busy = False
        #: this process, made at the first pass (in the process that runs the passes, after any fork)
        self._process: psutil.Process | None = None

    def wait_s(self) -> float:
        return self.interval_ms / 1000.0 / (BUSY_DIVISOR if self.busy else 1)

    def run_once(self) -> None:
        if self.release is None:
            return
        before = self.resident_bytes()
        self._pass()
        after = self.resident_bytes()
        self.busy = before > 0 and after > 0 and before - after >= BUSY_RELEASE

    def resident_bytes(self) -> int:
        """This process's resident set, bytes (0 where the platform does not say: the pace stays as it is)."""
        try:
            if self._process is None:
                self._process = psutil.Process()
            return self._process.memory_info().rss
        except psutil.Error:
            return 0

    def _pass(self) -> None:
        self.passes += 1
        files = list(self.commit_log.files)
        if not files:
            return
        *older, last = files
        self._release(last, last.wrote_position - self.keep_bytes)
        # the segments before the last are where consumers behind the writer read (a backlog drains through
        # them at over 100 MB/s): every pass; the rest of the store, read only by the odd old message, and the
        # idle consume-queue segments every ``cq_every`` passes
        sweep = self.passes % self.cq_every == 0
        for mf in older if sweep else older[-RECENT:]:
            self._release(mf, mf.file_size)
        if sweep:
            for cq in self.consume_queues():
                for mf in cq.queue.files[:-1]:
                    self._release(mf, mf.file_size)

    def _release(self, mf: MappedFile, end: int) -> None:
        """Release ``mf``'s mapped pages below ``end``."""
        if end <= 0 or mf.closed:
            return
        try:
            self.release(mf.mm, 0, end)  # type: ignore[misc]
        except (ValueError, BufferError, TypeError):  # the cleaner closed the mapping meanwhile
            return
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("cannot release mapped pages of %s: %s (the broker's RSS includes them)",
                            mf.path.name, exc.strerror)
