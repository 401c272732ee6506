"""AsyncTraceDispatcher with an in-memory sender (no sockets): batching by size and keys, bounded queue under a
flood (drops counted per reason, equal to the real count), failed sends counted and logged once per interval,
bounded shutdown flush."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from mq.common import properties as P
from mq.common.message import Message
from mq.trace.context import TraceBean, TraceContext, TraceType
from mq.trace.dispatcher import AsyncTraceDispatcher, DispatcherOptions, DropReason, trace_group_name
from mq.trace.encoder import decode_body


def pub(i: int, keys: str | None = None, pad: int = 0) -> TraceContext:
    return TraceContext(TraceType.Pub, timestamp=1_700_000_000_000 + i, region_id="DefaultRegion", group_name="PG",
                        cost_time=1, beans=(TraceBean(topic="T" + "x" * pad, msg_id=f"ID{i:030d}", keys=keys,
                                                      store_host="127.0.0.1:10911", offset_msg_id="O"),))


def sub_before(i: int, n: int) -> TraceContext:
    return TraceContext(TraceType.SubBefore, timestamp=1, group_name="CG", request_id=f"R{i}",
                        beans=tuple(TraceBean(msg_id=f"M{i}-{j}") for j in range(n)))


class Recorder:
    def __init__(self, fail: bool = False, hang: bool = False, delay: float = 0.0) -> None:
        self.messages: list[Message] = []
        self.fail, self.hang, self.delay = fail, hang, delay

    async def __call__(self, msg: Message) -> str:
        if self.hang:
            await asyncio.get_running_loop().create_future()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            raise ConnectionError("broker gone")
        self.messages.append(msg)
        return "ok"

    def records(self) -> list[TraceContext]:
        return [c for m in self.messages for c in decode_body(m.body, compressed=False)]


FAST = dict(poll_interval=0.01, max_batch_age=0.02)


def test_batches_respect_body_and_keys_limits_and_carry_index_keys() -> None:
    async def main():
        rec = Recorder()
        d = AsyncTraceDispatcher("PG", sender=rec, options=DispatcherOptions(max_body_bytes=2000,
                                                                            max_keys_bytes=300, **FAST))
        await d.start()
        ctxs = [pub(i, keys=f"k{i} common") for i in range(60)] + [sub_before(100, 5)]
        for c in ctxs:
            assert d.append(c)
        stats = await d.shutdown()
        return rec, ctxs, stats

    rec, ctxs, stats = asyncio.run(main())
    assert stats["offered"] == stats["sent"] == 65 and stats["dropped"] == 0 and stats["pending"] == 0
    assert len(rec.messages) > 1 and stats["messagesSent"] == len(rec.messages)
    for m in rec.messages:
        assert m.topic == "RMQ_SYS_TRACE_TOPIC"
        assert len(m.body) <= 2000 and len(m.properties[P.KEYS].encode()) <= 300
        keys = set(m.properties[P.KEYS].split(" "))
        for c in decode_body(m.body, compressed=False):  # every record is findable by its msgId
            assert c.bean.msg_id in keys
            if c.bean.keys:
                assert set(c.bean.keys.split(" ")) <= keys
    got = rec.records()
    assert [c.bean.msg_id for c in got] == [c.bean.msg_id for c in ctxs[:60]] + [f"M100-{j}" for j in range(5)]


def test_flood_drops_are_counted_with_reason_and_equal_the_real_count() -> None:
    async def main():
        rec = Recorder()
        d = AsyncTraceDispatcher("PG", sender=rec, options=DispatcherOptions(queue_size=64, **FAST))
        await d.start()
        accepted = dropped = 0
        for burst in range(20):
            for i in range(200):  # 200 appends without yielding: the worker cannot keep up
                if d.append(sub_before(burst * 1000 + i, 2)):
                    accepted += 2
                else:
                    dropped += 2
            await asyncio.sleep(0)
        stats = await d.shutdown()
        return rec, stats, accepted, dropped

    rec, stats, accepted, dropped = asyncio.run(main())
    assert dropped > 0
    assert stats["droppedByReason"] == {DropReason.QUEUE_FULL.value: dropped}
    assert stats["dropped"] == dropped and stats["offered"] == accepted + dropped
    assert stats["sent"] == accepted == len(rec.records())  # the count reported is the real count


def test_failed_sends_are_counted_and_logged_once_per_interval(caplog) -> None:
    async def main():
        rec = Recorder(fail=True)
        d = AsyncTraceDispatcher("PG", sender=rec, options=DispatcherOptions(drop_log_interval=0.2, **FAST))
        await d.start()
        for i in range(10):
            d.append(pub(i))
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.4)
        mid = d.stats()
        for i in range(5):
            d.append(pub(100 + i))
        return mid, await d.shutdown()

    with caplog.at_level(logging.WARNING, logger="mq.trace.dispatcher"):
        mid, stats = asyncio.run(main())
    assert mid["droppedByReason"] == {"send_failed": 10} and "broker gone" in mid["lastError"]
    assert stats["droppedByReason"] == {"send_failed": 15} and stats["sent"] == 0 and stats["offered"] == 15
    warnings = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert 2 <= len(warnings) <= 3  # one per interval plus the final one, not one per failure
    assert all("send_failed=" in w and "broker gone" in w for w in warnings)
    assert sum(int(w.split(" dropped ")[1].split(" ")[0]) for w in warnings) == 15


def test_shutdown_flush_is_bounded_and_counts_what_is_left() -> None:
    async def main():
        d = AsyncTraceDispatcher("PG", sender=Recorder(hang=True), options=DispatcherOptions(**FAST))
        await d.start()
        for i in range(30):
            d.append(pub(i))
        await asyncio.sleep(0.05)  # in flight, stuck
        for i in range(30, 40):
            d.append(pub(i))  # still queued
        t0 = time.monotonic()
        stats = await d.shutdown(timeout=0.3)
        return time.monotonic() - t0, stats, d.append(pub(99)), d.stats()

    took, stats, late, after = asyncio.run(main())
    assert took < 1.5
    assert stats["droppedByReason"] == {"shutdown_timeout": 40} and stats["pending"] == 0
    assert late is False and after["droppedByReason"]["after_shutdown"] == 1


def test_shutdown_flushes_young_segments() -> None:
    async def main():
        rec = Recorder(delay=0.01)
        d = AsyncTraceDispatcher("PG", sender=rec, options=DispatcherOptions(poll_interval=0.05, max_batch_age=60))
        await d.start()
        for i in range(7):
            d.append(pub(i))
        await asyncio.sleep(0.1)
        assert rec.messages == []  # too young to be sent by age
        return rec, await d.shutdown()

    rec, stats = asyncio.run(main())
    assert stats["sent"] == 7 and len(rec.records()) == 7


def test_oversize_record_and_backlog_are_dropped_with_reason() -> None:
    async def main():
        rec = Recorder(hang=True)
        d = AsyncTraceDispatcher("PG", sender=rec, options=DispatcherOptions(
            max_body_bytes=500, max_inflight=1, max_pending_batches=1, **FAST))
        await d.start()
        d.append(pub(0, pad=600))  # one record larger than a trace message may be
        for i in range(1, 20):
            d.append(pub(i, pad=200))  # ~2 records per message; only 2 messages may wait
        await asyncio.sleep(0.1)
        mid = d.stats()
        await d.shutdown(timeout=0.1)
        return mid, d.stats()

    mid, stats = asyncio.run(main())
    assert mid["droppedByReason"]["oversize"] == 1 and mid["droppedByReason"]["backlog_full"] > 0
    assert mid["offered"] == mid["sent"] + mid["dropped"] + mid["pending"]
    assert stats["offered"] == 20 and stats["dropped"] == 20 and stats["pending"] == 0


def test_group_name_and_topic() -> None:
    a, b = trace_group_name("PG", "PRODUCE"), trace_group_name("PG", "PRODUCE")
    assert a.startswith("_INNER_TRACE_PRODUCER-PG-PRODUCE-") and a != b
    assert AsyncTraceDispatcher("CG", "CONSUME", trace_topic=" ").trace_topic == "RMQ_SYS_TRACE_TOPIC"
    assert AsyncTraceDispatcher("CG", "CONSUME", trace_topic="MyTrace").trace_topic == "MyTrace"
    with pytest.raises(ValueError):
        AsyncTraceDispatcher("CG", "OTHER")


def test_never_started_dispatcher_counts_its_queue_at_shutdown() -> None:
    async def main():
        d = AsyncTraceDispatcher("PG", sender=Recorder(), options=DispatcherOptions(**FAST))
        for i in range(3):
            d.append(sub_before(i, 2))
        return await d.shutdown()

    stats = asyncio.run(main())
    assert stats["droppedByReason"] == {"not_started": 6} and stats["offered"] == 6 and stats["pending"] == 0


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 6)), min_size=1, max_size=40),
       max_body=st.integers(150, 3000), max_keys=st.integers(40, 400))
def test_every_record_is_sent_once_or_counted_dropped(sizes, max_body, max_keys) -> None:
    """Random record sizes and limits: every message within both limits, each record stored at most once, and
    offered == stored + dropped (oversize only)."""
    ctxs = [pub(i, keys=" ".join(f"k{i}_{j}" for j in range(nk)), pad=pad) for i, (pad, nk) in enumerate(sizes)]

    async def main():
        rec = Recorder()
        d = AsyncTraceDispatcher("PG", sender=rec, options=DispatcherOptions(
            max_body_bytes=max_body, max_keys_bytes=max_keys, max_pending_batches=10_000, **FAST))
        await d.start()
        for c in ctxs:
            d.append(c)
        return rec, await d.shutdown()

    rec, stats = asyncio.run(main())
    got = [c.bean.msg_id for c in rec.records()]
    assert len(got) == len(set(got)) == stats["sent"]
    assert stats["offered"] == len(ctxs) == stats["sent"] + stats["dropped"]
    assert set(stats["droppedByReason"]) <= {"oversize"}
    for m in rec.messages:
        assert len(m.body) <= max_body and len(m.properties[P.KEYS]) + 1 <= max_keys
