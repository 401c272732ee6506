"""Flow control (FEATURES.md §7): bounded send queue -> SYSTEM_BUSY, queue-wait limit, ordered pipelined sends."""

from __future__ import annotations

import asyncio

from mq.protocol.codes import ResponseCode as RC

from .wire import send_cmd


def test_send_queue_overflow_answers_system_busy(broker_factory, client, run):
    # Sends are handled inline while the send group is idle; they queue only when the flush-ack backlog is
    # full (SYNC_FLUSH), and that queue is bounded.
    # The queue-wait limit is lifted: on a slow machine the first fsync can outlast the default 200 ms and the
    # two queued sends would be answered [TIMEOUT_CLEAN_QUEUE] instead (tested on its own below).
    b = broker_factory(send_thread_pool_queue_capacity=2, flush_disk_type="SYNC_FLUSH", max_pending_flush_acks=1,
                       wait_time_mills_in_send_queue=60_000)

    async def main():
        await client.invoke(b.address, send_cmd("Busy", b"warm"))
        conn = await client.connection(b.address)
        futs = [conn.invoke_future(send_cmd("Busy", b"x"), 10) for _ in range(50)]  # one write, one read
        resps = await asyncio.gather(*futs)
        codes = [r.code for r in resps]
        assert codes.count(RC.SUCCESS) >= 3, [(r.code, r.remark) for r in resps if r.code != RC.SUCCESS][:5]
        assert RC.SYSTEM_BUSY in codes
        busy = [r for r in resps if r.code == RC.SYSTEM_BUSY]
        assert all(r.remark.startswith("[OVERLOAD]") for r in busy)
        # the broker keeps serving
        r = await client.invoke(b.address, send_cmd("Busy", b"after"))
        assert r.code == RC.SUCCESS

    run(main())


def test_requests_that_waited_too_long_get_timeout_clean_queue(broker_factory, client, run):
    b = broker_factory(wait_time_mills_in_send_queue=0, fast_failure_scan_interval_ms=10_000,
                       flush_disk_type="SYNC_FLUSH", max_pending_flush_acks=1)

    async def main():
        conn = await client.connection(b.address)
        futs = [conn.invoke_future(send_cmd("Slow", b"x"), 10) for _ in range(20)]
        resps = await asyncio.gather(*futs)
        busy = [r for r in resps if r.code == RC.SYSTEM_BUSY]
        assert busy and all(r.remark.startswith("[TIMEOUT_CLEAN_QUEUE]") for r in busy)
        assert b.fast_failure.scan_once() == 0  # nothing left queued

    run(main())


def test_pipelined_sends_from_one_connection_keep_their_order(broker_factory, client, run):
    b = broker_factory(flush_disk_type="SYNC_FLUSH")

    async def main():
        conn = await client.connection(b.address)
        futs = [conn.invoke_future(send_cmd("Order", f"{i}".encode(), queue_id=1), 10) for i in range(200)]
        resps = await asyncio.gather(*futs)
        assert [r.code for r in resps] == [RC.SUCCESS] * 200
        assert [int(r.ext_fields["queueOffset"]) for r in resps] == list(range(200))

    run(main())
