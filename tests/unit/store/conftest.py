"""Fixtures for the store core tests: small segments so rolling and BLANK records happen quickly."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mq.common.hosts import pack_host
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties
from mq.config import StoreConfig
from mq.daemon.broker.long_polling import LoopPoster
from mq.store.message_store import MessageStore


def small_config(root, **kw) -> StoreConfig:
    base = dict(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                mapped_file_size_consume_queue=20 * 64, max_hash_slot_num=1024, max_index_num=4096,
                flush_interval_commit_log=50, flush_interval_consume_queue=50)
    base.update(kw)
    return StoreConfig(**base)


_BORN = pack_host("10.0.0.9", 4321)  # packed, as the broker hands it over


def inner(topic="T", body=b"body", queue_id=0, tags=None, keys=None, props=None, sys_flag=0, **kw):
    p = dict(props or {})
    if tags is not None:
        p["TAGS"] = tags
    if keys is not None:
        p["KEYS"] = keys
    return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=p,
                                 properties_string=encode_properties(p), sys_flag=sys_flag,
                                 born_host=_BORN, born_timestamp=1_700_000_000_000, **kw)


@pytest.fixture
def make_store(tmp_path):
    stores: list[MessageStore] = []

    def make(root=None, start=True, **kw) -> MessageStore:
        store_kw = kw.pop("_store_kw", {})
        s = MessageStore(small_config(root or tmp_path / "store", **kw), **store_kw)
        if start:
            s.start()
        stores.append(s)
        return s

    yield make
    for s in stores:
        s.shutdown()


class LoopThread:
    """An asyncio loop running in its own thread, and the ``LoopPoster`` made on it (the owner)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="owner-loop", daemon=True)
        self.thread.start()
        self.poster = self.call(lambda: LoopPoster(asyncio.get_running_loop()))

    def call(self, fn):
        """Run ``fn()`` on the loop and return its result."""
        async def run():
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def owner():
    lt = LoopThread()
    yield lt
    lt.close()
