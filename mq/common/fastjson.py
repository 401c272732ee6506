"""Read and write the JSON dialect of Java's fastjson 1.2.69 (PROTOCOL.md §6.0).

RocketMQ serializes its bodies with fastjson, which departs from standard JSON in two ways a reader must accept::

    +-----------------------------+-----------------------------------------------------------------+
    | quirk                       | on the wire                                                     |
    +-----------------------------+-----------------------------------------------------------------+
    | unquoted integer map keys   | {"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}         |
    | object-valued map keys      | {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}  |
    +-----------------------------+-----------------------------------------------------------------+

plus what other clients add: quoted numeric keys (standard mode), a trailing newline (C++ / jsoncpp), bare
identifier keys (fastjson's lenient reader accepts ``{a:1}``), and the C++ client's empty value in
``"mqTable":}`` which is read as ``null``.

``loads`` tries ``orjson`` first (standard JSON, the common case) and falls back to the tolerant parser below
only when orjson refuses the text. Keys come back as:

- quoted keys -> ``str`` (also ``"0"``: the caller decides whether a key is a number);
- unquoted integer keys -> ``int``;
- object keys -> whatever ``object_key(dict)`` returns; by default an :class:`ObjectKey`, a hashable, ordered
  tuple of sorted ``(key, value)`` pairs (nested objects/arrays frozen the same way) with ``as_dict()``.
  ``mq.protocol.bodies`` passes a hook that builds ``MessageQueue`` values instead.

``dumps`` writes standard JSON (``"0":``) by default; ``fastjson_int_keys=True`` writes integer keys unquoted
(``0:``), the form the C++ client and ali-ons receive from a Java name server. Keys that are :class:`ObjectKey`
or that have a ``to_json_value()`` method (``MessageQueue``) are written in fastjson's object-key form in both
modes: it is the only form a Java broker emits for ``Map<MessageQueue, ...>``. Values with ``to_json_value()``
are written as what it returns.

Both functions are pure; ``loads`` raises only :class:`FastJsonDecodeError` (a ``RemoteProtocolError``).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Hashable

import orjson

from mq.errors import LocalProtocolError, RemoteProtocolError

__all__ = ["FastJsonDecodeError", "ObjectKey", "loads", "dumps", "freeze"]

#: Deepest nesting the fallback parser follows (orjson's own limit is 1024).
MAX_DEPTH = 512


class FastJsonDecodeError(RemoteProtocolError):
    """The text is not JSON, not even in fastjson's dialect."""


class ObjectKey(tuple):
    """A JSON object used as a map key, frozen: a sorted tuple of ``(key, value)`` pairs."""

    __slots__ = ()

    @classmethod
    def from_dict(cls, obj: dict) -> "ObjectKey":
        return cls(sorted((str(k), freeze(v)) for k, v in obj.items()))

    def as_dict(self) -> dict:
        return {k: _thaw(v) for k, v in self}

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self:
            if k == key:
                return v
        return default

    def to_json_value(self) -> dict:
        return self.as_dict()

    def __repr__(self) -> str:
        return f"ObjectKey({self.as_dict()!r})"


def freeze(value: Any) -> Hashable:
    """A hashable form of a decoded JSON value: dicts -> ObjectKey, lists -> tuples."""
    if isinstance(value, dict):
        return ObjectKey.from_dict(value)
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, ObjectKey):
        return value.as_dict()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------
def loads(data: bytes | bytearray | memoryview | str,
          object_key: Callable[[dict], Hashable] | None = None) -> Any:
    """Parse standard JSON or fastjson's dialect (see the module docstring)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    except TypeError as exc:
        raise FastJsonDecodeError(f"cannot read JSON from {type(data).__name__}: {exc}") from None
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FastJsonDecodeError(f"JSON text is not UTF-8: {exc}") from None
    parser = _Parser(text, object_key or ObjectKey.from_dict)
    try:
        value = parser.document()
    except RecursionError:
        raise FastJsonDecodeError("JSON nested too deeply") from None
    return value


_WS = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_LITERALS = {"true": True, "false": False, "null": None}


class _Parser:
    __slots__ = ("text", "pos", "object_key", "depth")

    def __init__(self, text: str, object_key: Callable[[dict], Hashable]) -> None:
        self.text = text
        self.pos = 0
        self.object_key = object_key
        self.depth = 0

    def fail(self, what: str) -> FastJsonDecodeError:
        near = self.text[self.pos:self.pos + 20]
        return FastJsonDecodeError(f"bad JSON at offset {self.pos}: {what} (near {near!r})")

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def document(self) -> Any:
        self.ws()
        value = self.value()
        self.ws()
        if self.pos != len(self.text):
            raise self.fail("trailing characters")
        return value

    def value(self) -> Any:
        text = self.text
        if self.pos >= len(text):
            raise self.fail("unexpected end")
        ch = text[self.pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        if ch == '"':
            return self.string()
        m = _NUMBER.match(text, self.pos)
        if m:
            self.pos = m.end()
            return self.number(m)
        m = _IDENT.match(text, self.pos)
        if m and m.group() in _LITERALS:
            self.pos = m.end()
            return _LITERALS[m.group()]
        raise self.fail("expected a value")

    @staticmethod
    def number(m: re.Match) -> int | float:
        if m.group(1) is None and m.group(2) is None:
            return int(m.group())
        return float(m.group())

    def string(self) -> str:
        m = _STRING.match(self.text, self.pos)
        if not m:
            raise self.fail("unterminated string")
        self.pos = m.end()
        raw = m.group()
        if "\\" not in raw:
            if any(ord(c) < 0x20 for c in raw):
                raise self.fail("control character in string")
            return raw[1:-1]
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise self.fail("bad escape in string") from None

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH}")

    def key(self) -> Hashable:
        text = self.text
        ch = text[self.pos] if self.pos < len(text) else ""
        if ch == '"':
            return self.string()
        if ch == "{":
            obj = self.obj()
            try:
                return self.object_key(obj)
            except (TypeError, ValueError, KeyError, RemoteProtocolError) as exc:
                raise self.fail(f"object key not accepted: {exc}") from None
        m = _NUMBER.match(text, self.pos)
        if m:
            self.pos = m.end()
            return self.number(m)
        m = _IDENT.match(text, self.pos)
        if m:
            self.pos = m.end()
            return m.group()
        raise self.fail("expected a key")

    def obj(self) -> dict:
        self.enter()
        text = self.text
        self.pos += 1
        out: dict = {}
        self.ws()
        if self.pos < len(text) and text[self.pos] == "}":
            self.pos += 1
            self.depth -= 1
            return out
        while True:
            self.ws()
            k = self.key()
            self.ws()
            if self.pos >= len(text) or text[self.pos] != ":":
                raise self.fail("expected ':'")
            self.pos += 1
            self.ws()
            if self.pos < len(text) and text[self.pos] in ",}":
                out[k] = None  # C++ writes "mqTable":} when it has no queues
            else:
                out[k] = self.value()
            self.ws()
            if self.pos >= len(text):
                raise self.fail("unterminated object")
            ch = text[self.pos]
            self.pos += 1
            if ch == "}":
                self.depth -= 1
                return out
            if ch != ",":
                self.pos -= 1
                raise self.fail("expected ',' or '}'")

    def array(self) -> list:
        self.enter()
        text = self.text
        self.pos += 1
        out: list = []
        self.ws()
        if self.pos < len(text) and text[self.pos] == "]":
            self.pos += 1
            self.depth -= 1
            return out
        while True:
            self.ws()
            out.append(self.value())
            self.ws()
            if self.pos >= len(text):
                raise self.fail("unterminated array")
            ch = text[self.pos]
            self.pos += 1
            if ch == "]":
                self.depth -= 1
                return out
            if ch != ",":
                self.pos -= 1
                raise self.fail("expected ',' or ']'")


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
def _default(value: Any) -> Any:
    if hasattr(value, "to_json_value"):
        return value.to_json_value()
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def dumps(obj: Any, *, fastjson_int_keys: bool = False) -> bytes:
    """``obj`` as JSON bytes; integer keys quoted unless ``fastjson_int_keys``; object keys as objects."""
    try:
        return orjson.dumps(obj, default=_default)
    except TypeError:
        pass  # a non-str key somewhere (or a value nobody can write: the slow path says which)
    parts: list[bytes] = []
    _write(obj, parts, fastjson_int_keys, 0)
    return b"".join(parts)


def _write(value: Any, out: list[bytes], int_keys: bool, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise LocalProtocolError(f"JSON value nested deeper than {MAX_DEPTH}")
    if isinstance(value, dict):
        out.append(b"{")
        first = True
        for k, v in value.items():
            if not first:
                out.append(b",")
            first = False
            _write_key(k, out, int_keys, depth)
            out.append(b":")
            _write(v, out, int_keys, depth + 1)
        out.append(b"}")
    elif isinstance(value, (list, tuple, set, frozenset)) and not isinstance(value, ObjectKey):
        out.append(b"[")
        first = True
        for v in value:
            if not first:
                out.append(b",")
            first = False
            _write(v, out, int_keys, depth + 1)
        out.append(b"]")
    elif hasattr(value, "to_json_value"):
        _write(value.to_json_value(), out, int_keys, depth + 1)
    else:
        try:
            out.append(orjson.dumps(value))
        except TypeError as exc:
            raise LocalProtocolError(f"cannot write {type(value).__name__} as JSON: {exc}") from None


def _write_key(key: Any, out: list[bytes], int_keys: bool, depth: int) -> None:
    if type(key) is str:
        out.append(orjson.dumps(key))
    elif isinstance(key, bool):
        out.append(b'"true"' if key else b'"false"')
    elif isinstance(key, int):
        text = str(int(key)).encode()
        out.append(text if int_keys else b'"' + text + b'"')
    elif isinstance(key, str):
        out.append(orjson.dumps(str(key)))
    elif hasattr(key, "to_json_value"):
        _write(key.to_json_value(), out, int_keys, depth + 1)
    elif key is None:
        out.append(b'"null"')
    else:
        out.append(orjson.dumps(str(key)))
