"""Pure parts of the gRPC endpoint: metadata and signatures, routes' queues, transaction ids, recall handles,
the shipped descriptors, the remoting port's protocol sniff and the name server's gRPC addresses."""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import logging

import pytest

from mq.daemon.proxy import context as X
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.producer import parse_recall_handle, recall_handle
from mq.daemon.proxy.route import accepted_types, queues_of
from mq.daemon.proxy.sessions import decode_transaction_id, encode_transaction_id
from mq.daemon.proxy.status import ProxyError, from_response_code
from mq.protocol.bodies import QueueData, TopicConfig
from mq.protocol.codes import LanguageCode, ResponseCode


def test_authorization_header_as_the_python_client_writes_it():
    sig = hmac.new(b"secret", b"20260101T000000Z", hashlib.sha1).hexdigest()
    header = f"MQv2-HMAC-SHA1 Credential=ak1, SignedHeaders=x-mq-date-time, Signature={sig}"
    assert X.parse_authorization(header) == ("ak1", "x-mq-date-time", sig)
    assert X.signature("secret", "20260101T000000Z") == sig
    assert X.parse_authorization("Basic abc") is None


def test_language_version_and_peer():
    assert X.language_code("PYTHON") is LanguageCode.PYTHON and X.language_code("HTTP") is LanguageCode.HTTP
    assert X.language_code("whatever") is LanguageCode.OTHER
    assert X.version_ordinal("4.9.4") == 401  # MQVersion.V4_9_4
    assert X.version_ordinal("1.0.8") == X.version_ordinal("5.0.0")  # the Node client's own numbering
    assert X.peer_address("ipv4:127.0.0.1:5000") == "127.0.0.1:5000"
    assert X.peer_address("ipv6:[::1]:5000") == "[::1]:5000"


class _Ctx:
    def __init__(self, md):
        self.md = md

    def invocation_metadata(self):
        return self.md

    def peer(self):
        return "ipv4:10.1.2.3:4567"


def test_call_context_needs_a_client_id():
    ctx = X.call_context(_Ctx((("x-mq-client-id", "c1"), ("x-mq-language", "PYTHON"), ("other", "x"))))
    assert (ctx.client_id, ctx.language, ctx.remote_addr, ctx.peer_host) == ("c1", "PYTHON", "10.1.2.3:4567",
                                                                             "10.1.2.3")
    with pytest.raises(ProxyError) as err:
        X.call_context(_Ctx((("x-mq-language", "PYTHON"),)))
    assert err.value.code == pb.Code.CLIENT_ID_REQUIRED


def test_queues_follow_apaches_permission_split():
    topic, broker = pb.Resource(name="T"), pb.Broker(name="b")
    qs = queues_of(QueueData("b", read_queue_nums=4, write_queue_nums=2, perm=6), topic, broker, (1,))
    assert [(q.id, q.permission) for q in qs] == [(0, pb.Permission.READ), (1, pb.Permission.READ),
                                                 (2, pb.Permission.READ_WRITE), (3, pb.Permission.READ_WRITE)]
    assert [q.permission for q in queues_of(QueueData("b", 2, 2, perm=0), topic, broker, (1,))] == \
        [pb.Permission.NONE] * 2


def test_accepted_message_types():
    assert accepted_types(None) == (1, 2, 3, 4)
    tc = TopicConfig(topic_name="T")
    tc.attributes = {"+message.type": "FIFO"}
    assert accepted_types(tc) == (pb.MessageType.FIFO,)


def test_transaction_ids_and_recall_handles_round_trip():
    tid = encode_transaction_id("ID1", "12 3456")
    assert decode_transaction_id(tid) == ("ID1", 12, 3456)
    with pytest.raises(ProxyError):
        decode_transaction_id("garbage")
    h = recall_handle("T", "broker-a", 1_700_000_000_000, "ID1")
    assert parse_recall_handle(h) == ("T", "broker-a", 1_700_000_000_000, "ID1")
    with pytest.raises(ProxyError):
        parse_recall_handle("!!")


def test_response_codes_map_as_rocketmqs_proxy():
    assert from_response_code(ResponseCode.SYSTEM_BUSY, "busy").code == pb.Code.TOO_MANY_REQUESTS
    assert from_response_code(ResponseCode.TOPIC_NOT_EXIST, None).code == pb.Code.TOPIC_NOT_FOUND
    assert from_response_code(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "").code == pb.Code.CONSUMER_GROUP_NOT_FOUND
    assert from_response_code(999, "x").code == pb.Code.INTERNAL_SERVER_ERROR


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools is not installed")
def test_shipped_descriptors_are_what_the_pinned_protoc_makes_of_the_protos():
    from importlib.metadata import version
    from pathlib import Path

    from mq.daemon.proxy.proto import regenerate

    if version("grpcio-tools") != "1.85.1":
        pytest.skip("descriptors.py is generated with grpcio-tools 1.85.1")
    assert regenerate.build() == (Path(regenerate.__file__).with_name("descriptors.py")).read_text()


def test_remoting_port_names_the_grpc_endpoint_for_a_grpc_client(caplog):
    from mq.remoting.connection import Connection, foreign_protocol

    assert foreign_protocol(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") == "HTTP/2 (gRPC)"
    assert foreign_protocol(b"\x16\x03\x01\x02\x00\x01") == "TLS"
    assert foreign_protocol(b"\x00\x00\x00\x10\x00\x00") is None

    class Registry:
        foreign_protocol_hint = "use 127.0.0.1:8081"

    class Transport:
        closed = False

        def close(self):
            self.closed = True

        def abort(self):
            self.closed = True

        def get_extra_info(self, name):
            return ("127.0.0.1", 40000)

    conn = Connection(Registry(), name="broker")
    conn.transport = Transport()
    conn.remote_addr = "127.0.0.1:40000"
    with caplog.at_level(logging.WARNING, logger="mq.remoting.connection"):
        conn.data_received(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert conn.closed
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "HTTP/2 (gRPC)" in lines[0] and "use 127.0.0.1:8081" in lines[0]
    assert "frame length" not in lines[0]


def test_name_server_routes_carry_grpc_addresses_only_when_registered():
    from mq.daemon.namesrv.route_table import RouteTable
    from mq.protocol.bodies import TopicConfigSerializeWrapper

    wrapper = TopicConfigSerializeWrapper(topic_config_table={"T": TopicConfig(topic_name="T")})
    t = RouteTable()
    t.register_broker(cluster="c", broker_addr="10.0.0.1:10911", broker_name="b1", broker_id=0, ha_server_addr="",
                      wrapper=wrapper, filter_servers=None, channel=None, now_ms=1, grpc_port=8081)
    t.register_broker(cluster="c", broker_addr="10.0.0.2:10911", broker_name="b2", broker_id=0, ha_server_addr="",
                      wrapper=wrapper, filter_servers=None, channel=None, now_ms=1)
    route = t.pickup_route("T")
    grpc = {bd.broker_name: bd.grpc_addrs for bd in route.broker_datas}
    assert grpc == {"b1": {"10.0.0.1:10911": "10.0.0.1:8081"}, "b2": None}
    assert b"grpcAddrs" not in TopicRouteDataOf(route, "b2")


def TopicRouteDataOf(route, name):
    from mq.protocol.bodies import TopicRouteData

    return TopicRouteData(queue_datas=route.queue_datas,
                          broker_datas=[bd for bd in route.broker_datas if bd.broker_name == name]).to_json()


def test_recall_table_forgets_what_it_dropped():
    from mq.daemon.broker.timer.recall import RecallTable, TIMER_DEL_UNIQKEY, marker_key

    t = RecallTable()
    t.on_marker({TIMER_DEL_UNIQKEY: marker_key("T", "ID1"), "RECALL_DELIVER_MS": "1000"})
    assert not t.recalled({"REAL_TOPIC": "T", "UNIQ_KEY": "ID2"}, 1000)
    assert t.recalled({"REAL_TOPIC": "T", "UNIQ_KEY": "ID1"}, 1000)
    assert not t.recalled({"REAL_TOPIC": "T", "UNIQ_KEY": "ID1"}, 1000)


def test_a_5x_message_id_is_a_uniq_key_for_the_query_commands():
    from mq.cli.query import IdKind, classify_msg_id

    assert classify_msg_id("0102FC0000000135E60B1925D400000000") == (IdKind.UNIQ_KEY, None)
    with pytest.raises(ValueError):
        classify_msg_id("02" + "0" * 32)  # 34 hex characters, but not a 5.x id
