"""mq.remoting over the in-memory transport (no sockets): dispatch, errors, flow control, client logic."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from mq.config import ConnectionLimits, ProcessorLimits
from mq.errors import ConnectError, ConnectionClosedError, RemotingTimeoutError
from mq.protocol.codec import encode
from mq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode, SerializeType
from mq.protocol.command import RemotingCommand
from mq.remoting import (
    HandlerRegistry,
    RejectRequest,
    RemotingClient,
    RemotingServer,
    request_context,
)
from mq.remoting.testing import ConnectionPair, MemoryNetwork


def run(coro, timeout: float = 10.0):
    async def guarded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(guarded())


def req(code: int, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(code, {k: str(v) for k, v in ext.items()})


def echo(conn, cmd):
    return cmd.response(0, "echo", ext_fields=dict(cmd.ext_fields), body=cmd.body)


def make_server(**kw) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, **kw)
    server.register(10, echo)
    return server


# ---------------------------------------------------------------------------------------------
# matching and pipelining
# ---------------------------------------------------------------------------------------------
def test_out_of_order_responses_match_by_opaque():
    async def main():
        server = make_server()
        gates: dict[str, asyncio.Event] = {}

        async def held(conn, cmd):
            await gates[cmd.ext_fields["i"]].wait()
            return cmd.response(0, ext_fields={"i": cmd.ext_fields["i"]})

        server.configure_group("held", ProcessorLimits(concurrency=10, queue_capacity=10))
        server.register(20, held, group="held")
        pair = ConnectionPair(server)
        n = 8
        for i in range(n):
            gates[str(i)] = asyncio.Event()
        futs = [asyncio.ensure_future(pair.client_conn.invoke(req(20, i=i), 5)) for i in range(n)]
        await pair.settle()
        order = []
        for i in reversed(range(n)):  # release the last request first
            gates[str(i)].set()
            done = await futs[i]
            order.append(i)
            assert done.ext_fields == {"i": str(i)}
            assert not any(f.done() for f in futs[:i])
        assert order == list(reversed(range(n)))
        assert pair.client_conn.pending_count == 0
        await server.stop()

    run(main())


def test_pipelined_1000_requests_coalesce_into_few_writes():
    async def main():
        server = make_server()
        pair = ConnectionPair(server)
        cmds = [req(10, n=i) for i in range(1000)]
        resps = await asyncio.gather(*(pair.client_conn.invoke(c, 5) for c in cmds))
        assert [r.ext_fields["n"] for r in resps] == [str(i) for i in range(1000)]
        assert all(r.opaque == c.opaque and r.is_response for r, c in zip(resps, cmds))
        assert len({c.opaque for c in cmds}) == 1000
        # 1000 requests made in one loop iteration leave in one write, and are answered in one write.
        assert pair.client_transport.writes == 1
        assert pair.server_transport.writes == 1
        await server.stop()

    run(main())


def test_frames_split_into_small_chunks_still_decode():
    async def main():
        server = make_server()
        pair = ConnectionPair(server, chunk_size=7)
        resps = await asyncio.gather(*(pair.client_conn.invoke(RemotingCommand.request(10, {"k": "v" * i},
                                                                                        body=b"x" * i), 5)
                                       for i in range(50)))
        assert [len(r.body or b"") for r in resps] == list(range(50))
        assert pair.server_transport.writes > 1
        await server.stop()

    run(main())


def test_opaque_wraps_to_negative_int32():
    async def main():
        server = make_server()
        pair = ConnectionPair(server)
        pair.client_conn._opaque = 2**31 - 2
        a = await pair.client_conn.invoke(req(10), 1)
        b = await pair.client_conn.invoke(req(10), 1)
        assert (a.opaque, b.opaque) == (2**31 - 1, -(2**31))
        await server.stop()

    run(main())


# ---------------------------------------------------------------------------------------------
# error responses
# ---------------------------------------------------------------------------------------------
def test_unknown_code_remark():
    async def main():
        server = make_server()
        pair = ConnectionPair(server)
        resp = await pair.client_conn.invoke(req(4242), 1)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 4242 not supported"
        await server.stop()

    run(main())


def test_default_handler_takes_unknown_codes():
    async def main():
        server = make_server()
        server.register_default(lambda conn, cmd: cmd.response(0, f"default {cmd.code}"))
        pair = ConnectionPair(server)
        assert (await pair.client_conn.invoke(req(4242), 1)).remark == "default 4242"
        assert (await pair.client_conn.invoke(req(10), 1)).remark == "echo"
        await server.stop()

    run(main())


@pytest.mark.parametrize("is_async", [False, True])
def test_handler_exception_is_system_error_with_logged_traceback(is_async, caplog):
    async def main():
        server = make_server()
        if is_async:
            async def bad(conn, cmd):
                raise ValueError("boom")
        else:
            def bad(conn, cmd):
                raise ValueError("boom")
        server.register(30, bad)
        pair = ConnectionPair(server)
        resp = await pair.client_conn.invoke(req(30), 1)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "ValueError: boom"
        # the connection is still usable
        assert (await pair.client_conn.invoke(req(10), 1)).code == 0
        await server.stop()

    with caplog.at_level(logging.ERROR, logger="mq.remoting.server"):
        run(main())
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info and "30" in errors[0].getMessage()


def test_handler_returning_wrong_type_is_system_error():
    async def main():
        server = make_server()
        server.register(31, lambda conn, cmd: "not a command")
        pair = ConnectionPair(server)
        resp = await pair.client_conn.invoke(req(31), 1)
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark.startswith("TypeError: handler returned str")
        await server.stop()

    run(main())


@pytest.mark.parametrize("is_async", [False, True])
def test_reject_request(is_async):
    async def main():
        server = make_server()
        if is_async:
            async def rej(conn, cmd):
                raise RejectRequest("page cache busy")
        else:
            def rej(conn, cmd):
                raise RejectRequest("page cache busy")
        server.register(32, rej)
        pair = ConnectionPair(server)
        resp = await pair.client_conn.invoke(req(32), 1)
        assert resp.code == ResponseCode.SYSTEM_BUSY
        assert resp.remark == "[REJECTREQUEST]page cache busy"
        await server.stop()

    run(main())


def test_system_busy_when_group_queue_full_and_request_context():
    async def main():
        server = make_server()
        gate = asyncio.Event()
        waits: list[float] = []

        async def held(conn, cmd):
            await gate.wait()
            ctx = request_context()
            waits.append(ctx.queue_wait)
            return cmd.response(0, cmd.ext_fields["i"])

        server.configure_group("g", ProcessorLimits(concurrency=1, queue_capacity=2))
        server.register(40, held, group="g")
        pair = ConnectionPair(server)
        futs = [asyncio.ensure_future(pair.client_conn.invoke(req(40, i=i), 5)) for i in range(5)]
        await pair.settle()
        # 1 running + 2 queued; requests 3 and 4 are refused at once.
        busy = [await futs[3], await futs[4]]
        for r in busy:
            assert r.code == ResponseCode.SYSTEM_BUSY
            assert r.remark == "[OVERLOAD]system busy, start flow control for a while"
        assert not any(f.done() for f in futs[:3])
        assert server.registry.group("g").queued == 2
        await asyncio.sleep(0.02)
        gate.set()
        ok = await asyncio.gather(*futs[:3])
        assert [r.remark for r in ok] == ["0", "1", "2"]
        assert waits[1] >= 0.02 and waits[2] >= 0.02 and waits[0] < waits[1]
        assert pair.server_conn.inflight == 0
        await server.stop()

    run(main())


def test_clean_expired_requests_answers_timeout_clean_queue():
    async def main():
        server = make_server()
        gate = asyncio.Event()

        async def held(conn, cmd):
            await gate.wait()
            return cmd.response(0, "done")

        server.configure_group("g", ProcessorLimits(concurrency=1, queue_capacity=10))
        server.register(41, held, group="g")
        pair = ConnectionPair(server)
        futs = [asyncio.ensure_future(pair.client_conn.invoke(req(41), 5)) for _ in range(3)]
        await pair.settle()
        await asyncio.sleep(0.05)
        assert server.clean_expired_requests("g", max_wait=10.0) == 0
        assert server.clean_expired_requests("g", max_wait=0.03) == 2
        cleaned = await asyncio.gather(futs[1], futs[2])
        for r in cleaned:
            assert r.code == ResponseCode.SYSTEM_BUSY
            assert r.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy") and "size of queue: 2" in r.remark
        gate.set()
        assert (await futs[0]).remark == "done"
        assert pair.server_conn.inflight == 0
        await server.stop()

    run(main())


def test_serialize_type_is_mirrored_even_for_handmade_responses():
    async def main():
        server = make_server()
        server.register(50, lambda conn, cmd: RemotingCommand(0, remark="handmade"))  # JSON by default
        pair = ConnectionPair(server)
        for code in (10, 50):
            cmd = RemotingCommand.request(code, {"a": "1"}, serialize_type=SerializeType.ROCKETMQ)
            resp = await pair.client_conn.invoke(cmd, 1)
            assert resp.serialize_type == SerializeType.ROCKETMQ
            assert resp.opaque == cmd.opaque and resp.flag & FLAG_RESPONSE
        resp = await pair.client_conn.invoke(req(50), 1)
        assert resp.serialize_type == SerializeType.JSON
        await server.stop()

    run(main())


# ---------------------------------------------------------------------------------------------
# oneway
# ---------------------------------------------------------------------------------------------
def test_oneway_requests_never_get_an_answer():
    async def main():
        server = make_server()
        calls: list[int] = []

        def bad(conn, cmd):
            calls.append(cmd.code)
            raise ValueError("boom")

        def rej(conn, cmd):
            calls.append(cmd.code)
            raise RejectRequest("x")

        async def abad(conn, cmd):
            calls.append(cmd.code)
            raise ValueError("boom")

        gate = asyncio.Event()

        async def held(conn, cmd):
            calls.append(cmd.code)
            await gate.wait()
            return cmd.response(0)

        server.register(30, bad)
        server.register(32, rej)
        server.register(33, abad)
        server.configure_group("tiny", ProcessorLimits(concurrency=1, queue_capacity=0))
        server.register(40, held, group="tiny")
        pair = ConnectionPair(server)
        for code in (10, 30, 32, 33, 4242, 40, 40):  # the second 40 overflows the group
            pair.client_conn.invoke_oneway(RemotingCommand.request(code))
        await pair.settle(10)
        gate.set()
        await pair.settle(10)
        assert calls == [30, 32, 33, 40]
        assert pair.server_transport.writes == 0
        # the connection still answers two-way requests
        assert (await pair.client_conn.invoke(req(10), 1)).code == 0
        await server.stop()

    run(main())


def test_oneway_flag_is_set_on_the_wire():
    async def main():
        server = make_server()
        seen: list[int] = []
        server.register(60, lambda conn, cmd: seen.append(cmd.flag))
        pair = ConnectionPair(server)
        pair.client_conn.invoke_oneway(RemotingCommand.request(60))
        await pair.settle()
        assert seen == [FLAG_ONEWAY]
        await server.stop()

    run(main())


# ---------------------------------------------------------------------------------------------
# timeouts and closing
# ---------------------------------------------------------------------------------------------
def test_timeout_names_address_and_code():
    async def main():
        server = make_server()
        server.register(70, lambda conn, cmd: None)  # never answers
        pair = ConnectionPair(server)
        t0 = time.monotonic()
        with pytest.raises(RemotingTimeoutError) as info:
            await pair.client_conn.invoke(req(70), 0.05)
        assert 0.04 <= time.monotonic() - t0 < 1.0
        assert "10.0.0.1:10911" in str(info.value) and "code 70" in str(info.value)
        assert info.value.addr == "10.0.0.1:10911"
        assert pair.client_conn.pending_count == 0
        await server.stop()

    run(main())


def test_pending_futures_fail_when_connection_closes():
    async def main():
        server = make_server()
        held: list[tuple] = []
        server.register(70, lambda conn, cmd: held.append((conn, cmd)))
        closed: list = []
        server.on_connection_closed(closed.append)
        pair = ConnectionPair(server)
        futs = [asyncio.ensure_future(pair.client_conn.invoke(req(70), 5)) for _ in range(3)]
        await pair.settle()
        assert len(held) == 3 and pair.client_conn.pending_count == 3
        pair.server_conn.close()
        results = await asyncio.gather(*futs, return_exceptions=True)
        assert all(isinstance(r, ConnectionClosedError) for r in results)
        assert pair.client_conn.closed and pair.client_conn.pending_count == 0
        assert closed == [pair.server_conn] and server.connections == []
        # a late answer to a held request is dropped quietly
        assert held[0][0].send_response(held[0][1].response(0)) is False
        with pytest.raises(ConnectionClosedError):
            await pair.client_conn.invoke(req(10), 1)
        await server.stop()

    run(main())


def test_long_poll_answered_later_with_send_response():
    async def main():
        server = make_server()
        held: list[tuple] = []
        server.register(11, lambda conn, cmd: held.append((conn, cmd)))
        pair = ConnectionPair(server)
        fut = asyncio.ensure_future(pair.client_conn.invoke(req(11), 5))
        await pair.settle()
        assert not fut.done()
        conn, cmd = held[0]
        assert conn.send_response(cmd.response(0, "late")) is True
        assert (await fut).remark == "late"
        await server.stop()

    run(main())


def test_malformed_frame_closes_only_that_connection(caplog):
    async def main():
        server = make_server()
        server.register(70, lambda conn, cmd: None)  # holds the request
        closed: list = []
        server.on_connection_closed(closed.append)
        bad = ConnectionPair(server, client_addr="10.0.0.7:1111")
        good = ConnectionPair(server, client_addr="10.0.0.8:2222")
        assert len(server.connections) == 2
        fut = asyncio.ensure_future(bad.client_conn.invoke(req(70), 5))
        await bad.settle()
        bad.send_raw(b"\x00\x00\x00\x02garbage")  # length 2 < 4
        with pytest.raises(ConnectionClosedError):
            await fut
        await bad.settle()
        assert closed == [bad.server_conn]
        assert server.connections == [good.server_conn]
        assert (await good.client_conn.invoke(req(10), 1)).code == 0
        await server.stop()

    with caplog.at_level(logging.WARNING, logger="mq.remoting"):
        run(main())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "10.0.0.7:1111" in warnings[0] and "frame length 2" in warnings[0]


def test_unknown_opaque_response_is_dropped():
    async def main():
        server = make_server()
        pair = ConnectionPair(server)
        stray = RemotingCommand(0, opaque=12345, flag=FLAG_RESPONSE)
        pair.server_transport.write(encode(stray))
        await pair.settle()
        assert not pair.client_conn.closed
        assert (await pair.client_conn.invoke(req(10), 1)).code == 0
        await server.stop()

    run(main())


def test_idle_connections_are_closed():
    async def main():
        server = make_server()
        pair = ConnectionPair(server)
        assert server.close_idle(120.0) == 0
        assert server.close_idle(120.0, now=time.monotonic() + 121) == 1
        await pair.settle()
        assert pair.client_conn.closed and server.connections == []
        await server.stop()

    run(main())


# ---------------------------------------------------------------------------------------------
# server-initiated requests
# ---------------------------------------------------------------------------------------------
def test_server_invokes_a_client_handler():
    async def main():
        server = make_server()
        client_reg = HandlerRegistry("client")
        client_reg.register(39, lambda conn, cmd: cmd.response(0, f"checked {cmd.ext_fields['msgId']}"))
        notified: list[str] = []
        client_reg.register(40, lambda conn, cmd: notified.append(cmd.ext_fields["consumerGroup"]))
        pair = ConnectionPair(server, client_reg)
        resp = await pair.server_conn.invoke(req(39, msgId="M1"), 1)
        assert resp.remark == "checked M1"
        pair.server_conn.invoke_oneway(req(40, consumerGroup="G"))
        await pair.settle()
        assert notified == ["G"]
        # the client's own requests still work on the same connection
        assert (await pair.client_conn.invoke(req(10), 1)).code == 0
        await server.stop()

    run(main())


# ---------------------------------------------------------------------------------------------
# flow control
# ---------------------------------------------------------------------------------------------
def test_reading_pauses_when_too_many_requests_in_flight():
    async def main():
        server = make_server(connection_limits=ConnectionLimits(max_inflight=4))
        gate = asyncio.Event()

        async def held(conn, cmd):
            await gate.wait()
            return cmd.response(0)

        server.configure_group("g", ProcessorLimits(concurrency=2, queue_capacity=100))
        server.register(80, held, group="g")
        pair = ConnectionPair(server)
        futs = [asyncio.ensure_future(pair.client_conn.invoke(req(80), 5)) for _ in range(3)]
        await pair.settle()
        assert not pair.server_conn.reading_paused and pair.server_conn.inflight == 3
        futs.append(asyncio.ensure_future(pair.client_conn.invoke(req(80), 5)))
        await pair.settle()
        assert pair.server_conn.inflight == 4 and pair.server_conn.reading_paused
        assert not pair.server_transport.is_reading()
        futs += [asyncio.ensure_future(pair.client_conn.invoke(req(80), 5)) for _ in range(6)]
        await pair.settle()
        assert pair.server_conn.inflight == 4  # the 6 new requests wait in the transport
        gate.set()
        resps = await asyncio.gather(*futs)
        assert all(r.code == 0 for r in resps)
        assert not pair.server_conn.reading_paused and pair.server_conn.inflight == 0
        await server.stop()

    run(main())


def test_server_stops_reading_while_its_output_is_blocked():
    async def main():
        limits = ConnectionLimits(write_high_water=2000, write_low_water=500)
        server = make_server(connection_limits=limits)
        server.register(81, lambda conn, cmd: cmd.response(0, body=b"r" * 700))
        pair = ConnectionPair(server)
        pair.client_transport.pause_reading()  # a peer that does not read its responses
        futs = [asyncio.ensure_future(pair.client_conn.invoke(req(81), 5)) for _ in range(4)]
        await pair.settle()
        assert pair.server_conn.write_blocked and pair.server_conn.reading_paused
        buffered = pair.server_transport.get_write_buffer_size()
        assert buffered > 2000
        futs += [asyncio.ensure_future(pair.client_conn.invoke(req(81), 5)) for _ in range(4)]
        await pair.settle()
        assert pair.server_transport.get_write_buffer_size() == buffered  # nothing more was produced
        pair.client_transport.resume_reading()
        resps = await asyncio.gather(*futs)
        assert [len(r.body) for r in resps] == [700] * 8
        assert not pair.server_conn.write_blocked and not pair.server_conn.reading_paused
        await server.stop()

    run(main())


# ---------------------------------------------------------------------------------------------
# RemotingClient over the memory network
# ---------------------------------------------------------------------------------------------
def test_client_shares_one_connect_and_reconnects_after_close():
    async def main():
        server = make_server()
        net = MemoryNetwork()
        net.bind("10.0.0.1:9876", server)
        connects = 0

        async def counting(addr, factory):
            nonlocal connects
            connects += 1
            return await net.connect(addr, factory)

        client = RemotingClient(connector=counting)
        resps = await asyncio.gather(*(client.invoke("10.0.0.1:9876", req(10, n=i)) for i in range(20)))
        assert [r.ext_fields["n"] for r in resps] == [str(i) for i in range(20)]
        assert connects == 1 and len(server.connections) == 1
        first = client.connections["10.0.0.1:9876"]
        server.connections[0].close()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert first.closed and client.connections == {}
        assert (await client.invoke("10.0.0.1:9876", req(10))).code == 0
        assert connects == 2 and client.connections["10.0.0.1:9876"] is not first
        fut = client.invoke_async("10.0.0.1:9876", req(10, x=1))
        assert (await fut).ext_fields == {"x": "1"}
        await client.close()
        await server.stop()

    run(main())


def test_client_refused_and_bad_address():
    async def main():
        client = RemotingClient(connector=MemoryNetwork().connect)
        with pytest.raises(ConnectError) as info:
            await client.invoke("10.0.0.5:10911", req(10))
        assert str(info.value) == "cannot connect to 10.0.0.5:10911: connection refused"
        assert info.value.addr == "10.0.0.5:10911"
        with pytest.raises(ConnectError):
            await client.invoke("nonsense", req(10))
        await client.close()

    run(main())


def test_client_connect_timeout():
    async def main():
        async def never(addr, factory):
            await asyncio.sleep(10)

        client = RemotingClient(connector=never, connect_timeout=0.05)
        t0 = time.monotonic()
        with pytest.raises(ConnectError, match="timed out"):
            await client.invoke("10.0.0.5:10911", req(10))
        assert time.monotonic() - t0 < 1.0
        await client.close()

    run(main())


def test_stop_cancels_running_workers():
    async def main():
        server = make_server()
        started = asyncio.Event()
        cancelled = asyncio.Event()

        async def forever(conn, cmd):
            started.set()
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        server.register(90, forever)
        pair = ConnectionPair(server)
        fut = asyncio.ensure_future(pair.client_conn.invoke(req(90), 5))
        await started.wait()
        await server.stop()
        assert cancelled.is_set()
        with pytest.raises(ConnectionClosedError):
            await fut

    run(main())


def test_cancelled_invoke_forgets_its_opaque_and_late_answer_is_dropped():
    async def main():
        server = make_server()
        held: list[tuple] = []
        server.register(70, lambda conn, cmd: held.append((conn, cmd)))
        pair = ConnectionPair(server)
        task = asyncio.ensure_future(pair.client_conn.invoke(req(70), 5))
        await pair.settle()
        assert pair.client_conn.pending_count == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pair.client_conn.pending_count == 0
        conn, cmd = held[0]
        conn.send_response(cmd.response(0, "late"))
        await pair.settle()
        assert not pair.client_conn.closed
        assert (await pair.client_conn.invoke(req(10), 1)).code == 0
        await server.stop()

    run(main())


def test_handler_closing_the_connection_drops_the_rest_of_the_read():
    async def main():
        server = make_server()
        seen: list[str] = []

        def kick(conn, cmd):
            seen.append(cmd.ext_fields["i"])
            conn.close("kicked")
            return cmd.response(0)

        server.register(71, kick)
        pair = ConnectionPair(server)
        futs = [asyncio.ensure_future(pair.client_conn.invoke(req(71, i=i), 5)) for i in range(3)]
        results = await asyncio.gather(*futs, return_exceptions=True)
        assert seen == ["0"]
        assert all(isinstance(r, ConnectionClosedError) for r in results)
        assert pair.server_conn.close_reason == "kicked"
        await server.stop()

    run(main())


def test_inline_handler_sees_request_context():
    async def main():
        server = make_server()
        contexts = []
        server.register(72, lambda conn, cmd: contexts.append(request_context()) or cmd.response(0))
        pair = ConnectionPair(server)
        before = time.monotonic()
        await pair.client_conn.invoke(req(72), 1)
        ctx = contexts[0]
        assert ctx.queue_wait == 0 and before <= ctx.arrived <= time.monotonic() and ctx.age() >= 0
        assert request_context() is None  # outside handlers
        await server.stop()

    run(main())


def test_client_close_fails_pending_and_reports_closed_connections():
    async def main():
        server = make_server()
        server.register(70, lambda conn, cmd: None)
        net = MemoryNetwork(chunk_size=13)
        net.bind("10.0.0.1:9876", server)
        client = RemotingClient(connector=net.connect)
        lost: list[str] = []
        client.on_connection_closed(lambda addr, conn: lost.append(addr))
        assert (await client.invoke("10.0.0.1:9876", req(10, k="v"))).ext_fields == {"k": "v"}
        pending = asyncio.ensure_future(client.invoke("10.0.0.1:9876", req(70), 5))
        await asyncio.sleep(0.01)
        await client.close()
        with pytest.raises(ConnectionClosedError):
            await pending
        assert lost == ["10.0.0.1:9876"]
        await server.stop()

    run(main())


def test_connection_without_dispatcher_answers_not_supported():
    async def main():
        from mq.remoting import Connection
        from mq.remoting.testing import connect_memory

        plain = Connection(None, name="plain")
        server = make_server()
        asker = server.make_connection()
        connect_memory(plain, asker)
        resp = await asker.invoke(req(40), 1)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 40 not supported"
        await server.stop()

    run(main())


def test_inline_fast_path_runs_only_while_the_group_is_idle():
    """A grouped async handler with an ``inline`` fast path: answered on the spot while the group is idle,
    handed to the group on DEFER, and never reordered behind queued work."""
    import asyncio

    from mq.config import ProcessorLimits
    from mq.remoting import DEFER, RemotingServer
    from mq.remoting.testing import ConnectionPair

    order: list[str] = []
    gate = asyncio.Event()

    async def slow(conn, cmd):
        order.append(f"async-{cmd.ext_fields['i']}")
        if cmd.ext_fields["i"] == "0":
            await gate.wait()
        return cmd.response(0)

    def fast(conn, cmd):
        if cmd.ext_fields["i"] == "0":
            return DEFER
        order.append(f"inline-{cmd.ext_fields['i']}")
        return cmd.response(0)

    async def main():
        server = RemotingServer("127.0.0.1", 0, name="t")
        server.configure_group("g", ProcessorLimits(concurrency=1, queue_capacity=10))
        server.register(77, slow, group="g", inline=fast)
        pair = ConnectionPair(server)
        futs = [pair.client_conn.invoke_future(RemotingCommand.request(77, {"i": str(i)}), 5) for i in range(3)]
        await pair.settle()
        assert order == ["async-0"]  # 0 deferred to the group; 1 and 2 queue behind it instead of overtaking
        gate.set()
        await asyncio.gather(*futs)
        assert order == ["async-0", "async-1", "async-2"]
        await pair.client_conn.invoke(RemotingCommand.request(77, {"i": "3"}), 5)
        assert order[-1] == "inline-3"  # idle again: the fast path answers on the spot

    asyncio.run(main())
