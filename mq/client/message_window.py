"""Reading a topic's messages by time: the offset window [begin, end) of each queue and the messages in it.

Shared by ``mq printMsg``, ``printMsgByQueue``, ``consumeMessage`` and the web console's query by time range.
Every read is a plain pull with a ``PullConsumer`` (Java's ``DefaultMQPullConsumer``); nothing is committed.
A queue's window is [min offset, max offset); a begin time moves its start to SEARCH_OFFSET_BY_TIMESTAMP(begin),
an end time its end to one past SEARCH_OFFSET_BY_TIMESTAMP(end): the search answers the *nearest* message, which
may lie on either side of the time, so the window runs one offset further and messages are kept when
``begin <= storeTimestamp < end``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, NoReturn

from mq.errors import BrokerError
from mq.protocol.codes import ResponseCode

BATCH = 32


@dataclass(frozen=True)
class TimeRange:
    """``begin <= storeTimestamp < end``; None (or 0, as Java's ``> 0`` tests) leaves that side open.
    ValueError when begin is after end."""

    begin: int | None = None
    end: int | None = None

    def __post_init__(self) -> None:
        if self.begin and self.end and self.begin > self.end:
            raise ValueError("the begin timestamp is after the end timestamp")

    def contains(self, ms: int) -> bool:
        return (not self.begin or ms >= self.begin) and (not self.end or ms < self.end)


@dataclass
class Window:
    """The offsets [begin, end) of one queue to read, and what was read there."""

    queue: Any
    begin: int
    end: int
    messages: list = field(default_factory=list)


async def topic_queues(pc: Any, topic: str, broker: str | None = None) -> list:
    """The topic's readable queues (TopicNotExistError for an unknown topic), only ``broker``'s when given."""
    queues = await pc.fetch_subscribe_queues(topic)
    if broker is None:
        return queues
    mine = [q for q in queues if q.broker_name == broker]
    if not mine:
        _not_in_route(f"broker {broker!r} is not in the route of {topic} (brokers: "
                      f"{', '.join(sorted({q.broker_name for q in queues})) or 'none'})")
    return mine


async def find_queue(pc: Any, topic: str, broker: str, queue_id: int) -> Any:
    for q in await topic_queues(pc, topic, broker):
        if q.queue_id == queue_id:
            return q
    _not_in_route(f"{topic} has no readable queue {queue_id} on broker {broker}")


def _not_in_route(text: str) -> NoReturn:
    raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, text)


async def queue_window(pc: Any, q: Any, times: TimeRange) -> Window:
    """[min, max) of ``q``, narrowed by the time search (one past the end's answer: it may be the message
    just before the end time)."""
    lo, hi = await pc.min_offset(q), await pc.max_offset(q)
    begin = await pc.search_offset(q, times.begin) if times.begin else lo
    end = await pc.search_offset(q, times.end) + 1 if times.end else hi
    return Window(q, min(max(begin, lo), hi), min(max(end, lo), hi))


async def window_messages(pc: Any, w: Window, expression: str, times: TimeRange) -> AsyncIterator[Any]:
    """The messages of ``w`` that match the tag ``expression`` and ``times``, oldest first.

    Stops at the window's end, when the broker has nothing more (NO_NEW_MSG), or when a pull makes no
    progress; an OFFSET_ILLEGAL that points further on (messages deleted meanwhile) is followed."""
    from mq.client.pull_api import PullStatus

    offset = w.begin
    while offset < w.end:
        res = await pc.pull(w.queue, offset, min(BATCH, w.end - offset), expression)
        if res.status is PullStatus.NO_NEW_MSG:
            return
        if res.status is PullStatus.FOUND:
            for m in res.messages:
                if m.queue_offset < w.end and times.contains(m.store_timestamp):
                    yield m
        if res.next_begin_offset <= offset:
            return
        offset = res.next_begin_offset


async def fill(pc: Any, w: Window, expression: str, times: TimeRange, limit: int | None = None) -> None:
    """Append the messages of ``w`` to ``w.messages``, at most ``limit``."""
    if limit is not None and limit <= 0:
        return
    async with contextlib.aclosing(window_messages(pc, w, expression, times)) as it:
        async for m in it:
            w.messages.append(m)
            if limit is not None and len(w.messages) >= limit:
                return


async def newest_in_range(pc: Any, topic: str, times: TimeRange, limit: int, expression: str = "*"
                          ) -> tuple[list, int]:
    """The newest ``limit`` messages of ``topic`` stored in ``times`` (all queues, newest first), and how many
    offsets the windows span in all (an upper bound of the matches: when it is larger than ``limit``, older
    messages were left out). Only the last ``limit`` offsets of each queue's window are read."""
    windows = [await queue_window(pc, q, times) for q in await topic_queues(pc, topic)]
    span = sum(w.end - w.begin for w in windows)
    found = []
    for w in windows:
        w.begin = max(w.begin, w.end - limit)
        await fill(pc, w, expression, times)
        found.extend(w.messages)
    found.sort(key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
    return found[:limit], span
