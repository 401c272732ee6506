"""mq.remoting.fine_timer: a one-shot, re-armable, sub-millisecond timer on asyncio and uvloop loops."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from mq.remoting import fine_timer
from mq.remoting.fine_timer import FineTimer

LOOPS = ["asyncio"] + (["uvloop"] if sys.platform != "win32" else [])


def _run(kind: str, coro_fn):
    if kind == "uvloop":
        import uvloop
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro_fn())
    finally:
        loop.close()


@pytest.mark.parametrize("kind", LOOPS)
def test_fires_once_after_a_sub_millisecond_delay_and_can_be_armed_again(kind):
    async def main():
        loop = asyncio.get_running_loop()
        fired: list[float] = []
        waiter: list[asyncio.Future] = []

        def on_fire() -> None:
            fired.append(time.monotonic())
            waiter[-1].set_result(None)

        timer = FineTimer(loop, on_fire)
        assert timer.precise  # Linux: a timerfd
        waits = []
        for _ in range(20):
            waiter.append(loop.create_future())
            t0 = time.monotonic()
            timer.arm(0.0003)
            assert timer.armed
            # the loop is idle until the timer fires: neither loop's own timers could end the wait in under a
            # millisecond (uvloop runs a 0.3 ms call_later at once, asyncio's epoll sleeps a whole millisecond)
            await asyncio.wait_for(waiter[-1], 1.0)
            waits.append(fired[-1] - t0)
            assert not timer.armed
        await asyncio.sleep(0.01)
        assert len(fired) == 20  # once per arm
        waits.sort()
        assert waits[0] >= 0.0003 - 1e-5
        assert waits[10] < 0.00095, waits  # the median
        timer.close()

    _run(kind, main)


@pytest.mark.parametrize("kind", LOOPS)
def test_arming_an_armed_timer_keeps_its_deadline_and_close_cancels(kind):
    async def main():
        fired: list[float] = []
        timer = FineTimer(asyncio.get_running_loop(), lambda: fired.append(time.monotonic()))
        t0 = time.monotonic()
        timer.arm(0.05)
        timer.arm(0.5)  # no-op: armed
        await asyncio.sleep(0.2)
        assert len(fired) == 1 and 0.045 <= fired[0] - t0 < 0.19
        timer.arm(0.05)
        timer.close()
        await asyncio.sleep(0.15)
        assert len(fired) == 1  # closed before its deadline: never fires
        timer.arm(0.01)  # a closed timer ignores arm
        await asyncio.sleep(0.05)
        assert len(fired) == 1 and not timer.armed
        timer.close()  # twice is fine

    _run(kind, main)


def test_without_timerfd_it_falls_back_to_call_later(monkeypatch):
    monkeypatch.setattr(fine_timer, "_LIBC", None)

    async def main():
        fired = []
        timer = FineTimer(asyncio.get_running_loop(), lambda: fired.append(1))
        assert not timer.precise
        timer.arm(0.01)
        await asyncio.sleep(0.1)
        assert fired == [1]
        timer.arm(0.01)
        timer.close()
        await asyncio.sleep(0.05)
        assert fired == [1]

    _run("asyncio", main)


def test_a_loop_that_cannot_watch_the_timerfd_gets_call_later_and_a_warning(caplog):
    async def main():
        loop = asyncio.get_running_loop()

        def no_readers(*_args):
            raise NotImplementedError

        loop.add_reader = no_readers  # as a loop without descriptor watching would
        fired = []
        with caplog.at_level("WARNING", logger="mq.remoting.fine_timer"):
            timer = FineTimer(loop, lambda: fired.append(1))
        assert not timer.precise
        assert any("cannot watch a timerfd" in r.getMessage() for r in caplog.records)
        timer.arm(0.01)
        await asyncio.sleep(0.1)
        assert fired == [1]
        timer.close()

    _run("asyncio", main)
