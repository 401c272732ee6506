"""TraceDataEncoder compatibility: hand-built records from TRACE.md §3, byte-identical encoding, tolerant
decoding (§8), malformed input, compressed bodies and trace message keys (§3.4)."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.errors import MQError
from mq.trace.context import (
    LocalTransactionState,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
)
from mq.trace.encoder import (
    TraceDecodeError,
    decode_body,
    decode_record,
    decode_text,
    encode_body,
    encode_context,
    encode_contexts,
    iter_decode_body,
    iter_decode_text,
    looks_compressed,
    trace_message_keys,
    trans_keys,
)

S, T = "\x01", "\x02"
MID = "AC110001000018B4AAC2176F22A60000"
OFF = "C0A8000100002A9F0000000000000F10"

PUB = S.join(["Pub", "1660000000000", "DefaultRegion", "PG", "TopicTest", MID, "TagA", "null",
              "192.168.0.1:10911", "120", "15", "0", OFF, "true"]) + T  # fmt: skip
SUB_BEFORE = S.join(["SubBefore", "1660000000200", "null", "CG", "REQ1", MID, "0", "null"]) + T
SUB_AFTER = S.join(["SubAfter", "REQ1", MID, "3", "true", "null", "0", "1660000000203", "CG"]) + T
END_TX = S.join(["EndTransaction", "1660000000100", "DefaultRegion", "PG", "TopicTest", MID, "null", "k1 k2",
                 "192.168.0.1:10911", "2", "TX-1", "COMMIT_MESSAGE", "false"]) + T  # fmt: skip

EXPECTED = {
    PUB: TraceContext(
        TraceType.Pub, timestamp=1660000000000, region_id="DefaultRegion", group_name="PG", cost_time=15,
        success=True,
        beans=(TraceBean(topic="TopicTest", msg_id=MID, tags="TagA", keys=None, store_host="192.168.0.1:10911",
                         body_length=120, msg_type=MessageType.Normal_Msg, offset_msg_id=OFF),),
    ),
    SUB_BEFORE: TraceContext(
        TraceType.SubBefore, timestamp=1660000000200, region_id=None, group_name="CG", request_id="REQ1",
        beans=(TraceBean(msg_id=MID, retry_times=0, keys=None),),
    ),
    SUB_AFTER: TraceContext(
        TraceType.SubAfter, timestamp=1660000000203, group_name="CG", request_id="REQ1", cost_time=3,
        success=True, context_code=0, beans=(TraceBean(msg_id=MID, keys=None),),
    ),
    END_TX: TraceContext(
        TraceType.EndTransaction, timestamp=1660000000100, region_id="DefaultRegion", group_name="PG",
        beans=(TraceBean(topic="TopicTest", msg_id=MID, tags=None, keys="k1 k2", store_host="192.168.0.1:10911",
                         msg_type=MessageType.Trans_msg_Commit, transaction_id="TX-1",
                         transaction_state=LocalTransactionState.COMMIT_MESSAGE, from_transaction_check=False),),
    ),
}  # fmt: skip


@pytest.mark.parametrize("record", list(EXPECTED), ids=["Pub", "SubBefore", "SubAfter", "EndTransaction"])
def test_hand_built_record_decodes_and_reencodes_byte_identical(record: str) -> None:
    [ctx] = decode_text(record)
    assert ctx == EXPECTED[record]
    assert encode_context(ctx) == record


def test_body_of_all_types_round_trips() -> None:
    body = (PUB + SUB_BEFORE + SUB_AFTER + END_TX).encode()
    contexts = decode_body(body)
    assert [c.trace_type for c in contexts] == [TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter,
                                                TraceType.EndTransaction]  # fmt: skip
    assert encode_contexts(contexts).encode() == body


def test_sub_before_with_many_beans_writes_one_record_per_bean_sharing_request_id() -> None:
    ctx = TraceContext(TraceType.SubBefore, timestamp=5, region_id=None, group_name="CG", request_id="R",
                       beans=(TraceBean(msg_id="A", retry_times=1, keys="x"), TraceBean(msg_id="B", keys=None)))  # fmt: skip
    assert encode_context(ctx) == f"SubBefore{S}5{S}null{S}CG{S}R{S}A{S}1{S}x{T}SubBefore{S}5{S}null{S}CG{S}R{S}B{S}0{S}null{T}"
    assert [c.bean.msg_id for c in decode_text(encode_context(ctx))] == ["A", "B"]


def test_pub_field_count_variants_follow_java_decoder() -> None:
    head = ["Pub", "1", "R", "PG", "T", "M", "t", "k", "h:1", "10", "7", "3"]
    twelve = decode_record(S.join(head))
    assert (twelve.success, twelve.bean.offset_msg_id, twelve.bean.msg_type) == (True, "", MessageType.Delay_Msg)
    thirteen = decode_record(S.join([*head, "false"]))
    assert (thirteen.success, thirteen.bean.offset_msg_id) == (False, "")
    fifteen = decode_record(S.join([*head, "OFF", "TRUE", "10.1.1.1"]))
    assert (fifteen.success, fifteen.bean.offset_msg_id, fifteen.bean.client_host) == (True, "OFF", "10.1.1.1")


def test_sub_after_old_formats_have_no_timestamp_or_context_code() -> None:
    six = decode_record(S.join(["SubAfter", "R", "M", "4", "false", "k"]))
    assert (six.timestamp, six.context_code, six.success, six.group_name) == (None, 0, False, "")
    seven = decode_record(S.join(["SubAfter", "R", "M", "4", "true", "k", "4"]))
    assert (seven.timestamp, seven.context_code) == (None, 4)


def test_empty_trailing_keys_field_is_kept_not_an_index_error() -> None:
    [ctx] = decode_text(S.join(["SubBefore", "1", "null", "CG", "R", "M", "2", ""]) + T)
    assert ctx.bean.keys == "" and ctx.bean.retry_times == 2


@pytest.mark.parametrize(
    "record, reason",
    [
        (S.join(["Pub", "x1", "R", "PG", "T", "M", "t", "k", "h", "1", "1", "0", "O", "true"]), "bad_number"),
        (S.join(["Pub", "1", "R", "PG", "T", "M", "t", "k", "h", "1", "1", "9", "O", "true"]), "bad_enum"),
        (S.join(["Pub", "1", "R", "PG", "T", "M", "t", "k", "h", "1", "99999999999", "0", "O", "true"]), "bad_number"),
        (S.join(["SubBefore", "1", "null", "CG"]), "too_few_fields"),
        (S.join(["SubAfter", "R", "M", "1", "true", "k", "0", "SubAfter", "CG"]), "bad_number"),
        (S.join(["EndTransaction", "1", "R", "PG", "T", "M", "t", "k", "h", "2", "TX", "MAYBE", "true"]), "bad_enum"),
        ("Bogus" + S + "1", "unknown_type"),
    ],
)
def test_malformed_record_raises_typed_error(record: str, reason: str) -> None:
    with pytest.raises(TraceDecodeError) as exc:
        decode_record(record)
    assert exc.value.reason == reason
    assert isinstance(exc.value, MQError)


def test_unknown_types_are_skipped_like_java_but_reported_by_the_lenient_iterator() -> None:
    text = "Bogus" + S + "1" + T + SUB_BEFORE
    assert [c.trace_type for c in decode_text(text)] == [TraceType.SubBefore]
    items = list(iter_decode_text(text))
    assert isinstance(items[0], TraceDecodeError) and items[0].reason == "unknown_type"
    assert items[1] == EXPECTED[SUB_BEFORE]


def test_cloud_channel_sub_after_defect_and_truncation_are_malformed() -> None:
    cloud = S.join(["SubAfter", "R", "M", "3", "true", "k", "0"]) + S  # 4.9.5+ CLOUD: \x01, not \x02
    items = list(iter_decode_text(cloud + SUB_AFTER))
    assert [type(i) for i in items] == [TraceDecodeError] and items[0].reason == "bad_number"
    truncated = list(iter_decode_text(PUB + SUB_BEFORE[:20]))
    assert truncated[0] == EXPECTED[PUB]
    assert isinstance(truncated[1], TraceDecodeError) and truncated[1].reason == "unterminated"
    with pytest.raises(TraceDecodeError):
        decode_text(cloud)


def test_compressed_bodies_detected_or_flagged() -> None:
    raw = (PUB + SUB_BEFORE + SUB_AFTER).encode() * 40
    packed = zlib.compress(raw)
    assert looks_compressed(packed) and not looks_compressed(raw)
    assert decode_body(packed) == decode_body(raw) == decode_body(packed, compressed=True)
    assert len(decode_body(raw, compressed=False)) == 120
    body, compressed = encode_body(decode_body(raw))
    assert compressed and len(raw) >= 4096 and zlib.decompress(body) == raw
    small, small_compressed = encode_body(decode_text(PUB))
    assert not small_compressed and small == PUB.encode()
    with pytest.raises(TraceDecodeError) as exc:
        decode_body(b"\x78\x9c not zlib", compressed=None)
    assert exc.value.reason == "bad_zlib"
    [err] = list(iter_decode_body(b"garbage", compressed=True))
    assert err.reason == "bad_zlib"


def test_trans_keys_and_trace_message_keys() -> None:
    ctxs = decode_text(PUB + END_TX + SUB_BEFORE)
    assert trans_keys(ctxs[0]) == [MID]  # keys null: only the msg id
    assert trans_keys(ctxs[1]) == [MID, "k1", "k2"]
    assert trace_message_keys(ctxs) == f"{MID} k1 k2"
    odd = TraceContext(TraceType.SubBefore, beans=(TraceBean(msg_id="M", keys=" a  b "),))
    # Java String.split(" "): leading empty kept, trailing empties dropped; the joined string is trimmed.
    assert trans_keys(odd) == ["M", "", "a", "b"]
    assert trace_message_keys([odd]) == "M  a b"


# ------------------------------------------------------------------------------------------ property

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12).filter(
    lambda s: s != "null"
)
_opt = st.one_of(st.none(), _text)
_int = st.integers(0, 2**31 - 1)
_ts = st.integers(0, 2**63 - 1)


@st.composite
def contexts(draw: st.DrawFn) -> TraceContext:
    tt = draw(st.sampled_from(list(TraceType)))
    if tt is TraceType.Pub:
        bean = TraceBean(topic=draw(_text), msg_id=draw(_text), tags=draw(_opt), keys=draw(_opt),
                         store_host=draw(_text), body_length=draw(_int), msg_type=draw(st.sampled_from(list(MessageType))),
                         offset_msg_id=draw(_text))  # fmt: skip
        return TraceContext(tt, timestamp=draw(_ts), region_id=draw(_opt), group_name=draw(_text),
                            cost_time=draw(_int), success=draw(st.booleans()), beans=(bean,))  # fmt: skip
    if tt is TraceType.SubBefore:
        bean = TraceBean(msg_id=draw(_text), retry_times=draw(_int), keys=draw(_opt))
        return TraceContext(tt, timestamp=draw(_ts), region_id=draw(_opt), group_name=draw(_text),
                            request_id=draw(_text), beans=(bean,))  # fmt: skip
    if tt is TraceType.SubAfter:
        bean = TraceBean(msg_id=draw(_text), keys=draw(_opt))
        return TraceContext(tt, timestamp=draw(_ts), group_name=draw(_text), request_id=draw(_text),
                            cost_time=draw(_int), success=draw(st.booleans()), context_code=draw(st.integers(0, 4)),
                            beans=(bean,))  # fmt: skip
    bean = TraceBean(topic=draw(_text), msg_id=draw(_text), tags=draw(_opt), keys=draw(_opt), store_host=draw(_text),
                     msg_type=MessageType.Trans_msg_Commit, transaction_id=draw(_opt),
                     transaction_state=draw(st.sampled_from(list(LocalTransactionState))),
                     from_transaction_check=draw(st.booleans()))  # fmt: skip
    return TraceContext(tt, timestamp=draw(_ts), region_id=draw(_opt), group_name=draw(_text), beans=(bean,))


@settings(max_examples=150, deadline=None)
@given(st.lists(contexts(), max_size=8), st.booleans())
def test_round_trip_contexts_through_bodies(ctxs: list[TraceContext], compress: bool) -> None:
    body, compressed = encode_body(ctxs, compress_threshold=0 if compress else None)
    assert compressed is (compress and True)
    decoded = decode_body(body, compressed)
    # SubAfter does not carry regionId: it decodes as "".
    expected = [c if c.trace_type is not TraceType.SubAfter else TraceContext(
        c.trace_type, c.timestamp, "", "", c.group_name, c.cost_time, c.success, c.request_id, c.context_code, c.beans)
        for c in ctxs]  # fmt: skip
    assert decoded == expected
    assert encode_contexts(decoded) == encode_contexts(ctxs)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["\x01", "\x02", "Pub", "SubBefore", "SubAfter", "EndTransaction", "1", "x",
                                  "true", "COMMIT_MESSAGE", "-", "9"]), max_size=60).map("".join))  # fmt: skip
def test_arbitrary_text_yields_contexts_or_typed_errors_only(text: str) -> None:
    for item in iter_decode_text(text):
        assert isinstance(item, (TraceContext, TraceDecodeError))
        if isinstance(item, TraceContext):
            assert decode_text(encode_context(item)) == [item] or item.trace_type is TraceType.SubAfter
