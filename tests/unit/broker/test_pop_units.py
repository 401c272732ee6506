"""The pure parts of pop: receipt handles (ExtraInfoUtil), batch-ack bit sets, topic attributes, revive-log records,
FIFO order info, the finished-handle table, the ACL resources of the pop codes; hostile input raises only the
documented errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.common.attributes import alter, parse_to_map, parse_to_string
from mq.daemon.broker.acl_resources import Perm, required_resources
from mq.daemon.broker.pop import records as R
from mq.daemon.broker.pop.handles import ACKED, REPLACED, FinishedHandles
from mq.daemon.broker.pop.order import ILLEGAL, STALE, OrderInfoManager
from mq.errors import RemoteProtocolError, TopicAttributeError
from mq.protocol import extra_info as X
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand
from mq.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody, decode_bitset, encode_bitset

names = st.text(st.sampled_from("abcXYZ019_-%"), min_size=1, max_size=12)
longs = st.integers(0, 2**62)


# -- receipt handles ------------------------------------------------------------------------------------------
@given(longs, longs, st.integers(0, 2**40), st.sampled_from([0, 3, 999]), st.sampled_from(["0", "1", "2"]), names,
       st.integers(0, 1023), longs)
def test_extra_info_round_trip(ck, pt, it, rq, retry, broker, qid, qo):
    text = X.build(ck, pt, it, rq, retry, broker, qid, qo)
    ei = X.parse(text)
    assert (ei.ck_queue_offset, ei.pop_time, ei.invisible_time, ei.revive_qid, ei.retry, ei.broker_name,
            ei.queue_id, ei.queue_offset) == (ck, pt, it, rq, retry, broker, qid, qo)
    assert ei.encode() == text and ei.revive_time == pt + it and ei.is_order == (rq == 999)
    handle = X.parse(f"{text} 123456")  # the 5.x receipt handle adds the commit-log offset
    assert handle.commit_log_offset == 123456 and handle.queue_offset == qo


def test_extra_info_as_the_java_client_builds_it():
    assert X.build(5, 1700000000000, 60000, 0, "0", "broker-a", 3) == "5 1700000000000 60000 0 0 broker-a 3"
    assert X.retry_flag("T") == "0" and X.retry_flag("%RETRY%G_T") == "1" and X.retry_flag("%RETRY%G+T") == "2"
    assert X.real_topic("T", "G", "1") == "%RETRY%G_T" and X.real_topic("T", "G", "2") == "%RETRY%G+T"
    assert X.real_topic("%RETRY%G_T", "G", "1") == "%RETRY%G_T"
    assert X.origin_topic("%RETRY%G_T_x", "G") == "T_x" and X.origin_topic("%RETRY%G+T", "G") == "T"
    info = "0 1 5;1 0 7"
    assert X.parse_start_offset_info(info) == {"0@1": 5, "1@0": 7}
    assert X.parse_msg_offset_info("0 1 5,6,9") == {"0@1": [5, 6, 9]}
    assert X.parse_order_count_info(";".join(X.order_count_entries("T", 2, {8: 3}, 0))) == {"0@qo2%8": 3, "0@2": 0}


@settings(max_examples=300)
@given(st.text(max_size=120))
def test_extra_info_hostile_text_raises_only_protocol_errors(text):
    try:
        X.parse(text)
    except RemoteProtocolError:
        pass
    for f in (X.parse_start_offset_info, X.parse_msg_offset_info, X.parse_order_count_info):
        try:
            f(text)
        except RemoteProtocolError:
            pass


# -- batch acks -----------------------------------------------------------------------------------------------
def test_bitset_is_javas_to_byte_array_in_base64():
    assert encode_bitset([0, 1, 2]) == "Bw==" and encode_bitset([8]) == "AAE=" and encode_bitset([]) == ""
    assert decode_bitset("Bw==") == [0, 1, 2] and decode_bitset(None) == []
    body = BatchAckMessageRequestBody("b", [BatchAck("G", "T", "0", 10, 1, 0, 5, 60, encode_bitset([0, 3]))])
    again = BatchAckMessageRequestBody.from_json(body.to_json())
    assert again.acks[0].offsets() == [10, 13]
    java = b'{"acks":[{"b":"CQ==","c":"G","it":60000,"pt":7,"q":2,"r":"1","rq":3,"so":100,"t":"T"}],"brokerName":"b"}'
    ba = BatchAckMessageRequestBody.from_json(java).acks[0]
    assert (ba.retry, ba.queue_id, ba.revive_queue_id, ba.offsets()) == ("1", 2, 3, [100, 103])


@given(st.sets(st.integers(0, 4000), max_size=50))
def test_bitset_round_trip(idx):
    assert decode_bitset(encode_bitset(idx)) == sorted(idx)


@given(st.text(max_size=60))
def test_bitset_hostile_text(text):
    try:
        decode_bitset(text)
    except RemoteProtocolError:
        pass


# -- topic attributes -----------------------------------------------------------------------------------------
def test_attribute_changes_as_rocketmq_applies_them():
    assert parse_to_map("+message.type=FIFO,-queue.type") == {"+message.type": "FIFO", "-queue.type": ""}
    assert parse_to_string({"+message.type": "FIFO", "-x": ""}) == "+message.type=FIFO,-x"
    assert alter(None, {"+message.type": "FIFO"}, create=True) == {"message.type": "FIFO"}
    assert alter({"message.type": "FIFO"}, {"+message.type": "DELAY"}, create=False) == {"message.type": "DELAY"}
    assert alter({"message.type": "FIFO"}, {"-message.type": ""}, create=False) == {}
    assert alter(None, {"+queue.type": "SimpleCQ"}, create=True) == {"queue.type": "SimpleCQ"}
    for current, changes, create, needle in [
        (None, {"+message.type": "BAD"}, True, "not in set"),
        (None, {"-message.type": ""}, True, "only add"),
        ({}, {"-message.type": ""}, False, "nonexistent"),
        ({"queue.type": "SimpleCQ"}, {"+queue.type": "SimpleCQ"}, False, "unchangeable"),
        (None, {"+what": "1"}, True, "unsupported key"),
    ]:
        with pytest.raises(TopicAttributeError, match=needle):
            alter(current, changes, create)
    for bad in ("message.type=FIFO", "message.type", "+a=1,+a=2"):
        with pytest.raises(TopicAttributeError):
            parse_to_map(bad)


# -- revive-log records ----------------------------------------------------------------------------------------
def test_records_round_trip_and_tags_code():
    ck = R.CheckPoint("T", 1, 10, 1000, 500, "G", [0, 2, 5], "b", 16)
    back = R.parse(R.CK, ck.to_json())
    assert back == ck and back.offsets() == [10, 12, 15] and back.revive_time == 1500
    ack = R.Ack("T", 1, 10, 1000, "G", [12], "b")
    assert R.parse(R.ACK, ack.to_json()) == ack and R.parse(R.ACK, ack.to_json()).key == ck.key
    batch = R.Ack("T", 1, 10, 1000, "G", [10, 15], "b")
    assert R.parse(R.BATCH_ACK, batch.to_json()) == batch
    op = R.OrderRecord(R.ORDER_POP, "T", 0, 9, "G", [3, 4], 100, "att", 3)
    assert R.parse(R.ORDER_POP, op.to_json()) == op
    oc = R.OrderRecord(R.ORDER_CHANGE, "T", 0, 9, "G", [3], next_visible=77)
    assert R.parse(R.ORDER_CHANGE, oc.to_json()) == oc
    code = R.tags_code(1_800_000_000_123, R.ACK)
    assert R.split_tags_code(code) == (1_800_000_000_123, R.ACK) and code < 2**63


@given(st.sampled_from([R.CK, R.ACK, R.BATCH_ACK, R.ORDER_POP, R.ORDER_ACK, R.ORDER_CHANGE, 7]),
       st.binary(max_size=80) | st.text(max_size=80).map(str.encode))
def test_records_hostile_bodies(kind, body):
    try:
        R.parse(kind, body)
    except RemoteProtocolError:
        pass


# -- FIFO order info --------------------------------------------------------------------------------------------
def test_order_info_blocks_counts_commits_and_replays(tmp_path):
    m = OrderInfoManager(tmp_path)
    assert m.update("a1", "T", "G", 0, 1000, 500, [5, 6, 7], 1000) == {5: 0, 6: 0, 7: 0}
    assert m.blocked("a2", "T", "G", 0, 1400) and not m.blocked("a1", "T", "G", 0, 1400)  # same attempt
    assert not m.blocked("a2", "T", "G", 0, 1500)  # invisible time over
    assert m.commit_and_next("T", "G", 0, 6, 1000, 1100) == 5  # out of order: the offset stays at 5
    assert m.commit_and_next("T", "G", 0, 6, 999, 1100) == STALE
    assert m.commit_and_next("T", "G", 0, 9, 1000, 1100) == ILLEGAL
    assert m.change_visible("T", "G", 0, 5, 1000, 9000, 1100)
    assert m.blocked(None, "T", "G", 0, 8000)
    # a new pop of the same offsets raises their counts; the same attempt id keeps them
    assert m.preview_counts("a3", "T", "G", 0, [5, 7, 8]) == {5: 1, 7: 1, 8: 0}
    m.update("a3", "T", "G", 0, 2000, 500, [5, 7], 2000)
    assert m.preview_counts("a3", "T", "G", 0, [5, 7]) == {5: 1, 7: 1}
    assert m.commit_and_next("T", "G", 0, 5, 2000, 2100) == 7 and m.commit_and_next("T", "G", 0, 7, 2000, 2100) == 8
    m.persist(3000)
    again = OrderInfoManager(tmp_path)
    again.load()
    assert again.get("T", "G", 0) == m.get("T", "G", 0)
    # replay: an older pop changes nothing, acks are idempotent
    assert again.apply(R.OrderRecord(R.ORDER_POP, "T", 0, 1000, "G", [5, 6, 7], 500, "a1", 5), 3000) is None
    assert again.apply(R.OrderRecord(R.ORDER_ACK, "T", 0, 2000, "G", [5]), 3000) == 8


def test_finished_handles_are_bounded_and_expire():
    f = FinishedHandles(capacity=3)
    keys = [f.key("T", 0, 1, 2, "G", i) for i in range(5)]
    f.add(keys[0], 100, ACKED, 0)
    f.add(keys[1], 100, REPLACED, 0)
    assert f.reason(keys[0], 50) == ACKED and f.reason(keys[1], 50) == REPLACED
    assert f.reason(keys[0], 100) is None  # expired
    for k in keys[2:]:
        f.add(k, 1000, ACKED, 60)
    assert len(f) <= 3 and f.reason(keys[4], 70) == ACKED
    assert FinishedHandles(capacity=0).reason(keys[0], 0) is None


# -- ACL ------------------------------------------------------------------------------------------------------
def test_pop_codes_need_sub_on_group_and_topic():
    def req(code, ext=None, body=None):
        return RemotingCommand.request(code, ext or {}, body)

    ext = {"consumerGroup": "G", "topic": "T"}
    for code in (RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE, RequestCode.ACK_MESSAGE,
                 RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
        assert required_resources(req(code, ext)) == {"%RETRY%G": Perm.SUB, "T": Perm.SUB}
    assert required_resources(req(RequestCode.ACK_MESSAGE, {"consumerGroup": "G", "topic": "%RETRY%G_T"})) == {
        "%RETRY%G": Perm.SUB}
    body = BatchAckMessageRequestBody("b", [BatchAck("G", "T"), BatchAck("H", "U")]).to_json()
    assert required_resources(req(RequestCode.BATCH_ACK_MESSAGE, body=body)) == {
        "%RETRY%G": Perm.SUB, "T": Perm.SUB, "%RETRY%H": Perm.SUB, "U": Perm.SUB}
