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
    return _parse(text, object_key or ObjectKey.from_dict)


#: One token of the dialect, after optional whitespace; ``lastgroup`` names its kind. A string holds no raw
#: control character (JSON forbids them); its escapes are checked when it is decoded.
_TOKEN = re.compile(r"""[ \t\r\n]*(?:
      (?P<s>"[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*")
    | (?P<n>-?[0-9]+(?P<f>(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?))
    | (?P<i>[A-Za-z_$][A-Za-z0-9_$]*)
    | (?P<p>[{}\[\]:,])
    )""", re.VERBOSE)
_TRAILING_WS = re.compile(r"[ \t\r\n]*")
_LITERALS = {"true": True, "false": False, "null": None}
#: Longest integer accepted (Python refuses to convert longer ones; no RocketMQ number comes close).
_MAX_DIGITS = 4000

# What the parser expects next.
_VALUE, _FIRST_VALUE, _KEY, _FIRST_KEY, _COLON, _MEMBER_VALUE, _NEXT, _END = range(8)


def _fail(text: str, pos: int, what: str) -> FastJsonDecodeError:
    return FastJsonDecodeError(f"bad JSON at offset {pos}: {what} (near {text[pos:pos + 20]!r})")


def _scalar(text: str, m: re.Match, kind: str | None) -> Any:
    if kind == "s":
        raw = m.group("s")
        if "\\" not in raw:
            return raw[1:-1]
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _fail(text, m.start("s"), "bad escape in string") from None
    if kind == "n":
        if m.group("f"):
            return float(m.group("n"))
        digits = m.group("n")
        if len(digits) > _MAX_DIGITS:
            raise _fail(text, m.start("n"), f"integer of more than {_MAX_DIGITS} digits")
        return int(digits)
    word = m.group("i")
    if word in _LITERALS:
        return _LITERALS[word]
    raise _fail(text, m.start("i"), "expected a value")


def _parse(text: str, object_key: Callable[[dict], Hashable]) -> Any:
    """The tolerant reader: one pass over the tokens with an explicit stack, so its time is linear in the
    text and its depth is bounded by ``MAX_DEPTH`` without recursion.

    A stack frame is ``[container, key, is_key]``: the dict or list being filled, the member key waiting for
    its value, and whether the container is an object used as a key (fastjson's ``{{...}:v}``). The bottom
    frame is a list that receives the document's value."""
    scan = _TOKEN.scanner(text).match
    stack: list[list] = [[[], None, False]]  # the root frame receives the document's value
    state = _VALUE
    end = 0
    while state != _END:
        m = scan()
        if m is None:
            pos = _TRAILING_WS.match(text, end).end()
            raise _fail(text, pos, "unexpected end" if pos >= len(text) else "unexpected character")
        end = m.end()
        kind = m.lastgroup
        if kind == "f":  # the fraction group of a number closes last
            kind = "n"
        tok = m.group("p") if kind == "p" else None
        if state == _COLON:
            if tok != ":":
                raise _fail(text, m.start(), "expected ':'")
            state = _MEMBER_VALUE
            continue
        if state == _KEY or state == _FIRST_KEY:
            if tok == "{":  # fastjson's object key
                if len(stack) > MAX_DEPTH:
                    raise _fail(text, m.start(), f"nested deeper than {MAX_DEPTH}")
                stack.append([{}, None, True])
                state = _FIRST_KEY
                continue
            if kind == "i":
                stack[-1][1] = m.group("i")
            elif kind == "s" or kind == "n":
                stack[-1][1] = _scalar(text, m, kind)
            elif not (tok == "}" and state == _FIRST_KEY):
                raise _fail(text, m.start(), "expected a key")
            else:  # "{}"
                value = _close(text, m, stack, object_key)
                if value is _KEY_DONE:
                    state = _COLON
                    continue
                state = _place(stack, value)
                continue
            state = _COLON
            continue
        if state == _NEXT:
            closer = "}" if type(stack[-1][0]) is dict else "]"
            if tok == ",":
                state = _KEY if closer == "}" else _VALUE
                continue
            if tok != closer:
                raise _fail(text, m.start(), f"expected ',' or '{closer}'")
            value = _close(text, m, stack, object_key)
            if value is _KEY_DONE:
                state = _COLON
                continue
            state = _place(stack, value)
            continue
        # a value is expected (_VALUE, _FIRST_VALUE after "[", _MEMBER_VALUE after ":")
        if tok is None:
            state = _place(stack, _scalar(text, m, kind))
        elif tok == "{" or tok == "[":
            if len(stack) > MAX_DEPTH:
                raise _fail(text, m.start(), f"nested deeper than {MAX_DEPTH}")
            if tok == "{":
                stack.append([{}, None, False])
                state = _FIRST_KEY
            else:
                stack.append([[], None, False])
                state = _FIRST_VALUE
        elif state == _MEMBER_VALUE and (tok == "," or tok == "}"):
            top = stack[-1]  # C++ writes "mqTable":} when it has no queues: the member is null
            top[0][top[1]] = None
            if tok == ",":
                state = _KEY
                continue
            value = _close(text, m, stack, object_key)
            state = _COLON if value is _KEY_DONE else _place(stack, value)
        elif state == _FIRST_VALUE and tok == "]":
            state = _place(stack, _close(text, m, stack, object_key))
        else:
            raise _fail(text, m.start(), "expected a value")
    pos = _TRAILING_WS.match(text, end).end()
    if pos != len(text):
        raise _fail(text, pos, "trailing characters")
    return stack[0][0][0]


def _close(text: str, m: re.Match, stack: list[list], object_key: Callable[[dict], Hashable]) -> Any:
    """Pop the container just closed; an object that is a key becomes the key of the frame below it."""
    container, _key, is_key = stack.pop()
    if not is_key:
        return container
    try:
        stack[-1][1] = object_key(container)
    except (TypeError, ValueError, KeyError, RemoteProtocolError) as exc:
        raise _fail(text, m.start(), f"object key not accepted: {exc}") from None
    return _KEY_DONE


def _place(stack: list[list], value: Any) -> int:
    """Put a complete value in its container (the root frame: the document is complete); the next state."""
    top = stack[-1]
    if len(stack) == 1:
        top[0].append(value)
        return _END
    container = top[0]
    if type(container) is dict:
        container[top[1]] = value
    else:
        container.append(value)
    return _NEXT


#: Returned by ``_close`` when the closed object was a key.
_KEY_DONE = object()


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
