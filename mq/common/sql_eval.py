"""Values and operators of SQL92 selectors (Java's ``filter.expression`` classes), used by
``mq.common.sql_filter``'s parser. Pure.

- Java conversions: ``Integer.valueOf``/``Long.valueOf``/``Double.valueOf``/``Boolean.valueOf`` of a property
  string and ``Double.compare``; a failed parse raises ``Sql92EvalError`` (Java's NumberFormatException).
- ``compare_fn(left_type, right_type)``: ``ComparisonExpression.__compare`` with string conversion on, chosen
  once per comparison from the operands' static Java types (a property is a String, a literal has its type).
- ``Node``: one compiled expression, ``fn(properties) -> True/False/None/value``, with what the compile-time
  checks need (literal, property, condition). ``make_*`` build the operators as closures, with inlined fast
  paths for the usual ``property <op> literal`` shapes.
"""

from __future__ import annotations

import math
import operator
import re
from typing import Callable

from mq.errors import MQError


class Sql92EvalError(MQError):
    """Evaluating a selector failed for one message (Java threw): the message is not matched."""


# ---------------------------------------------------------------------------------------------------------
# Java conversions
# ---------------------------------------------------------------------------------------------------------
_INT_RE = re.compile(r"[+-]?\d+\Z")  # Integer.parseInt: sign, Unicode decimal digits, nothing else
_DOUBLE_RE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z")
_HEX_DOUBLE_RE = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)"
                            r"[fFdD]?\Z")
_JAVA_TRIM = "".join(chr(c) for c in range(33))
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MIN_VALUE = 5e-324


def java_int_valueof(s: str) -> int:
    """``Integer.valueOf(String)``; raises Sql92EvalError (NumberFormatException) on failure."""
    if s.isascii() and s.isdigit():  # the common case: plain ASCII digits
        v = int(s)
    elif _INT_RE.match(s) is None:
        raise Sql92EvalError(f"For input string: {s!r}")
    else:
        v = int(s)
    if not I32_MIN <= v <= I32_MAX:
        raise Sql92EvalError(f"For input string: {s!r} (out of int range)")
    return v


def java_long_valueof(s: str) -> int:
    """``Long.valueOf(String)``."""
    if s.isascii() and s.isdigit():
        v = int(s)
    elif _INT_RE.match(s) is None:
        raise Sql92EvalError(f"For input string: {s!r}")
    else:
        v = int(s)
    if not I64_MIN <= v <= I64_MAX:
        raise Sql92EvalError(f"For input string: {s!r} (out of long range)")
    return v


def java_double_valueof(s: str) -> float:
    """``Double.valueOf(String)``: trimmed, decimal or hex, NaN/Infinity, optional f/d suffix."""
    t = s.strip(_JAVA_TRIM)
    if _DOUBLE_RE.match(t) is not None:
        if t[-1] in "fFdD" and not t.endswith("Infinity"):
            t = t[:-1]
        return float(t)
    m = _HEX_DOUBLE_RE.match(t)
    if m is not None:
        try:
            v = float.fromhex(m.group(2))
        except OverflowError:
            v = math.inf
        return -v if m.group(1) == "-" else v
    raise Sql92EvalError(f"For input string: {s!r}")


def _java_boolean_valueof(s: str) -> bool:
    return len(s) == 4 and s.lower() == "true"


def _dcmp(a: float, b: float) -> int:
    """``Double.compare``: -0.0 < 0.0, NaN equal to itself and above everything."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b and a != 0.0:
        return 0
    an, bn = a != a, b != b
    if an or bn:
        return an - bn
    return (math.copysign(1.0, a) > 0) - (math.copysign(1.0, b) > 0)


def _icmp(a, b) -> int:
    return (a > b) - (a < b)


# Java value types (static per expression node)
T_NULL, T_STR, T_INT, T_LONG, T_DOUBLE, T_BOOL = range(6)
_TYPE_NAMES = ("null", "String", "Integer", "Long", "Double", "Boolean")


def _cast_error(lv, rv) -> int:
    raise Sql92EvalError(f"cannot compare Boolean {lv!r} with String {rv!r} (ClassCastException)")


def _minus_one(lv, rv) -> int:
    return -1


_CMP: dict[tuple[int, int], Callable] = {
    (T_STR, T_STR): _icmp, (T_INT, T_INT): _icmp, (T_LONG, T_LONG): _icmp, (T_BOOL, T_BOOL): _icmp,
    (T_DOUBLE, T_DOUBLE): _dcmp,
    (T_INT, T_LONG): _icmp, (T_LONG, T_INT): _icmp,
    (T_INT, T_DOUBLE): lambda lv, rv: _dcmp(float(lv), rv), (T_LONG, T_DOUBLE): lambda lv, rv: _dcmp(float(lv), rv),
    (T_DOUBLE, T_INT): lambda lv, rv: _dcmp(lv, float(rv)), (T_DOUBLE, T_LONG): lambda lv, rv: _dcmp(lv, float(rv)),
    (T_INT, T_STR): lambda lv, rv: _icmp(lv, java_int_valueof(rv)),
    (T_LONG, T_STR): lambda lv, rv: _icmp(lv, java_long_valueof(rv)),
    (T_DOUBLE, T_STR): lambda lv, rv: _dcmp(lv, java_double_valueof(rv)),
    (T_STR, T_INT): lambda lv, rv: _icmp(java_int_valueof(lv), rv),
    (T_STR, T_LONG): lambda lv, rv: _icmp(java_long_valueof(lv), rv),
    (T_STR, T_DOUBLE): lambda lv, rv: _dcmp(java_double_valueof(lv), rv),
    (T_STR, T_BOOL): lambda lv, rv: _icmp(_java_boolean_valueof(lv), rv),
    (T_BOOL, T_STR): _cast_error,
}


def compare_fn(lt: int, rt: int) -> Callable:
    """Java ``__compare(lv, rv, true)`` for two non-null values of static types ``lt``/``rt``."""
    return _CMP.get((lt, rt), _minus_one)


# ---------------------------------------------------------------------------------------------------------
# expression nodes
# ---------------------------------------------------------------------------------------------------------
PROP, CONST, FOLDED, COND = range(4)  # property, literal, negated value (not a Java constant), condition


class Node:
    """One parsed expression: ``fn(properties) -> value`` and what Java's compile-time checks look at."""

    __slots__ = ("kind", "jtype", "value", "fn", "name", "text")

    def __init__(self, kind: int, jtype: int, fn: Callable, value=None, name: str | None = None,
                 text: str = "") -> None:
        self.kind = kind
        self.jtype = jtype
        self.fn = fn
        self.value = value
        self.name = name
        self.text = text

    @property
    def is_boolean(self) -> bool:  # Java BooleanExpression (conditions and TRUE/FALSE/NULL literals)
        return self.kind == COND or (self.kind == CONST and self.jtype in (T_BOOL, T_NULL))

    @property
    def known(self) -> bool:  # value fixed at compile time
        return self.kind in (CONST, FOLDED)


def _const_fn(v):
    return lambda p: v


def value_node(kind: int, jtype: int, value, text: str) -> Node:
    return Node(kind, jtype, _const_fn(value), value, text=text)


def prop_node(name: str) -> Node:
    return Node(PROP, T_STR, lambda p: p.get(name), name=name, text=name)


def cond(fn: Callable, text: str) -> Node:
    return Node(COND, T_BOOL, fn, text=text)


_PYOP = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_TEST = {"=": lambda c: c == 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0,
         "<=": lambda c: c <= 0}


def make_equal(left: Node, right: Node, text: str) -> Node:
    """Java ``doCreateEqual`` (no operand checks: IS NULL uses it directly)."""
    lf, rf = left.fn, right.fn
    if left.kind == PROP and right.known and right.value is not None:
        name, c = left.name, right.value
        if right.jtype in (T_INT, T_LONG):
            parse = java_int_valueof if right.jtype == T_INT else java_long_valueof

            def eq_int(p):
                v = p.get(name)
                return None if v is None else parse(v) == c
            return cond(eq_int, text)
        if right.jtype == T_STR:
            def eq_str(p):
                v = p.get(name)
                return None if v is None else v == c
            return cond(eq_str, text)
        cmp = compare_fn(T_STR, right.jtype)

        def eq_prop(p):
            v = p.get(name)
            return None if v is None else cmp(v, c) == 0
        return cond(eq_prop, text)
    if right.kind == CONST and right.jtype == T_NULL:  # IS NULL
        return cond(lambda p: lf(p) is None, text)
    cmp = compare_fn(left.jtype, right.jtype)

    def eq(p):
        lv = lf(p)
        rv = rf(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return cmp(lv, rv) == 0
    return cond(eq, text)


def make_order(op: str, left: Node, right: Node, text: str) -> Node:
    """Java ``ComparisonExpression.evaluate`` for ``>``, ``>=``, ``<``, ``<=``."""
    test = _TEST[op]
    lf, rf = left.fn, right.fn
    if left.jtype == T_STR and right.jtype == T_STR:
        def both_str(p):
            lv = lf(p)
            if lv is None:
                return None
            rv = rf(p)
            if rv is None:
                return None
            return test(_dcmp(java_double_valueof(lv), java_double_valueof(rv)))
        return cond(both_str, text)
    cmp = compare_fn(left.jtype, right.jtype)
    if left.kind == PROP and right.known and right.jtype in (T_INT, T_LONG):  # the common case, inlined
        name, c, pyop = left.name, right.value, _PYOP[op]
        parse = java_int_valueof if right.jtype == T_INT else java_long_valueof

        def prop_int(p):
            v = p.get(name)
            return None if v is None else pyop(parse(v), c)
        return cond(prop_int, text)
    if left.kind == PROP and right.known and right.value is not None:
        name, c = left.name, right.value

        def prop_const(p):
            v = p.get(name)
            return None if v is None else test(cmp(v, c))
        return cond(prop_const, text)

    def order(p):
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        return test(cmp(lv, rv))
    return cond(order, text)


def make_not(node: Node, text: str) -> Node:
    f = node.fn

    def not_(p):
        v = f(p)
        return None if v is None else not v
    return cond(not_, text)


def make_and(left: Node, right: Node) -> Node:
    lf, rf = left.fn, right.fn

    def and_(p):
        lv = lf(p)
        if lv is False:
            return False
        rv = rf(p)
        if rv is False:
            return False
        if lv is None or rv is None:
            return None
        return True
    return cond(and_, f"({left.text} AND {right.text})")


def make_or(left: Node, right: Node) -> Node:
    lf, rf = left.fn, right.fn

    def or_(p):
        lv = lf(p)
        if lv is True:
            return True
        rv = rf(p)
        if rv is True:
            return True
        if lv is None or rv is None:
            return None
        return False
    return cond(or_, f"({left.text} OR {right.text})")


def make_in(node: Node, values: list[str], negated: bool, text: str) -> Node:
    name, s = node.name, frozenset(values)

    def in_(p):
        v = p.get(name)
        return None if v is None else (v in s) is not negated
    return cond(in_, text)


def negate(node: Node, text: str) -> Node:
    """Java ``createNegate``: only numbers negate (int/long wrap), anything else evaluates to null. Every
    operand here is either known at compile time or a property/condition (never a number), so it folds."""
    v, t = (node.value, node.jtype) if node.known else (None, T_NULL)
    if t == T_INT:
        v = I32_MIN if v == I32_MIN else -v
    elif t == T_LONG:
        v = I64_MIN if v == I64_MIN else -v
    elif t == T_DOUBLE:
        v = -v
    else:
        v, t = None, T_NULL
    return value_node(FOLDED, t, v, text)


