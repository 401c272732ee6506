"""SQL92 message selectors (RocketMQ 4.9 ``expressionType=SQL92``), FEATURES.md §9.2-9.3. Pure: no I/O.

``compile_sql92(text)`` parses a JMS-style selector (this module: lexer and parser; ``mq.common.sql_eval``: the
values and operators it compiles to) and returns a ``Sql92Filter`` whose ``matches(properties)``
says whether a message with those (string) properties is selected. It behaves as RocketMQ 4.9.4's
``SelectorParser`` + ``filter.expression`` classes (read there, written here):

Grammar (keywords case-insensitive, identifiers case-sensitive as property names)::

    selector   := or                       -- tokens after a complete selector are ignored, as JavaCC does
    or         := and ("OR" and)*
    and        := equality ("AND" equality)*
    equality   := comparison ("=" comparison | "<>" comparison | "IS" "NULL" | "IS" "NOT" "NULL")*
    comparison := unary ((">" | ">=" | "<" | "<=") unary | "BETWEEN" unary "AND" unary
                        | "NOT" "BETWEEN" unary "AND" unary | ["NOT"] "IN" "(" string ("," string)* ")")*
    unary      := "+" unary | "-" unary | "NOT" unary | primary
    primary    := literal | identifier | "(" or ")"
    literal    := 'string' ('' escapes a quote) | 0 | [1-9][0-9]*[lL]? | float | TRUE | FALSE | NULL
    identifier := [a-zA-Z_$][a-zA-Z0-9_$]*
    comments   := -- ... end of line (the line end is required) | /* ... */

Evaluation (Java's, kept exactly):

- Values are Java-typed: String (a property), Integer/Long (decimal literal: Integer when it fits), Double
  (float literal; 0.0 and overflow are rejected at compile time), Boolean, null (missing property, NULL).
- Three-valued logic: ``AND``/``OR``/``NOT`` over TRUE/FALSE/null as JMS; a selector matches only on TRUE.
- ``x = y``: null on the left -> null; null only on the right -> FALSE; both null -> TRUE. ``<>`` is NOT(=).
  ``>``/``>=``/``<``/``<=``: any null -> null; two strings are both parsed as doubles.
- Mixed types convert as ``ComparisonExpression.__compare`` with string conversion on: a string compared with
  an Integer/Long/Double/Boolean is parsed as ``Integer.valueOf``/``Long.valueOf``/``Double.valueOf``/
  ``Boolean.valueOf``; numbers widen (int -> long -> double). A parse failure (``a = 5`` with a='x') is an
  evaluation error, and an error anywhere makes the whole selector not match.
- ``a IN ('x', 'y')`` needs a property on the left; null -> null. A bare property used as a condition is null
  when missing, else FALSE (a string is not a Boolean). Unary minus of anything but a number is null.
- Compile-time checks as Java's: ``<`` family operands cannot be string/boolean/null literals or conditions,
  ``=`` operands cannot be the NULL literal, ``TRUE = 1`` is refused, BETWEEN literal bounds must be ordered.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

from mq.common.sql_eval import (
    PROP, CONST, T_NULL, T_STR, T_INT, T_LONG, T_DOUBLE, T_BOOL, DOUBLE_MIN_VALUE, I32_MAX, I64_MAX, Node,
    compare_fn, cond, make_and, make_equal, make_in, make_not, make_or, make_order, negate, prop_node, value_node,
    Sql92EvalError, java_double_valueof, java_int_valueof, java_long_valueof)
from mq.errors import MQError

__all__ = ["Sql92Filter", "Sql92SyntaxError", "Sql92EvalError", "compile_sql92", "java_double_valueof",
           "java_int_valueof", "java_long_valueof"]


class Sql92SyntaxError(MQError):
    """A selector that does not compile; ``line``/``column`` (1-based) and ``offset`` (0-based) locate it."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        self.offset = offset
        self.line = text.count("\n", 0, offset) + 1
        self.column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        super().__init__(f"Invalid MessageSelector: {message} at line {self.line}, column {self.column}")


# ---------------------------------------------------------------------------------------------------------
# lexer
# ---------------------------------------------------------------------------------------------------------
_KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})
_SKIP_RE = re.compile(r"(?:[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*.*?\*/)+", re.S)
_DECIMAL_RE = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT_RE = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_STRING_RE = re.compile(r"'(?:''|[^'])*'")
_ID_RE = re.compile(r"[a-zA-Z_$][a-zA-Z0-9_$]*")
_PUNCT = ("<>", "<=", ">=", "<", ">", "=", "(", ")", ",", "+", "-")

EOF = "EOF"


class _Token:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind = kind
        self.text = text
        self.pos = pos

    def describe(self) -> str:
        return "end of expression" if self.kind == EOF else repr(self.text)


class _Lexer:
    """Tokens on demand (JavaCC reads ahead only as far as the parser looks)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.buf: list[_Token] = []

    def _next(self) -> _Token:
        text, pos = self.text, self.pos
        m = _SKIP_RE.match(text, pos)
        if m is not None:
            pos = m.end()
        if pos >= len(text):
            self.pos = pos
            return _Token(EOF, "", pos)
        ch = text[pos]
        tok = None
        if ch.isascii() and (ch.isdigit() or ch == "."):
            d = _DECIMAL_RE.match(text, pos)
            f = _FLOAT_RE.match(text, pos)
            dl = d.end() if d else pos
            fl = f.end() if f else pos
            if fl > dl:
                tok = _Token("FLOAT", text[pos:fl], pos)
            elif dl > pos:
                tok = _Token("INT", text[pos:dl], pos)
        elif ch == "'":
            m = _STRING_RE.match(text, pos)
            if m is not None:
                tok = _Token("STR", m.group(), pos)
        else:
            m = _ID_RE.match(text, pos)
            if m is not None:
                word = m.group()
                up = word.upper()
                tok = _Token(up if up in _KEYWORDS else "ID", word, pos)
            else:
                for p in _PUNCT:
                    if text.startswith(p, pos):
                        tok = _Token(p, p, pos)
                        break
        if tok is None:
            raise Sql92SyntaxError(f"lexical error, unexpected character {ch!r}", text, pos)
        self.pos = pos + len(tok.text)
        return tok

    def peek(self, k: int = 0) -> _Token:
        while len(self.buf) <= k:
            self.buf.append(self._next())
        return self.buf[k]

    def take(self) -> _Token:
        tok = self.peek()
        del self.buf[0]
        return tok


# ---------------------------------------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lx = _Lexer(text)

    def fail(self, msg: str, pos: int) -> Sql92SyntaxError:
        return Sql92SyntaxError(msg, self.text, pos)

    def expect(self, kind: str, what: str) -> _Token:
        tok = self.lx.take()
        if tok.kind != kind:
            raise self.fail(f"expected {what} but found {tok.describe()}", tok.pos)
        return tok

    def as_boolean(self, node: Node, pos: int) -> Node:
        if node.is_boolean:
            return node
        if node.kind == PROP:  # UnaryExpression.createBooleanCast
            name = node.name
            return cond(lambda p: None if p.get(name) is None else False, node.text)
        raise self.fail(f"expression will not result in a boolean value: {node.text}", pos)

    # selector := or
    def selector(self) -> Node:
        pos = self.lx.peek().pos
        return self.as_boolean(self.or_(), pos)

    def or_(self) -> Node:
        pos = self.lx.peek().pos
        left = self.and_()
        while self.lx.peek().kind == "OR":
            self.lx.take()
            rpos = self.lx.peek().pos
            right = self.and_()
            left = make_or(self.as_boolean(left, pos), self.as_boolean(right, rpos))
        return left

    def and_(self) -> Node:
        pos = self.lx.peek().pos
        left = self.equality()
        while self.lx.peek().kind == "AND":
            self.lx.take()
            rpos = self.lx.peek().pos
            right = self.equality()
            left = make_and(self.as_boolean(left, pos), self.as_boolean(right, rpos))
        return left

    def equality(self) -> Node:
        lx = self.lx
        left = self.comparison()
        while True:
            tok = lx.peek()
            if tok.kind in ("=", "<>"):
                lx.take()
                right = self.comparison()
                text = f"({left.text} {tok.kind} {right.text})"
                self.check_equal(left, right, tok.pos)
                eq = make_equal(left, right, text)
                left = eq if tok.kind == "=" else make_not(eq, text)
            elif tok.kind == "IS":
                lx.take()
                negated = False
                if lx.peek().kind != "NULL":
                    self.expect("NOT", "NOT or NULL after IS")
                    negated = True
                self.expect("NULL", "NULL")
                text = f"({left.text} IS {'NOT ' if negated else ''}NULL)"
                eq = make_equal(left, value_node(CONST, T_NULL, None, "NULL"), text)
                left = make_not(eq, text) if negated else eq
            else:
                return left

    def comparison(self) -> Node:
        lx = self.lx
        left = self.unary()
        while True:
            tok = lx.peek()
            k = tok.kind
            if k in (">", ">=", "<", "<="):
                lx.take()
                right = self.unary()
                self.check_order(left, tok.pos)
                self.check_order(right, tok.pos)
                left = make_order(k, left, right, f"({left.text} {k} {right.text})")
            elif k == "BETWEEN" or (k == "NOT" and lx.peek(1).kind == "BETWEEN"):
                lx.take()
                if k == "NOT":
                    lx.take()
                low = self.unary()
                self.expect("AND", "AND in BETWEEN")
                high = self.unary()
                left = self.between(left, low, high, k == "NOT", tok.pos)
            elif k == "IN" or (k == "NOT" and lx.peek(1).kind == "IN"):
                lx.take()
                if k == "NOT":
                    lx.take()
                self.expect("(", "'(' after IN")
                values = [self.string()]
                while lx.peek().kind == ",":
                    lx.take()
                    values.append(self.string())
                self.expect(")", "')' closing the IN list")
                if left.kind != PROP:
                    raise self.fail(f"expected a property for IN expression, got: {left.text}", tok.pos)
                text = f"({left.text} {'NOT IN' if k == 'NOT' else 'IN'} {tuple(values)})"
                left = make_in(left, values, k == "NOT", text)
            elif k == "NOT":
                lx.take()
                raise self.fail(f"expected BETWEEN or IN after NOT but found {lx.peek().describe()}", tok.pos)
            else:
                return left

    def between(self, value: Node, low: Node, high: Node, negated: bool, pos: int) -> Node:
        if not negated and low.kind == CONST and high.kind == CONST:  # createBetween's literal check
            if low.value is None or high.value is None:
                raise self.fail("illegal values of between, values can not be null", pos)
            try:
                ret = compare_fn(high.jtype, low.jtype)(high.value, low.value)
            except Sql92EvalError as exc:
                raise self.fail(f"illegal values of between: {exc}", pos) from None
            if ret < 0:
                raise self.fail(f"illegal values of between, left value({low.text}) must less than or equal to "
                                f"right value({high.text})", pos)
        for n in (value, low, value, high):
            self.check_order(n, pos)
        if negated:
            return make_or(make_order("<", value, low, f"({value.text} < {low.text})"),
                            make_order(">", value, high, f"({value.text} > {high.text})"))
        return make_and(make_order(">=", value, low, f"({value.text} >= {low.text})"),
                         make_order("<=", value, high, f"({value.text} <= {high.text})"))

    def check_order(self, node: Node, pos: int) -> None:
        """``checkLessThanOperand``: literals must be numbers, conditions are refused."""
        if node.kind == CONST:
            if node.jtype in (T_INT, T_LONG, T_DOUBLE):
                return
            raise self.fail(f"value {node.text} cannot be compared", pos)
        if node.is_boolean:
            raise self.fail(f"value {node.text} cannot be compared", pos)

    def check_equal(self, left: Node, right: Node, pos: int) -> None:
        for n in (left, right):
            if n.kind == CONST and n.jtype == T_NULL:
                raise self.fail(f"{n.text} cannot be compared", pos)
        if left.kind == CONST and right.kind == CONST and left.is_boolean and not right.is_boolean:
            raise self.fail(f"{left.text} cannot be compared with {right.text}", pos)

    def unary(self) -> Node:
        lx = self.lx
        tok = lx.peek()
        if tok.kind == "+":
            lx.take()
            return self.unary()
        if tok.kind == "-":
            lx.take()
            operand = self.unary()
            return negate(operand, f"(- {operand.text})")
        if tok.kind == "NOT":
            lx.take()
            pos = lx.peek().pos
            operand = self.as_boolean(self.unary(), pos)
            return make_not(operand, f"(NOT {operand.text})")
        return self.primary()

    def primary(self) -> Node:
        lx = self.lx
        tok = lx.take()
        k = tok.kind
        if k == "ID":
            return prop_node(tok.text)
        if k == "(":
            node = self.or_()
            self.expect(")", "')'")
            return node
        if k == "STR":
            s = tok.text[1:-1].replace("''", "'")
            return value_node(CONST, T_STR, s, tok.text)
        if k == "INT":
            digits = tok.text.rstrip("lL")
            v = int(digits)
            if v > I64_MAX:
                raise self.fail(f"number {tok.text} is out of the long range", tok.pos)
            return value_node(CONST, T_INT if v <= I32_MAX else T_LONG, v, tok.text)
        if k == "FLOAT":
            v = float(tok.text)
            if v > 1.7976931348623157e308:
                raise self.fail(f"{tok.text} is greater than 1.7976931348623157E308", tok.pos)
            if v < DOUBLE_MIN_VALUE:
                raise self.fail(f"{tok.text} is less than 4.9E-324", tok.pos)
            return value_node(CONST, T_DOUBLE, v, tok.text)
        if k == "TRUE":
            return value_node(CONST, T_BOOL, True, "TRUE")
        if k == "FALSE":
            return value_node(CONST, T_BOOL, False, "FALSE")
        if k == "NULL":
            return value_node(CONST, T_NULL, None, "NULL")
        raise self.fail(f"unexpected {tok.describe()}", tok.pos)

    def string(self) -> str:
        tok = self.expect("STR", "a string literal")
        return tok.text[1:-1].replace("''", "'")


# ---------------------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------------------
class Sql92Filter:
    """A compiled selector. ``matches`` is what a broker uses; ``evaluate`` exposes the three-valued result."""

    __slots__ = ("expression", "_fn")

    def __init__(self, expression: str, fn: Callable[[Mapping[str, str]], bool | None]) -> None:
        self.expression = expression
        self._fn = fn

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """TRUE/FALSE/None (unknown); raises Sql92EvalError where Java's evaluation throws."""
        return self._fn(properties)

    def matches(self, properties: Mapping[str, str]) -> bool:
        """True only when the selector evaluates to TRUE; unknown and evaluation errors do not match."""
        try:
            return self._fn(properties) is True
        except Exception:  # Java: any Throwable while evaluating -> not matched
            return False

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


def compile_sql92(text: str) -> Sql92Filter:
    """Compile a SQL92 selector; raises Sql92SyntaxError (naming line and column) when it is not valid."""
    if text is None:
        raise Sql92SyntaxError("no expression", "", 0)
    node = _Parser(text).selector()
    return Sql92Filter(text, node.fn)
