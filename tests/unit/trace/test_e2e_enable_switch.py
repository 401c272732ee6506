"""The ``enable_trace=True`` constructor switch of the client classes."""

from __future__ import annotations

from mq.client.consumer import PushConsumer
from mq.client.producer import Producer
from mq.config import ConsumerConfig, ProducerConfig
from mq.trace.dispatcher import AsyncTraceDispatcher
from mq.trace.hooks import ConsumeTraceHook, SendTraceHook


def test_producer_switch_attaches_hooks_and_dispatcher():
    p = Producer(ProducerConfig(group="PG_SWITCH"), enable_trace=True, trace_topic="MyTrace")
    assert isinstance(p.trace_dispatcher, AsyncTraceDispatcher)
    assert p.trace_dispatcher.trace_topic == "MyTrace"
    assert any(isinstance(h, SendTraceHook) for h in p.hooks)
    assert p.stats()["trace"]["offered"] == 0
    plain = Producer(ProducerConfig(group="PG_PLAIN"))
    assert plain.trace_dispatcher is None and plain.stats()["trace"] is None


def test_push_consumer_switch_attaches_hooks_and_dispatcher():
    c = PushConsumer(ConsumerConfig(group="CG_SWITCH"), lambda msgs: None, enable_trace=True)
    assert isinstance(c.trace_dispatcher, AsyncTraceDispatcher)
    assert any(isinstance(h, ConsumeTraceHook) for h in c.hooks)
    assert c.stats()["trace"]["dropped"] == 0
