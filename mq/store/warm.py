"""Warm-ahead: zero-fill the commit log's page cache just ahead of the write position, off the put path.

A segment's disk blocks are reserved ahead of the writer (``MappedFile.reserve_to``), but its pages are not
in the page cache, so the first write to each 4 KiB page through the mapping takes a page fault that allocates
and zeroes a page-cache page: about 1.7 µs of the put path's CPU per 1 KiB message on this machine, measured
when segments were still sparse (``benchmarks/store_append.py``). ``WarmAheadService`` moves that
work to its own thread: it ``os.pwrite``s zeros (the GIL is released) into the chunk after the write position,
so the put path later finds the page already cached and only maps it. RocketMQ's ``warmMapedFileEnable`` does
the same job once per segment; here it runs continuously, ``ahead`` bytes in front of the writer. It is off unless
``warmAheadBytes`` (or ``warmMapedFileEnable``) is set: the zero pages are dirty and get written back as well,
which on a 2-core machine whose other core is busy cost the broker more CPU than the page faults it saved
(docs/performance.md).

Only bytes the writer has not reached are zeroed (they are zero on disk already, so nothing changes but the
cache), and the writer never enters a chunk while it is being zeroed::

    thread (put lock held)            reserve [start, end): start >= the write position, mf.zeroing_from = start
    thread (no lock)                  pwrite zeros over [start, end)
    thread (condition)                mf.zeroing_from = NOT_ZEROING, mf.warmed_to = end, notify
    CommitLog.append (put lock held)  if pos + size > mf.zeroing_from: wait_until_clear(mf)

Only the last segment is warmed (retention never deletes it) and the thread stops before the log closes. A
failed ``pwrite`` (a full disk) stops warming for that segment and is logged once; puts go on as before.
"""

from __future__ import annotations

import logging
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


class WarmAheadService:
    def __init__(self, queue: "MappedFileQueue", put_lock: threading.Lock, *, ahead: int = DEFAULT_AHEAD,
                 chunk: int = CHUNK, idle_wait: float = 0.01,
                 pwrite: Callable[[int, memoryview, int], int] = os.pwrite) -> None:
        self.queue = queue
        self.put_lock = put_lock
        self.ahead = max(ahead, chunk)
        self.chunk = chunk
        self.idle_wait = idle_wait
        self.pwrite = pwrite
        self._zeros = bytes(chunk)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: bytes zero-filled ahead of the writer since start
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

    def _reserve(self) -> tuple["MappedFile", int, int] | None:
        """Under the put lock: the next chunk to zero of the last segment, marked as being zeroed."""
        with self.put_lock:
            files = self.queue.files
            mf = files[-1] if files else None
            if mf is None or mf.closed or mf.start_offset in self._failed:
                return None
            wp = mf.wrote_position
            start = max(mf.warmed_to, -(-wp // OS_PAGE_SIZE) * OS_PAGE_SIZE)
            limit = min(wp + self.ahead, mf.file_size)
            if start >= limit:
                return None
            end = min(start + self.chunk, mf.file_size)
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
                self.pwrite(mf.fd, memoryview(self._zeros)[:end - start], start)
                ok = True
            except OSError as exc:
                ok = False
                self._failed.add(mf.start_offset)
                log.warning("warm-ahead of %s stopped at %d: %s (puts fault their pages in themselves)",
                            mf.path.name, start, exc.strerror or exc)
            with self._cond:
                mf.zeroing_from = NOT_ZEROING
                if ok:
                    mf.warmed_to = end
                    self.warmed_bytes += end - start
                self._cond.notify_all()
