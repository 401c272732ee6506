"""The 5.x wire message <-> stored message mapping, the FIFO queue hash and the body digests."""

from __future__ import annotations

import hashlib
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq.common.message import MessageExt
from mq.common.record import decode_record, encode_record
from mq.daemon.proxy import convert as C
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.status import ProxyError

Code = pb.Code
MID = "0102FC0000000135E60B1925D400000000"


def wire(**sp) -> object:
    props = {"message_id": MID, **sp}
    user = props.pop("user", {})
    body = props.pop("body", b"hello")
    return pb.Message(topic=pb.Resource(name="T"), body=body, user_properties=user,
                      system_properties=pb.SystemProperties(**props))


def stored(m: object, **kw) -> C.Outgoing:
    args = {"producer_group": "T", "peer_host": "10.0.0.1", "max_body": 4 << 20, "max_delay_ms": 86_400_000,
            "now_ms": 1_700_000_000_000, **kw}
    return C.to_stored(m, **args)


def test_a_message_crosses_to_the_store_and_back_intact():
    m = wire(tag="TagA", keys=["k1", "k2"], user={"color": "red", "n": "5"}, message_group="g1",
             trace_context="00-abc", born_host="client-host")
    out = stored(m)
    assert out.properties["TAGS"] == "TagA" and out.properties["KEYS"] == "k1 k2"
    assert out.properties["UNIQ_KEY"] == MID and out.properties["__SHARDINGKEY"] == "g1"
    assert out.properties["PGROUP"] == "T" and out.message_type == pb.MessageType.FIFO
    ext = MessageExt(topic="T", body=out.body, properties=out.properties, queue_id=3, queue_offset=9,
                     born_timestamp=out.born_timestamp, born_host=("10.0.0.1", 5), store_timestamp=1_700_000_000_500,
                     store_host=("10.0.0.2", 10911), reconsume_times=2)
    back = C.to_wire(decode_record(encode_record(ext)), receipt_handle="h 1")
    sp = back.system_properties
    assert (sp.message_id, sp.tag, list(sp.keys), sp.message_group) == (MID, "TagA", ["k1", "k2"], "g1")
    assert dict(back.user_properties) == {"color": "red", "n": "5"}
    assert sp.delivery_attempt == 3 and sp.queue_id == 3 and sp.queue_offset == 9 and sp.receipt_handle == "h 1"
    assert sp.body_digest.type == pb.DigestType.MD5
    assert sp.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert sp.born_host == "client-host" and sp.trace_context == "00-abc" and back.body == b"hello"


def test_delay_transaction_and_compressed_bodies():
    out = stored(wire(delivery_timestamp=pb.Timestamp(seconds=1_700_000_010)))
    assert out.properties["TIMER_DELIVER_MS"] == "1700000010000" and out.message_type == pb.MessageType.DELAY
    tx = stored(wire(message_type=pb.MessageType.TRANSACTION,
                     orphaned_transaction_recovery_duration=pb.Duration(seconds=30)))
    assert tx.properties["TRAN_MSG"] == "true" and tx.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    assert tx.sys_flag & 0x4
    ext = MessageExt(topic="T", body=zlib.compress(b"x" * 5000), properties={"UNIQ_KEY": MID}, sys_flag=1)
    back = C.to_wire(ext)
    assert back.body == b"x" * 5000 and back.system_properties.body_encoding == pb.Encoding.IDENTITY


@pytest.mark.parametrize("m, code", [
    (wire(user={"TAGS": "x"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (wire(user={"a": "b\x01c"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (wire(tag="A|B"), Code.ILLEGAL_MESSAGE_TAG),
    (wire(keys=["  "]), Code.ILLEGAL_MESSAGE_KEY),
    (wire(message_id=""), Code.ILLEGAL_MESSAGE_ID),
    (wire(body=b""), Code.MESSAGE_BODY_EMPTY),
    (wire(message_group="g" * 64), Code.ILLEGAL_MESSAGE_GROUP),
    (wire(user={f"k{i}": "v" for i in range(129)}), Code.MESSAGE_PROPERTIES_TOO_LARGE),
    (wire(delivery_timestamp=pb.Timestamp(seconds=1_800_000_000)), Code.ILLEGAL_DELIVERY_TIME),
    (wire(body_digest=pb.Digest(type=pb.DigestType.MD5, checksum="00" * 16)), Code.MESSAGE_CORRUPTED),
])
def test_bad_messages_are_refused_with_the_clients_codes(m, code):
    with pytest.raises(ProxyError) as err:
        stored(m)
    assert err.value.code == code


def test_a_body_over_the_limit():
    with pytest.raises(ProxyError) as err:
        stored(wire(body=b"x" * 11), max_body=10)
    assert err.value.code == Code.MESSAGE_BODY_TOO_LARGE


@pytest.mark.parametrize("checksum", ["%08X", "%X", "%08x"])
def test_crc32_digests_padded_or_not_are_accepted(checksum):
    body = b"ab"  # crc32 0x9E83486D; and one whose crc32 needs padding below
    for b in (body, b"\x00" * 7):
        stored(wire(body=b, body_digest=pb.Digest(type=pb.DigestType.CRC32, checksum=checksum % zlib.crc32(b))))


@given(st.integers(-(2**31), 2**31 - 1), st.integers(1, 200))
def test_consistent_hash_is_guavas_shape(key, n):
    """Guava's consistentHash: a bucket in range, and growing the buckets by one moves a key only to the new one."""
    a, b = C.consistent_hash(key, n), C.consistent_hash(key, n + 1)
    assert 0 <= a < n
    assert b == a or b == n


def test_consistent_hash_spreads_keys():
    from mq.common.tags import java_hash_code

    seen = {C.consistent_hash(java_hash_code(f"group-{i}"), 8) for i in range(200)}
    assert seen == set(range(8))


def test_namespaces_wrap_and_split():
    assert C.wrap_namespace("ns", "T") == "ns%T" and C.wrap_namespace("", "T") == "T"
    assert C.split_namespace("ns%T") == ("ns", "T") and C.split_namespace("%RETRY%g") == ("", "%RETRY%g")
