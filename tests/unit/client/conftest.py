"""Fixtures for client unit tests: a fake name server + brokers on 127.0.0.1 port 0, unique client ids."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from mq.config import ClientConfig

from .fake_broker import start_cluster, stop_cluster

_ids = itertools.count()


@pytest.fixture
def client_config(tmp_path):
    def make(ns_addr: str, **kw) -> ClientConfig:
        kw.setdefault("instance_name", f"test{next(_ids)}")
        kw.setdefault("client_ip", "127.0.0.1")
        kw.setdefault("local_offset_store_dir", str(tmp_path / "offsets"))
        return ClientConfig(namesrv_addr=ns_addr, **kw)
    return make


@pytest.fixture
async def fake2():
    ns, brokers = await start_cluster("broker-a", "broker-b", topics={"TopicTest": 4})
    try:
        yield ns, brokers
    finally:
        await stop_cluster(ns, brokers)


@pytest.fixture
async def fake1():
    ns, brokers = await start_cluster("broker-a", topics={"TopicTest": 4})
    try:
        yield ns, brokers[0]
    finally:
        await stop_cluster(ns, brokers)
