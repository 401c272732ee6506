"""Delivery integration fixtures: the real name server and broker fixtures of tests/integration/broker/conftest.py,
loaded by path, plus ``client_config`` (helpers: delivery_helpers.py)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import pytest

from mq.config import ClientConfig

_spec = importlib.util.spec_from_file_location("_mq_broker_fixtures",
                                               Path(__file__).parents[1] / "broker" / "conftest.py")
_mod = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mod
_spec.loader.exec_module(_mod)

loop = _mod.loop
run = _mod.run
namesrv = _mod.namesrv
broker_factory = _mod.broker_factory
broker = _mod.broker
cluster = _mod.cluster
client = _mod.client

_ids = itertools.count()


@pytest.fixture
def client_config(namesrv, tmp_path):
    def make(**kw) -> ClientConfig:
        kw.setdefault("instance_name", f"it{next(_ids)}")
        kw.setdefault("client_ip", "127.0.0.1")
        kw.setdefault("local_offset_store_dir", str(tmp_path / "offsets"))
        return ClientConfig(namesrv_addr=namesrv.address, **kw)
    return make

