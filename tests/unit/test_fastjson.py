"""mq.common.fastjson: fastjson's dialect in (PROTOCOL.md §6.0) and both key forms out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.common.fastjson import MAX_DEPTH, FastJsonDecodeError, ObjectKey, dumps, freeze, loads
from mq.errors import LocalProtocolError, RemoteProtocolError


def test_standard_json_takes_the_orjson_path():
    assert loads(b'{"a":[1,2.5,"x",true,null]}') == {"a": [1, 2.5, "x", True, None]}
    assert loads('{"0":"q"}') == {"0": "q"}


def test_unquoted_integer_keys():
    text = b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911",-3:"x"}}'
    assert loads(text) == {"brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911", -3: "x"}}


def test_object_keys_become_hashable_object_keys():
    text = (b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5},'
            b'{"topic":"T","queueId":1,"brokerName":"b"}:{"brokerOffset":6}}}')
    table = loads(text)["offsetTable"]
    k0 = ObjectKey.from_dict({"topic": "T", "brokerName": "b", "queueId": 0})
    assert table[k0] == {"brokerOffset": 5}
    k1 = next(k for k in table if k.get("queueId") == 1)
    assert k1.as_dict() == {"brokerName": "b", "queueId": 1, "topic": "T"}
    assert sorted(table) == [k0, k1] and hash(k0) == hash(ObjectKey.from_dict(k0.as_dict()))


def test_object_key_hook():
    got = loads(b'{{"a":1}:2}', object_key=lambda d: ("custom", d["a"]))
    assert got == {("custom", 1): 2}


def test_nested_object_key_values_frozen():
    key = next(iter(loads(b'{{"a":[1,{"b":2}],"c":{"d":null}}:0}')))
    assert key.as_dict() == {"a": [1, {"b": 2}], "c": {"d": None}}
    assert freeze({"x": [1, 2]}) == ObjectKey((("x", (1, 2)),))


def test_trailing_newline_whitespace_and_identifier_keys():
    assert loads(b'{0:"a"}\n') == {0: "a"}
    assert loads(' { a : 1 , "b" : [ ] , c_d$ : { } }\r\n') == {"a": 1, "b": [], "c_d$": {}}


def test_cpp_empty_member_value_reads_as_null():
    assert loads(b'{"mqTable":}') == {"mqTable": None}
    assert loads(b'{"a":,"b":1}') == {"a": None, "b": 1}


def test_strings_with_escapes_in_fallback_path():
    assert loads(b'{0:"caf\\u00e9\\n\\"q\\""}') == {0: 'café\n"q"'}
    assert loads('{0:"日本"}'.encode()) == {0: "日本"}


def test_numbers_in_fallback_path():
    assert loads(b'{0:-12,1:1.5,2:2e3,3:12345678901234567890}') == {0: -12, 1: 1.5, 2: 2000.0,
                                                                    3: 12345678901234567890}


@pytest.mark.parametrize("bad", [
    b"", b"{", b"{0:}x", b'{0:"a"', b"[1,", b"[1 2]", b"{0 1}", b"nul", b'{0:"a"}}', b"\xff\xfe",
    b'{"a":"\x01"', b'{0:"\\x"}', b'{[1]:2}', b'{{"a":1}:2', b"{:1}", b"@",
])
def test_garbage_raises_fastjson_decode_error(bad):
    with pytest.raises(FastJsonDecodeError) as info:
        loads(bad)
    assert isinstance(info.value, RemoteProtocolError)


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(FastJsonDecodeError):
        loads(b"{0:" * (MAX_DEPTH + 10) + b"1" + b"}" * (MAX_DEPTH + 10))
    with pytest.raises(FastJsonDecodeError):
        loads(b"[" * 100_000)


def test_nesting_up_to_the_limit_is_read():
    assert loads(b"{0:" * (MAX_DEPTH - 1) + b"1" + b"}" * (MAX_DEPTH - 1)) is not None
    assert loads(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None


def test_huge_integers_are_a_decode_error_not_a_crash():
    # Python refuses to convert integers of more than 4300 digits (ValueError): the reader must say "bad JSON"
    with pytest.raises(FastJsonDecodeError, match="digits"):
        loads(b"{0:" + b"9" * 5000 + b"}")
    assert loads(b"{0:" + b"9" * 4000 + b"}") == {0: int("9" * 4000)}


def test_object_keys_at_any_position_and_empty_ones():
    assert loads(b'{1:2,{"a":1}:3,b:{{}:[{}]}}') == {1: 2, ObjectKey((("a", 1),)): 3, "b": {ObjectKey(()): [{}]}}


def test_loads_rejects_non_text_input():
    with pytest.raises(FastJsonDecodeError):
        loads(12)  # type: ignore[arg-type]


def test_dumps_standard_and_fastjson_int_keys():
    obj = {"brokerAddrs": {0: "a", 1: "b"}, "name": "x"}
    assert dumps(obj) == b'{"brokerAddrs":{"0":"a","1":"b"},"name":"x"}'
    assert dumps(obj, fastjson_int_keys=True) == b'{"brokerAddrs":{0:"a",1:"b"},"name":"x"}'
    assert dumps({"a": 1}, fastjson_int_keys=True) == b'{"a":1}'


def test_dumps_object_keys_in_both_modes():
    key = ObjectKey.from_dict({"topic": "T", "brokerName": "b", "queueId": 0})
    expected = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}'
    assert dumps({"offsetTable": {key: 5}}) == expected
    assert dumps({"offsetTable": {key: 5}}, fastjson_int_keys=True) == expected


def test_dumps_values_with_to_json_value_and_sets():
    class V:
        def to_json_value(self):
            return {"v": 1}
    assert json.loads(dumps({"a": V(), "s": {3}})) == {"a": {"v": 1}, "s": [3]}
    assert dumps({1: V()}) == b'{"1":{"v":1}}'


def test_dumps_rejects_unwritable_values():
    with pytest.raises(LocalProtocolError):
        dumps({1: object()})


def test_dumps_odd_keys():
    assert loads(dumps({True: 1, None: 2, 1.5: 3})) == {"true": 1, "null": 2, "1.5": 3}


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------
scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=12) | \
    st.floats(allow_nan=False, allow_infinity=False)
object_keys = st.dictionaries(st.text(max_size=6), st.integers(-2**63, 2**63 - 1) | st.text(max_size=6),
                              max_size=3).map(ObjectKey.from_dict)
keys = st.text(max_size=8) | st.integers(-2**31, 2**31 - 1) | object_keys
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=20)


def _standardize(v):
    """What a standard-JSON round trip gives back: integer keys as text."""
    if isinstance(v, dict):
        return {(str(k) if isinstance(k, int) else k): _standardize(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_standardize(x) for x in v]
    return v


def _keys_unique_after_standardizing(v) -> bool:
    if isinstance(v, dict):
        ks = [str(k) if isinstance(k, int) else k for k in v]
        return len(ks) == len(set(ks)) and all(_keys_unique_after_standardizing(x) for x in v.values())
    if isinstance(v, list):
        return all(_keys_unique_after_standardizing(x) for x in v)
    return True


@settings(max_examples=150, deadline=None)
@given(values)
def test_fastjson_form_round_trips(value):
    assert loads(dumps(value, fastjson_int_keys=True)) == value


@settings(max_examples=150, deadline=None)
@given(values)
def test_standard_form_round_trips_with_text_keys(value):
    if _keys_unique_after_standardizing(value):
        assert loads(dumps(value)) == _standardize(value)


@settings(max_examples=150, deadline=None)
@given(st.recursive(scalars, lambda i: st.lists(i, max_size=4) | st.dictionaries(st.text(max_size=8), i,
                                                                                  max_size=4), max_leaves=20))
def test_standard_json_matches_stdlib(value):
    assert loads(dumps(value)) == json.loads(json.dumps(value))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80) | st.text(alphabet='{}[]:,"0123456789-.eE truefalsn\\u\n', max_size=60))
def test_garbage_only_raises_fastjson_decode_error(data):
    try:
        loads(data)
    except FastJsonDecodeError:
        pass
