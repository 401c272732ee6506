"""Arbitrary-delay messages: ``buckets.TimerStore`` (durable structure) and ``service.TimerMessageService``.

The design and its defence are in docs/architecture.md, section "Arbitrary delay (timer)"."""

from mq.daemon.broker.timer.buckets import TimerStore
from mq.daemon.broker.timer.service import TIMER_TOPIC, TimerMessageService

__all__ = ["TIMER_TOPIC", "TimerMessageService", "TimerStore"]
