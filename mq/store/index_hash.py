"""The index's key hashing: Java's ``String.hashCode()`` and RocketMQ's ``indexKeyHashMethod`` (STORE.md §6).

A message key is indexed under ``abs(hashCode("topic#key"))`` (Integer.MIN_VALUE becomes 0), hashed over
UTF-16 code units as Java does, so a store written by RocketMQ's broker answers the same key queries.
``prefixed_key_hash`` extends the hash of ``topic#`` by a key's units, so a batch hashes each topic once.
"""

from __future__ import annotations

from array import array
from operator import mul

# 31**i mod 2**32, extended on demand; Java's hash is sum(unit[i] * 31**(n-1-i)) mod 2**32.
_POW31: list[int] = [1]


def _powers(n: int) -> list[int]:
    if len(_POW31) < n:
        p = _POW31[-1]
        for _ in range(n - len(_POW31)):
            p = (p * 31) & 0xFFFFFFFF
            _POW31.append(p)
    return _POW31


_powers(1025)  # keys longer than 1024 units extend the table on first use


def _hash_u32(s: str) -> int:
    """Java ``String.hashCode()`` as an unsigned 32-bit value: over UTF-16 code units, computed in C
    (``sum(map(mul, ...))`` of the reversed units against the powers of 31)."""
    if s.isascii():
        units: bytes | array = s.encode("ascii")
    else:
        units = array("H", s.encode(_UTF16_NATIVE, "surrogatepass"))  # Java strings may hold lone surrogates
    n = len(units)
    return sum(map(mul, units[::-1], _POW31 if n <= 1024 else _powers(n))) & 0xFFFFFFFF


def _java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: over UTF-16 code units, with int32 wrap-around (signed result).

    Kept private rather than ``mq.common.tags.java_hash_code``: that one memoises (right for tags, which
    repeat), while index keys are mostly unique. Tests check the two agree.
    """
    h = _hash_u32(s)
    return h - 0x100000000 if h & 0x80000000 else h


_UTF16_NATIVE = "utf-16-le" if array("H", b"\x01\x00")[0] == 1 else "utf-16-be"


def _abs_hash(h: int) -> int:
    """``indexKeyHashMethod`` of an unsigned 32-bit hash: abs of the int32, Integer.MIN_VALUE -> 0."""
    if h & 0x80000000:
        return 0 if h == 0x80000000 else 0x100000000 - h
    return h


def prefixed_key_hash(prefix_hash: int, key: str) -> int:
    """``index_key_hash(prefix + key)`` from the unsigned hash of ``prefix`` (``_hash_u32``): Java's hash is
    a polynomial, so hash(p + k) = hash(p) * 31**len(k) + hash(k) (mod 2**32, len in UTF-16 units). Lets
    the index hash ``topic#`` once per topic instead of once per key."""
    if key.isascii():
        units: bytes | array = key.encode("ascii")
    else:
        units = array("H", key.encode(_UTF16_NATIVE, "surrogatepass"))
    n = len(units)
    pw = _POW31 if n <= 1024 else _powers(n + 1)
    return _abs_hash((prefix_hash * pw[n] + sum(map(mul, units[::-1], pw))) & 0xFFFFFFFF)


def index_key_hash(key: str) -> int:
    """RocketMQ's ``indexKeyHashMethod``: ``abs(key.hashCode())``, with Integer.MIN_VALUE mapped to 0."""
    return _abs_hash(_hash_u32(key))


def build_key(topic: str, key: str) -> str:
    """The string that is hashed for a message key: ``topic#key``."""
    return f"{topic}#{key}"
