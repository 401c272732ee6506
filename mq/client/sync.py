"""A synchronous facade over the asyncio client, for scripts and the CLI.

One background thread runs one event loop (uvloop when installed) for every synchronous client of the process;
each call is ``asyncio.run_coroutine_threadsafe`` onto it and waits for the answer. ``send(...)`` is the
one-liner: it starts a producer, sends one message, and shuts down. ``SyncPushConsumer`` runs a plain listener
in a worker thread (it may block), concurrently or, with ``orderly=True``, as a MessageListenerOrderly.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import threading
from typing import Any, Awaitable, Callable, Iterable, Sequence, TypeVar

from mq.client.consumer import Listener, PushConsumer
from mq.client.hooks import SendResult
from mq.client.producer import Producer, QueueSelector
from mq.client.pull_api import PullConsumer, PullResult
from mq.common import properties as P
from mq.common.message import Message, MessageQueue
from mq.config import ClientConfig, ConsumerConfig, OrderlyConfig, ProducerConfig

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self, name: str = "mq-client-loop") -> None:
        from mq.remoting import new_event_loop

        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a synchronous mq call was made from the client loop thread itself")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        try:
            return fut.result(timeout)
        except BaseException:
            fut.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)


_shared: LoopThread | None = None
_shared_lock = threading.Lock()


def shared_loop() -> LoopThread:
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LoopThread()
            atexit.register(_shared.stop)
        return _shared


def build_message(topic: str, body: bytes | str, *, tags: str | None = None, keys: str | Iterable[str] | None = None,
                  properties: dict[str, str] | None = None, delay_level: int = 0, flag: int = 0) -> Message:
    msg = Message(topic=topic, body=body.encode() if isinstance(body, str) else bytes(body), flag=flag,
                  properties=dict(properties or {}))
    if tags:
        msg.properties[P.TAGS] = tags
    if keys:
        msg.keys = keys
    if delay_level:
        msg.delay_time_level = delay_level
    return msg


class SyncProducer:
    def __init__(self, config: ProducerConfig | None = None, client_config: ClientConfig | None = None, *,
                 loop: LoopThread | None = None, hooks: Sequence[Any] = (), enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        self._loop = loop or shared_loop()
        self.producer = Producer(config, client_config, hooks=hooks, enable_trace=enable_trace,
                                 trace_topic=trace_topic)

    def start(self) -> "SyncProducer":
        self._loop.run(self.producer.start())
        return self

    def shutdown(self) -> None:
        self._loop.run(self.producer.shutdown())

    def __enter__(self) -> "SyncProducer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send(self, msg: Message, *, queue: MessageQueue | None = None, selector: QueueSelector | None = None,
             arg: Any = None, timeout: float | None = None) -> SendResult:
        return self._loop.run(self.producer.send(msg, queue=queue, selector=selector, arg=arg, timeout=timeout))

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        self._loop.run(self.producer.send_oneway(msg, queue=queue))

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None]) -> None:
        """Start a send; ``callback`` runs on the client loop thread when it completes."""
        async def start() -> None:
            self.producer.send_async(msg, callback)
        self._loop.run(start())

    def send_batch(self, msgs: Sequence[Message], *, queue: MessageQueue | None = None) -> SendResult:
        return self._loop.run(self.producer.send_batch(msgs, queue=queue))

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop.run(self.producer.fetch_publish_queues(topic))

    def run(self, coro: Awaitable[T]) -> T:
        """Run any coroutine (e.g. one using ``self.producer``) on the client loop."""
        return self._loop.run(coro)


class SyncPullConsumer:
    def __init__(self, group: str = "DEFAULT_PULL_CONSUMER", client_config: ClientConfig | None = None, *,
                 loop: LoopThread | None = None) -> None:
        self._loop = loop or shared_loop()
        self.consumer = PullConsumer(group, client_config)

    def start(self) -> "SyncPullConsumer":
        self._loop.run(self.consumer.start())
        return self

    def shutdown(self) -> None:
        self._loop.run(self.consumer.shutdown())

    def __enter__(self) -> "SyncPullConsumer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop.run(self.consumer.fetch_subscribe_queues(topic))

    def pull(self, queue: MessageQueue, offset: int, max_nums: int = 32, expression: str | None = "*", *,
             block: float = 0.0) -> PullResult:
        return self._loop.run(self.consumer.pull(queue, offset, max_nums, expression, block=block))

    def max_offset(self, queue: MessageQueue) -> int:
        return self._loop.run(self.consumer.max_offset(queue))

    def min_offset(self, queue: MessageQueue) -> int:
        return self._loop.run(self.consumer.min_offset(queue))

    def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        return self._loop.run(self.consumer.search_offset(queue, timestamp_ms))

    def fetch_consume_offset(self, queue: MessageQueue) -> int:
        return self._loop.run(self.consumer.fetch_consume_offset(queue))

    def update_consume_offset(self, queue: MessageQueue, offset: int) -> None:
        self._loop.run(self.consumer.update_consume_offset(queue, offset))


class SyncPushConsumer:
    """``PushConsumer`` for synchronous code. A plain ``listener(msgs, context) -> ConsumeStatus`` runs in the
    loop's default thread pool, so it may block; an ``async def`` one runs on the loop. ``orderly=True`` (or
    ``config.consume_orderly``) consumes each queue in order under its broker lock (``mq.client.orderly``)."""

    def __init__(self, config: ConsumerConfig, listener: Listener, client_config: ClientConfig | None = None, *,
                 loop: LoopThread | None = None, orderly: bool | None = None,
                 orderly_config: OrderlyConfig | None = None, hooks: Sequence[Any] = (), enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        self._loop = loop or shared_loop()
        if inspect.iscoroutinefunction(listener):
            run_listener = listener
        else:
            async def run_listener(msgs, ctx):  # type: ignore[no-untyped-def]
                return await asyncio.to_thread(listener, msgs, ctx)

        async def make() -> PushConsumer:
            return PushConsumer(config, run_listener, client_config, hooks=hooks, enable_trace=enable_trace,
                                trace_topic=trace_topic, orderly=orderly, orderly_config=orderly_config)
        self.consumer = self._loop.run(make())

    def subscribe(self, topic: str, expression: str | None = "*") -> "SyncPushConsumer":
        self.consumer.subscribe(topic, expression)
        return self

    def start(self) -> "SyncPushConsumer":
        self._loop.run(self.consumer.start())
        return self

    def shutdown(self, grace: float = 5.0) -> None:
        self._loop.run(self.consumer.shutdown(grace=grace))

    def __enter__(self) -> "SyncPushConsumer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def running_info(self) -> dict[str, Any]:
        async def info() -> dict[str, Any]:
            return self.consumer.running_info()
        return self._loop.run(info())

    def stats(self) -> dict[str, Any]:
        async def stats() -> dict[str, Any]:
            return self.consumer.stats()
        return self._loop.run(stats())


def send(topic: str, body: bytes | str, *, namesrv: str = "127.0.0.1:9876", tags: str | None = None,
         keys: str | Iterable[str] | None = None, properties: dict[str, str] | None = None,
         group: str = "PY_SIMPLE_PRODUCER", timeout: float = 3.0) -> SendResult:
    """Send one message and return its result (starts and stops a producer around it)."""
    msg = build_message(topic, body, tags=tags, keys=keys, properties=properties)
    with SyncProducer(ProducerConfig(group=group, send_msg_timeout=timeout),
                      ClientConfig(namesrv_addr=namesrv, instance_name=f"simple-{threading.get_ident()}")) as p:
        return p.send(msg)
