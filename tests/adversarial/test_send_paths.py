"""Sends with hostile sysFlag, flag, timestamps, properties and bodies: a send the broker acknowledges must be
readable back exactly as sent (the record it wrote decodes, strictly, with the same body, topic and queue), and
the store must still verify. A send it refuses must leave no trace."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.record import decode_records
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode, ResponseCode
from tests.adversarial import registry
from tests.adversarial.conftest import adv_settings
from tests.adversarial.hostile import INT32_EDGES, sysflag_values
from tests.adversarial.rig import Rig
from tests.adversarial.wire import Peer, json_frame

EXAMPLES = 200
#: sysFlag bits that legitimately send the message elsewhere than the topic it names (a prepared transaction
#: goes to the half topic): the read-back oracle does not apply to them.
ELSEWHERE = SF.TRANSACTION_MASK


def benign_properties() -> st.SearchStrategy[str]:
    value = st.text(max_size=30).filter(lambda t: "\x01" not in t and "\x02" not in t)
    pairs = st.lists(st.tuples(st.sampled_from([P.KEYS, P.TAGS, "a", "user-key", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]),
                               value), max_size=4)
    return pairs.map(lambda ps: "".join(f"{k}\x01{v}\x02" for k, v in ps))


def test_an_acknowledged_send_reads_back_as_sent(rig: Rig) -> None:
    @adv_settings(EXAMPLES)
    @given(sys_flag=sysflag_values().filter(lambda f: not f & ELSEWHERE),
           flag=st.sampled_from(INT32_EDGES).filter(lambda n: -2**31 <= n < 2**31),
           born=st.sampled_from([0, -1, 2**63 - 1, -2**63, int(time.time() * 1000)]),
           props=benign_properties(), body=st.binary(max_size=2048),
           code=st.sampled_from([RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2]))
    def one(sys_flag: int, flag: int, born: int, props: str, body: bytes, code: int) -> None:
        hdr = H.SendMessageRequestHeaderV2(producer_group=registry.GROUP, topic=registry.TOPIC,
                                           default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
                                           sys_flag=sys_flag, born_timestamp=born, flag=flag, properties=props)
        ext = hdr.to_v1().to_ext() if code == RequestCode.SEND_MESSAGE else hdr.to_ext()
        opaque = rig.next_opaque()
        with Peer(rig.broker.address) as peer:
            resp = peer.call(json_frame(code, ext, body, opaque=opaque), opaque, 5.0)
            if resp is not None and resp.code == ResponseCode.SUCCESS:
                sent = H.SendMessageResponseHeader.from_ext(resp.ext_fields)
                pull = H.PullMessageRequestHeader(consumer_group=registry.GROUP, topic=registry.TOPIC,
                                                  queue_id=sent.queue_id, queue_offset=sent.queue_offset,
                                                  max_msg_nums=1, sys_flag=0x4, commit_offset=0,
                                                  suspend_timeout_millis=0, sub_version=0, subscription="*")
                opaque = rig.next_opaque()
                got = peer.call(json_frame(RequestCode.PULL_MESSAGE, pull.to_ext(), opaque=opaque), opaque, 5.0)
                assert got is not None and got.code == ResponseCode.SUCCESS, got
                (m,) = decode_records(got.body or b"", strict=True)  # the record decodes, as a client reads it
                assert (m.topic, m.queue_id, m.queue_offset, m.body, m.flag) == (
                    registry.TOPIC, sent.queue_id, sent.queue_offset, body, flag)
        rig.check()

    one()
