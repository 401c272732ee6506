"""The store's ``lock`` and ``abort`` marker files (STORE.md §8.1).

``lock``: holds the 4 bytes ``lock``; while a store runs, byte range [0, 1) is exclusively locked::

    +--------+-------+---------+--------------------------------------------------+
    | offset | bytes | content | note                                             |
    +--------+-------+---------+--------------------------------------------------+
    | 0      | 4     | "lock"  | range [0,1) locked with fcntl (Java's tryLock)   |
    +--------+-------+---------+--------------------------------------------------+

We take two locks on it: ``flock`` on the whole file, which also excludes a second ``StoreLock`` in the same
process (POSIX record locks do not), and a POSIX ``lockf`` record lock on [0, 1), the lock a Java broker's
``FileChannel.tryLock(0, 1, false)`` takes on Linux, so an ``mq`` broker and a RocketMQ broker exclude each
other. The holder's pid comes from ``F_GETLK``. Caveat of POSIX locks: closing *any* descriptor of the lock
file in this process releases the record lock, so nothing else should open it.

``abort``: empty; created when the store starts, removed on clean shutdown. Present at start-up means the last
run did not exit cleanly (``last_exit_ok = not abort.exists()``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
from pathlib import Path

from mq.errors import MQError

LOCK_FILE_NAME = "lock"
ABORT_FILE_NAME = "abort"
LOCK_FILE_CONTENT = b"lock"

# struct flock on Linux (x86-64, aarch64): l_type, l_whence (short), l_start, l_len (off_t), l_pid (pid_t),
# padded to 32 bytes.
_FLOCK_FORMAT = "@hhqqi4x"

_held_lock = threading.Lock()
_held_roots: set[str] = set()


class StoreLockedError(MQError):
    """Another process (or another store object in this one) is using the store directory."""

    def __init__(self, root: Path, pid: int | None, same_process: bool = False) -> None:
        self.root = Path(root)
        self.pid = pid
        if same_process:
            text = f"store {root} is already open in this process (pid {pid})"
        elif pid:
            text = f"store {root} is in use by another process (pid {pid})"
        else:
            text = f"store {root} is in use by another process"
        super().__init__(text)


def _holder_pid(fd: int) -> int | None:
    """The pid holding a conflicting POSIX lock on [0, 1), if the kernel tells us."""
    try:
        query = struct.pack(_FLOCK_FORMAT, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        l_type, _whence, _start, _len, pid = struct.unpack(_FLOCK_FORMAT, answer)
    except (OSError, struct.error):
        return None
    return pid if l_type != fcntl.F_UNLCK and pid > 0 else None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class StoreLock:
    """Exclusive use of a store directory for the life of a broker."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_FILE_NAME
        self._fd = -1
        self._key = ""

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> None:
        """Take the lock or raise ``StoreLockedError``; writes ``lock`` into the file as Java does."""
        if self._fd >= 0:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                with _held_lock:
                    mine = key in _held_roots
                raise StoreLockedError(self.root, os.getpid() if mine else _holder_pid(fd), mine) from None
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0, os.SEEK_SET)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise StoreLockedError(self.root, _holder_pid(fd)) from None
            os.pwrite(fd, LOCK_FILE_CONTENT, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)  # releases whatever we took
            raise
        with _held_lock:
            _held_roots.add(key)
        self._key = key
        self._fd = fd

    def release(self) -> None:
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        with _held_lock:
            _held_roots.discard(self._key)
        try:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0, os.SEEK_SET)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "StoreLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class AbortFile:
    """The ``abort`` marker of a store directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / ABORT_FILE_NAME

    def create(self) -> None:
        """Create the (empty) marker durably: the file and its directory entry are fsynced."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(self.root)

    def exists(self) -> bool:
        return self.path.exists()

    def remove(self) -> None:
        """Remove the marker durably (no error if it is already gone)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return
        _fsync_dir(self.root)
