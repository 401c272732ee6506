"""Socket addresses as stored in a record: 4 (or 16) address bytes + int32 port (MESSAGE.md §1).

No ``socket`` import (``mq.common`` does no I/O): addresses go through ``ipaddress``. IPv4-mapped IPv6
(``::ffff:a.b.c.d``) and ``::1`` are stored as IPv4 so C and Node clients can parse every record.
"""

from __future__ import annotations

import ipaddress
import struct
from functools import lru_cache

HOST_V4 = struct.Struct(">4si")
HOST_V6 = struct.Struct(">16si")

Address = tuple[str, int]


@lru_cache(maxsize=4096)
def pack_host(host: str, port: int) -> bytes:
    """Encode ``host:port``: 8 bytes for IPv4, 20 for IPv6."""
    ip = ipaddress.ip_address(host.strip("[]") if host else "0.0.0.0")
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip == ipaddress.IPv6Address("::1"):
            ip = ipaddress.IPv4Address("127.0.0.1")
    if ip.version == 4:
        return HOST_V4.pack(ip.packed, port)
    return HOST_V6.pack(ip.packed, port)


def unpack_host(raw: bytes | memoryview) -> Address:
    """Decode 8 or 20 bytes back into ``(host, port)`` (memoised: a consumer decodes the same few born and
    store hosts for every record it reads)."""
    return _unpack_host(bytes(raw))


@lru_cache(maxsize=4096)
def _unpack_host(raw: bytes) -> Address:
    if len(raw) == 8:
        a, port = HOST_V4.unpack(raw)
        return (f"{a[0]}.{a[1]}.{a[2]}.{a[3]}", port)
    a, port = HOST_V6.unpack(raw)
    return (str(ipaddress.IPv6Address(a)), port)


def parse_addr(addr: str) -> Address:
    """``"1.2.3.4:10911"`` or ``"[::1]:10911"`` -> ``(host, port)``."""
    host, _, port = addr.rpartition(":")
    return (host.strip("[]"), int(port))


def format_addr(addr: Address) -> str:
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
