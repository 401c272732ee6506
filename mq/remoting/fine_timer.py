"""A one-shot timer on an asyncio event loop with sub-millisecond resolution.

``loop.call_later`` cannot wait less than a millisecond: uvloop rounds the delay to whole milliseconds (anything
under 0.5 ms becomes ``call_soon``) and the selector loops round ``epoll_wait``'s timeout up to the next
millisecond. Where Linux offers ``timerfd_create`` the timer is a timerfd watched by the loop's reader, so it
fires after the delay asked for, whatever the loop's clock granularity; elsewhere it falls back to
``call_later``.

Arming costs one ``timerfd_settime`` call; an armed timer that is armed again keeps its earlier deadline.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from typing import Callable

log = logging.getLogger(__name__)

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK  # Linux defines TFD_NONBLOCK and TFD_CLOEXEC as these open(2) flags
_TFD_CLOEXEC = os.O_CLOEXEC


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _load_libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = [ctypes.c_int, ctypes.c_int]
    create.restype = ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return libc


_LIBC = _load_libc()


class FineTimer:
    """Calls ``callback`` on ``loop`` once, ``delay`` seconds after ``arm(delay)``; re-armable.

    Use it from the loop's thread only. ``close`` releases the file descriptor; a closed timer ignores
    ``arm``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback
        self._armed = False
        self._closed = False
        self._handle: asyncio.TimerHandle | None = None
        self._fd = -1
        self._spec = _Itimerspec()
        if _LIBC is not None:
            self._fd = self._open_timerfd(loop)

    def _open_timerfd(self, loop: asyncio.AbstractEventLoop) -> int:
        """A timerfd the loop watches, or -1 (and the reason logged) for the ``call_later`` fallback."""
        fd = _LIBC.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)  # type: ignore[union-attr]
        if fd < 0:
            log.warning("timerfd_create failed (errno %d); timers fall back to call_later (1 ms steps)",
                        ctypes.get_errno())
            return -1
        try:
            loop.add_reader(fd, self._on_readable)
        except (NotImplementedError, OSError) as exc:  # the loop cannot watch a descriptor
            os.close(fd)
            log.warning("the event loop cannot watch a timerfd (%s); timers fall back to call_later (1 ms steps)",
                        exc)
            return -1
        return fd

    @property
    def precise(self) -> bool:
        """True when backed by a timerfd (sub-millisecond); False on the ``call_later`` fallback."""
        return self._fd >= 0

    @property
    def armed(self) -> bool:
        return self._armed

    def arm(self, delay: float) -> None:
        """Fire once, ``delay`` seconds from now, unless already armed."""
        if self._armed or self._closed:
            return
        self._armed = True
        if self._fd < 0:
            self._handle = self._loop.call_later(delay, self._fire)
            return
        ns = max(1, int(delay * 1e9))  # a zero it_value would disarm it
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(ns, 1_000_000_000)
        if _LIBC.timerfd_settime(self._fd, 0, ctypes.byref(self._spec), None) != 0:  # type: ignore[union-attr]
            log.warning("timerfd_settime failed (errno %d); the timer falls back to call_later",
                        ctypes.get_errno())
            self._handle = self._loop.call_later(delay, self._fire)

    def _on_readable(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiration count; reading it clears readiness
        except BlockingIOError:  # already read: a spurious wake-up
            return
        self._fire()

    def _fire(self) -> None:
        self._handle = None
        if not self._armed or self._closed:
            return
        self._armed = False
        self._callback()

    def close(self) -> None:
        """Disarm and release the timer; its callback never runs after this."""
        if self._closed:
            return
        self._closed = True
        self._armed = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                self._loop.remove_reader(fd)
            except Exception:  # the loop is closed already
                pass
            os.close(fd)
