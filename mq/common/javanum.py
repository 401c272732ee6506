"""Numbers read the way Java reads them: ``Integer.parseInt`` / ``Long.parseLong`` syntax and ranges.

Python's ``int()`` also takes surrounding spaces, ``_`` between digits and numbers of any size; a RocketMQ peer
(and a Java broker reading our files) takes none of them. Every number a client sends as text goes through
``parse_java_int`` (header fields, body members, message queue ids).
"""

from __future__ import annotations

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def parse_java_int(text: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    """``text`` read as Java's ``Integer.parseInt`` (or ``Long.parseLong`` with the 64-bit bounds) reads it:
    an optional sign and decimal digits, in range. ``ValueError`` otherwise (Python's ``int()`` would also take
    spaces, underscores and ``+ 1``)."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isdecimal():  # isdecimal: Unicode Nd digits, as Java's Character.digit
        raise ValueError(f"For input string: {text[:40]!r}")
    digits = body.lstrip("0")
    if len(digits) > 20:  # out of any range (and keeps int() away from huge strings)
        raise ValueError(f"out of range: {text[:40]!r}")
    value = int(digits) if digits else 0
    if text[:1] == "-":
        value = -value
    if not lo <= value <= hi:
        raise ValueError(f"out of range [{lo}, {hi}]: {text[:40]!r}")
    return value
