import pytest

from mq.common.tags import SUB_ALL, java_hash_code, parse_subscription, tags_code, to_int32


@pytest.mark.parametrize("tag,expected", [
    ("TagA", 2598919), ("TagB", 2598920), ("*", 42), ("tag-1", 110118590), ("中文", 646394),
    ("😀", 1772899), ("polygenelubricants", -2147483648), ("Aa", 2112), ("BB", 2112), ("", 0),
])
def test_java_hash_code_vectors(tag, expected):
    assert java_hash_code(tag) == expected


def _reference(s: str) -> int:
    h = 0
    raw = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize("s", ["a" * 300, "Ω" * 50 + "x", "x" * 2000, "k😀" * 40])
def test_long_strings_match_horner(s):
    assert java_hash_code(s) == _reference(s)


def test_tags_code_sign_extends_and_absent_is_zero():
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("polygenelubricants") == -2147483648  # negative int64 after widening
    assert to_int32(0xFFFFFFFF) == -1
    assert to_int32(2**31) == -(2**31)


@pytest.mark.parametrize("expr,tags", [
    ("TagA || TagB", {"TagA", "TagB"}), ("TagA||", {"TagA"}), (" ||TagA", {"TagA"}), ("a|b", {"a|b"}),
])
def test_parse_subscription(expr, tags):
    sd = parse_subscription("T", expr)
    assert sd.tags_set == tags
    assert sd.code_set == {java_hash_code(t) for t in tags}
    assert sd.sub_string == expr
    assert sd.matches_code(java_hash_code(next(iter(tags))))
    assert not sd.matches_code(java_hash_code("other"))


@pytest.mark.parametrize("expr", [None, "", "*"])
def test_parse_subscription_all(expr):
    sd = parse_subscription("T", expr)
    assert sd.sub_string == SUB_ALL and sd.is_all
    assert not sd.tags_set and not sd.code_set
    assert sd.matches_code(12345) and sd.matches_tags(None)


def test_only_separators_matches_nothing_on_broker():
    sd = parse_subscription("T", "||")
    assert sd.sub_string == "||" and not sd.tags_set
    assert not sd.matches_code(0)


def test_client_refilter_is_exact_and_case_sensitive():
    sd = parse_subscription("T", "TagA")
    assert sd.matches_tags("TagA")
    assert not sd.matches_tags("taga")
    assert not sd.matches_tags(None)
    assert not sd.matches_tags(" TagA")
