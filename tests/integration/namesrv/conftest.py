"""A real name server on a free loopback port, and a helper that registers brokers through our client."""

from __future__ import annotations

import dataclasses
import zlib

import pytest

from mq.config import NamesrvConfig
from mq.daemon.namesrv.server import NamesrvServer
from mq.protocol import headers as h
from mq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient


@pytest.fixture
async def namesrv(tmp_path):
    cfg = dataclasses.replace(NamesrvConfig(), host="127.0.0.1", listen_port=0,
                              kv_config_path=str(tmp_path / "kvConfig.json"),
                              scan_not_active_broker_interval_ms=100, broker_channel_expired_time_ms=120_000)
    server = NamesrvServer(cfg)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client():
    c = RemotingClient(name="test")
    try:
        yield c
    finally:
        await c.close()


def register_command(*, broker_name: str, broker_addr: str, cluster: str = "DefaultCluster", broker_id: int = 0,
                     topics: dict[str, int] | None = None, counter: int = 1, compressed: bool = False,
                     crc: bool = True) -> RemotingCommand:
    table = {t: TopicConfig(topic_name=t, read_queue_nums=n, write_queue_nums=n) for t, n in (topics or {}).items()}
    wrapper = TopicConfigSerializeWrapper(topic_config_table=table,
                                          data_version=DataVersion(timestamp=1700000000000, counter=counter))
    body = RegisterBrokerBody(topic_config_serialize_wrapper=wrapper, filter_server_list=[]).encode(compressed)
    hdr = h.RegisterBrokerRequestHeader(broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster,
                                        ha_server_addr=broker_addr.rsplit(":", 1)[0] + ":10912", broker_id=broker_id,
                                        compressed=compressed,
                                        body_crc32=(zlib.crc32(body) & 0x7FFFFFFF) if crc else 0)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr.to_ext(), body)
