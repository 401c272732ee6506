"""Fixtures for every integration test: a real name server and broker in-process on 127.0.0.1 port 0, with a
tmp_path store, and client configurations pointing at them.

Every fixture runs its daemons on the test's own event loop (``run`` drives coroutines on it) and always
stops them:

    run(coro, timeout=20)          run a coroutine on the test's loop (uvloop when installed)
    namesrv                        a started NamesrvServer; ``namesrv.address``
    namesrv_factory()              start another name server (stopped after the test)
    broker_factory(**overrides)    start a BrokerController registered with ``namesrv``; overrides are
                                   BrokerConfig fields or StoreConfig fields (routed by name); ``store_dir=``
                                   picks the store root (default: a fresh tmp dir); returns the controller
    broker                         broker_factory() with defaults
    cluster                        ``Cluster(namesrv, broker, namesrv_addr, broker_addr, run)``
    client                         a RemotingClient on the same loop, closed after the test
    client_config(**overrides)     a ClientConfig for ``namesrv`` with a unique instance name
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from mq.config import BrokerConfig, NamesrvConfig, StoreConfig
from mq.remoting import RemotingClient, new_event_loop

_BROKER_FIELDS = {f.name for f in dataclasses.fields(BrokerConfig)}
_STORE_FIELDS = {f.name for f in dataclasses.fields(StoreConfig)}
_counter = itertools.count()

#: Small segments so tests never map 1 GiB files.
TEST_STORE_DEFAULTS = dict(mapped_file_size_commit_log=16 * 1024 * 1024,
                           mapped_file_size_consume_queue=30_000 * 20, max_hash_slot_num=50_000,
                           max_index_num=200_000)


def split_overrides(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    broker, store = {}, {}
    for k, v in overrides.items():
        if k in _BROKER_FIELDS:
            broker[k] = v
        elif k in _STORE_FIELDS:
            store[k] = v
        else:
            raise TypeError(f"unknown broker/store config field {k!r}")
    return broker, store


@pytest.fixture
def loop():
    lp = new_event_loop()
    asyncio.set_event_loop(lp)
    yield lp
    try:
        lp.run_until_complete(lp.shutdown_asyncgens())
    finally:
        lp.close()
        asyncio.set_event_loop(None)


@pytest.fixture
def run(loop) -> Callable[..., Any]:
    def runner(coro, timeout: float = 30.0):
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))

    return runner


@pytest.fixture
def namesrv_factory(run, tmp_path):
    from mq.daemon.namesrv.server import NamesrvServer

    started: list[NamesrvServer] = []

    def make() -> NamesrvServer:
        server = NamesrvServer(NamesrvConfig(host="127.0.0.1", listen_port=0,
                                             kv_config_path=str(tmp_path / f"kvConfig{len(started)}.json")))
        run(server.start())
        started.append(server)
        return server

    yield make
    for server in reversed(started):
        run(server.stop())


@pytest.fixture
def namesrv(namesrv_factory):
    return namesrv_factory()


@pytest.fixture
def broker_factory(run, namesrv, tmp_path):
    from mq.daemon.broker.controller import BrokerController

    started: list[BrokerController] = []

    def make(*, store_dir: str | None = None, register: bool = True, **overrides: Any) -> BrokerController:
        b_over, s_over = split_overrides(overrides)
        b_over.setdefault("grpc_server_port", -1)  # tests that speak gRPC ask for it (0: any free port)
        n = next(_counter)
        root = store_dir or str(tmp_path / f"store{n}")
        bcfg = BrokerConfig(host="127.0.0.1", listen_port=0,
                            namesrv_addr=namesrv.address if register else "", **b_over)
        scfg = StoreConfig(store_path_root_dir=root, **{**TEST_STORE_DEFAULTS, **s_over})
        ctrl = BrokerController(bcfg, store_config=scfg)
        run(ctrl.start())
        started.append(ctrl)
        return ctrl

    yield make
    for ctrl in reversed(started):
        run(ctrl.stop())


@pytest.fixture
def broker(broker_factory):
    return broker_factory()


@dataclass
class Cluster:
    namesrv: Any
    broker: Any
    namesrv_addr: str
    broker_addr: str
    run: Callable[..., Any]


@pytest.fixture
def cluster(namesrv, broker, run) -> Cluster:
    return Cluster(namesrv, broker, namesrv.address, broker.address, run)


@pytest.fixture
def client(run):
    c = RemotingClient(name="test-client")
    yield c
    run(c.close())


_client_ids = itertools.count()


@pytest.fixture
def client_config(namesrv, tmp_path):
    from mq.config import ClientConfig

    def make(**kw) -> ClientConfig:
        kw.setdefault("instance_name", f"it{next(_client_ids)}")
        kw.setdefault("client_ip", "127.0.0.1")
        kw.setdefault("local_offset_store_dir", str(tmp_path / "offsets"))
        return ClientConfig(namesrv_addr=namesrv.address, **kw)
    return make
