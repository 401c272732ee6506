"""Message ids (MESSAGE.md §6): the broker's offsetMsgId and the client's UNIQ_KEY.

offsetMsgId (16 bytes for IPv4, 28 for IPv6), uppercase hex::

    +---------+------+-----------------------+
    | bytes   | size | field                 |
    +---------+------+-----------------------+
    | 0       | 4/16 | store host IP         |
    | 4/16    |    4 | store host port int32 |
    | 8/20    |    8 | commit-log offset     |
    +---------+------+-----------------------+

UNIQ_KEY (16 bytes for an IPv4 client), uppercase hex::

    +-------+------+-----------------------------------------------------+
    | bytes | size | field                                               |
    +-------+------+-----------------------------------------------------+
    | 0     |  4   | client IP                                           |
    | 4     |  2   | low 16 bits of the PID                              |
    | 6     |  4   | per-process random (Java: classloader hashCode)     |
    | 10    |  4   | ms since the start of the current month, local time |
    | 14    |  2   | counter, wraps at 65536                             |
    +-------+------+-----------------------------------------------------+
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import random
import struct
import threading
import time

from mq.common.hosts import Address, pack_host, unpack_host

OFFSET_MSG_ID_V4_FORMAT = ">4siq"
OFFSET_MSG_ID_V4 = struct.Struct(OFFSET_MSG_ID_V4_FORMAT)
UNIQ_KEY_SUFFIX_FORMAT = ">iH"
_UNIQ_SUFFIX = struct.Struct(UNIQ_KEY_SUFFIX_FORMAT)
_Q = struct.Struct(">q")


def create_offset_msg_id_raw(store_host: bytes, offset: int) -> str:
    """offsetMsgId from the packed STOREHOST bytes (8 or 20) and a commit-log offset."""
    return (store_host + _Q.pack(offset)).hex().upper()


def create_offset_msg_id(store_host: Address, offset: int) -> str:
    """offsetMsgId for ``(ip, port)`` and a commit-log offset."""
    return create_offset_msg_id_raw(pack_host(*store_host), offset)


def decode_offset_msg_id(msg_id: str) -> tuple[Address, int]:
    """``(store (ip, port), commit-log offset)``; 32 hex chars = IPv4, else IPv6 (Java rule)."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"not a hex message id: {msg_id!r}") from None
    if len(raw) == 16:
        host = unpack_host(raw[:8])
    elif len(raw) == 28:
        host = unpack_host(raw[:20])
    else:
        raise ValueError(f"offsetMsgId must be 32 or 56 hex characters, got {len(msg_id)}")
    (offset,) = _Q.unpack_from(raw, len(raw) - 8)
    return host, offset


def _month_start_ms(now_ms: int) -> int:
    t = _dt.datetime.fromtimestamp(now_ms / 1000.0).astimezone()
    start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class UniqKeyGenerator:
    """Java ``MessageClientIDSetter``: a fixed 10-byte prefix and a 6-byte time + counter suffix."""

    def __init__(self, client_ip: str = "127.0.0.1", pid: int | None = None, salt: int | None = None) -> None:
        ip = ipaddress.ip_address(client_ip)
        pid = os.getpid() if pid is None else pid
        salt = random.getrandbits(32) if salt is None else salt
        self._prefix = (ip.packed + struct.pack(">HI", pid & 0xFFFF, salt & 0xFFFFFFFF)).hex().upper()
        self._lock = threading.Lock()
        self._counter = 0
        self._start = 0
        self._next_start = 0
        self._set_start(int(time.time() * 1000))

    def _set_start(self, now_ms: int) -> None:
        self._start = _month_start_ms(now_ms)
        t = _dt.datetime.fromtimestamp(self._start / 1000.0).astimezone()
        nxt = (t.replace(day=28) + _dt.timedelta(days=4)).replace(day=1)
        self._next_start = int(nxt.timestamp() * 1000)

    def next(self, now_ms: int | None = None) -> str:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            if now >= self._next_start or now < self._start:
                self._set_start(now)
            self._counter = (self._counter + 1) & 0xFFFF
            counter = self._counter
        diff = (now - self._start) & 0xFFFFFFFF
        if diff >= 0x80000000:
            diff -= 0x100000000
        return self._prefix + _UNIQ_SUFFIX.pack(diff, counter).hex().upper()


def uniq_key_ip(uniq_key: str) -> str:
    """The client IP at the front of a UNIQ_KEY (16 bytes if the id is 28 bytes)."""
    raw = bytes.fromhex(uniq_key)
    return str(ipaddress.ip_address(raw[:16] if len(raw) == 28 else raw[:4]))


def uniq_key_timestamp(uniq_key: str, now_ms: int | None = None) -> int:
    """Java ``getNearlyTimeFromID``: month start (local) + the int32 at byte ipLen+6, one month back if future."""
    raw = bytes.fromhex(uniq_key)
    ip_len = 16 if len(raw) == 28 else 4
    (diff,) = struct.unpack_from(">i", raw, ip_len + 6)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    start = _month_start_ms(now)
    if start + diff > now:
        prev = _dt.datetime.fromtimestamp((start - 1) / 1000.0).astimezone()
        start = _month_start_ms(int(prev.timestamp() * 1000))
    return start + diff
