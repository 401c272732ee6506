"""Interop fixtures: a name server and a broker on their own event loop in a background thread (the C++
client runs in subprocesses, so the daemons must keep serving while the test blocks on them)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Iterator

import pytest

from mq.config import BrokerConfig, NamesrvConfig, StoreConfig


class Daemons:
    def __init__(self, root: str, broker_options: dict | None = None, *, namesrv_port: int = 0,
                 **store_options) -> None:
        self.root = root
        self.namesrv_port = namesrv_port
        self.store_options = store_options
        #: extra BrokerConfig fields (e.g. enable_property_filter=True)
        self.broker_options = dict(broker_options or {})
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.namesrv = None
        self.broker = None

    def call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        from mq.daemon.broker.controller import BrokerController
        from mq.daemon.namesrv.server import NamesrvServer

        self.thread.start()

        async def up():
            self.namesrv = NamesrvServer(NamesrvConfig(listen_port=self.namesrv_port,
                                                       kv_config_path=f"{self.root}/kv.json"))
            await self.namesrv.start()
            self.broker = BrokerController(
                BrokerConfig(listen_port=0, namesrv_addr=self.namesrv.address, **self.broker_options),
                store_config=StoreConfig(**{"store_path_root_dir": f"{self.root}/store",
                                            "mapped_file_size_commit_log": 32 * 1024 * 1024,
                                            "max_hash_slot_num": 50_000, "max_index_num": 200_000,
                                            **self.store_options}))
            await self.broker.start()

        self.call(up())

    def stop(self) -> None:
        async def down():
            if self.broker is not None:
                await self.broker.stop()
            if self.namesrv is not None:
                await self.namesrv.stop()

        try:
            self.call(down())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def daemons(tmp_path):
    d = Daemons(str(tmp_path))
    d.start()
    yield d
    d.stop()


@contextlib.contextmanager
def grpc_daemons(root: str) -> Iterator[Daemons]:
    """What the 5.x SDK suites run against: ``Daemons`` whose broker has a gRPC endpoint on a free port
    (``endpoint``), SQL92 filters on and a 1 s transaction check; stopped on exit."""
    from tests.ports import free_port

    daemons = Daemons(root, broker_options={
        "grpc_server_port": free_port(), "enable_property_filter": True, "transaction_check_interval": 1000,
        "transaction_time_out": 1000})
    daemons.start()
    try:
        daemons.endpoint = f"127.0.0.1:{daemons.broker.grpc_port}"
        yield daemons
    finally:
        daemons.stop()
