"""Targeted tests of the issue 28 defects the generic attacks first found: clients writing system topics, retry
and DLQ topics made from names that are not topic names, client-chosen IPv6 sysFlag bits, and header numbers
Java would not parse. Each must keep holding; the generic tests attack the same requests at random.
"""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.record import decode_records
from mq.common.topic import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode, ResponseCode
from tests.adversarial import registry
from tests.adversarial.conftest import adv_settings
from tests.adversarial.hostile import NON_NUMBERS, TIMER_TOPIC, marked_name
from tests.adversarial.rig import Rig
from tests.adversarial.wire import Peer, json_frame

R = RequestCode
SETTLE = 1.5


def send(rig: Rig, topic: str, props: dict[str, str], *, sys_flag: int = 0, body: bytes = b"adv"):
    hdr = H.SendMessageRequestHeaderV2(producer_group=registry.GROUP, topic=topic, default_topic="TBW102",
                                       default_topic_queue_nums=4, queue_id=0, sys_flag=sys_flag,
                                       born_timestamp=int(time.time() * 1000), flag=0,
                                       properties=P.encode_properties(props))
    opaque = rig.next_opaque()
    with Peer(rig.broker.address) as peer:
        return peer.call(json_frame(R.SEND_MESSAGE_V2, hdr.to_ext(), body, opaque=opaque), opaque, 5.0)


def test_clients_cannot_write_system_topics(rig: Rig) -> None:
    @adv_settings(12)
    @given(topic=st.sampled_from([TIMER_TOPIC, SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC]),
           real=marked_name(str(rig.abs_target)))
    def one(topic: str, real: str) -> None:
        now = int(time.time() * 1000)
        resp = send(rig, topic, {"REAL_TOPIC": real, "REAL_QID": "0", "TIMER_OUT_MS": str(now - 1000),
                                 P.DELAY_TIME_LEVEL: "1", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"ADV{now}"})
        refused = resp is None or resp.code != ResponseCode.SUCCESS
        rig.check(settle=SETTLE)  # the timer and the schedule deliver within a second
        assert refused, f"a client wrote the system topic {topic}: {resp.ext_fields if resp else None}"

    one()


def test_retry_and_dlq_topics_are_not_paths(rig: Rig) -> None:
    @adv_settings(12)
    @given(group=marked_name(str(rig.abs_target)).map(lambda n: f"%RETRY%{n}"),
           max_times=st.sampled_from(["0", "16"]))
    def one(group: str, max_times: str) -> None:
        ext = {**registry.base_ext(R.CONSUMER_SEND_MSG_BACK, rig.broker.address), "group": group, "offset": "0",
               "maxReconsumeTimes": max_times}
        opaque = rig.next_opaque()
        with Peer(rig.broker.address) as peer:
            peer.call(json_frame(R.CONSUMER_SEND_MSG_BACK, ext, opaque=opaque), opaque, 5.0)
        rig.check()

    one()


def test_client_ipv6_sysflag_bits_do_not_break_records(rig: Rig) -> None:
    @adv_settings(8)
    @given(bits=st.sampled_from([SF.BORNHOST_V6, SF.STOREHOST_V6, SF.BORNHOST_V6 | SF.STOREHOST_V6]),
           body=st.binary(min_size=1, max_size=64))
    def one(bits: int, body: bytes) -> None:
        resp = send(rig, registry.TOPIC, {P.KEYS: "v6"}, sys_flag=bits, body=body)
        readable = True
        if resp is not None and resp.code == ResponseCode.SUCCESS:
            sent = H.SendMessageResponseHeader.from_ext(resp.ext_fields)
            pull = H.PullMessageRequestHeader(consumer_group=registry.GROUP, topic=registry.TOPIC,
                                              queue_id=sent.queue_id, queue_offset=sent.queue_offset, max_msg_nums=1,
                                              sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
                                              subscription="*")
            opaque = rig.next_opaque()
            with Peer(rig.broker.address) as peer:
                got = peer.call(json_frame(R.PULL_MESSAGE, pull.to_ext(), opaque=opaque), opaque, 5.0)
            try:
                readable = [m.body for m in decode_records(got.body or b"", strict=True)] == [body]
            except Exception:
                readable = False
        rig.check()
        assert readable, "an acked message does not read back"

    one()


#: Header number fields RocketMQ parses with Integer.parseInt (a value past 2^31 - 1 is refused); every other
#: number field below is a Long.
INT_FIELDS = {"queueId", "maxMsgNums", "sysFlag", "maxNum", "e", "d", "f", "h", "j", "l", "delayLevel",
              "maxReconsumeTimes"}
NUMBER_FIELDS = {
    R.GET_MAX_OFFSET: ["queueId"], R.GET_MIN_OFFSET: ["queueId"], R.GET_EARLIEST_MSG_STORETIME: ["queueId"],
    R.QUERY_CONSUMER_OFFSET: ["queueId"], R.UPDATE_CONSUMER_OFFSET: ["queueId", "commitOffset"],
    R.SEARCH_OFFSET_BY_TIMESTAMP: ["queueId", "timestamp"],
    R.PULL_MESSAGE: ["queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset"],
    R.SEND_MESSAGE_V2: ["e", "f", "g", "h"], R.QUERY_MESSAGE: ["maxNum", "beginTimestamp", "endTimestamp"],
    R.VIEW_MESSAGE_BY_ID: ["offset"],
}
#: What Java's parseInt / parseLong refuse (the empty string means "absent" and is left out).
NOT_JAVA_NUMBERS = [v for v in NON_NUMBERS if v.strip()] + ["1_0", " 1 "]


def test_header_numbers_are_parsed_strictly(rig: Rig) -> None:
    """A number field RocketMQ would not parse is refused, not read as some number."""
    cases = [(code, f) for code, fields in sorted(NUMBER_FIELDS.items()) for f in fields]

    @adv_settings(60)
    @given(case=st.sampled_from(cases), value=st.one_of(st.sampled_from(NOT_JAVA_NUMBERS),
                                                        st.sampled_from(["2147483648", "-2147483649",
                                                                         "9223372036854775808"])))
    def one(case: tuple[int, str], value: str) -> None:
        code, wire = case
        if value in ("2147483648", "-2147483649") and wire not in INT_FIELDS:
            value = "9223372036854775808"
        ext = {**registry.base_ext(code, rig.broker.address), wire: value}
        opaque = rig.next_opaque()
        with Peer(rig.broker.address) as peer:
            resp = peer.call(json_frame(code, ext, b"adv" if code == R.SEND_MESSAGE_V2 else b"", opaque=opaque),
                             opaque, 5.0)
        rig.check()
        assert resp is not None and resp.code != ResponseCode.SUCCESS, (
            f"{registry.code_name(code)} took {wire}={value!r} as a number: {resp.ext_fields if resp else None}")

    one()
