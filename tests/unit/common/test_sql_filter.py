"""SQL92 selector compiler (mq.common.sql_filter): FEATURES.md §9.2 grammar rows, Java's null and type rules,
comments, errors with positions; hypothesis checks against an independent reference evaluator and algebraic
laws."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.common.sql_filter import (Sql92EvalError, Sql92SyntaxError, compile_sql92, java_double_valueof,
                                  java_int_valueof, java_long_valueof)
from mq.errors import MQError


def m(expr: str, **props: str) -> bool:
    return compile_sql92(expr).matches(props)


def ev(expr: str, **props: str):
    return compile_sql92(expr).evaluate(props)


# ---------------------------------------------------------------------------------------------------------
# §9.2 grammar, row by row
# ---------------------------------------------------------------------------------------------------------
class TestLogic:
    def test_and_or_not(self):
        assert m("a = 1 AND b = 2", a="1", b="2")
        assert not m("a = 1 AND b = 2", a="1", b="3")
        assert m("a = 1 OR b = 2", a="0", b="2")
        assert not m("a = 1 OR b = 2", a="0", b="0")
        assert m("NOT a = 'x'", a="y") is False  # NOT binds to the operand: (NOT a) = 'x'
        assert m("NOT (a = 'x')", a="y")
        assert not m("NOT (a = 'x')", a="x")

    def test_keywords_case_insensitive_identifiers_not(self):
        assert m("a = 1 and B = 2 oR c = 3", a="1", B="2")
        assert not m("a = 1 and b = 2", a="1", B="2")  # identifiers are property names: case-sensitive
        assert m("x iS nUlL")
        assert m("a bEtWeEn 1 AnD 3", a="2")
        assert m("a In ('x')", a="x")
        assert m("tRuE")

    def test_parentheses_and_precedence(self):
        # AND binds tighter than OR
        assert m("a = 1 OR b = 1 AND c = 1", a="1")
        assert not m("(a = 1 OR b = 1) AND c = 1", a="1")
        assert m("((a = 1))", a="1")

    def test_three_valued_logic(self):
        assert ev("a = 1 AND b = 1", b="1") is None  # unknown AND TRUE
        assert ev("a = 1 AND b = 1", b="2") is False  # unknown AND FALSE
        assert ev("a = 1 OR b = 1", b="1") is True
        assert ev("a = 1 OR b = 1", b="2") is None
        assert ev("NOT (a = 1)") is None
        assert not m("NOT (a = 1)")


class TestComparison:
    @pytest.mark.parametrize("expr,props,want", [
        ("a = 5", {"a": "5"}, True), ("a = 5", {"a": "6"}, False),
        ("a <> 5", {"a": "6"}, True), ("a <> 5", {"a": "5"}, False),
        ("a > 5", {"a": "6"}, True), ("a > 5", {"a": "5"}, False),
        ("a >= 5", {"a": "5"}, True), ("a >= 5", {"a": "4"}, False),
        ("a < 5", {"a": "4"}, True), ("a < 5", {"a": "5"}, False),
        ("a <= 5", {"a": "5"}, True), ("a <= 5", {"a": "6"}, False),
        ("a = 'abc'", {"a": "abc"}, True), ("a = 'abc'", {"a": "ABC"}, False),
        ("a <> 'abc'", {"a": "abd"}, True),
        ("5 < a", {"a": "6"}, True), ("5 = a", {"a": "5"}, True),
        ("a > b", {"a": "10", "b": "9"}, True),  # two strings compare as doubles, not text
        ("a < b", {"a": "10", "b": "9"}, False),
    ])
    def test_operators(self, expr, props, want):
        assert m(expr, **props) is want

    def test_between(self):
        assert m("a BETWEEN 1 AND 3", a="1") and m("a BETWEEN 1 AND 3", a="3") and m("a BETWEEN 1 AND 3", a="2")
        assert not m("a BETWEEN 1 AND 3", a="0") and not m("a BETWEEN 1 AND 3", a="4")
        assert m("a NOT BETWEEN 1 AND 3", a="4") and m("a NOT BETWEEN 1 AND 3", a="0")
        assert not m("a NOT BETWEEN 1 AND 3", a="2")
        assert ev("a BETWEEN 1 AND 3") is None and ev("a NOT BETWEEN 1 AND 3") is None
        assert m("a BETWEEN 1.5 AND 2.5", a="2")
        assert m("a BETWEEN -3 AND -1", a="-2")

    def test_in(self):
        assert m("a IN ('x', 'y')", a="y")
        assert not m("a IN ('x', 'y')", a="z")
        assert m("a NOT IN ('x', 'y')", a="z")
        assert not m("a NOT IN ('x', 'y')", a="x")
        assert ev("a IN ('x')") is None and ev("a NOT IN ('x')") is None
        assert m("a IN ('1','2','3','4','5','6')", a="6")  # Java switches to a HashSet from 5 elements

    def test_in_takes_string_literals_only(self):
        with pytest.raises(Sql92SyntaxError):
            compile_sql92("a IN (1, 2)")
        with pytest.raises(Sql92SyntaxError):
            compile_sql92("a IN ()")

    def test_is_null(self):
        assert m("a IS NULL") and not m("a IS NULL", a="1")
        assert m("a IS NOT NULL", a="1") and not m("a IS NOT NULL")
        assert ev("(a = 1) IS NULL") is True  # a condition that is unknown IS NULL

    def test_unary(self):
        assert m("a = -5", a="-5")
        assert m("a = +5", a="5")
        assert m("a = - -5", a="5")
        assert m("a > -1.5", a="-1")
        assert ev("-a = 1", a="1") is None  # negating a string gives null
        assert m("a = -2147483648", a="-2147483648")


class TestLiterals:
    def test_integers(self):
        assert m("a = 10", a="10") and m("a = 10L", a="10") and m("a = 10l", a="10") and m("a = 0", a="0")
        assert m("a = 9223372036854775807", a="9223372036854775807")
        with pytest.raises(Sql92SyntaxError, match="long range"):
            compile_sql92("a = 9223372036854775808")

    def test_int_literal_parses_the_property_as_int(self):
        # Integer.valueOf(property): a decimal text or one beyond the int range is an evaluation error
        assert not m("a = 5", a="5.0")
        assert not m("a > 3", a="3000000000")
        assert m("a > 3000000000", a="3000000001")  # a Long literal: Long.valueOf
        assert m("a = 5L", a="5")  # 5L still fits an Integer: Java makes it one

    def test_floats(self):
        assert m("a = 1.5", a="1.5") and m("a = 1.5E2", a="150") and m("a = 15e-1", a="1.5")
        assert m("a = .5", a="0.5") and m("a = 5.", a="5") and m("a < 1E3", a="999.9")
        assert m("a = 1.5", a=" 1.5 ")  # Double.valueOf trims
        assert m("a = 1.5", a="1.5d") and m("a = 1.5", a="1.5F")
        assert m("a > 1.5", a="NaN")  # Double.compare: NaN above everything
        assert not m("a = 1.5", a="1,5")
        with pytest.raises(Sql92SyntaxError, match="less than"):
            compile_sql92("a > 0.0")  # Java refuses literals below Double.MIN_VALUE, zero included
        with pytest.raises(Sql92SyntaxError, match="greater than"):
            compile_sql92("a > 1e400")

    def test_strings(self):
        assert m("a = 'it''s'", a="it's")
        assert m("a = ''", a="")
        assert m("a = 'x y'", a="x y")
        assert m("a = 'ünï'", a="ünï")
        assert m("a = 'line\nbreak'", a="line\nbreak")

    def test_booleans_and_null(self):
        assert m("TRUE") and not m("FALSE") and not m("NULL")
        assert m("a = TRUE", a="true") and m("a = TRUE", a="TRUE") and not m("a = TRUE", a="yes")
        assert m("a = FALSE", a="anything")  # Boolean.valueOf is false for any other text
        assert not m("TRUE = a", a="true")  # Java casts the Boolean to String: ClassCastException
        assert m("TRUE = TRUE") and m("1 = 1") and not m("1 = TRUE")

    def test_identifiers(self):
        assert m("_a$1 = 'x'", **{"_a$1": "x"})
        assert m("$x = 'y'", **{"$x": "y"})
        assert m("TAGS = 'TagA'", TAGS="TagA")
        assert m("andy = 1", andy="1")  # a keyword prefix is an identifier
        with pytest.raises(Sql92SyntaxError, match="lexical"):
            compile_sql92("a.b = 1")


class TestComments:
    def test_line_comment(self):
        assert m("a = 1 -- the a\nAND b = 2", a="1", b="2")
        assert m("-- lead\na = 1\n", a="1")
        assert m("a = 1 -- trailing\r\n", a="1")

    def test_line_comment_needs_its_line_end(self):
        # JavaCC: without a line end "--" is two minus signs, which here trail a complete selector
        with pytest.raises(Sql92SyntaxError):
            compile_sql92("a = 1 OR --x")
        assert m("a = 1 --x", a="1")

    def test_block_comment(self):
        assert m("/* c */ a /* = 2 */ = /**/ 1 /* multi\nline */", a="1")
        assert m("a = 1 /*/ still comment */", a="1")
        with pytest.raises(Sql92SyntaxError, match="lexical"):
            compile_sql92("a = 1 AND /* open")


class TestNotSupported:
    def test_no_like(self):
        # 4.9.4 has no LIKE: "LIKE" lexes as an identifier that ends the selector after ``a``, which as a
        # condition is a string cast to Boolean: never TRUE
        f = compile_sql92("a LIKE 'x%'")
        assert not f.matches({"a": "xyz"}) and not f.matches({})
        assert ev("NOT a LIKE 'x%' AND b = 1", a="x", b="2") is True  # everything from LIKE on is ignored

    def test_no_arithmetic_or_bang(self):
        with pytest.raises(Sql92SyntaxError):
            compile_sql92("a != 1")
        with pytest.raises(Sql92SyntaxError):
            compile_sql92("a = = 1")


# ---------------------------------------------------------------------------------------------------------
# null semantics (Java doCreateEqual and friends)
# ---------------------------------------------------------------------------------------------------------
class TestNulls:
    def test_equal_nulls_are_asymmetric(self):
        assert ev("a = 'x'") is None
        assert ev("'x' = a") is False
        assert ev("a <> 'x'") is None
        assert ev("'x' <> a") is True
        assert ev("a = b") is True  # both null

    def test_order_with_null(self):
        for op in (">", ">=", "<", "<="):
            assert ev(f"a {op} 1") is None
            assert ev(f"1 {op} a") is None

    def test_bare_property(self):
        assert ev("a") is None
        assert ev("a", a="true") is False
        assert ev("NOT a", a="x") is True
        assert ev("a OR b = 1", b="1") is True


class TestConversion:
    def test_errors_fail_the_whole_selector(self):
        f = compile_sql92("a = 5 OR b = 1")
        assert not f.matches({"a": "x", "b": "1"})  # the error on the left wins
        with pytest.raises(Sql92EvalError):
            f.evaluate({"a": "x", "b": "1"})
        assert compile_sql92("b = 1 OR a = 5").matches({"a": "x", "b": "1"})  # short-circuit
        assert not m("a > b", a="x", b="1")
        assert not m("a > 5", a="")

    def test_java_parsers(self):
        assert java_int_valueof("+12") == 12 and java_int_valueof("-0") == 0
        assert java_int_valueof("٣") == 3  # Character.digit takes any Unicode decimal digit
        for bad in (" 1", "1 ", "1_0", "0x10", "", "+", "2147483648"):
            with pytest.raises(Sql92EvalError):
                java_int_valueof(bad)
        assert java_long_valueof("2147483648") == 2147483648
        with pytest.raises(Sql92EvalError):
            java_long_valueof("9223372036854775808")
        assert java_double_valueof("\t1e3 ") == 1000.0
        assert java_double_valueof("-Infinity") == float("-inf")
        assert java_double_valueof("0x1p3") == 8.0
        assert java_double_valueof("1.") == 1.0 and java_double_valueof(".5f") == 0.5
        for bad in ("1e", "inf", "nan", "1.5x", "", "--1", "Infinityd"):
            with pytest.raises(Sql92EvalError):
                java_double_valueof(bad)

    def test_negative_zero_and_long_double(self):
        assert m("a < b", a="-0", b="0")  # Double.compare: -0.0 < 0.0
        assert m("a = 1.0", a="1")
        assert m("a > 9007199254740992", a="9007199254740993")  # a Long literal: Long.valueOf, exact
        assert m("a = 9007199254740992.0", a="9007199254740993")  # Double: both round to 2^53


# ---------------------------------------------------------------------------------------------------------
# compile errors
# ---------------------------------------------------------------------------------------------------------
class TestErrors:
    @pytest.mark.parametrize("expr,line,col", [
        ("a >", 1, 4), ("(a = 1", 1, 7), ("a = 1 AND", 1, 10), ("a ! 1", 1, 3), ("a = 'x", 1, 5),
        ("a = 1\nAND b IS x", 2, 10), ("", 1, 1), ("a IN 'x'", 1, 6),
    ])
    def test_syntax_error_names_position(self, expr, line, col):
        with pytest.raises(Sql92SyntaxError) as ei:
            compile_sql92(expr)
        err = ei.value
        assert isinstance(err, MQError)
        assert (err.line, err.column) == (line, col)
        assert f"line {line}, column {col}" in str(err)

    @pytest.mark.parametrize("expr,what", [
        ("a > 'x'", "cannot be compared"), ("a >= TRUE", "cannot be compared"), ("a < NULL", "cannot be compared"),
        ("(a = 1) > 2", "cannot be compared"), ("a = NULL", "cannot be compared"), ("NULL = a", "cannot be compared"),
        ("TRUE = 1", "cannot be compared with"), ("a BETWEEN 3 AND 1", "must less than or equal"),
        ("a BETWEEN 'a' AND 'b'", "cannot be compared"), ("a BETWEEN 1 AND NULL", "can not be null"),
        ("5", "boolean value"), ("'x'", "boolean value"), ("-a", "boolean value"), ("a = 1 AND 5", "boolean value"),
        ("NOT 5", "boolean value"), ("1 IN ('x')", "property for IN"), ("(a = 1) IN ('x')", "property for IN"),
    ])
    def test_semantic_errors(self, expr, what):
        with pytest.raises(Sql92SyntaxError, match=re.escape(what)):
            compile_sql92(expr)

    def test_trailing_tokens_are_ignored_as_javacc_does(self):
        assert m("a = 1 b c", a="1")
        assert m("a = 1)", a="1")
        with pytest.raises(Sql92SyntaxError):
            compile_sql92("a = 1 !")  # but the next token must still lex
        with pytest.raises(Sql92SyntaxError):
            compile_sql92("a = 1 NOT b")  # and NOT after an operand needs BETWEEN or IN


# ---------------------------------------------------------------------------------------------------------
# hypothesis: a tiny independent evaluator for a subset, and algebraic laws
# ---------------------------------------------------------------------------------------------------------
class Err(Exception):
    pass


NAMES = ["a", "b", "c"]
values = st.one_of(st.integers(-5, 5).map(str), st.sampled_from(["x", "y", "1.5", "", " 2", "2147483648"]))
props_st = st.dictionaries(st.sampled_from(NAMES), values).map(lambda d: {k: v for k, v in d.items() if v})


def _int_or_err(s: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", s) or not -2**31 <= int(s) < 2**31:
        raise Err
    return int(s)


def leaf():
    name = st.sampled_from(NAMES)
    num = st.integers(-4, 4)
    cmp_ = st.tuples(st.just("cmp"), name, st.sampled_from(["=", "<>", ">", ">=", "<", "<="]), num)
    eqs = st.tuples(st.just("eqs"), name, st.sampled_from(["x", "y", "1.5"]))
    in_ = st.tuples(st.just("in"), name, st.booleans(), st.lists(st.sampled_from(["x", "y", "1", "2"]), min_size=1,
                                                                    max_size=3))
    isn = st.tuples(st.just("isnull"), name, st.booleans())
    btw = st.tuples(st.just("between"), name, st.booleans(), num, num).filter(lambda t: t[3] <= t[4])
    return st.one_of(cmp_, eqs, in_, isn, btw)


exprs = st.recursive(leaf(), lambda kids: st.one_of(
    st.tuples(st.just("not"), kids), st.tuples(st.just("and"), kids, kids), st.tuples(st.just("or"), kids, kids)),
    max_leaves=8)


def render(e) -> str:
    k = e[0]
    if k == "cmp":
        return f"{e[1]} {e[2]} {e[3]}"
    if k == "eqs":
        return f"{e[1]} = '{e[2]}'"
    if k == "in":
        return f"{e[1]} {'NOT IN' if e[2] else 'IN'} ({', '.join(repr(v) for v in e[3])})"
    if k == "isnull":
        return f"{e[1]} IS {'NOT ' if e[2] else ''}NULL"
    if k == "between":
        return f"{e[1]} {'NOT BETWEEN' if e[2] else 'BETWEEN'} {e[3]} AND {e[4]}"
    if k == "not":
        return f"NOT ({render(e[1])})"
    return f"({render(e[1])}) {k.upper()} ({render(e[2])})"


def ref(e, p):
    """Reference semantics written from the JMS/Java rules, independently of the compiler."""
    k = e[0]
    if k == "cmp":
        v = p.get(e[1])
        if v is None:
            return None
        x = _int_or_err(v)
        op, c = e[2], e[3]
        return {"=": x == c, "<>": x != c, ">": x > c, ">=": x >= c, "<": x < c, "<=": x <= c}[op]
    if k == "eqs":
        v = p.get(e[1])
        return None if v is None else v == e[2]
    if k == "in":
        v = p.get(e[1])
        return None if v is None else ((v in e[3]) != e[2])
    if k == "isnull":
        return (p.get(e[1]) is None) != e[2]
    if k == "between":
        v = p.get(e[1])
        if v is None:
            return None
        x = _int_or_err(v)
        inside = e[3] <= x <= e[4]
        return inside != e[2]
    if k == "not":
        v = ref(e[1], p)
        return None if v is None else not v
    left = ref(e[1], p)
    if k == "and":
        if left is False:
            return False
        right = ref(e[2], p)
        if right is False:
            return False
        return None if left is None or right is None else True
    if left is True:
        return True
    right = ref(e[2], p)
    if right is True:
        return True
    return None if left is None or right is None else False


@settings(max_examples=200, deadline=None)
@given(exprs, props_st)
def test_agrees_with_reference(e, p):
    f = compile_sql92(render(e))
    try:
        want = ref(e, p)
    except Err:
        with pytest.raises(Sql92EvalError):
            f.evaluate(p)
        assert f.matches(p) is False
        return
    assert f.evaluate(p) is want
    assert f.matches(p) is (want is True)


def _outcome(f, p):
    try:
        return f.evaluate(p)
    except Sql92EvalError:
        return "error"


@settings(max_examples=150, deadline=None)
@given(exprs, exprs, props_st)
def test_algebraic_laws(e1, e2, p):
    a, b = render(e1), render(e2)
    same = [
        (f"NOT (NOT ({a}))", a),
        (f"NOT (({a}) AND ({b}))", f"(NOT ({a})) OR (NOT ({b}))"),
        (f"NOT (({a}) OR ({b}))", f"(NOT ({a})) AND (NOT ({b}))"),
    ]
    for x, y in same:
        assert _outcome(compile_sql92(x), p) == _outcome(compile_sql92(y), p), (x, y)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(NAMES), st.integers(-3, 3), st.integers(0, 4), props_st)
def test_between_is_ge_and_le(name, lo, width, p):
    hi = lo + width
    pairs = [(f"{name} BETWEEN {lo} AND {hi}", f"{name} >= {lo} AND {name} <= {hi}"),
             (f"{name} NOT BETWEEN {lo} AND {hi}", f"NOT ({name} BETWEEN {lo} AND {hi})"),
             (f"{name} NOT BETWEEN {lo} AND {hi}", f"{name} < {lo} OR {name} > {hi}")]
    for x, y in pairs:
        assert _outcome(compile_sql92(x), p) == _outcome(compile_sql92(y), p), (x, y)
