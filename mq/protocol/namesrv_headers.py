"""Typed headers of the name server's requests (RocketMQ 4.x: route lookup, broker registration, KV config,
write permission, topics by cluster). Re-exported by ``headers.py``, where ``REQUEST_HEADERS`` maps codes to them.
"""

from __future__ import annotations

from mq.protocol.header_codec import Header, Long, _header


# ---------------------------------------------------------------------------------------------
# name server (100-106, 205, 206, 216, 219, 224, 322, 327)
# ---------------------------------------------------------------------------------------------
@_header
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@_header
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    compressed: bool = False
    body_crc32: int = 0
    #: the broker's gRPC endpoint port (an mq extension; a Java name server ignores the extField); None: none
    grpc_server_port: int | None = None


@_header
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@_header
class UnregisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@_header
class QueryDataVersionRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@_header
class QueryDataVersionResponseHeader(Header):
    changed: bool


@_header
class PutKVConfigRequestHeader(Header):
    namespace: str
    key: str
    value: str


@_header
class GetKVConfigRequestHeader(Header):
    namespace: str
    key: str


@_header
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@_header
class DeleteKVConfigRequestHeader(Header):
    namespace: str
    key: str


@_header
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str


@_header
class WipeWritePermOfBrokerRequestHeader(Header):
    broker_name: str


@_header
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int


@_header
class AddWritePermOfBrokerRequestHeader(Header):
    broker_name: str


@_header
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int


@_header
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@_header
class GetTopicsByClusterRequestHeader(Header):
    cluster: str
