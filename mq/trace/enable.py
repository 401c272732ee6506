"""``enable_trace``: switch message tracing on for one client (Java's ``enableMsgTrace`` constructor flag).

    producer = Producer(ProducerConfig(group="PG"), ClientConfig(namesrv_addr=ns))
    enable_trace(producer)                       # or enable_trace(producer, "MY_TRACE_TOPIC")
    await producer.start()                        # the dispatcher starts with it ...
    ...
    await producer.shutdown()                     # ... and flushes (bounded) when it stops

What it does, per client kind:

+----------------------------+-------------------------------------------+-----------------------------+
| client                     | hooks registered                          | dispatcher                  |
+----------------------------+-------------------------------------------+-----------------------------+
| Producer (incl. sync       | SendTraceHook (``register_hook``), and    | kind PRODUCE, group of the  |
| ``SyncProducer``) /        | EndTransactionTraceHook when the client   | producer                    |
| transaction producer       | has ``register_end_transaction_hook``     |                             |
| PushConsumer               | ConsumeTraceHook (``register_hook``)      | kind CONSUME, group of the  |
|                            |                                           | consumer                    |
+----------------------------+-------------------------------------------+-----------------------------+

The dispatcher (its own trace producer, own group ``_INNER_TRACE_PRODUCER-<group>-<kind>-<n>``) is
attached as ``client.trace_dispatcher``; its ``stats()`` tells sent / dropped-by-reason / pending trace
records. The client's ``start`` and ``shutdown`` are wrapped on the instance so the dispatcher starts after
the client and is flushed before the client stops; if the client is already running, the dispatcher starts
on the first traced event.
"""

from __future__ import annotations

import functools
from typing import Any

from mq.errors import ConfigError
from mq.trace.dispatcher import AsyncTraceDispatcher, DispatcherOptions
from mq.trace.hooks import ConsumeTraceHook, EndTransactionTraceHook, SendTraceHook


def _unwrap(client: Any) -> Any:
    """The asyncio client behind a synchronous facade (``SyncProducer.producer``, ``.consumer``)."""
    for attr in ("producer", "consumer"):
        inner = getattr(client, attr, None)
        if inner is not None and hasattr(inner, "register_hook") and not hasattr(client, "register_hook"):
            return inner
    return client


def _is_consumer(client: Any) -> bool:
    return hasattr(client, "subscribe") and hasattr(client, "consumer_data")


def enable_trace(client: Any, trace_topic: str | None = None, *,
                 dispatcher_options: DispatcherOptions | None = None) -> AsyncTraceDispatcher:
    """Attach trace hooks and a dispatcher to ``client``; returns the dispatcher (also ``client.trace_dispatcher``).

    ``trace_topic``: a customized trace topic (blank -> RMQ_SYS_TRACE_TOPIC). Calling it twice is an error.
    """
    target = _unwrap(client)
    if not hasattr(target, "register_hook"):
        raise ConfigError(f"cannot trace a {type(client).__name__}: it has no register_hook()")
    if getattr(target, "trace_dispatcher", None) is not None:
        raise ConfigError(f"tracing is already enabled on this {type(client).__name__}")
    consumer = _is_consumer(target)
    dispatcher = AsyncTraceDispatcher(target.group, "CONSUME" if consumer else "PRODUCE",
                                      client_config=target.client_config, trace_topic=trace_topic,
                                      options=dispatcher_options)
    if consumer:
        instance = getattr(target, "instance", None)
        ip = getattr(instance, "client_ip", None) or target.client_config.client_ip or "127.0.0.1"
        target.register_hook(ConsumeTraceHook(dispatcher, client_ip=ip))
    else:
        target.register_hook(SendTraceHook(dispatcher))
        register_end = getattr(target, "register_end_transaction_hook", None)
        if register_end is not None:
            register_end(EndTransactionTraceHook(dispatcher))
    target.trace_dispatcher = dispatcher
    _wrap_lifecycle(target, dispatcher)
    return dispatcher


def _wrap_lifecycle(target: Any, dispatcher: AsyncTraceDispatcher) -> None:
    start, shutdown = target.start, target.shutdown

    @functools.wraps(start)
    async def start_with_trace(*args: Any, **kwargs: Any) -> Any:
        rv = await start(*args, **kwargs)
        await dispatcher.start()
        return rv

    @functools.wraps(shutdown)
    async def shutdown_with_trace(*args: Any, **kwargs: Any) -> Any:
        try:
            rv = await shutdown(*args, **kwargs)  # a consumer finishes its in-flight batches (and traces) first
        finally:
            await dispatcher.shutdown()
        return rv

    target.start = start_with_trace
    target.shutdown = shutdown_with_trace
