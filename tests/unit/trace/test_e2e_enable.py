"""enable_trace wiring (no sockets): which hooks each client kind gets, the dispatcher it carries, facades."""

from __future__ import annotations

import pytest

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.client.producer import Producer
from mq.client.sync import SyncProducer
from mq.config import ClientConfig, ConsumerConfig, ProducerConfig
from mq.errors import ConfigError
from mq.trace.dispatcher import DispatcherOptions
from mq.trace.enable import enable_trace
from mq.trace.hooks import ConsumeTraceHook, SendTraceHook

CC = ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="127.0.0.1")


def test_producer_gets_send_hook_and_a_produce_dispatcher() -> None:
    p = Producer(ProducerConfig(group="PG1"), CC)
    d = enable_trace(p, "MY_TRACE", dispatcher_options=DispatcherOptions(queue_size=7))
    assert p.trace_dispatcher is d and d.kind == "PRODUCE" and d.trace_topic == "MY_TRACE"
    assert d.options.queue_size == 7 and d.producer_group.startswith("_INNER_TRACE_PRODUCER-PG1-PRODUCE-")
    assert [type(h) for h in p.hooks] == [SendTraceHook]
    assert not d.started  # starts with the producer
    with pytest.raises(ConfigError):
        enable_trace(p)


def test_push_consumer_gets_consume_hook() -> None:
    c = PushConsumer(ConsumerConfig(group="CG1"), lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS, CC)
    d = enable_trace(c)
    assert d.kind == "CONSUME" and d.trace_topic == "RMQ_SYS_TRACE_TOPIC"
    assert [type(h) for h in c.hooks] == [ConsumeTraceHook]


def test_sync_facade_is_unwrapped_and_other_objects_refused() -> None:
    from mq.client.sync import LoopThread

    lt = LoopThread("enable-test")
    try:
        sp = SyncProducer(ProducerConfig(group="PG2"), CC, loop=lt)
        d = enable_trace(sp)
        assert sp.producer.trace_dispatcher is d and isinstance(sp.producer.hooks[0], SendTraceHook)
    finally:
        lt.stop()
    with pytest.raises(ConfigError):
        enable_trace(object())
