"""mq.protocol.bodies: every JSON body, Java / fastjson / C++ / ali-ons forms (PROTOCOL.md §6, §11)."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import orjson

from mq.errors import RemoteProtocolError
from mq.protocol import bodies as b
from mq.protocol.codes import LanguageCode

MQ0 = b.MessageQueue("T", "broker-a", 0)
MQ1 = b.MessageQueue("T", "broker-a", 1)


def test_message_queue_hashable_ordered_and_json():
    assert sorted([b.MessageQueue("T", "b", 2), MQ1, MQ0, b.MessageQueue("A", "z", 9)])[0].topic == "A"
    assert MQ0 < MQ1 and len({MQ0, b.MessageQueue("T", "broker-a", 0)}) == 1
    assert orjson.dumps(MQ0.to_json_value()) == b'{"brokerName":"broker-a","queueId":0,"topic":"T"}'
    assert b.MessageQueue.from_json_value(orjson.loads(b'{"topic":"T","brokerName":"broker-a","queueId":"0"}')) == MQ0
    from mq.common.message import MessageQueue

    assert b.MessageQueue is MessageQueue  # one MessageQueue type for client, broker and bodies


# ---- §6.1 TopicRouteData ------------------------------------------------------------------------
ROUTE_STANDARD = (b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
                  b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
                  b'"orderTopicConf":"broker-a:4;broker-b:4","queueDatas":[{"brokerName":"broker-a","perm":6,'
                  b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
ROUTE_FASTJSON = ROUTE_STANDARD.replace(b'"0":', b"0:").replace(b'"1":', b"1:")


def _route() -> b.TopicRouteData:
    return b.TopicRouteData(
        order_topic_conf="broker-a:4;broker-b:4",
        queue_datas=[b.QueueData("broker-a", 4, 4, 6, 0)],
        broker_datas=[b.BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})],
        filter_server_table={})


def test_route_standard_and_fastjson_forms_byte_exact():
    route = _route()
    assert route.to_json() == ROUTE_STANDARD
    assert route.to_json(standard=False) == ROUTE_FASTJSON
    assert b.TopicRouteData.from_json(ROUTE_STANDARD) == route
    assert b.TopicRouteData.from_json(ROUTE_FASTJSON + b"\n") == route


def test_route_omits_null_order_conf_and_reads_old_spelling():
    route = b.TopicRouteData.from_json(b'{"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":1,'
                                       b'"topicSynFlag":3,"writeQueueNums":1}],"brokerDatas":[]}')
    assert route.queue_datas[0].topic_sys_flag == 3 and route.order_topic_conf is None
    assert b"orderTopicConf" not in route.to_json()


@pytest.mark.parametrize("version,flag,standard", [(401, False, True), (407, False, True), (333, False, False),
                                                   (63, False, False), (121, False, False), (121, True, True)])
def test_standard_json_for(version, flag, standard):
    assert b.standard_json_for(version, flag) is standard


# ---- §6.6 ClusterInfo ----------------------------------------------------------------------------
def test_cluster_info_uses_unquoted_keys_like_java():
    text = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
            b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')
    info = b.ClusterInfo.from_json(text)
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.1:10911"}
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert info.to_json() == text
    assert b'"0":' in info.to_json(standard=True)


# ---- §6.7 register body, topic config, data version ----------------------------------------------
def _register_body() -> b.RegisterBrokerBody:
    table = {"T": b.TopicConfig("T", 8, 8), "%RETRY%G": b.TopicConfig("%RETRY%G", 1, 1, 6, "SINGLE_TAG")}
    return b.RegisterBrokerBody(b.TopicConfigSerializeWrapper(table, b.DataVersion(1690000000000, 7)), [])


def test_topic_config_and_data_version_java_shapes():
    assert b.DataVersion(1690000000000, 7).to_json() == b'{"counter":7,"timestamp":1690000000000}'
    assert b.TopicConfig("T", 8, 8).to_json() == (
        b'{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T",'
        b'"topicSysFlag":0,"writeQueueNums":8}')
    assert b.TopicConfig() == b.TopicConfig("", 16, 16, 6, "SINGLE_TAG", 0, False)


@settings(max_examples=200, deadline=None)
@given(st.builds(b.TopicConfig, st.text(max_size=20), st.integers(0, 1024), st.integers(0, 1024), st.integers(0, 15),
                 st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]), st.integers(0, 2**31 - 1), st.booleans()))
def test_topic_config_fast_encoder_equals_the_generic_one(tc):
    assert tc.to_json_value() == b.JsonBody.to_json_value(tc)
    assert list(tc.to_json_value()) == list(b.JsonBody.to_json_value(tc))  # fastjson's field order too


def test_topic_config_with_a_none_field_is_encoded_as_the_generic_encoder_does():
    tc = b.TopicConfig("T", 8, 8)
    tc.topic_filter_type = None  # type: ignore[assignment]
    assert tc.to_json_value() == b.JsonBody.to_json_value(tc)
    assert "topicFilterType" not in tc.to_json_value()


def test_register_body_json_round_trip():
    body = _register_body()
    text = body.to_json()
    assert text.startswith(b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":')
    assert b.RegisterBrokerBody.decode(text) == body == b.RegisterBrokerBody.from_json(text)


def test_register_body_compressed_layout_built_by_hand():
    dv = b'{"counter":7,"timestamp":1690000000000}'
    topics = [b"T 8 8 6 SINGLE_TAG", b"%RETRY%G 1 1 6 SINGLE_TAG"]
    raw = struct.pack(">i", len(dv)) + dv + struct.pack(">i", len(topics))
    for t in topics:
        raw += struct.pack(">i", len(t)) + t
    raw += struct.pack(">i", 2) + b"[]"
    assert b.RegisterBrokerBody.decode(zlib.compress(raw, 9), compressed=True) == _register_body()
    assert zlib.decompress(_register_body().encode(compressed=True)) == raw


@pytest.mark.parametrize("raw", [
    b"", struct.pack(">i", 100) + b"{}", struct.pack(">i", 2) + b"{}" + struct.pack(">i", 5),
    struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 3) + b"a b",
    struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 13) + b"T x 1 6 SINGLE",
    struct.pack(">i", 2) + b"{}" + struct.pack(">i", 0) + struct.pack(">i", 2) + b"{}",
    struct.pack(">i", 2) + b"{}" + struct.pack(">i", -1),
])
def test_bad_compressed_register_bodies(raw):
    with pytest.raises(RemoteProtocolError):
        b.RegisterBrokerBody.decode(zlib.compress(raw), compressed=True)


def test_compressed_register_body_not_zlib_and_bomb():
    with pytest.raises(RemoteProtocolError):
        b.RegisterBrokerBody.decode(b"not zlib", compressed=True)
    bomb = zlib.compress(b"\0" * (b.MAX_INFLATED + 1024), 9)
    with pytest.raises(RemoteProtocolError, match="inflates"):
        b.RegisterBrokerBody.decode(bomb, compressed=True)


# ---- §6.3 small lists ----------------------------------------------------------------------------
def test_topic_list_kv_table_group_list_consumer_list():
    tl = b.TopicList.from_json(b'{"topicList":["A","B"],"brokerAddr":"1.2.3.4:10911"}')
    assert tl.topic_list == {"A", "B"} and tl.broker_addr == "1.2.3.4:10911"
    assert b.TopicList({"B", "A"}).to_json() == b'{"topicList":["A","B"]}'
    assert b.KVTable.from_json(b'{"table":{"k":"v"}}').table == {"k": "v"}
    assert b.KVTable({"putTps": "1.0 2.0 3.0"}).to_json() == b'{"table":{"putTps":"1.0 2.0 3.0"}}'
    assert b.GroupList.from_json(b'{"groupList":["G1"]}').group_list == {"G1"}
    assert b.GetConsumerListByGroupResponseBody.from_json(b'{"consumerIdList":["c1","c2"]}').consumer_id_list == \
        ["c1", "c2"]


# ---- §6.4 heartbeats ---------------------------------------------------------------------------
JAVA_HEARTBEAT = (
    b'{"clientID":"10.0.0.5@12345","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING","subscriptionDataSet":['
    b'{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
    b'"subVersion":1690000000000,"tagsSet":["TagA"],"topic":"T"},'
    b'{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1690000000000,'
    b'"tagsSet":[],"topic":"%RETRY%G"}],"unitMode":false}],'
    b'"producerDataSet":[{"groupName":"PG"},{"groupName":"CLIENT_INNER_PRODUCER"}]}')
CPP_HEARTBEAT = (
    b'{"clientID":"10.0.0.6@4321#default","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,'
    b'"groupName":"G","messageModel":1,"subscriptionDataSet":[{"codeSet":[0],"subString":"TagA",'
    b'"subVersion":"1690000000000","tagsSet":["TagA"],"topic":"T"},{"subString":"*",'
    b'"subVersion":"1690000000001","topic":"%RETRY%G"}]}]}\n')
ONS_HEARTBEAT = (
    b'{"clientID":"10.0.0.7@9","producerDataSet":[],"consumerDataSet":[{"groupName":"G",'
    b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
    b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",'
    b'"subscriptionDataSet":[{"topic":"T","subString":"*","classFilterMode":false,"tagsSet":[],"codeSet":[],'
    b'"subVersion":1690000000000}]}]}')


def test_java_heartbeat_round_trips_byte_exact():
    hb = b.HeartbeatData.from_json(JAVA_HEARTBEAT)
    assert hb.client_id == "10.0.0.5@12345"
    [cd] = hb.consumer_data_set
    assert (cd.consume_type, cd.message_model, cd.consume_from_where) == (
        b.ConsumeType.CONSUME_PASSIVELY, b.MessageModel.CLUSTERING, b.ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
    assert cd.subscription_data_set[0].code_set == {2598919}
    assert [p.group_name for p in hb.producer_data_set] == ["PG", "CLIENT_INNER_PRODUCER"]
    assert hb.to_json() == JAVA_HEARTBEAT


def test_cpp_heartbeat_quirks():
    hb = b.HeartbeatData.from_json(CPP_HEARTBEAT)
    assert hb.producer_data_set == []  # key absent when empty
    [cd] = hb.consumer_data_set
    assert cd.consume_type is b.ConsumeType.CONSUME_PASSIVELY  # ordinal 1
    assert cd.message_model is b.MessageModel.CLUSTERING
    assert cd.consume_from_where is b.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert cd.unit_mode is False
    sub, retry = cd.subscription_data_set
    assert sub.sub_version == 1690000000000 and sub.expression_type == "TAG" and sub.code_set == {0}
    assert retry.tags_set == set() and retry.code_set == set() and retry.sub_version == 1690000000001
    assert retry.class_filter_mode is False


def test_ons_heartbeat_deprecated_enum_name():
    [cd] = b.HeartbeatData.from_json(ONS_HEARTBEAT).consumer_data_set
    assert cd.consume_from_where is b.ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST


def test_producer_only_heartbeat_without_consumers():
    hb = b.HeartbeatData.from_json(b'{"clientID":"c","producerDataSet":[{"groupName":"PG"}]}')
    assert hb.consumer_data_set == [] and hb.producer_data_set == [b.ProducerData("PG")]


@pytest.mark.parametrize("bad", [
    b"", b"\n", b"[]", b"not json", b'{"clientID":[1]}', b'{"consumerDataSet":{}}',
    b'{"consumerDataSet":[{"consumeType":"NOPE"}]}', b'{"consumerDataSet":[{"consumeType":7}]}',
    b'{"consumerDataSet":[{"subscriptionDataSet":[{"subVersion":"soon"}]}]}',
    b'{"consumerDataSet":[{"subscriptionDataSet":[{"tagsSet":[[1]]}]}]}',
    b'{"consumerDataSet":[{"unitMode":"maybe"}]}', b'{"consumerDataSet":[5]}',
])
def test_bad_heartbeats_raise_remote_protocol_error(bad):
    with pytest.raises(RemoteProtocolError):
        b.HeartbeatData.from_json(bad)


def test_unknown_fields_ignored_and_nulls_default():
    hb = b.HeartbeatData.from_json(b'{"clientID":"c","newField":{"x":1},"producerDataSet":null}')
    assert hb == b.HeartbeatData("c")


# ---- §6.5 connections ------------------------------------------------------------------------------
def test_consumer_and_producer_connection():
    text = (b'{"connectionSet":[{"clientAddr":"10.0.0.5:53412","clientId":"c1","language":"JAVA","version":401}],'
            b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
            b'"messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],'
            b'"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}}}')
    cc = b.ConsumerConnection.from_json(text)
    assert cc.connection_set == [b.Connection("c1", "10.0.0.5:53412", LanguageCode.JAVA, 401)]
    assert cc.subscription_table["T"].sub_string == "*"
    assert cc.to_json() == text
    pc = b.ProducerConnection([b.Connection("p", "1.1.1.1:1", LanguageCode.CPP, 63)])
    assert pc.to_json() == (b'{"connectionSet":[{"clientAddr":"1.1.1.1:1","clientId":"p","language":"CPP",'
                            b'"version":63}]}')
    assert b.ProducerConnection.from_json(pc.to_json()) == pc


# ---- §6.8 locks ------------------------------------------------------------------------------------
def test_lock_bodies():
    req = b.LockBatchRequestBody.from_json(
        b'{"clientId":"c","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":1,"topic":"T"},'
        b'{"topic":"T","brokerName":"broker-a","queueId":0}]}\n')
    assert req.mq_set == {MQ0, MQ1} and req.client_id == "c" and req.consumer_group == "G"
    assert req.to_json() == (b'{"clientId":"c","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":0,'
                             b'"topic":"T"},{"brokerName":"broker-a","queueId":1,"topic":"T"}]}')
    resp = b.LockBatchResponseBody({MQ1})
    assert resp.to_json() == b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    assert b.LockBatchResponseBody.from_json(resp.to_json()) == resp
    un = b.UnlockBatchRequestBody("G", "c", {MQ0})
    assert b.UnlockBatchRequestBody.from_json(un.to_json()) == un


# ---- §6.2 MessageQueue-keyed bodies ----------------------------------------------------------------
CONSUME_STATS = (b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
                 b'{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":1690000000000},'
                 b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":0,"consumerOffset":0,'
                 b'"lastTimestamp":0}}}')


def test_consume_stats_object_keys_both_ways():
    cs = b.ConsumeStats.from_json(CONSUME_STATS)
    assert cs.offset_table[MQ0] == b.OffsetWrapper(5, 3, 1690000000000)
    assert cs.offset_table[MQ1] == b.OffsetWrapper() and cs.consume_tps == 0.0
    assert cs.to_json() == CONSUME_STATS


def test_mq_keys_as_json_strings_are_accepted():
    text = b'{"offsetTable":{"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":0,\\"topic\\":\\"T\\"}":7}}'
    assert b.ResetOffsetBody.from_json(text).offset_table == {MQ0: 7}


def test_topic_stats_and_reset_offset():
    ts = b.TopicStatsTable({MQ0: b.TopicOffset(0, 10, 1690000000000)})
    assert ts.to_json() == (b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
                            b'{"lastUpdateTimestamp":1690000000000,"maxOffset":10,"minOffset":0}}}')
    assert b.TopicStatsTable.from_json(ts.to_json()) == ts
    ro = b.ResetOffsetBody({MQ1: 4})
    assert b.ResetOffsetBody.from_json(ro.to_json()) == ro


@pytest.mark.parametrize("bad", [b'{"offsetTable":{"T":5}}', b'{"offsetTable":{{"a":1}:5}}',
                                 b'{"offsetTable":{0:5}}', b'{"offsetTable":{{"queueId":"x"}:5}}'])
def test_bad_mq_keys(bad):
    with pytest.raises(RemoteProtocolError):
        b.ResetOffsetBody.from_json(bad)


def test_consumer_offset_wrapper_unquoted_ids():
    w = b.ConsumerOffsetSerializeWrapper.from_json(b'{"offsetTable":{"T@G":{0:5,1:7}}}')
    assert w.offset_table == {"T@G": {0: 5, 1: 7}}
    assert w.to_json(standard=False) == b'{"offsetTable":{"T@G":{0:5,1:7}}}'
    assert w.to_json() == b'{"offsetTable":{"T@G":{"0":5,"1":7}}}'


# ---- §6.11, §6.12 ----------------------------------------------------------------------------------
def test_subscription_group_config_defaults_match_spec():
    text = (b'{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
            b'"groupName":"G","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
            b'"whichBrokerWhenConsumeSlowly":1}')
    assert b.SubscriptionGroupConfig("G").to_json() == text
    assert b.SubscriptionGroupConfig.from_json(text) == b.SubscriptionGroupConfig("G")
    w = b.SubscriptionGroupWrapper({"G": b.SubscriptionGroupConfig("G")}, b.DataVersion(1, 2))
    assert b.SubscriptionGroupWrapper.from_json(w.to_json()) == w


def test_consume_message_directly_result():
    text = b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"ok","spentTimeMills":3}'
    r = b.ConsumeMessageDirectlyResult.from_json(text)
    assert r.consume_result == "CR_SUCCESS" and r.spent_time_mills == 3 and r.to_json() == text


# ---- properties --------------------------------------------------------------------------------------
names = st.text(min_size=1, max_size=10)
mqs = st.builds(b.MessageQueue, names, names, st.integers(0, 1000))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.builds(b.QueueData, names, st.integers(0, 64), st.integers(0, 64), st.integers(0, 15),
                          st.integers(0, 7)), max_size=4),
       st.lists(st.builds(b.BrokerData, names, names, st.dictionaries(st.integers(0, 16), names, max_size=3)),
                max_size=4),
       st.none() | names, st.booleans())
def test_route_round_trip_both_forms(queues, brokers, conf, standard):
    route = b.TopicRouteData(conf, queues, brokers, {})
    assert b.TopicRouteData.from_json(route.to_json(standard=standard)) == route


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(mqs, st.builds(b.OffsetWrapper, st.integers(0, 2**62), st.integers(0, 2**62),
                                      st.integers(0, 2**62)), max_size=5),
       st.floats(0, 1e6, allow_nan=False))
def test_consume_stats_round_trip(table, tps):
    cs = b.ConsumeStats(table, tps)
    assert b.ConsumeStats.from_json(cs.to_json()) == cs


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(names, st.builds(b.TopicConfig, names, st.integers(0, 64), st.integers(0, 64),
                                        st.integers(0, 15), st.sampled_from(["SINGLE_TAG", "MULTI_TAG"])),
                       max_size=5),
       st.builds(b.DataVersion, st.integers(0, 2**45), st.integers(0, 2**31)),
       st.lists(names, max_size=3), st.booleans())
def test_register_body_round_trip_both_forms(table, version, filters, compressed):
    table = {k.replace(" ", "_"): b.TopicConfig(k.replace(" ", "_"), v.read_queue_nums, v.write_queue_nums,
                                                 v.perm, v.topic_filter_type) for k, v in table.items()}
    body = b.RegisterBrokerBody(b.TopicConfigSerializeWrapper(table, version), filters)
    assert b.RegisterBrokerBody.decode(body.encode(compressed), compressed) == body


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=120))
def test_garbage_bodies_only_raise_remote_protocol_error(data):
    for cls in (b.HeartbeatData, b.TopicRouteData, b.ConsumeStats, b.LockBatchRequestBody, b.ClusterInfo):
        try:
            cls.from_json(data)
        except RemoteProtocolError:
            pass
