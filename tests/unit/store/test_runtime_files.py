"""StoreLock across processes (and against a Java-style record lock), and the abort marker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from mq.errors import MQError
from mq.store.runtime_files import AbortFile, StoreLock, StoreLockedError

HOLD_WITH_STORELOCK = """
import sys
from pathlib import Path
from mq.store.runtime_files import StoreLock
lock = StoreLock(Path(sys.argv[1]))
lock.acquire()
print("locked", flush=True)
sys.stdin.readline()
lock.release()
"""

# What a Java broker does: FileChannel.tryLock(0, 1, false) is a POSIX record lock on [0, 1).
HOLD_LIKE_JAVA = """
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], "lock"), os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
print("locked", flush=True)
sys.stdin.readline()
"""

TRY_ACQUIRE = """
import sys
from pathlib import Path
from mq.store.runtime_files import StoreLock, StoreLockedError
try:
    StoreLock(Path(sys.argv[1])).acquire()
except StoreLockedError as exc:
    print("refused:", exc)
else:
    print("acquired")
"""


def _holder(script: str, root: Path) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", script, str(root)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=20)
        if proc.stdout:
            proc.stdout.close()


@pytest.fixture
def held_by_other_process(tmp_path: Path) -> Iterator[subprocess.Popen]:
    yield from _holder(HOLD_WITH_STORELOCK, tmp_path)


def test_second_process_cannot_acquire(tmp_path: Path) -> None:
    with StoreLock(tmp_path) as lock:
        assert lock.held
        out = subprocess.run([sys.executable, "-c", TRY_ACQUIRE, str(tmp_path)], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"refused: store {tmp_path} is in use by another process (pid {os.getpid()})"
    assert not lock.held
    out = subprocess.run([sys.executable, "-c", TRY_ACQUIRE, str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "acquired"


def test_we_cannot_acquire_while_another_process_holds_it(tmp_path: Path,
                                                          held_by_other_process: subprocess.Popen) -> None:
    lock = StoreLock(tmp_path)
    with pytest.raises(StoreLockedError) as info:
        lock.acquire()
    assert isinstance(info.value, MQError)
    assert info.value.pid == held_by_other_process.pid
    assert str(info.value) == f"store {tmp_path} is in use by another process (pid {held_by_other_process.pid})"
    assert not lock.held


def test_a_java_style_record_lock_is_respected(tmp_path: Path) -> None:
    for proc in _holder(HOLD_LIKE_JAVA, tmp_path):
        with pytest.raises(StoreLockedError, match=f"pid {proc.pid}"):
            StoreLock(tmp_path).acquire()
    with StoreLock(tmp_path):
        pass


def test_second_lock_in_the_same_process_is_refused(tmp_path: Path) -> None:
    first = StoreLock(tmp_path)
    first.acquire()
    first.acquire()  # re-acquiring the same object is a no-op
    with pytest.raises(StoreLockedError, match="already open in this process"):
        StoreLock(tmp_path).acquire()
    first.release()
    first.release()
    second = StoreLock(tmp_path)
    second.acquire()
    second.release()


def test_lock_file_holds_lock_like_java(tmp_path: Path) -> None:
    with StoreLock(tmp_path):
        assert (tmp_path / "lock").read_bytes() == b"lock"


def test_abort_file_create_exists_remove(tmp_path: Path) -> None:
    abort = AbortFile(tmp_path / "store")
    assert not abort.exists()
    abort.create()
    assert abort.exists() and abort.path.read_bytes() == b""
    abort.create()  # idempotent
    abort.remove()
    assert not abort.exists()
    abort.remove()  # no error when already gone
