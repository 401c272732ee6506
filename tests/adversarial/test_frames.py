"""Frame-level garbage against both daemons: lengths that lie, truncated frames, unknown serialize types, headers
that are not JSON objects or carry the wrong types, binary headers whose inner lengths lie, garbage after a
valid frame, pipelined frames of registered and unregistered codes. After each example the rig's invariants
hold (both daemons alive and answering, the store verifies, nothing written outside the store)."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq.config import FrameLimits
from tests.adversarial import registry
from tests.adversarial.conftest import adv_settings
from tests.adversarial.rig import Rig
from tests.adversarial.wire import Peer, binary_header, frame, json_frame, json_header

EXAMPLES = 150
MAX_FRAME = FrameLimits().max_frame


def _valid(code: int = 28, opaque: int = 7) -> bytes:
    return json_frame(code, {}, opaque=opaque)


@st.composite
def garbage(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["random", "bad_length", "header_len", "serialize_type", "truncated",
                                 "valid_then_garbage", "json_not_object", "json_wrong_types", "binary_lies",
                                 "pipelined", "huge_header_claim", "empty_json_header"]))
    if kind == "random":
        return kind, draw(st.binary(min_size=1, max_size=2048))
    if kind == "bad_length":
        n = draw(st.sampled_from([-2**31, -1, 0, 1, 2, 3, 4, 5, MAX_FRAME, MAX_FRAME + 1, 2**31 - 1]))
        return kind, struct.pack(">i", n) + draw(st.binary(max_size=64))
    if kind == "header_len":
        body = draw(st.binary(max_size=32))
        hlen = draw(st.sampled_from([0, 1, 0xFFFFFF, len(body) + 1, 4 * 1024 * 1024 + 1]))
        return kind, struct.pack(">iI", 4 + len(body), hlen) + body
    if kind == "serialize_type":
        header = json_header(28, {}, opaque=1)
        t = draw(st.integers(2, 255))
        return kind, struct.pack(">iI", 4 + len(header), (t << 24) | len(header)) + header
    if kind == "truncated":
        data = json_frame(draw(st.sampled_from(registry.broker_codes())), {"topic": "AdvTopic"}, b"x" * 100,
                          opaque=3)
        return kind, data[:draw(st.integers(1, len(data) - 1))]
    if kind == "valid_then_garbage":
        return kind, _valid() + draw(st.binary(min_size=1, max_size=256))
    if kind == "json_not_object":
        header = draw(st.sampled_from([b"[]", b"1", b'"x"', b"{", b"\xff\xfe", b"null", b"{}" * 3, b"\x00",
                                       b'{"code":28', b"{" * 10_000]))
        return kind, frame(0, header)
    if kind == "json_wrong_types":
        obj = {"code": draw(st.sampled_from(["28", 28.5, None, [], 2**31, -2**31 - 1, 10**30, True])),
               "opaque": draw(st.sampled_from([1, "1", None, 2**40, -1, {}])),
               "flag": draw(st.sampled_from([0, 1, 2, 3, -1, 2**31, "x", None])),
               "version": draw(st.sampled_from([0, 399, -1, 2**33, "v"])),
               "language": draw(st.sampled_from(["JAVA", 99, None, [], "\u0000"])),
               "extFields": draw(st.sampled_from([{}, [], "x", None, {"a": {"b": [1]}}, {"": None}, 5])),
               "remark": draw(st.sampled_from([None, 5, [], "r" * 100_000]))}
        return kind, frame(0, json.dumps(obj).encode())
    if kind == "binary_lies":
        good = binary_header(28, {b"k": b"v"}, opaque=9)
        at = draw(st.sampled_from([13, 17, 19, 21]))  # remark length, ext length, key length, value length
        lie = draw(st.sampled_from([-1, 2**31 - 1, 0x7FFF, 1000]))
        fmt = ">h" if at == 21 else ">i"
        size = 2 if at == 21 else 4
        at = 17 + 4 if at == 21 else at
        hdr = good[:at] + struct.pack(fmt, lie if fmt == ">i" else max(-32768, min(32767, lie))) + good[at + size:]
        return kind, frame(1, hdr)
    if kind == "pipelined":
        codes = draw(st.lists(st.one_of(st.sampled_from(registry.broker_codes()), st.integers(-32768, 32767)),
                              min_size=2, max_size=40))
        return kind, b"".join(json_frame(c, {}, opaque=i) for i, c in enumerate(codes))
    if kind == "huge_header_claim":
        return kind, struct.pack(">iI", MAX_FRAME, 0xFFFFFF) + b"{" * 1024
    return kind, frame(0, b"")


@pytest.mark.parametrize("daemon", ["broker", "namesrv"])
def test_frame_garbage(rig: Rig, daemon: str) -> None:
    address = getattr(rig, daemon).address

    @adv_settings(EXAMPLES)
    @given(g=garbage())
    def one(g: tuple[str, bytes]) -> None:
        with Peer(address) as peer:
            if peer.send(g[1]):
                peer.response(-1, 0.2)  # read whatever comes (or the close) for a moment
        rig.check()

    one()


@pytest.mark.parametrize("daemon", ["broker", "namesrv"])
def test_unregistered_codes_are_refused_not_fatal(rig: Rig, daemon: str) -> None:
    """A code nobody registered is answered REQUEST_CODE_NOT_SUPPORTED (RocketMQ's answer), whatever it carries."""
    d = getattr(rig, daemon)
    known = set(registry.broker_codes() if daemon == "broker" else registry.namesrv_codes())

    @adv_settings(EXAMPLES // 3)
    @given(code=st.integers(-32768, 32767).filter(lambda c: c not in known),
           ext=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=3),
           body=st.binary(max_size=128))
    def one(code: int, ext: dict[str, str], body: bytes) -> None:
        opaque = rig.next_opaque()
        with Peer(d.address) as peer:
            resp = peer.call(json_frame(code, ext, body, opaque=opaque), opaque, 5.0)
        assert resp is not None and resp.code == 3, resp  # REQUEST_CODE_NOT_SUPPORTED
        rig.check()

    one()
