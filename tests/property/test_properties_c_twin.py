"""The C properties reader (mq/common/_properties.c) gives the same dict as its Python twin, key order included."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mq.common import properties as P

pytestmark = pytest.mark.skipif(P.decode_properties is P.py_decode_properties,
                                reason="the C reader is not built (no C compiler at install) or MQ_PURE_PYTHON is set")

#: mostly separators and short names, so segments are empty, nameless, valueless and repeated
pieces = st.lists(st.sampled_from(["\x01", "\x02", "a", "TAGS", "é", "\U0001d11e", "", " ", "\x00"]) | st.text(max_size=4),
                  max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(pieces)
@example("a\x01\x01b\x02a\x01c")  # the first \x01 splits; a later name wins
@example("\x01b\x02a\x01\x02\x02x\x01y\x02")  # no name, no value, empty segments, a trailing separator
@example("\ud800\x01\udfff")  # lone surrogates are text like any other
def test_decode_matches_python(text):
    got = P.decode_properties(text)
    want = P.py_decode_properties(text)
    assert got == want and list(got) == list(want)


def test_none_and_empty_give_an_empty_dict():
    assert P.decode_properties(None) == {} and P.decode_properties("") == {}


@settings(max_examples=500, deadline=None)
@given(pieces, st.sampled_from(["WAIT", "a", "é", "", "\U0001d11e"]), st.sampled_from(["CLUSTER\x01c", "é\x01\U0001d11e", ""]))
@example("WAIT\x01true", "WAIT", "CLUSTER\x01c")  # the only pair: nothing kept, no separator before the new one
@example("aWAIT\x01x\x02WAIT\x01true\x02b\x01c", "WAIT", "CLUSTER\x01c")  # a name that only ends in WAIT stays
@example("b\x01c\x02WAIT\x01true", "WAIT", "CLUSTER\x01c")  # cut to the end after a separator
@example("b\x01c", "WAIT", "CLUSTER\x01c")  # nothing to cut: a separator before the new pair
@example("é\x01\U0001d11e", "é", "CLUSTER\x01c")  # the cut takes every wide character: the result is ASCII
@example("a\x01b\x02é\x01é", "é", "x\x01y")  # and every non-ASCII one
@example("ÿ\x01x\x02a\x01b", "ÿ", "CLUSTER\x01c")  # an ASCII rest after a cut Latin-1 pair
def test_splice_matches_python(text, name, pair):
    # str equality compares the kinds first: a result wider than its characters (not canonical) fails here
    assert P.splice_properties(text, name, pair) == P.py_splice_properties(text, name, pair)


def test_splice_of_none_and_argument_errors():
    assert P.splice_properties(None, "WAIT", "CLUSTER\x01c") == "CLUSTER\x01c"
    from mq.common import _properties
    with pytest.raises(TypeError):
        _properties.splice("a", "b")
    with pytest.raises(TypeError):
        _properties.splice(b"a", "b", "c")
