"""The typed headers' C fast path (mq/protocol/_codec.c: header_from_ext, header_to_ext) reads and writes every
header as the generated Python code does (py_from_ext, py_to_ext): same header or same error, same extFields."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.protocol import header_codec as hc
from mq.protocol import headers as h
from mq.protocol import pop_headers

pytestmark = pytest.mark.skipif(hc._c_spec is None, reason="the C codec is not built (no C compiler at install) "
                                "or MQ_PURE_PYTHON is set")

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALL = sorted({c for mod in (h, pop_headers) for c in vars(mod).values()
              if isinstance(c, type) and issubclass(c, hc.Header) and c is not hc.Header}, key=lambda c: c.__name__)

#: what a field's text can be: Java numbers at and past the int and long bounds, signs, other digits, spaces
NUMBERS = ["0", "-0", "+7", "-1", "007", "2147483647", "2147483648", "-2147483648", "-2147483649",
           "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
           "123456789", "1234567890", "123456789012345678", "1234567890123456789", "00000000000000000000000001",
           "1" * 30, "\u0661\u0662", "１２", "1_0", " 1", "1 ", "+", "-", "", "0x10", "1.5", "1e3"]
BOOLS = ["true", "TRUE", "True", "tRuE", "1", "0", "false", "yes", "t", "truE ", "\u0131rue", "TRUE\u0307"]
values = st.one_of(st.sampled_from(NUMBERS), st.sampled_from(BOOLS), st.text(max_size=12), st.none(),
                   st.integers(-2**64, 2**64), st.booleans(), st.floats(allow_nan=False))


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return ("raised", type(exc), str(exc))


#: mostly what a field of each kind usually carries, sometimes anything
SHAPED = {str: st.text(max_size=12), int: st.sampled_from(NUMBERS), bool: st.sampled_from(BOOLS),
          float: st.sampled_from(["1.5", "2", "x", ""])}


@st.composite
def ext_for(draw, cls):
    ext = {}
    for f in cls.FIELDS:
        if draw(st.integers(0, 19)) == 0:
            continue  # absent
        ext[f.wire] = draw(values) if draw(st.integers(0, 9)) == 0 else draw(SHAPED[f.kind])
    for k in draw(st.lists(st.text(max_size=3), max_size=2)):
        ext[k] = draw(values)
    return ext


@SETTINGS
@given(st.data())
def test_from_ext_matches_python(data):
    cls = data.draw(st.sampled_from(ALL))
    ext = data.draw(ext_for(cls) | st.none() | st.just({}))
    c, py = _outcome(cls.from_ext, ext), _outcome(cls.py_from_ext, ext)
    assert c == py
    if c[0] == "ok":
        assert type(c[1]) is cls
        assert [type(getattr(c[1], f.name)) for f in dataclasses.fields(cls)] == \
               [type(getattr(py[1], f.name)) for f in dataclasses.fields(cls)]


@SETTINGS
@given(st.data())
def test_to_ext_matches_python(data):
    cls = data.draw(st.sampled_from(ALL))
    kwargs = {f.attr: data.draw(values) if data.draw(st.integers(0, 9)) == 0 else
              data.draw(st.none() | st.just(1 << 62) | st.just(-5) | st.booleans() if f.kind in (int, bool) else st.text())
              for f in cls.FIELDS}
    hd = cls(**kwargs)
    assert _outcome(hd.to_ext) == _outcome(hd.py_to_ext)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_usual_headers_round_trip_through_c(cls):
    sample = {}
    for i, f in enumerate(cls.FIELDS):
        sample[f.attr] = {str: f"v{i}", int: 1000 + i, bool: i % 2 == 0, float: i + 0.5}[f.kind]
    hd = cls(**sample)
    ext = hd.to_ext()
    assert ext == hd.py_to_ext()
    assert list(ext) == list(hd.py_to_ext())
    assert cls.from_ext(ext) == cls.py_from_ext(ext) == hd


def test_a_subclass_is_read_as_itself():
    @dataclasses.dataclass(slots=True)
    class Sub(h.SendMessageResponseHeader):
        pass

    got = Sub.from_ext({"msgId": "m", "queueId": "1", "queueOffset": "2"})
    assert type(got) is Sub and got.queue_offset == 2
