"""Remote address patterns of the plain ACL (RocketMQ's ``RemoteAddressStrategyFactory``).

``address_matcher(pattern)`` is a predicate on a client's IP: ``*`` (anyone), one address, a comma list, a brace
list (``192.168.1.{1,2}``), or a range over one part followed only by ``*`` (``10.0.*.*``, ``10.0.0.10-20``, and
the same over the eight groups of IPv6). A malformed pattern is a ``ConfigError`` naming where it was found.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from mq.errors import ConfigError

AddressMatcher = Callable[[str], bool]


def _never(_addr: str) -> bool:
    return False


def _always(_addr: str) -> bool:
    return True


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


def _exact(pattern: str, where: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = _ip(pattern)
    if ip is None:
        raise ConfigError(f"{where}: {pattern!r} is not an IP address")
    return ip


def _range_matcher(pattern: str, where: str) -> AddressMatcher:
    """``a.b.c.*``, ``a.b.*.*``, ``a.b.c.10-20`` (IPv4) or the same over the eight groups of IPv6: fixed leading
    parts, one ranged part, then only ``*``."""
    v6 = ":" in pattern
    parts = pattern.split(":" if v6 else ".")
    size, top, base = (8, 0xFFFF, 16) if v6 else (4, 255, 10)
    if len(parts) != size:
        raise ConfigError(f"{where}: {pattern!r} must have {size} parts")
    head: list[int] = []
    lo = hi = -1
    for i, part in enumerate(parts):
        part = part.strip()
        if lo < 0:
            if part == "*" or "-" in part:
                if i == 0:
                    raise ConfigError(f"{where}: {pattern!r}: the first part cannot be a range")
                if part == "*":
                    lo, hi = 0, top
                else:
                    a, _, b = part.partition("-")
                    try:
                        lo, hi = int(a, base), int(b, base)
                    except ValueError:
                        raise ConfigError(f"{where}: {pattern!r}: bad range {part!r}") from None
                    if not 0 <= lo <= hi <= top:
                        raise ConfigError(f"{where}: {pattern!r}: range {part!r} outside 0-{top} or reversed")
                continue
            try:
                value = int(part, base)
            except ValueError:
                raise ConfigError(f"{where}: {pattern!r}: bad part {part!r}") from None
            if not 0 <= value <= top:
                raise ConfigError(f"{where}: {pattern!r}: part {part!r} outside 0-{top}")
            head.append(value)
        elif part != "*":
            raise ConfigError(f"{where}: {pattern!r}: only '*' may follow a range")
    position = len(head)

    def match(addr: str) -> bool:
        ip = _ip(addr)
        if ip is None or (ip.version == 6) != v6:
            return False
        if v6:
            groups = [int(g, 16) for g in ip.exploded.split(":")]
        else:
            groups = [int(g) for g in str(ip).split(".")]
        return groups[:position] == head and lo <= groups[position] <= hi

    return match


def address_matcher(pattern: object, where: str = "acl") -> AddressMatcher:
    """A predicate on the client's IP for one of RocketMQ's address patterns; ConfigError if malformed."""
    text = str(pattern).strip() if pattern is not None else ""
    if not text:
        return _never
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _always
    if text.endswith("}"):
        prefix, brace, rest = text.partition("{")
        if not brace:
            raise ConfigError(f"{where}: {text!r}: '}}' without '{{'")
        members = {_exact(prefix + item.strip(), where) for item in rest[:-1].split(",") if item.strip()}
        return lambda addr: _ip(addr) in members
    if "," in text:
        members = {_exact(item, where) for item in text.split(",") if item.strip()}
        return lambda addr: _ip(addr) in members
    if "*" in text or "-" in text:
        return _range_matcher(text, where)
    one = _exact(text, where)
    return lambda addr: _ip(addr) == one
