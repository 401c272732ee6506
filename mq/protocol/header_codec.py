"""How typed headers map to a command's ``extFields`` (PROTOCOL.md §3.5, §4): the ``Header`` base class, the
``@_header`` / ``@_hot_header`` decorators and the code they generate. The headers themselves are in
``headers.py`` (4.x) and ``pop_headers.py`` (RocketMQ 5's pop and metadata reads).

Every header is a frozen, slotted dataclass whose attributes are snake_case and whose wire keys are
RocketMQ's field names (camelCase by default; ``WIRE_NAMES`` where RocketMQ spells it otherwise: ``clientID``,
``MSG_REGION``, the V2 send letters ``a``..``m``). The five per-message ones (send V1/V2 request, send response,
pull request/response) are slotted but not frozen, for speed: treat them as immutable too.

- ``to_ext()`` -> ``dict[str, str]``: every value text, booleans ``"true"``/``"false"``, ``None`` fields left out
  (what Java and the C++ client's response decoders expect).
- ``from_ext(ext)`` reads what the three clients send, with Java's rules (``RemotingCommand
  .decodeCommandCustomHeader``): an ``int``/``Long`` field must be what ``Integer.parseInt``/``Long.parseLong``
  accept -- an optional ``+``/``-`` and decimal digits, nothing else (no spaces, no ``_``, no ``0x``), within
  the 32-bit (``Int``, the default for ``int``) or 64-bit (``Long``) range -- numbers sent as JSON numbers
  arrive as their text (the codec's job). Booleans follow ``Boolean.parseBoolean`` (``"true"`` in any case is
  true, anything else false) except that the C++ client's ``"1"`` is also true (Java reads it as false, which
  breaks C++ batches, PROTOCOL.md §4.1.2). An empty string for a non-string field means "absent" (Java's binary
  header turns ``""`` into null); unknown keys are ignored. A missing required field, or a number that does not
  parse, raises ``HeaderFieldError`` (a ``RemoteProtocolError``) in Java's words: ``the custom field <queueId>
  is null``; the dispatcher answers it SYSTEM_ERROR with that text.

A field without a default is required (Java ``@CFNotNull``). ``FIELDS`` lists each class's fields
(attribute, wire name, type, required, default); ``from_ext``/``to_ext`` are generated from it once per class as
straight-line code, so the per-message ones (``SendMessageRequestHeaderV2.from_ext``,
``SendMessageResponseHeader.to_ext``) cost about a microsecond.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from mq.common import native
from mq.common.javanum import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, parse_java_int
from mq.errors import HeaderFieldError

_TRUE = frozenset(("true", "1", "TRUE", "True"))
#: the C twins of the generated code (``_codec.c``), or None
_c_spec, _c_from_ext, _c_to_ext = native.load("mq.protocol._codec", "header_spec", "header_from_ext", "header_to_ext")


class _JavaLong:
    """Marks an ``int`` header field that is a Java ``long``/``Long`` (64-bit); plain ``int`` is Java ``int``."""


#: A header field of Java type ``long``/``Long``.
Long = Annotated[int, _JavaLong]


class HeaderField(typing.NamedTuple):
    attr: str
    wire: str
    kind: type  # str, int, bool or float
    required: bool
    default: Any
    long: bool = False  # an int field that is a Java long


def _text(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is str:
        return v
    return str(int(v)) if isinstance(v, int) else str(v)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _missing(cls: type, wire: str) -> HeaderFieldError:
    return HeaderFieldError(f"the custom field <{wire}> is null", header=cls.__name__, field=wire)


def _int_field(cls: type, wire: str, v: Any, long: bool) -> int:
    """The slow path of an int/long field: exact Java syntax and range, or ``HeaderFieldError``."""
    lo, hi = (INT64_MIN, INT64_MAX) if long else (INT32_MIN, INT32_MAX)
    try:
        if type(v) is str:
            return parse_java_int(v, lo, hi)
        if type(v) is int and lo <= v <= hi:  # a dict built in Python rather than decoded
            return v
    except ValueError:
        pass
    raise HeaderFieldError(f"the custom field <{wire}> is not {'a long' if long else 'an int'}: {str(v)[:40]!r}",
                           header=cls.__name__, field=wire)


def _float_field(cls: type, wire: str, v: Any) -> float:
    if type(v) is str and "_" not in v:
        try:
            return float(v)
        except ValueError:
            pass
    raise HeaderFieldError(f"the custom field <{wire}> is not a double: {str(v)[:40]!r}", header=cls.__name__,
                           field=wire)


class Header:
    """Base of every typed header; ``from_ext``/``to_ext`` are generated per class by ``_header`` (and
    ``py_from_ext``/``py_to_ext``, the same without the C codec's fast path)."""

    __slots__ = ()
    WIRE_NAMES: ClassVar[dict[str, str]] = {}
    FIELDS: ClassVar[tuple[HeaderField, ...]] = ()

    @classmethod
    def wire_names(cls) -> tuple[str, ...]:
        return tuple(f.wire for f in cls.FIELDS)

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None):  # generated per class by @_header
        raise TypeError(f"{cls.__name__} is not a header class: decorate it with @_header")

    def to_ext(self) -> dict[str, str]:  # generated per class by @_header
        raise TypeError(f"{type(self).__name__} is not a header class: decorate it with @_header")


def _fields(cls: type) -> tuple[HeaderField, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # X | None
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        long = False
        if typing.get_origin(tp) is Annotated:
            long = _JavaLong in tp.__metadata__
            tp = typing.get_args(tp)[0]
        if tp not in (str, int, bool, float):
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported header type {tp!r}")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(HeaderField(f.name, cls.WIRE_NAMES.get(f.name) or _camel(f.name), tp, required,
                               None if required else f.default, long))
    return tuple(out)


def _compile(cls: type) -> None:
    """Generate straight-line ``from_ext``/``to_ext`` for ``cls`` (as ``dataclasses`` does for ``__init__``):
    a loop over the fields costs about 0.5 µs per field, the unrolled code a fraction of that. Where the C codec
    is built, both first ask its twins (``header_from_ext``/``header_to_ext``), which read and write the usual
    case the same way and return None for the rest; ``py_from_ext``/``py_to_ext`` are the Python code alone."""
    fields = _fields(cls)
    ns: dict[str, Any] = {"_missing": _missing, "_int_field": _int_field, "_float_field": _float_field,
                          "_TRUE": _TRUE, "_text": _text}
    spec = None
    if _c_spec is not None and not hasattr(cls, "__post_init__"):
        spec = _c_spec(cls, fields)
    ns.update(_spec=spec, _cfrom=_c_from_ext, _cto=_c_to_ext)
    dec = ["def py_from_ext(cls, ext):", "    g = (ext or {}).get"]
    enc = ["def py_to_ext(self):", "    out = {}"]
    for i, f in enumerate(fields):
        w = repr(f.wire)
        ns[f"_d{i}"] = f.default
        absent = f"raise _missing(cls, {w})" if f.required else f"a{i} = _d{i}"
        dec.append(f"    v = g({w})")
        if f.kind is str:
            dec += [f"    if v is None: {absent}", f"    else: a{i} = v if type(v) is str else str(v)"]
        else:
            dec += ["    if v is None or v == '':", f"        {absent}", "    else:"]
            if f.kind is bool:
                dec.append(f"        a{i} = v is True or v in _TRUE or str(v).lower() == 'true'")
            elif f.kind is int:
                # Fast path: plain digits short enough to be in range (9 for an int, 18 for a long).
                short = 18 if f.long else 9
                dec += [f"        if type(v) is str and len(v) <= {short} and v.isdecimal(): a{i} = int(v)",
                        f"        else: a{i} = _int_field(cls, {w}, v, {f.long})"]
            else:
                dec.append(f"        a{i} = _float_field(cls, {w}, v)")
        expr = {str: "v if type(v) is str else _text(v)", int: "str(v) if type(v) is int else _text(v)",
                bool: "'true' if v else 'false'", float: "str(v)"}[f.kind]
        enc += [f"    v = self.{f.attr}", f"    if v is not None: out[{w}] = {expr}"]
    dec.append(f"    return cls({', '.join(f'a{i}' for i in range(len(fields)))})")
    enc.append("    return out")
    if spec is None:
        fast = ["from_ext = py_from_ext", "to_ext = py_to_ext"]
    else:
        fast = ["def from_ext(cls, ext):", "    h = _cfrom(_spec, cls, ext)",
                "    return py_from_ext(cls, ext) if h is None else h", "",
                "def to_ext(self):", "    out = _cto(_spec, self)", "    return py_to_ext(self) if out is None else out"]
    source = "\n".join(dec) + "\n\n" + "\n".join(enc) + "\n\n" + "\n".join(fast)
    exec(source, ns)  # noqa: S102 - generated from the field list
    for name in ("from_ext", "to_ext", "py_from_ext", "py_to_ext"):
        ns[name].__qualname__ = f"{cls.__name__}.{name}"
    cls.FIELDS = fields
    cls.from_ext = classmethod(ns["from_ext"])
    cls.to_ext = ns["to_ext"]
    cls.py_from_ext = classmethod(ns["py_from_ext"])
    cls.py_to_ext = ns["py_to_ext"]


def _header(cls):
    cls = dataclass(frozen=True, slots=True)(cls)
    _compile(cls)
    return cls


def _hot_header(cls):
    """Per-message headers: slotted but not frozen (a frozen __init__ costs 1.6 µs more for 13 fields)."""
    cls = dataclass(slots=True)(cls)
    _compile(cls)
    return cls
