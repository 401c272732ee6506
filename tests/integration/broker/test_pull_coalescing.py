"""Pull coalescing (``pullCoalesceMicros``, ``pullCoalesceMessages``) against a real broker over loopback.

The windows here are long (0.2-5 s) so that what happens inside one is not a race with the test."""

from __future__ import annotations

import asyncio
import time

from mq.protocol.codes import ResponseCode as RC
from mq.remoting import RemotingClient

from .wire import pull_cmd, records, send_cmd

SUSPEND_SUB = 0x2 | 0x4  # SUSPEND + SUBSCRIPTION, as a push consumer's pull (without COMMIT_OFFSET)


async def _send(client, b, topic: str, n: int, queue_id: int = 0) -> None:
    for i in range(n):
        r = await client.invoke(b.address, send_cmd(topic, f"m{i}".encode(), queue_id=queue_id))
        assert r.code == RC.SUCCESS, r.remark


def test_a_pull_that_finds_few_waits_for_its_window_and_takes_what_arrived(broker_factory, client, run):
    b = broker_factory(pull_coalesce_micros=300_000)

    async def main():
        await _send(client, b, "CoFew", 1)
        t0 = time.monotonic()
        fut = asyncio.ensure_future(client.invoke(b.address, pull_cmd("CoFew", 0, 0, sys_flag=SUSPEND_SUB,
                                                                      suspend_ms=5000), timeout=10))
        await asyncio.sleep(0.1)
        assert not fut.done() and b.pull_processor.coalescer.parked_count == 1
        await _send(client, b, "CoFew", 2)
        r = await fut
        waited = time.monotonic() - t0
        assert r.code == RC.SUCCESS and len(records(r)) == 3 and r.ext_fields["nextBeginOffset"] == "3"
        assert 0.29 <= waited < 1.0, waited
        assert b.pull_processor.coalescer.parked_count == 0 and b.hold_service.held_count == 0

    run(main())


def test_a_pull_that_finds_enough_or_all_it_asks_for_is_answered_at_once(broker_factory, client, run):
    b = broker_factory(pull_coalesce_micros=5_000_000, pull_coalesce_messages=8)

    async def main():
        await _send(client, b, "CoEnough", 9)
        for offset, max_nums, flag, expect in ((0, 32, SUSPEND_SUB, 9),  # at least pullCoalesceMessages
                                               (6, 2, SUSPEND_SUB, 2),  # all it asks for
                                               (8, 32, 0x4, 1)):  # no SUSPEND flag: never parked
            t0 = time.monotonic()
            r = await client.invoke(b.address, pull_cmd("CoEnough", 0, offset, max_nums=max_nums, sys_flag=flag,
                                                         suspend_ms=5000), timeout=10)
            assert r.code == RC.SUCCESS and len(records(r)) == expect, (offset, r)
            assert time.monotonic() - t0 < 1.0
        assert b.pull_processor.coalescer.parked_count == 0

    run(main())


def test_coalescing_off_answers_at_once(broker_factory, client, run):
    b = broker_factory(pull_coalesce_micros=0)

    async def main():
        await _send(client, b, "CoOff", 1)
        t0 = time.monotonic()
        r = await client.invoke(b.address, pull_cmd("CoOff", 0, 0, sys_flag=SUSPEND_SUB, suspend_ms=5000))
        assert r.code == RC.SUCCESS and len(records(r)) == 1 and time.monotonic() - t0 < 0.2

    run(main())


def test_a_parked_pull_that_still_finds_nothing_is_held_then_woken(broker_factory, client, run):
    b = broker_factory(pull_coalesce_micros=200_000)

    async def main():
        await _send(client, b, "CoHold", 1)
        fut = asyncio.ensure_future(client.invoke(b.address, pull_cmd("CoHold", 0, 1, sys_flag=SUSPEND_SUB,
                                                                      suspend_ms=5000), timeout=10))
        await asyncio.sleep(0.05)
        assert (b.pull_processor.coalescer.parked_count, b.hold_service.held_count) == (1, 0)
        await asyncio.sleep(0.4)
        assert (b.pull_processor.coalescer.parked_count, b.hold_service.held_count) == (0, 1)
        t_send = time.monotonic()
        await _send(client, b, "CoHold", 1)
        r = await fut
        assert r.code == RC.SUCCESS and [m.queue_offset for m in records(r)] == [1]
        assert time.monotonic() - t_send < 0.1  # a woken pull is answered at once, not parked again

    run(main())


def test_a_closed_connections_parked_pull_is_dropped_and_the_broker_carries_on(broker_factory, client, run):
    b = broker_factory(pull_coalesce_micros=300_000)

    async def main():
        await _send(client, b, "CoGone", 1)
        other = RemotingClient()
        fut = asyncio.ensure_future(other.invoke(b.address, pull_cmd("CoGone", 0, 0, sys_flag=SUSPEND_SUB,
                                                                     suspend_ms=5000), timeout=10))
        await asyncio.sleep(0.05)
        assert b.pull_processor.coalescer.parked_count == 1
        await other.close()
        await asyncio.sleep(0.5)
        assert b.pull_processor.coalescer.parked_count == 0 and b.hold_service.held_count == 0
        assert fut.done() and (fut.cancelled() or fut.exception() is not None)  # the client closed it
        r = await client.invoke(b.address, pull_cmd("CoGone", 0, 0, sys_flag=SUSPEND_SUB, suspend_ms=5000))
        assert r.code == RC.SUCCESS and len(records(r)) == 1

    run(main())


def test_beyond_the_limit_pulls_run_at_once_and_a_stopping_broker_drops_the_parked(broker_factory, client, run):
    """At most maxHeldPullRequests pulls wait at once; a broker that stops closes the connections of the
    parked ones instead of answering them."""
    b = broker_factory(pull_coalesce_micros=5_000_000, max_held_pull_requests=2)

    async def main():
        await _send(client, b, "CoLimit", 1)
        parked = [asyncio.ensure_future(client.invoke(b.address, pull_cmd("CoLimit", 0, 0, sys_flag=SUSPEND_SUB,
                                                                          suspend_ms=5000), timeout=10))
                  for _ in range(2)]
        await asyncio.sleep(0.1)
        assert b.pull_processor.coalescer.parked_count == 2
        t0 = time.monotonic()
        r = await client.invoke(b.address, pull_cmd("CoLimit", 0, 0, sys_flag=SUSPEND_SUB, suspend_ms=5000))
        assert r.code == RC.SUCCESS and len(records(r)) == 1 and time.monotonic() - t0 < 1.0
        await b.stop()
        assert b.pull_processor.coalescer.parked_count == 0
        done, _ = await asyncio.wait(parked, timeout=5)
        assert len(done) == 2 and all(f.exception() is not None for f in done)

    run(main())


def test_a_parked_pull_whose_run_fails_is_answered_system_error(broker_factory, client, run, monkeypatch):
    b = broker_factory(pull_coalesce_micros=100_000)

    def broken(*_args, **_kwargs):
        raise RuntimeError("store unreadable")

    async def main():
        await _send(client, b, "CoFail", 1)
        monkeypatch.setattr(b.pull_processor, "process", broken)
        r = await client.invoke(b.address, pull_cmd("CoFail", 0, 0, sys_flag=SUSPEND_SUB, suspend_ms=5000),
                                timeout=5)
        assert r.code == RC.SYSTEM_ERROR and r.remark == "RuntimeError: store unreadable"
        monkeypatch.undo()
        r = await client.invoke(b.address, pull_cmd("CoFail", 0, 0, sys_flag=SUSPEND_SUB, suspend_ms=5000))
        assert r.code == RC.SUCCESS and len(records(r)) == 1

    run(main())
