"""Golden frames built byte by byte from PROTOCOL.md §1, §2 and checked against codec.py both ways."""

from __future__ import annotations

import struct

import pytest

from mq.config import FrameLimits
from mq.errors import LocalProtocolError, RemoteProtocolError
from mq.protocol import codec
from mq.protocol.codes import LanguageCode, RequestCode, SerializeType
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import (PullMessageRequestHeader, QueryConsumerOffsetRequestHeader,
                                 SendMessageRequestHeader, SendMessageRequestHeaderV2)


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    """§1: int32 length (= 4 + H + B), int32 header word (type 0 << 24 | H), header, body."""
    return struct.pack(">i", 4 + len(header) + len(body)) + struct.pack(">I", len(header)) + header + body


def rocketmq_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">i", 4 + len(header) + len(body)) + struct.pack(">I", (1 << 24) | len(header)) + header + body


def rocketmq_header(code: int, lang: int, version: int, opaque: int, flag: int, remark: bytes,
                    ext: list[tuple[bytes, bytes]]) -> bytes:
    """§2.2: code i16, lang i8, version i16, opaque i32, flag i32, remarkLen i32, remark, extLen i32, entries."""
    entries = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return (struct.pack(">h", code) + struct.pack(">b", lang) + struct.pack(">h", version)
            + struct.pack(">i", opaque) + struct.pack(">i", flag) + struct.pack(">i", len(remark)) + remark
            + struct.pack(">i", len(entries)) + entries)


JAVA_REQUEST = (b'{"code":14,"extFields":{"topic":"T","consumerGroup":"G","queueId":"0"},"flag":0,'
                b'"language":"JAVA","opaque":17,"serializeTypeCurrentRPC":"JSON","version":401}')
BROKER_RESPONSE = (b'{"code":0,"extFields":{"offset":"42"},"flag":1,"language":"JAVA","opaque":17,'
                   b'"serializeTypeCurrentRPC":"JSON","version":401}')
CPP_REQUEST = (b'{"code":14,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"c2lnbmF0dXJl",'
               b'"consumerGroup":"G","queueId":0,"topic":"T"},"flag":0,"language":"CPP","opaque":5,'
               b'"remark":"","version":333}\n')
ONS_REQUEST = (b'{"code":14,"language":"JAVA","opaque":3,"flag":0,"version":121,'
               b'"extFields":{"consumerGroup":"G","topic":"T","queueId":0}}')


def test_java_json_request_decodes():
    [cmd] = codec.FrameDecoder().feed(json_frame(JAVA_REQUEST))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.language) == (14, 17, 0, 401, LanguageCode.JAVA)
    assert cmd.ext_fields == {"topic": "T", "consumerGroup": "G", "queueId": "0"}
    assert cmd.remark is None and cmd.body is None
    assert not cmd.is_response and not cmd.is_oneway
    h = QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
    assert (h.consumer_group, h.topic, h.queue_id) == ("G", "T", 0)


def test_broker_response_encodes_byte_exact_like_java():
    req = codec.decode_frame(json_frame(JAVA_REQUEST))
    resp = req.response(0, ext_fields={"offset": "42"})
    resp.version = 401
    assert codec.encode(resp) == json_frame(BROKER_RESPONSE)
    assert resp.is_response


def test_response_with_remark_keeps_fastjson_key_order():
    cmd = RemotingCommand(17, opaque=9, flag=1, remark="not set any response code")
    header = codec.encode_header(cmd)
    assert header == (b'{"code":17,"extFields":{},"flag":1,"language":"JAVA","opaque":9,'
                      b'"remark":"not set any response code","serializeTypeCurrentRPC":"JSON","version":407}')


def test_cpp_request_numbers_trailing_newline_and_signature_fields():
    [cmd] = codec.FrameDecoder().feed(json_frame(CPP_REQUEST))
    assert cmd.language == LanguageCode.CPP and cmd.version == 333 and cmd.remark == ""
    assert cmd.ext_fields == {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "c2lnbmF0dXJl",
                              "consumerGroup": "G", "queueId": "0", "topic": "T"}
    assert QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields).queue_id == 0


def test_ons_request_js_values():
    [cmd] = codec.FrameDecoder().feed(json_frame(ONS_REQUEST))
    assert (cmd.code, cmd.opaque, cmd.version, cmd.language) == (14, 3, 121, LanguageCode.JAVA)
    assert cmd.ext_fields == {"consumerGroup": "G", "topic": "T", "queueId": "0"}


def test_cpp_send_message_with_numbers_and_01_booleans():
    header = (b'{"code":310,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x","a":"PG","b":"T",'
              b'"c":"TBW102","d":4,"e":2,"f":0,"g":"1690000000000","h":0,"i":"WAIT\\u0001true\\u0002",'
              b'"j":"0","k":"0","l":16,"m":"1"},"flag":0,"language":"CPP","opaque":77,"remark":"",'
              b'"version":333}\n')
    body = b"hello"
    [cmd] = codec.FrameDecoder().feed(json_frame(header, body))
    assert cmd.body == body and cmd.code == RequestCode.SEND_MESSAGE_V2
    h = SendMessageRequestHeaderV2.from_ext(cmd.ext_fields)
    assert (h.producer_group, h.topic, h.default_topic, h.default_topic_queue_nums, h.queue_id) == \
        ("PG", "T", "TBW102", 4, 2)
    assert (h.born_timestamp, h.properties, h.reconsume_times, h.max_reconsume_times) == \
        (1690000000000, "WAIT\x01true\x02", 0, 16)
    assert h.unit_mode is False and h.batch is True  # "1" is a C++ true (§4.1.2)


def test_cpp_send_message_v1_code_10():
    header = (b'{"code":10,"extFields":{"producerGroup":"PG","topic":"T","defaultTopic":"TBW102",'
              b'"defaultTopicQueueNums":4,"queueId":1,"sysFlag":0,"bornTimestamp":"1","flag":0,'
              b'"properties":"","reconsumeTimes":0,"unitMode":"0","batch":"0"},"flag":0,"language":"CPP",'
              b'"opaque":1,"remark":"","version":63}\n')
    [cmd] = codec.FrameDecoder().feed(json_frame(header, b"x"))
    h = SendMessageRequestHeader.from_ext(cmd.ext_fields)
    assert h.queue_id == 1 and h.batch is False and h.unit_mode is False and h.properties == ""


def test_java_pull_request_with_bname_ignored():
    header = (b'{"code":11,"extFields":{"bname":"b","commitOffset":"0","consumerGroup":"G","expressionType":"TAG",'
              b'"maxMsgNums":"32","queueId":"1","queueOffset":"5","subVersion":"1690000000000",'
              b'"subscription":"*","suspendTimeoutMillis":"15000","sysFlag":"2","topic":"T"},"flag":0,'
              b'"language":"JAVA","opaque":8,"serializeTypeCurrentRPC":"JSON","version":407}')
    [cmd] = codec.FrameDecoder().feed(json_frame(header))
    h = PullMessageRequestHeader.from_ext(cmd.ext_fields)
    assert (h.queue_id, h.queue_offset, h.max_msg_nums, h.sys_flag, h.suspend_timeout_millis) == (1, 5, 32, 2, 15000)


def test_rocketmq_header_decodes_and_encodes_byte_exact():
    ext = [(b"consumerGroup", b"G"), (b"queueId", b"0"), (b"topic", b"T")]
    header = rocketmq_header(14, 0, 401, 17, 0, b"", ext)
    frame = rocketmq_frame(header, b"body")
    [cmd] = codec.FrameDecoder().feed(frame)
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (14, 0, 401, 17, 0, None)
    assert cmd.ext_fields == {"consumerGroup": "G", "queueId": "0", "topic": "T"}
    assert cmd.body == b"body"
    assert codec.encode(cmd) == frame


def test_rocketmq_header_with_remark_and_utf8():
    header = rocketmq_header(1, 1, 333, -5, 1, "système".encode(), [("clé".encode(), "värde".encode())])
    [cmd] = codec.FrameDecoder().feed(rocketmq_frame(header))
    assert cmd.remark == "système" and cmd.ext_fields == {"clé": "värde"} and cmd.opaque == -5
    assert cmd.language == LanguageCode.CPP and cmd.is_response
    assert codec.encode(cmd) == rocketmq_frame(header)


def test_rocketmq_response_mirrors_request_type():
    req = codec.decode_frame(rocketmq_frame(rocketmq_header(30, 0, 401, 3, 0, b"", [(b"topic", b"T")])))
    resp = req.response(0, ext_fields={"offset": "7"})
    assert resp.serialize_type == SerializeType.ROCKETMQ
    frame = codec.encode(resp)
    assert frame[4] == 1  # serialize type byte
    assert codec.decode_frame(frame).ext_fields == {"offset": "7"}


def test_rocketmq_unknown_language_byte_is_other():
    header = rocketmq_header(14, 99, 401, 1, 0, b"", [])
    assert codec.decode_frame(rocketmq_frame(header)).language == LanguageCode.OTHER


@pytest.mark.parametrize("bad", [
    rocketmq_header(14, 0, 401, 1, 0, b"", [])[:-4] + struct.pack(">i", 50),             # extLen beyond header
    rocketmq_header(14, 0, 401, 1, 0, b"", [])[:13] + struct.pack(">i", 1000) + b"\0" * 4,  # remark too long
    rocketmq_header(14, 0, 401, 1, 0, b"", [(b"k", b"v")])[:-1],                      # value truncated
    rocketmq_header(14, 0, 401, 1, 0, b"", [(b"\xff", b"v")]),                         # key not UTF-8
    b"\x00\x0e\x00",                                                                    # shorter than fixed part
])
def test_bad_rocketmq_headers_raise(bad):
    with pytest.raises(RemoteProtocolError):
        codec.decode_frame(rocketmq_frame(bad))


def test_oneway_flag():
    cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"a": "1"}, oneway=True)
    frame = codec.encode(cmd)
    decoded = codec.decode_frame(frame)
    assert decoded.is_oneway and decoded.flag == 2 and not decoded.is_response


def test_several_frames_in_one_feed_and_split_feeds():
    frames = json_frame(JAVA_REQUEST) + json_frame(CPP_REQUEST) + rocketmq_frame(
        rocketmq_header(14, 0, 401, 2, 0, b"", []))
    dec = codec.FrameDecoder()
    assert [c.opaque for c in dec.feed(frames)] == [17, 5, 2]
    dec = codec.FrameDecoder()
    got = []
    for i in range(len(frames)):
        got += dec.feed(frames[i:i + 1])
    assert [c.opaque for c in got] == [17, 5, 2] and dec.buffered == 0


def test_length_over_limit_rejected_from_four_bytes():
    dec = codec.FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="over the limit"):
        dec.feed(struct.pack(">i", 100 * 1024 * 1024))
    with pytest.raises(RemoteProtocolError, match="already failed"):
        dec.feed(json_frame(JAVA_REQUEST))


@pytest.mark.parametrize("length", [-1, -2**31, 0, 3])
def test_negative_or_short_length_rejected(length):
    with pytest.raises(RemoteProtocolError, match="invalid"):
        codec.FrameDecoder().feed(struct.pack(">i", length))


def test_header_length_longer_than_frame_rejected_before_the_body():
    dec = codec.FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="longer than the frame"):
        dec.feed(struct.pack(">iI", 10, 100))


def test_header_over_configured_limit():
    dec = codec.FrameDecoder(FrameLimits(max_frame=1 << 20, max_header=64))
    with pytest.raises(RemoteProtocolError, match="header length"):
        dec.feed(struct.pack(">iI", 1000, 500))


def test_unknown_serialize_type_rejected():
    with pytest.raises(RemoteProtocolError, match="serialize type"):
        codec.FrameDecoder().feed(struct.pack(">iI", 10, (2 << 24) | 4))


def test_partial_frame_is_buffered():
    frame = json_frame(JAVA_REQUEST, b"xyz")
    dec = codec.FrameDecoder()
    assert dec.feed(frame[:-1]) == [] and dec.buffered == len(frame) - 1
    [cmd] = dec.feed(frame[-1:])
    assert cmd.body == b"xyz" and dec.buffered == 0


@pytest.mark.parametrize("header", [
    b"not json", b"[1,2]", b'{"opaque":1}', b'{"code":"x"}', b'{"code":1,"extFields":[1]}',
    b'{"code":1,"opaque":4294967296}', b'{"code":true}', b'{"code":1.5}',
])
def test_bad_json_headers_raise(header):
    with pytest.raises(RemoteProtocolError):
        codec.decode_frame(json_frame(header))


def test_json_header_tolerances():
    cmd = codec.decode_frame(json_frame(b'{"code":"14","opaque":"3","language":1,"remark":5,'
                                        b'"extFields":{"n":null,"b":true,"f":2.0,"x":1.5}}'))
    assert (cmd.code, cmd.opaque, cmd.language, cmd.remark) == (14, 3, LanguageCode.CPP, "5")
    assert cmd.ext_fields == {"b": "true", "f": "2", "x": "1.5"}


def test_decode_frame_rejects_stray_bytes():
    with pytest.raises(RemoteProtocolError, match="exactly one"):
        codec.decode_frame(json_frame(JAVA_REQUEST) + b"\0")


def test_encode_prefix_and_encode_into():
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"{}")
    out = bytearray(b"..")
    codec.encode_into(out, cmd)
    assert bytes(out[2:]) == codec.encode(cmd) == codec.encode_prefix(cmd) + b"{}"


def test_encode_normalizes_non_string_ext_values():
    cmd = RemotingCommand(0, ext_fields={"queueId": 3, "ok": True, "none": None})  # type: ignore[dict-item]
    assert codec.decode_frame(codec.encode(cmd)).ext_fields == {"queueId": "3", "ok": "true"}
    cmd.serialize_type = SerializeType.ROCKETMQ
    assert codec.decode_frame(codec.encode(cmd)).ext_fields == {"queueId": "3", "ok": "true"}


def test_rocketmq_encode_rejects_what_does_not_fit():
    with pytest.raises(LocalProtocolError):
        codec.encode(RemotingCommand(70000, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(LocalProtocolError):
        codec.encode(RemotingCommand(1, opaque=2**31, serialize_type=SerializeType.ROCKETMQ))
