"""One preallocated, memory-mapped segment file (RocketMQ ``MappedFile``).

A segment is named by the 20-digit decimal offset of its first byte in the logical stream and is exactly
``file_size`` bytes long from creation, as RocketMQ requires. A write through a mapping into a hole that the file
system cannot fill raises SIGBUS and kills the process, so blocks are reserved (``posix_fallocate``) before any
byte is stored into them, and a full disk fails with an ``OSError`` the callers turn into a status:

- with ``reserve_step`` (the commit log: 64 MiB steps of 1 GiB segments; consume queues: 64 KiB steps of one
  5.7 MB segment per topic queue), the file is created sparse and the writer reserves ``reserve_step`` bytes at
  a time ahead of itself (``reserve_to``), so the store takes the disk its data needs: a topic with 1,024 queues
  no longer takes 5.8 GB at once, nor a fresh broker 1 GiB;
- without it (``reserve_step=0``), the whole segment at creation, and an existing sparse file (RocketMQ's Java
  broker, older ``mq``) gets its holes reserved when opened.
Writes go through a shared ``mmap``: once copied they are in the page cache and survive a process crash.
``flush`` calls ``os.fdatasync`` on the file descriptor; it releases the GIL and, on Linux, writes back
pages dirtied through the mapping (``mmap.flush``/msync would hold the GIL: PERFORMANCE.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
import sys
from pathlib import Path
from typing import Callable

from mq.errors import MQError

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096
FILE_NAME_DIGITS = 20
TMP_SUFFIX = ".creating"
#: ``MappedFile.zeroing_from`` while no chunk of the segment is being zero-filled (``mq.store.warm``)
NOT_ZEROING = 1 << 62


class StoreError(MQError):
    """The store's files are unusable (wrong size, corrupt beyond repair, locked) or it was misused."""


class SegmentIOError(StoreError, OSError):
    """The operating system refused a segment (open or map). An ``OSError``, so that the writers turn it into
    a status as they do a full disk (CREATE_MAPPED_FILE_FAILED; the dispatcher's backlog, which keeps the
    records until the segment can be created), and a ``StoreError`` with a readable message at start. The
    message names the limit to raise when it is a per-process one."""


def _limit_hint(err: int) -> str:
    """What to raise when ``err`` is a per-process limit: open files or memory mappings."""
    if err in (errno.EMFILE, errno.ENFILE):
        try:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        except (ImportError, OSError, ValueError):  # pragma: no cover - not Linux
            return ""
        how = (f"`ulimit -n {hard}` (the hard limit)" if soft < hard else
               "the hard limit, e.g. `ulimit -Hn 655350 && ulimit -n 655350` as root or LimitNOFILE= for systemd")
        return (f" (this process may open {soft} files and every segment of the commit log, each consume queue "
                f"and the index holds one: raise the limit with {how})")
    if err == errno.ENOMEM:
        try:
            with open("/proc/sys/vm/max_map_count") as f:
                limit = f.read().strip()
            with open("/proc/self/maps") as f:
                used = sum(1 for _ in f)
        except OSError:
            return ""
        return (f" (this process has {used} memory mappings and vm.max_map_count is {limit}; every segment is "
                "one: raise it, e.g. `sysctl -w vm.max_map_count=655360`, as RocketMQ's deployment guide does)")
    return ""


#: errors of ``posix_fallocate`` that mean "this file system cannot reserve", not "no space"
_NO_FALLOCATE = {errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
_warned_sparse: set[int] = set()  # st_dev of the file systems already warned about


def reserve_blocks(fd: int, size: int, path: Path, *, new: bool) -> None:
    """Reserve disk blocks for bytes ``[0, size)`` of ``fd`` so that stores through a mapping cannot fault.

    A new file that does not fit raises ``OSError(ENOSPC)``. For an existing file (``new=False``) a failure is
    logged and the file stays as it was: it still holds data that must stay readable. A file system that cannot
    reserve (``EOPNOTSUPP``) leaves the file sparse, with one warning per file system."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno in _NO_FALLOCATE:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            _warn_sparse(fd, path, exc)
            return
        if new:
            raise
        log.warning("cannot reserve the blocks of %s (%s); writes into its holes would fail if the disk fills",
                    path, exc.strerror)


def reserve_range(fd: int, start: int, end: int, file_size: int, path: Path, *, need: int | None = None,
                  keep: int | None = None) -> int:
    """Reserve the blocks of bytes ``[start, end)`` of a full-length (sparse) file before stores into them;
    returns the end now reserved, or ``file_size`` on a file system that cannot reserve (the file then stays
    sparse, with one warning per file system).

    ``end`` is a step ahead of what the caller's write needs, ``need`` (default ``end``). When the disk cannot
    hold the whole step, the step is halved until it fits, down to ``need``, so that a full disk refuses a write
    only when the write itself does not fit. ext4 keeps what a failed ``fallocate`` allocated before it ran
    out, so each failed attempt gives its blocks back (``punch_hole`` over ``[keep, attempt end)``; ``keep``,
    default ``start``, is where the caller's data ends: nothing below it is touched). ``OSError(ENOSPC)`` when
    not even ``need`` fits, with nothing kept."""
    if end <= start:
        return start
    need = end if need is None else max(start, min(need, end))
    keep = start if keep is None else max(start, keep)
    attempt = end
    while True:
        if attempt <= start:  # the write needs nothing more
            return start
        try:
            os.posix_fallocate(fd, start, attempt - start)
        except OSError as exc:
            if exc.errno in _NO_FALLOCATE:
                _warn_sparse(fd, path, exc)
                return file_size
            if keep < attempt:
                punch_hole(fd, keep, attempt - keep)
            if exc.errno not in _NO_SPACE or attempt <= need:
                raise
            half = -(-(start + (attempt - start) // 2) // OS_PAGE_SIZE) * OS_PAGE_SIZE  # on a page boundary
            attempt = half if need < half < attempt else need
            continue
        return attempt


#: errors of ``fallocate`` that mean the disk (or the user's quota) has no room for the range
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02


def _libc_fallocate() -> Callable[[int, int, int, int], int] | None:
    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(name, use_errno=True).fallocate
    except (OSError, AttributeError):  # pragma: no cover - a libc without fallocate(2)
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fn.restype = ctypes.c_int
    return fn


_fallocate = _libc_fallocate()
_warned_punch: set[int] = set()  # st_dev of the file systems already warned about


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Give back the blocks of bytes ``[offset, offset + length)`` of ``fd``, which then read as zeros; the
    file keeps its size (``fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)``). False, with one warning per
    file system, where that is not possible (the bytes then stay as they were)."""
    if length <= 0:
        return True
    if _fallocate is not None and _fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    err = ctypes.get_errno() if _fallocate is not None else errno.ENOSYS
    try:
        dev = os.fstat(fd).st_dev
    except OSError:
        dev = -1
    if dev not in _warned_punch:
        _warned_punch.add(dev)
        log.warning("cannot give disk blocks back (punch a hole) on this file system: %s", os.strerror(err))
    return False


def _warn_sparse(fd: int, path: Path, exc: OSError) -> None:
    """Once per file system: it cannot reserve blocks, so its store files stay sparse."""
    dev = os.fstat(fd).st_dev
    if dev not in _warned_sparse:
        _warned_sparse.add(dev)
        log.warning("the file system of %s cannot reserve blocks (%s); store files stay sparse there, "
                    "and a full disk will stop the process", path.parent, exc.strerror)


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the decimal offset zero-padded to 20 digits."""
    return f"{offset:0{FILE_NAME_DIGITS}d}"


class MappedFile:
    """A fixed-size segment mapped read/write. Positions are relative to the segment start."""

    __slots__ = ("path", "file_size", "start_offset", "fd", "mm", "wrote_position", "flushed_position",
                 "_closed", "last_store_timestamp", "zeroing_from", "warmed_to", "reserve_step", "reserved_to")

    def __init__(self, path: Path, file_size: int, *, create: bool = False, reserve_step: int = 0) -> None:
        self.path = Path(path)
        self.file_size = file_size
        try:
            self.start_offset = int(self.path.name)
        except ValueError:
            raise StoreError(f"{self.path}: segment names must be a 20-digit offset") from None
        # A new segment is sized under a temporary name and then renamed, so a crash never leaves a short
        # file under a segment name (RocketMQ would refuse to start on it).
        tmp = self.path.with_name(self.path.name + TMP_SUFFIX)
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        try:
            self.fd = os.open(tmp if create else self.path, flags, 0o644)
        except OSError as exc:
            raise SegmentIOError(exc.errno, f"cannot open segment {self.path}: {exc.strerror or exc}"
                                            f"{_limit_hint(exc.errno)}") from exc
        try:
            size = os.fstat(self.fd).st_size
            if create:
                if reserve_step:
                    os.ftruncate(self.fd, file_size)
                else:
                    reserve_blocks(self.fd, file_size, self.path, new=True)
                os.rename(tmp, self.path)
            elif size != file_size:
                raise StoreError(f"{self.path} is {size} bytes; every segment must be exactly {file_size}")
            elif not reserve_step:
                reserve_blocks(self.fd, file_size, self.path, new=False)
            try:
                self.mm = mmap.mmap(self.fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as exc:
                raise SegmentIOError(exc.errno, f"cannot map segment {self.path}: {exc.strerror or exc}"
                                                f"{_limit_hint(exc.errno)}") from exc
        except BaseException:
            os.close(self.fd)
            if create:
                tmp.unlink(missing_ok=True)
            raise
        self.wrote_position = 0
        self.flushed_position = 0
        self.last_store_timestamp = 0
        self._closed = False
        #: start of the chunk ``WarmAheadService`` is zero-filling (NOT_ZEROING if none); writes stop short of it
        self.zeroing_from = NOT_ZEROING
        #: end of the zero-filled (page-cached) region ahead of the writer
        self.warmed_to = 0
        #: reserve blocks this many bytes at a time ahead of the writer (0: the whole segment is reserved)
        self.reserve_step = reserve_step
        #: bytes ``[0, reserved_to)`` have their blocks; a writer calls ``reserve_to`` before storing beyond
        self.reserved_to = 0 if reserve_step else file_size

    def reserve_to(self, end: int) -> None:
        """Reserve the blocks of bytes ``[reserved_to, end)``, rounded up to ``reserve_step`` (less near a full
        disk: ``reserve_range``), before a store into them; ``OSError(ENOSPC)`` when not even ``end`` fits
        (nothing is stored then, and nothing stays allocated)."""
        new_end = min(self.file_size, -(-end // self.reserve_step) * self.reserve_step)
        self.reserved_to = reserve_range(self.fd, self.reserved_to, new_end, self.file_size, self.path,
                                         need=end, keep=self.wrote_position)

    def discard_from(self, pos: int) -> None:
        """Give back the blocks of bytes ``[pos, file_size)`` after a truncation to ``pos``, so that they read as
        zeros: stale records or units left there would otherwise look valid to a later recovery. Only for a
        segment reserved in steps (``reserve_step``), which reserves again before its next store."""
        if not self.reserve_step or pos >= self.file_size:
            return
        if punch_hole(self.fd, pos, self.file_size - pos):
            self.reserved_to = min(self.reserved_to, pos)
            self.warmed_to = min(self.warmed_to, pos)

    def data_end(self, start: int = 0) -> int:
        """Where the first hole at or after ``start`` begins (``SEEK_HOLE``; ``file_size`` when there is none or
        the file system cannot say). Bytes are read only below it: reading a hole through the mapping makes the
        file system find a page for it, and tmpfs with no room left answers SIGBUS, which kills the process
        (a restart on a full disk did, in the recovery of a consume queue whose next segment had no blocks)."""
        try:
            return min(self.file_size, os.lseek(self.fd, start, os.SEEK_HOLE))
        except OSError:
            return self.file_size

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.file_size

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def closed(self) -> bool:
        return self._closed

    def read(self, pos: int, size: int) -> bytes | None:
        """Copy ``size`` bytes at ``pos`` (relative); None if out of range or the file was destroyed."""
        if pos < 0 or pos + size > self.file_size:
            return None
        try:
            return self.mm[pos:pos + size]
        except ValueError:  # mmap closed by the cleaner
            return None

    def flush(self, fsync: Callable[[int], None] = os.fdatasync) -> int:
        """Write back everything written so far; returns the new flushed position."""
        pos = self.wrote_position
        if pos > self.flushed_position and not self._closed:
            fsync(self.fd)
            self.flushed_position = pos
        return self.flushed_position

    def mtime(self) -> float:
        try:
            return os.stat(self.path).st_mtime
        except OSError:
            return 0.0

    def touch(self) -> None:
        """Bump the mtime (an mmap write does not always do so promptly); retention uses it."""
        try:
            os.utime(self.fd)
        except OSError:
            pass

    def close(self) -> bool:
        """Unmap and close; False if the mapping is still exported (retry later)."""
        if self._closed:
            return True
        try:
            self.mm.close()
        except BufferError:
            return False
        os.close(self.fd)
        self._closed = True
        return True

    def destroy(self) -> bool:
        """Close and delete the file. The name disappears at once even if the unmap must wait."""
        self.path.unlink(missing_ok=True)
        return self.close()

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
