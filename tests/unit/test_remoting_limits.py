"""The remoting bounds over the in-memory transport (no sockets): pending output per connection and per server,
stalls, unfinished frames, the time bounds of ``RemotingServer.scan``, offloaded requests and their ordering,
and the hold on full garbage collections."""

from __future__ import annotations

import asyncio
import gc
import struct
import weakref

import pytest

from mq.config import BrokerConfig, ConnectionLimits, NamesrvConfig, from_mapping
from mq.errors import ConfigError, ConnectionBusyError
from mq.protocol.codec import encode
from mq.protocol.command import RemotingCommand
from mq.remoting import DEFER, RemotingServer
from mq.remoting.gc_pause import GcPause, freeze_started_heap
from mq.remoting.testing import ConnectionPair


def run(coro, timeout: float = 10.0):
    async def guarded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(guarded())


def req(code: int, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(code, {k: str(v) for k, v in ext.items()})


ANSWER = 1000


def answering_server(limits: ConnectionLimits, calls: list) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, connection_limits=limits)

    def big(conn, cmd):
        calls.append(cmd.ext_fields["n"])
        return cmd.response(0, body=b"a" * ANSWER)

    server.register(10, big)
    return server


def test_a_pipelined_burst_builds_answers_only_up_to_the_mark_and_serves_the_rest_once_read():
    async def main():
        calls: list[str] = []
        server = answering_server(ConnectionLimits(write_high_water=4000, write_low_water=1000), calls)
        pair = ConnectionPair(server)
        pair.client_transport.pause_reading()  # a client that does not read
        cmds = [req(10, n=i) for i in range(100)]
        futs = [asyncio.ensure_future(pair.client_conn.invoke(c, 5)) for c in cmds]
        await pair.settle(10)
        assert 3 <= len(calls) <= 6, calls  # about one mark of answers, not 100
        assert pair.server_conn.serving_paused and pair.server_conn.reading_paused
        assert server.budget.output == pair.server_conn.pending_output <= 4000 + ANSWER
        pair.client_transport.resume_reading()
        resps = await asyncio.gather(*futs)
        assert [r.opaque for r in resps] == [c.opaque for c in cmds] and all(len(r.body) == ANSWER for r in resps)
        assert calls == [str(i) for i in range(100)]  # in order, none lost
        assert not pair.server_conn.serving_paused and not pair.server_conn.reading_paused
        await server.stop()
        assert server.budget.output == 0

    run(main())


def test_requests_wait_while_the_server_total_is_over_its_limit_and_the_longest_stalled_is_closed():
    async def main():
        calls: list[str] = []
        limits = ConnectionLimits(write_high_water=3000, write_low_water=1000, max_total_output=5000)
        server = answering_server(limits, calls)
        first, second = ConnectionPair(server), ConnectionPair(server)
        first.client_transport.pause_reading()
        for i in range(10):
            asyncio.ensure_future(first.client_conn.invoke(req(10, n=f"a{i}"), 5))
        await first.settle(10)
        assert first.server_conn.stalled_since is not None
        second.client_transport.pause_reading()
        for i in range(10):
            asyncio.ensure_future(second.client_conn.invoke(req(10, n=f"b{i}"), 5))
        await second.settle(10)
        # The total went over 5000: the connection stalled longest (the first) was closed, its output dropped.
        assert first.server_conn.closed and not second.server_conn.closed
        assert server.budget.output == second.server_conn.pending_output
        await server.stop()

    run(main())


def test_scan_closes_unfinished_frames_stalled_and_idle_connections():
    async def main():
        limits = ConnectionLimits(frame_timeout=5, idle_timeout=20, write_stall_timeout=10,
                                  write_high_water=2000, write_low_water=500)
        server = answering_server(limits, [])
        slow, idle, stalled = ConnectionPair(server), ConnectionPair(server), ConnectionPair(server)
        frame = encode(req(10, n=1))
        slow.send_raw(frame[:10])
        await slow.settle()
        started = slow.server_conn.frame_started
        assert started is not None and server.budget.partial == 10
        last = slow.server_conn.last_active
        slow.send_raw(frame[10:11])  # a trickled byte is not traffic
        await slow.settle()
        assert slow.server_conn.last_active == last and slow.server_conn.frame_started == started
        stalled.client_transport.pause_reading()
        for i in range(10):
            asyncio.ensure_future(stalled.client_conn.invoke(req(10, n=i), 30))
        await stalled.settle(10)
        assert stalled.server_conn.stalled_since is not None
        assert server.scan(started + 4) == 0
        assert server.scan(started + 6) == 1 and slow.server_conn.closed
        assert server.scan(stalled.server_conn.stalled_since + 11) == 1 and stalled.server_conn.closed
        assert server.scan(idle.server_conn.last_active + 21) == 1 and idle.server_conn.closed
        await asyncio.sleep(0.01)
        assert server.budget.partial == 0 and server.budget.output == 0
        await server.stop()

    run(main())


def test_unfinished_frames_over_the_server_total_close_the_connection_that_went_over():
    async def main():
        server = answering_server(ConnectionLimits(max_total_partial=100), [])
        a, b = ConnectionPair(server), ConnectionPair(server)
        a.send_raw(struct.pack(">ii", 1000, 20) + b"x" * 70)
        await a.settle()
        b.send_raw(struct.pack(">ii", 1000, 20) + b"y" * 70)
        await b.settle()
        assert b.server_conn.closed and not a.server_conn.closed
        assert server.budget.partial == 78
        await server.stop()

    run(main())


def test_requests_to_a_peer_that_does_not_read_are_refused():
    async def main():
        server = answering_server(ConnectionLimits(write_high_water=2000, write_low_water=500), [])
        pair = ConnectionPair(server)
        pair.client_transport.pause_reading()
        for i in range(5):
            asyncio.ensure_future(pair.client_conn.invoke(req(10, n=i), 5))
        await pair.settle(10)
        conn = pair.server_conn
        assert conn.output_full
        assert conn.invoke_oneway(req(40)) is False
        with pytest.raises(ConnectionBusyError):
            conn.invoke_future(req(39), 1.0)
        await server.stop()

    run(main())


def test_offloaded_requests_keep_each_connections_order_and_do_not_hold_up_others():
    async def main():
        server = RemotingServer("127.0.0.1", 0, connection_limits=ConnectionLimits(offload_body_threshold=10))
        seen: list[str] = []
        release = asyncio.Event()

        def inline(conn, cmd):
            if server.is_heavy(cmd):
                return DEFER
            seen.append(cmd.ext_fields["n"])
            return cmd.response(0)

        async def heavy(conn, cmd):
            body = await server.offload(bytes.upper, bytes(cmd.body or b""))
            await release.wait()
            seen.append(cmd.ext_fields["n"])
            return cmd.response(0, body=body)

        server.register_offloaded(34, heavy, inline)
        a, b = ConnectionPair(server), ConnectionPair(server)
        big = RemotingCommand.request(34, {"n": "a-heavy"}, b"x" * 100)
        f1 = asyncio.ensure_future(a.client_conn.invoke(big, 5))
        f2 = asyncio.ensure_future(a.client_conn.invoke(req(34, n="a-small"), 5))  # must wait for a-heavy
        f3 = asyncio.ensure_future(b.client_conn.invoke(req(34, n="b-small"), 5))  # must not
        await asyncio.wait_for(f3, 5)
        assert seen == ["b-small"]
        release.set()
        r1, _r2 = await asyncio.gather(f1, f2)
        assert seen == ["b-small", "a-heavy", "a-small"] and r1.body == b"X" * 100
        await server.stop()

    run(main())


def test_gc_pause_holds_off_full_collections_and_restores_the_thresholds(monkeypatch):
    pause = GcPause(max_hold=1000)
    before = gc.get_threshold()
    with pause:
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] > 10**9
        with pause:
            assert pause.holding
        assert pause.holding
    assert gc.get_threshold() == before and not pause.holding
    collected = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(a))
    pause = GcPause(max_hold=0)
    with pause:
        with pause:  # held longer than max_hold: one full collection runs anyway
            pass
    assert collected == [()]
    assert gc.get_threshold() == before


def test_freezing_the_started_heap_collects_its_garbage_and_keeps_the_rest_out_of_later_collections():
    class Node:
        pass

    garbage = Node()
    garbage.self = garbage  # a cycle only the collector can free
    gone = weakref.ref(garbage)
    del garbage
    kept = [Node()]
    try:
        frozen = freeze_started_heap()
        assert gone() is None  # collected first, not frozen
        assert frozen > 0 and 0 < gc.get_freeze_count() <= frozen  # frozen objects may still be freed by refcount
        assert not any(o is kept for o in gc.get_objects())  # in the permanent generation: never walked again
        later = [Node()]
        assert any(o is later for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())


def test_limits_are_yaml_keys_of_both_daemons_and_are_checked():
    ns = from_mapping(NamesrvConfig, {"writeBufferHighWaterMark": 2 << 20, "writeBufferLowWaterMark": 1 << 20,
                                      "writeBufferTotalLimit": 64 << 20, "writeStallTimeoutSeconds": 5,
                                      "frameMaxLength": 8 << 20, "frameCompleteTimeoutSeconds": 2.5,
                                      "partialFrameTotalLimit": 32 << 20, "serverChannelMaxIdleTimeSeconds": 60,
                                      "maxInflightRequestsPerChannel": 64, "heavyBodyThreshold": 4096,
                                      "badRequestLogIntervalSeconds": 30})
    lim = ns.connection_limits
    assert (lim.write_high_water, lim.write_low_water, lim.max_total_output, lim.write_stall_timeout,
            lim.frame_timeout, lim.max_total_partial, lim.idle_timeout, lim.max_inflight,
            lim.offload_body_threshold, lim.bad_request_log_interval) == (
        2 << 20, 1 << 20, 64 << 20, 5.0, 2.5, 32 << 20, 60.0, 64, 4096, 30.0)
    assert ns.frame_limits.max_frame == 8 << 20
    assert BrokerConfig(server_channel_max_idle_time_seconds=7).connection_limits.idle_timeout == 7.0
    with pytest.raises(ConfigError, match="writeBufferLowWaterMark"):
        from_mapping(NamesrvConfig, {"writeBufferLowWaterMark": 10 << 20})
