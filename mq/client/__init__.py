"""The `mq` client library: asyncio-native, the same protocol and behaviour as the RocketMQ 4.9 clients.

Public API (imported lazily, so ``mq.client.admin`` stays cheap)::

    Producer(ProducerConfig, ClientConfig)        start/shutdown; send, send_async, send_oneway, send_batch,
                                                  send(selector=..., arg=...) for ordered sends
    PushConsumer(ConsumerConfig, listener, ClientConfig)   subscribe(topic, expr); start/shutdown;
                                                  orderly=True for queue-locked, in-order consumption
    PullConsumer(group, ClientConfig)             pull(queue, offset, max_nums, expression), fetch_subscribe_queues,
                                                  min/max/search offsets, fetch/update consume offset
    SyncProducer, SyncPullConsumer, SyncPushConsumer, send(...)   the synchronous facade (mq.client.sync)
    SendResult, SendStatus, ConsumeStatus, SendHook, ConsumeHook   (mq.client.hooks)
    MQClientInstance                              shared per client id (mq.client.instance)
    MQAdmin                                       name server / broker admin calls (mq.client.admin)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Producer": "mq.client.producer",
    "PushConsumer": "mq.client.consumer",
    "PullConsumer": "mq.client.pull_api",
    "PullResult": "mq.client.pull_api",
    "PullStatus": "mq.client.pull_api",
    "SyncProducer": "mq.client.sync",
    "SyncPullConsumer": "mq.client.sync",
    "SyncPushConsumer": "mq.client.sync",
    "send": "mq.client.sync",
    "SendResult": "mq.client.hooks",
    "SendStatus": "mq.client.hooks",
    "ConsumeStatus": "mq.client.hooks",
    "SendHook": "mq.client.hooks",
    "ConsumeHook": "mq.client.hooks",
    "MQClientInstance": "mq.client.instance",
    "MQAdmin": "mq.client.admin",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mq.client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
