"""Warm-ahead: bring the commit log's pages into the page cache just ahead of the write position, off the put path.

A segment's disk blocks are reserved ahead of the writer (``MappedFile.reserve_to``), but its pages are not
in the page cache, so the first write to each page through the mapping takes a page fault that allocates and
zeroes a page-cache page: 0.1-2.7 µs of the putting thread's system time per 1 KiB message on this machine,
the high end when the VM makes fresh pages expensive (``benchmarks/store_append.py`` prints it).
``WarmAheadService`` moves that work to its own thread, ``ahead`` bytes in front of the writer, one chunk at a
time, with the GIL released. RocketMQ's ``warmMapedFileEnable`` does the same job once per segment; here it
runs continuously. By default (``default_ahead``) it runs under ASYNC_FLUSH where the kernel can populate and
the process may use at least ``MIN_CPUS`` CPUs: the thread does the same kernel work the writer would (about
3.5 µs of system time per 1 KiB message on this machine) and only pays where a core is idle to take it. On
2 CPUs shared with clients it took the clients' core: under RocketMQ's benchmark Producer the broker sent
9-15 % more without it, and as much beside a CPU burner (``benchmarks/vs_rocketmq.py --mq-config
warmAheadBytes=0``, docs/performance.md). It never runs by default under SYNC_FLUSH, where the group commit
needs the second core.

Two ways, chosen at start:

- **populate** (Linux 5.14+): ``madvise(MADV_POPULATE_READ)`` over the chunk, through libc (``mmap.madvise``
  would hold the GIL). The kernel reads the pages in (zeroes, for reserved blocks), caches them and maps them
  read-only into this process, so the writer's first store to each page only takes a write-protect fault (no
  allocation, no zeroing). It changes no byte and dirties no page: nothing extra is written back, and the writer
  never waits for it.
- **zero-fill** (elsewhere): ``os.pwrite`` of zeros over the chunk. Only bytes the writer has not reached are
  zeroed (they are zero on disk already), and the writer never enters a chunk while it is being zeroed::

    thread (put lock held)            reserve [start, end): start >= the write position, mf.zeroing_from = start
    thread (no lock)                  pwrite zeros over [start, end)
    thread (condition)                mf.zeroing_from = NOT_ZEROING, mf.warmed_to = end, notify
    CommitLog.append (put lock held)  if pos + size > mf.zeroing_from: wait_until_clear(mf)

  The zero pages are dirty and are written back as well, which on a 2-core machine whose other core is busy
  cost the broker more CPU than the page faults it saved.

Only the last segment is warmed (retention never deletes it) and the thread stops before the log closes. A
failed chunk (a full disk, an I/O error) stops warming for that segment and is logged once; puts go on as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import logging
import mmap
import os
import threading
from typing import TYPE_CHECKING, Callable

from mq.store.mapped_file import NOT_ZEROING, OS_PAGE_SIZE

if TYPE_CHECKING:
    from mq.store.mapped_file import MappedFile
    from mq.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

CHUNK = 1 << 20
DEFAULT_AHEAD = 16 << 20
#: the fewest CPUs this process may use for ``default_ahead`` to warm: the event loop's, the warming thread's
#: and one for everything else on the machine
MIN_CPUS = 3
#: <linux/mman.h>; Python's mmap module names neither
MADV_POPULATE_READ = 22

Populate = Callable[[mmap.mmap, int, int], None]


def libc_madvise() -> Callable[[int, int, int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:  # pragma: no cover - no C library to call
        return None
    try:
        fn = ctypes.CDLL(name, use_errno=True).madvise  # a CDLL call releases the GIL
    except (OSError, AttributeError):  # pragma: no cover
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def make_populate() -> Populate | None:
    """``populate(mm, start, length)``: MADV_POPULATE_READ over ``mm[start:start + length]`` (page-aligned
    ``start``), raising ``OSError``; None where the kernel or platform has no such advice."""
    madvise = libc_madvise()
    if madvise is None:
        return None

    def populate(mm: mmap.mmap, start: int, length: int) -> None:
        view = (ctypes.c_char * length).from_buffer(mm, start)  # holds the mapping open during the call
        try:
            if madvise(ctypes.addressof(view), length, MADV_POPULATE_READ) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
        finally:
            del view

    probe = mmap.mmap(-1, mmap.PAGESIZE)
    try:
        populate(probe, 0, mmap.PAGESIZE)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS):  # pragma: no cover
            log.debug("MADV_POPULATE_READ probe failed: %s", exc)
        return None
    finally:
        probe.close()
    return populate


@functools.cache
def can_populate() -> bool:
    """Whether this kernel and platform have MADV_POPULATE_READ (probed once)."""
    return make_populate() is not None


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - no affinity on this platform
        return os.cpu_count() or 1


def default_ahead(sync_flush: bool, cpus: int | None = None) -> int:
    """What ``warmAheadBytes = -1`` means: ``DEFAULT_AHEAD`` under ASYNC_FLUSH where pages can be populated and
    at least ``MIN_CPUS`` CPUs are usable (``cpus``, default ``usable_cpus()``), else off. With fewer the thread
    takes CPU from the clients and the writer rather than from an idle core; under SYNC_FLUSH it would compete
    with the group commit for a core, and zero-fill (the fallback) dirties pages that are then written back
    twice."""
    if sync_flush:
        return 0
    if (usable_cpus() if cpus is None else cpus) < MIN_CPUS:
        return 0
    return DEFAULT_AHEAD if can_populate() else 0


class WarmAheadService:
    def __init__(self, queue: "MappedFileQueue", put_lock: threading.Lock, *, ahead: int = DEFAULT_AHEAD,
                 chunk: int = CHUNK, idle_wait: float = 0.01,
                 pwrite: Callable[[int, memoryview, int], int] = os.pwrite,
                 append_end: Callable[["MappedFile"], int] | None = None) -> None:
        self.queue = queue
        #: where the writer's next record goes in a segment: past records staged but not yet written
        #: (``CommitLog.append_end``), which must not be zeroed after they are
        self.append_end = append_end or (lambda mf: mf.wrote_position)
        self.put_lock = put_lock
        self.ahead = max(ahead, chunk)
        self.chunk = chunk
        self.idle_wait = idle_wait
        self.pwrite = pwrite
        #: the populate way where the kernel has it, else None: zero-fill
        self.populate: Populate | None = make_populate()
        self._zeros = bytes(chunk)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: bytes brought in ahead of the writer since start
        self.warmed_bytes = 0
        self._failed: set[int] = set()

    # -- the put path's side -----------------------------------------------------------------------------
    def wait_until_clear(self, mf: "MappedFile", end: int) -> None:
        """Called under the put lock when a write up to ``end`` reaches a chunk being zeroed."""
        with self._cond:
            while mf.zeroing_from < end:
                self._cond.wait()

    # -- the thread --------------------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="mq-store-warm", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def mode(self) -> str:
        return "populate" if self.populate is not None else "zero-fill"

    def _reserve(self) -> tuple["MappedFile", int, int] | None:
        """Under the put lock: the next chunk to warm of the last segment (zero-fill: marked as being zeroed)."""
        with self.put_lock:
            files = self.queue.files
            mf = files[-1] if files else None
            if mf is None or mf.closed or mf.start_offset in self._failed:
                return None
            wp = self.append_end(mf)
            start = max(mf.warmed_to, -(-wp // OS_PAGE_SIZE) * OS_PAGE_SIZE)
            limit = min(wp + self.ahead, mf.file_size)
            if start >= limit:
                return None
            end = min(start + self.chunk, mf.file_size)
            if self.populate is None:
                mf.zeroing_from = start
            return mf, start, end

    def _run(self) -> None:
        while not self._stop.is_set():
            job = self._reserve()
            if job is None:
                self._stop.wait(self.idle_wait)
                continue
            mf, start, end = job
            try:
                if self.populate is not None:
                    self.populate(mf.mm, start, end - start)
                else:
                    self.pwrite(mf.fd, memoryview(self._zeros)[:end - start], start)
                ok = True
            except (OSError, ValueError, BufferError) as exc:  # ValueError/BufferError: the mapping is closed
                ok = False
                self._failed.add(mf.start_offset)
                log.warning("warm-ahead (%s) of %s stopped at %d: %s (puts fault their pages in themselves)",
                            self.mode, mf.path.name, start, getattr(exc, "strerror", None) or exc)
            with self._cond:
                mf.zeroing_from = NOT_ZEROING
                if ok:
                    mf.warmed_to = end
                    self.warmed_bytes += end - start
                self._cond.notify_all()
