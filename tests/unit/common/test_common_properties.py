import pytest

from mq.common import properties as P
from mq.common.message import Message


def test_encode_java_form_no_trailing_separator_none_skipped():
    assert P.encode_properties({"TAGS": "a", "KEYS": "k1 k2", "X": None}) == "TAGS\x01a\x02KEYS\x01k1 k2"
    assert P.encode_properties({}) == ""
    assert P.encode_properties(None) == ""


def test_decode_tolerant():
    assert P.decode_properties("TAGS\x01a\x02KEYS\x01k\x02") == {"TAGS": "a", "KEYS": "k"}  # C/Node trailing
    assert P.decode_properties("A\x01x\x01y") == {"A": "x\x01y"}  # first 0x01 splits
    assert P.decode_properties("A\x01\x02B\x01v") == {"B": "v"}  # empty value dropped (Java)
    assert P.decode_properties("\x01v\x02ab") == {}  # empty name, no separator
    assert P.decode_properties("") == {}
    assert P.decode_properties_bytes("K\x01中".encode()) == {"K": "中"}


def test_split_keys():
    assert P.split_keys("a  b c") == ["a", "b", "c"]
    assert P.split_keys(None) == []


def test_message_accessors():
    m = Message("T", b"x")
    m.tags = "TagA"
    m.keys = ["k1", "k2"]
    m.delay_time_level = 3
    m.wait_store_msg_ok = False
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3", "WAIT": "false"}
    assert m.key_list == ["k1", "k2"] and m.delay_time_level == 3 and not m.wait_store_msg_ok
    m.tags = None
    assert m.tags is None and "TAGS" not in m.properties
    assert P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY" and P.KEYS in P.SYSTEM_PROPERTY_NAMES


@pytest.mark.parametrize("splice", [P.splice_properties, P.py_splice_properties])
@pytest.mark.parametrize("text,want", [
    ("KEYS\x01k\x02WAIT\x01true\x02TAGS\x01t\x02", "KEYS\x01k\x02TAGS\x01t\x02CLUSTER\x01c"),
    ("WAIT\x01true", "CLUSTER\x01c"),
    ("KEYS\x01k\x02WAIT\x01true", "KEYS\x01k\x02CLUSTER\x01c"),
    ("XWAIT\x01a\x02WAIT\x01b", "XWAIT\x01a\x02CLUSTER\x01c"),  # only a pair that starts with WAIT goes
    ("WAIT\x01a\x02WAIT\x01b", "WAIT\x01b\x02CLUSTER\x01c"),  # only the first
    ("KEYS\x01k", "KEYS\x01k\x02CLUSTER\x01c"),
    ("", "CLUSTER\x01c"),
    (None, "CLUSTER\x01c"),
])
def test_splice_drops_the_first_pair_and_appends_one(splice, text, want):
    assert splice(text, "WAIT", "CLUSTER\x01c") == want
