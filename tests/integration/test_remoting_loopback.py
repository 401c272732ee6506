"""mq.remoting over real sockets on 127.0.0.1 port 0, on asyncio's loop and on uvloop."""

from __future__ import annotations

import asyncio
import time

import pytest

from mq.config import ConnectionLimits
from mq.errors import ConnectError, ConnectionClosedError
from mq.protocol.codes import ResponseCode, SerializeType
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient, RemotingServer, new_event_loop, uvloop_available
from tests.ports import free_port

LOOPS = ["asyncio"] + (["uvloop"] if uvloop_available() else [])


@pytest.fixture(params=LOOPS)
def run(request):
    prefer_uvloop = request.param == "uvloop"

    def runner(coro, timeout: float = 20.0):
        async def guarded():
            return await asyncio.wait_for(coro, timeout)

        with asyncio.Runner(loop_factory=lambda: new_event_loop(prefer_uvloop)) as r:
            return r.run(guarded())

    return runner


def echo(conn, cmd):
    return cmd.response(0, "echo", ext_fields=dict(cmd.ext_fields), body=cmd.body)


async def slow_echo(conn, cmd):
    await asyncio.sleep(0.001)
    return cmd.response(0, "slow", ext_fields=dict(cmd.ext_fields), body=cmd.body)


async def start_server(**kw) -> tuple[RemotingServer, str]:
    server = RemotingServer("127.0.0.1", 0, **kw)
    server.register(10, echo)
    server.register(11, slow_echo)
    host, port = await server.start()
    assert port > 0 and server.port == port
    return server, f"{host}:{port}"


def test_round_trips_sync_async_bodies_and_serialize_types(run):
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        try:
            r = await client.invoke(addr, RemotingCommand.request(10, {"k": "v"}, body=b"hello"))
            assert (r.code, r.remark, r.ext_fields, r.body) == (0, "echo", {"k": "v"}, b"hello")
            r = await client.invoke(addr, RemotingCommand.request(11, {"a": "b"},
                                                                  serialize_type=SerializeType.ROCKETMQ))
            assert (r.remark, r.ext_fields, r.serialize_type) == ("slow", {"a": "b"}, SerializeType.ROCKETMQ)
            big = bytes(range(256)) * 4096  # 1 MiB: arrives in many reads
            r = await client.invoke(addr, RemotingCommand.request(10, body=big), timeout=10)
            assert r.body == big
            r = await client.invoke(addr, RemotingCommand.request(999))
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            rs = await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(10 + i % 2, {"i": str(i)}))
                                        for i in range(500)))
            assert [x.ext_fields["i"] for x in rs] == [str(i) for i in range(500)]
            fut = client.invoke_async(addr, RemotingCommand.request(10, {"z": "1"}))
            assert (await fut).ext_fields == {"z": "1"}
            assert len(server.connections) == 1
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_reconnect_after_server_side_close(run):
    async def main():
        server, addr = await start_server()
        held: list = []
        server.register(70, lambda conn, cmd: held.append(cmd))
        closed: list = []
        server.on_connection_closed(closed.append)
        client = RemotingClient()
        try:
            assert (await client.invoke(addr, RemotingCommand.request(10))).code == 0
            pending = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(70), timeout=5))
            while not held:
                await asyncio.sleep(0.001)
            first = server.connections[0]
            first.close()
            with pytest.raises(ConnectionClosedError):
                await pending
            assert closed == [first]
            r = await client.invoke(addr, RemotingCommand.request(10, {"again": "1"}))
            assert r.ext_fields == {"again": "1"}
            assert len(server.connections) == 1 and server.connections[0] is not first
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_broker_initiated_request_answered_by_client_handler(run):
    async def main():
        server, addr = await start_server()
        channels: list = []

        def heartbeat(conn, cmd):
            conn.attrs["clientID"] = cmd.ext_fields["clientID"]
            channels.append(conn)
            return cmd.response(0)

        server.register(34, heartbeat)
        client = RemotingClient()
        checks: list[str] = []

        async def running_info(conn, cmd):
            await asyncio.sleep(0)
            return cmd.response(0, body=b'{"jstack":""}')

        client.register(39, lambda conn, cmd: checks.append(cmd.ext_fields["msgId"]))
        client.register(307, running_info)
        try:
            await client.invoke(addr, RemotingCommand.request(34, {"clientID": "c1"}))
            conn = channels[0]
            assert conn.attrs == {"clientID": "c1"} and conn.remote_addr.startswith("127.0.0.1:")
            r = await conn.invoke(RemotingCommand.request(307, {"consumerGroup": "G"}), timeout=2)
            assert r.code == 0 and r.body == b'{"jstack":""}'
            conn.invoke_oneway(RemotingCommand.request(39, {"msgId": "M1"}))
            for _ in range(200):
                if checks:
                    break
                await asyncio.sleep(0.005)
            assert checks == ["M1"]
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_many_concurrent_connections(run):
    async def main():
        server, addr = await start_server()
        clients = [RemotingClient(name=f"c{i}") for i in range(40)]
        try:
            async def work(i, c):
                rs = await asyncio.gather(*(c.invoke(addr, RemotingCommand.request(10 + j % 2, {"c": str(i),
                                                                                            "j": str(j)}))
                                            for j in range(25)))
                return [(x.ext_fields["c"], x.ext_fields["j"]) for x in rs]

            results = await asyncio.gather(*(work(i, c) for i, c in enumerate(clients)))
            for i, res in enumerate(results):
                assert res == [(str(i), str(j)) for j in range(25)]
            assert len(server.connections) == 40
            assert len({c.remote_addr for c in server.connections}) == 40
        finally:
            for c in clients:
                await c.close()
            await server.stop()

    run(main())


def test_peer_down_gives_connect_error_quickly(run):
    async def main():
        port = free_port()  # a port that nobody listens on
        addr = f"127.0.0.1:{port}"
        client = RemotingClient(connect_timeout=3.0)
        try:
            t0 = time.monotonic()
            with pytest.raises(ConnectError) as info:
                await client.invoke(addr, RemotingCommand.request(10))
            assert time.monotonic() - t0 < 0.5
            assert str(info.value) == f"cannot connect to {addr}: connection refused"
            assert info.value.addr == addr
            with pytest.raises(ConnectError):
                await client.invoke_oneway(addr, RemotingCommand.request(10))
        finally:
            await client.close()

    run(main())


def test_stop_fails_pending_requests_and_malformed_frame_closes_one_connection(run):
    async def main():
        server, addr = await start_server()
        server.register(70, lambda conn, cmd: None)
        good = RemotingClient()
        try:
            assert (await good.invoke(addr, RemotingCommand.request(10))).code == 0
            host, port = addr.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"\x00\x00\x00\x10\x07\x00\x00\x01junkjunkjunk")  # serialize type 7
            assert await asyncio.wait_for(reader.read(), 2) == b""  # the server closed it
            writer.close()
            assert (await good.invoke(addr, RemotingCommand.request(10))).code == 0
            pending = asyncio.ensure_future(good.invoke(addr, RemotingCommand.request(70), timeout=5))
            await asyncio.sleep(0.05)
            await server.stop()
            with pytest.raises(ConnectionClosedError):
                await pending
        finally:
            await good.close()
            await server.stop()

    run(main())


def test_idle_connection_closed_by_server(run):
    async def main():
        server, addr = await start_server(connection_limits=ConnectionLimits(idle_timeout=0.2))
        client = RemotingClient()
        try:
            await client.invoke(addr, RemotingCommand.request(10))
            conn = client.connections[addr]
            deadline = time.monotonic() + 3
            while not conn.closed and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert conn.closed and server.connections == []
            assert (await client.invoke(addr, RemotingCommand.request(10))).code == 0
        finally:
            await client.close()
            await server.stop()

    run(main())
