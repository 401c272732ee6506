"""mq.protocol.headers: wire names, to_ext / from_ext, tolerance, errors (PROTOCOL.md §3.5, §4)."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.errors import HeaderFieldError, RemoteProtocolError
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode

ALL = sorted((c for c in vars(h).values() if isinstance(c, type) and issubclass(c, h.Header) and c is not h.Header),
             key=lambda c: c.__name__)


def _sample(cls):
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        tp = hints[f.name]
        if typing.get_origin(tp) is not None:
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        kwargs[f.name] = {str: f"v{i}", int: 1000 + i, bool: i % 2 == 0, float: i + 0.5}[tp]
    return cls(**kwargs)


def test_every_brief_header_exists():
    names = {c.__name__ for c in ALL}
    for expected in [
        "SendMessageRequestHeader", "SendMessageRequestHeaderV2", "SendMessageResponseHeader",
        "PullMessageRequestHeader", "PullMessageResponseHeader", "QueryConsumerOffsetRequestHeader",
        "QueryConsumerOffsetResponseHeader", "UpdateConsumerOffsetRequestHeader", "GetMaxOffsetRequestHeader",
        "GetMaxOffsetResponseHeader", "GetMinOffsetRequestHeader", "GetMinOffsetResponseHeader",
        "SearchOffsetRequestHeader", "SearchOffsetResponseHeader", "GetEarliestMsgStoretimeRequestHeader",
        "GetEarliestMsgStoretimeResponseHeader", "ViewMessageRequestHeader", "QueryMessageRequestHeader",
        "QueryMessageResponseHeader", "UnregisterClientRequestHeader", "GetConsumerListByGroupRequestHeader",
        "ConsumerSendMsgBackRequestHeader", "EndTransactionRequestHeader", "CheckTransactionStateRequestHeader",
        "NotifyConsumerIdsChangedRequestHeader", "GetRouteInfoRequestHeader", "RegisterBrokerRequestHeader",
        "RegisterBrokerResponseHeader", "UnregisterBrokerRequestHeader", "QueryDataVersionRequestHeader",
        "QueryDataVersionResponseHeader", "PutKVConfigRequestHeader", "GetKVConfigRequestHeader",
        "GetKVConfigResponseHeader", "DeleteKVConfigRequestHeader", "GetKVListByNamespaceRequestHeader",
        "WipeWritePermOfBrokerRequestHeader", "WipeWritePermOfBrokerResponseHeader",
        "AddWritePermOfBrokerRequestHeader", "AddWritePermOfBrokerResponseHeader",
        "DeleteTopicFromNamesrvRequestHeader", "GetTopicsByClusterRequestHeader", "CreateTopicRequestHeader",
        "DeleteTopicRequestHeader", "GetTopicStatsInfoRequestHeader", "GetConsumeStatsRequestHeader",
        "GetConsumerConnectionListRequestHeader", "GetProducerConnectionListRequestHeader",
        "ResetOffsetRequestHeader", "GetConsumerRunningInfoRequestHeader",
        "ConsumeMessageDirectlyResultRequestHeader"]:
        assert expected in names
    assert RequestCode.HEART_BEAT not in h.REQUEST_HEADERS and RequestCode.LOCK_BATCH_MQ not in h.REQUEST_HEADERS


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_round_trip_every_header(cls):
    header = _sample(cls)
    ext = header.to_ext()
    assert all(type(k) is str and type(v) is str for k, v in ext.items())
    assert set(ext) == set(cls.wire_names())
    assert cls.from_ext(ext) == header
    for v in ext.values():
        assert v not in ("True", "False")


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_missing_required_field_is_named(cls):
    ext = _sample(cls).to_ext()
    required = [f.wire for f in cls.FIELDS if f.required]
    for wire in required:
        partial = {k: v for k, v in ext.items() if k != wire}
        with pytest.raises(RemoteProtocolError, match=f"<{wire}>"):
            cls.from_ext(partial)
    only_required = {k: v for k, v in ext.items() if k in required}
    assert cls.from_ext(only_required).to_ext().keys() >= only_required.keys()  # optional fields may be absent


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_unparsable_number_is_named(cls):
    ext = _sample(cls).to_ext()
    for f in cls.FIELDS:
        if f.kind in (int, float):
            with pytest.raises(RemoteProtocolError, match=f"<{f.wire}>"):
                cls.from_ext({**ext, f.wire: "12x"})


def test_none_fields_are_omitted():
    ext = h.UnregisterClientRequestHeader("cid").to_ext()
    assert ext == {"clientID": "cid"}


def test_send_v2_wire_letters_and_v1_conversion():
    v1 = h.SendMessageRequestHeader("PG", "T", "TBW102", 4, 3, 0, 1690000000000, 0, "TAGS\x01a\x02", 0, False,
                                    True, 16)
    v2 = v1.to_v2()
    assert v2.to_ext() == {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1690000000000",
                           "h": "0", "i": "TAGS\x01a\x02", "j": "0", "k": "false", "m": "true", "l": "16"}
    assert v1.to_ext()["maxReconsumeTimes"] == "16" and v1.to_ext()["batch"] == "true"
    assert v2.to_v1() == v1 and h.SendMessageRequestHeaderV2.from_v1(v1) == v2
    assert h.REQUEST_HEADERS[RequestCode.SEND_MESSAGE_V2] is h.SendMessageRequestHeaderV2


@pytest.mark.parametrize("text,value", [("true", True), ("TRUE", True), ("1", True), ("false", False),
                                        ("0", False), ("no", False), ("", False)])
def test_boolean_forms(text, value):
    ext = {"a": "g", "b": "t", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "m": text, "k": text}
    v2 = h.SendMessageRequestHeaderV2.from_ext(ext)
    assert v2.batch is value and v2.unit_mode is value
    hdr = h.GetRouteInfoRequestHeader.from_ext({"topic": "T", "acceptStandardJsonOnly": text})
    assert hdr.accept_standard_json_only is (value if text else None)


def test_route_header_absent_flag_is_none():
    hdr = h.GetRouteInfoRequestHeader.from_ext({"topic": "T"})
    assert hdr.accept_standard_json_only is None and hdr.to_ext() == {"topic": "T"}


def test_numbers_given_as_numbers_or_padded_text():
    hdr = h.PullMessageRequestHeader.from_ext({
        "consumerGroup": "G", "topic": "T", "queueId": 0, "queueOffset": "12", "maxMsgNums": 32, "sysFlag": 6,
        "commitOffset": "0", "suspendTimeoutMillis": 15000, "subVersion": "1690000000000", "subscription": "*"})
    assert (hdr.queue_id, hdr.queue_offset, hdr.max_msg_nums, hdr.sub_version) == (0, 12, 32, 1690000000000)
    assert hdr.expression_type is None


def test_empty_string_for_number_means_absent():
    hdr = h.ConsumerSendMsgBackRequestHeader.from_ext({"offset": "5", "group": "G", "delayLevel": "0",
                                                       "maxReconsumeTimes": ""})
    assert hdr.max_reconsume_times is None
    with pytest.raises(RemoteProtocolError, match="<offset>"):
        h.ConsumerSendMsgBackRequestHeader.from_ext({"offset": "", "group": "G", "delayLevel": "0"})


def test_send_response_header_hot_path_matches_spec():
    r = h.SendMessageResponseHeader("ID", 3, 42, None, "DefaultRegion", True)
    assert r.to_ext() == {"msgId": "ID", "queueId": "3", "queueOffset": "42", "MSG_REGION": "DefaultRegion",
                          "TRACE_ON": "true"}
    assert h.SendMessageResponseHeader.from_ext(r.to_ext()) == r
    assert h.SendMessageResponseHeader("ID", 0, 0, "tx").to_ext() == {"msgId": "ID", "queueId": "0",
                                                                      "queueOffset": "0", "transactionId": "tx"}


def test_pull_response_header():
    r = h.PullMessageResponseHeader(0, 10, 0, 10)
    assert r.to_ext() == {"suggestWhichBrokerId": "0", "nextBeginOffset": "10", "minOffset": "0", "maxOffset": "10"}


def test_wire_names_that_are_not_camel_case():
    assert "clientID" in h.UnregisterClientRequestHeader.wire_names()
    assert "_UNIQUE_KEY_QUERY" in h.QueryMessageRequestHeader.wire_names()
    assert "indexLastUpdatePhyoffset" in h.QueryMessageResponseHeader.wire_names()
    assert "isForce" in h.ResetOffsetRequestHeader.wire_names()
    assert "bodyCrc32" in h.RegisterBrokerRequestHeader.wire_names()
    assert h.EndTransactionRequestHeader.wire_names() == (
        "producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "msgId",
        "fromTransactionCheck", "transactionId")


def test_register_broker_defaults():
    hdr = h.RegisterBrokerRequestHeader.from_ext({"brokerName": "b", "brokerAddr": "1.1.1.1:10911",
                                                  "clusterName": "C", "haServerAddr": "1.1.1.1:10912",
                                                  "brokerId": "0"})
    assert hdr.compressed is False and hdr.body_crc32 == 0
    assert hdr.to_ext()["compressed"] == "false"


def test_frozen_headers_cannot_be_changed():
    hdr = h.GetRouteInfoRequestHeader("T")
    with pytest.raises(dataclasses.FrozenInstanceError):
        hdr.topic = "U"  # type: ignore[misc]


def test_cpp_extras_ignored():
    ext = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "x", "consumerGroup": "G", "topic": "T",
           "queueId": "1"}
    assert h.QueryConsumerOffsetRequestHeader.from_ext(ext) == h.QueryConsumerOffsetRequestHeader("G", "T", 1)


def test_v2_missing_and_bad_fields():
    base = {"a": "g", "b": "t", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    for key in base:
        with pytest.raises(RemoteProtocolError, match=f"<{key}>"):
            h.SendMessageRequestHeaderV2.from_ext({k: v for k, v in base.items() if k != key})
    for key in ("d", "e", "f", "g", "h", "j", "l"):
        with pytest.raises(RemoteProtocolError, match=f"<{key}>"):
            h.SendMessageRequestHeaderV2.from_ext({**base, key: "x"})
    with pytest.raises(RemoteProtocolError):
        h.SendMessageRequestHeaderV2.from_ext({})


def _reference_from_ext(cls, ext):
    """The rules of the module docstring, written as a plain loop over FIELDS."""
    kwargs = {}
    for f in cls.FIELDS:
        v = ext.get(f.wire)
        if v is None or (v == "" and f.kind is not str):
            if f.required:
                raise HeaderFieldError(f"missing {f.wire}")
            continue
        if f.kind is bool:
            kwargs[f.attr] = v.lower() in ("true", "1")
        elif f.kind is str:
            kwargs[f.attr] = v
        elif f.kind is int:  # Integer.parseInt / Long.parseLong: sign and decimal digits, in range
            bits = 63 if f.long else 31
            if not re.fullmatch(r"[+-]?\d+", v) or not -(2**bits) <= int(v) < 2**bits:
                raise HeaderFieldError(f"bad {f.wire}")
            kwargs[f.attr] = int(v)
        else:
            try:
                kwargs[f.attr] = f.kind(v)
            except ValueError:
                raise HeaderFieldError(f"bad {f.wire}") from None
    return cls(**kwargs)


ext_values = st.one_of(st.text(max_size=6), st.integers(-2**40, 2**40).map(str),
                       st.integers(-2**64, 2**64).map(str),
                       st.sampled_from(["true", "false", "0", "1", "", "TRUE", "True", "1_0", " 1 ", "+1", "-0",
                                        "2147483648", "-2147483649", "9223372036854775808", "\u0663", "0x1", "1e3",
                                        "00000000000000000000000000000000000000001"]))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([h.SendMessageRequestHeaderV2, h.SendMessageRequestHeader, h.PullMessageRequestHeader,
                        h.EndTransactionRequestHeader, h.GetRouteInfoRequestHeader]), st.data())
def test_generated_from_ext_agrees_with_reference(cls, data):
    ext = data.draw(st.fixed_dictionaries({}, optional={f.wire: ext_values for f in cls.FIELDS}))
    def run(fn):
        try:
            return fn(cls, ext)
        except RemoteProtocolError as exc:
            return type(exc)
    assert run(lambda c, e: c.from_ext(e)) == run(_reference_from_ext)


# ---------------------------------------------------------------------------------------------
# numbers exactly as Java parses them (Integer.parseInt / Long.parseLong)
# ---------------------------------------------------------------------------------------------
_PULL = {"consumerGroup": "G", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0",
         "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}


@pytest.mark.parametrize("text", ["1_0", " 1 ", "1 ", "\t1", "0x1", "1e3", "1.0", "+", "-", "--1", "+-1", "１_２",
                                  "2147483648", "-2147483649", "99999999999999999999999"])
def test_int_fields_refuse_what_integer_parseint_refuses(text):
    with pytest.raises(HeaderFieldError, match="<queueId> is not an int") as info:
        h.PullMessageRequestHeader.from_ext({**_PULL, "queueId": text})
    assert info.value.field == "queueId"


@pytest.mark.parametrize("text,value", [("7", 7), ("+7", 7), ("-7", -7), ("-0", 0), ("007", 7),
                                        ("2147483647", 2**31 - 1), ("-2147483648", -(2**31)),
                                        ("0" * 40 + "5", 5), ("\u0663", 3), ("１２", 12)])
def test_int_fields_take_what_integer_parseint_takes(text, value):
    assert h.PullMessageRequestHeader.from_ext({**_PULL, "queueId": text}).queue_id == value


def test_long_fields_have_the_64_bit_range():
    assert h.PullMessageRequestHeader.from_ext({**_PULL, "queueOffset": str(2**63 - 1)}).queue_offset == 2**63 - 1
    assert h.PullMessageRequestHeader.from_ext({**_PULL, "queueOffset": str(-(2**63))}).queue_offset == -(2**63)
    for text in (str(2**63), str(-(2**63) - 1), "1_000"):
        with pytest.raises(HeaderFieldError, match="<queueOffset> is not a long"):
            h.PullMessageRequestHeader.from_ext({**_PULL, "queueOffset": text})


def test_java_long_fields_are_marked_as_in_rocketmq():
    longs = {cls.__name__: {f.wire for f in cls.FIELDS if f.long} for cls in ALL}
    assert longs["PullMessageRequestHeader"] == {"queueOffset", "commitOffset", "suspendTimeoutMillis", "subVersion"}
    assert longs["SendMessageRequestHeaderV2"] == {"g"}
    assert longs["UpdateConsumerOffsetRequestHeader"] == {"commitOffset"}
    assert longs["RegisterBrokerRequestHeader"] == {"brokerId"}
    assert longs["QueryConsumerOffsetRequestHeader"] == set()


def test_booleans_are_java_parse_boolean_plus_the_cpp_one():
    base = {"a": "g", "b": "t", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    for text, value in (("true", True), ("TRUE", True), ("tRuE", True), ("1", True), ("yes", False),
                        ("0", False), ("false", False), ("t", False), (" true", False)):
        assert h.SendMessageRequestHeaderV2.from_ext({**base, "m": text}).batch is value, text
