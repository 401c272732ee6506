"""Tag hash codes and TAG subscription expressions (MESSAGE.md §8).

``java_hash_code`` is Java ``String.hashCode``: UTF-16 code units, ``h = 31*h + u`` with int32 wrap-around,
returned as a signed int (so sign-extends when widened to int64 for the consume queue ``tagsCode``).
"""

from __future__ import annotations

import struct
from operator import mul
from dataclasses import dataclass, field

SUB_ALL = "*"
_CACHE: dict[str, int] = {}
_CACHE_MAX = 65536


_POWS: dict[int, tuple[int, ...]] = {}


def _powers(n: int) -> tuple[int, ...]:
    """(31^(n-1), ..., 31, 1) mod 2^32: hashCode = sum(unit_i * 31^(n-1-i)) mod 2^32."""
    p = _POWS.get(n)
    if p is None:
        p = tuple(pow(31, n - 1 - i, 1 << 32) for i in range(n))
        if n <= 1024:
            _POWS[n] = p
    return p


def _java_hash(s: str) -> int:
    if s.isascii():
        units = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h = sum(map(mul, units, _powers(len(units)))) & 0xFFFFFFFF
    return h - 0x100000000 if h >= 0x80000000 else h


def java_hash_code(s: str) -> int:
    """Java ``String.hashCode`` of ``s`` as a signed 32-bit int (memoised: tags repeat)."""
    h = _CACHE.get(s)
    if h is None:
        h = _java_hash(s)
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[s] = h
    return h


def tags_code(tags: str | None) -> int:
    """Consume-queue tagsCode of a TAGS value: its hashCode, 0 when absent or empty."""
    if not tags:
        return 0
    return java_hash_code(tags)


def to_int32(v: int) -> int:
    """Java ``(int) long`` narrowing."""
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v >= 0x80000000 else v


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """A parsed TAG expression: ``sub_string`` '*' means all (empty sets)."""

    topic: str
    sub_string: str
    tags_set: frozenset[str] = field(default_factory=frozenset)
    code_set: frozenset[int] = field(default_factory=frozenset)
    expression_type: str = "TAG"

    @property
    def is_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def matches_code(self, code: int) -> bool:
        """Broker-side match on a consume-queue tagsCode (``(int) code in codeSet``)."""
        if self.sub_string == SUB_ALL:
            return True
        if -0x80000000 <= code <= 0x7FFFFFFF:
            return code in self.code_set
        return to_int32(code) in self.code_set

    def matches_tags(self, tags: str | None) -> bool:
        """Client-side re-filter (Java rule): all, or TAGS non-null and in tags_set."""
        if self.sub_string == SUB_ALL or not self.tags_set:
            return True
        return tags is not None and tags in self.tags_set


def parse_subscription(topic: str, expression: str | None) -> SubscriptionData:
    """Java ``FilterAPI.buildSubscriptionData`` for expression type TAG."""
    if expression is None or expression == "" or expression == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL)
    tags = []
    for piece in expression.split("||"):
        piece = piece.strip()
        if piece and piece not in tags:
            tags.append(piece)
    # Java keeps the original string even when no piece survives (e.g. "||"): it then matches nothing.
    return SubscriptionData(topic, expression, frozenset(tags), frozenset(java_hash_code(t) for t in tags))
