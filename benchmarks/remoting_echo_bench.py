"""Round trips per second of mq.remoting on loopback: an echo server in a subprocess, clients here.

The server answers a ~100-byte-body request with a ~50-byte-body response from a plain (inline) handler.
Two loads, as in /work/shared/PERFORMANCE.md:

- 16 connections, 1 request in flight each;
- 16 connections, 16 requests pipelined each.

Each is run with the server and the client on uvloop and on asyncio's own loop, with two kinds of client:

- ``RemotingClient``: the real client (``invoke`` from one coroutine per request slot);
- ``raw``: a bare protocol that writes pre-encoded request frames and only counts response frames, so
  the server (decode, dispatch, encode, write) is what is measured.

The figures also show the server process's CPU use (psutil): near 100 % means the server is the limit;
below that the client process (on the machine's other core) is. First, without sockets, the script prints the
server-side CPU cost of one request (decode, dispatch to an inline handler, encode, write) when a read holds 1
and 16 frames: the figure the loopback rates are bounded by, and far less noisy than they are.

    /work/venv/bin/python benchmarks/remoting_echo_bench.py [--duration 3] [--loops uvloop,asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

import psutil

from mq.protocol.codec import encode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient, RemotingServer, new_event_loop

ECHO_CODE = 10
REQUEST_BODY = b"q" * 100
REPLY_BODY = b"r" * 50


def _echo(conn, cmd):
    return cmd.response(0, ext_fields={"n": cmd.ext_fields.get("n", "")}, body=REPLY_BODY)


async def _serve(port: int) -> None:
    server = RemotingServer("127.0.0.1", port, name="bench")
    server.register(ECHO_CODE, _echo)
    _host, bound = await server.start()
    print(bound, flush=True)
    # Run until stdin closes (the parent exits or tells us to stop).
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    await server.stop()


def serve_main(loop_name: str) -> None:
    with asyncio.Runner(loop_factory=lambda: new_event_loop(loop_name == "uvloop")) as runner:
        runner.run(_serve(0))


async def _load(addr: str, connections: int, depth: int, duration: float) -> tuple[int, float]:
    clients = [RemotingClient(name=f"bench{i}") for i in range(connections)]
    for c in clients:
        await c.invoke(addr, RemotingCommand.request(ECHO_CODE, body=REQUEST_BODY))  # connect + warm up
    stop_at = 0.0
    count = 0

    async def worker(client: RemotingClient) -> None:
        nonlocal count
        ext = {"n": "1"}
        while time.perf_counter() < stop_at:
            resp = await client.invoke(addr, RemotingCommand.request(ECHO_CODE, ext, body=REQUEST_BODY))
            if resp.code != 0:
                raise RuntimeError(f"unexpected response {resp}")
            count += 1

    start = time.perf_counter()
    stop_at = start + duration
    await asyncio.gather(*(worker(c) for c in clients for _ in range(depth)))
    elapsed = time.perf_counter() - start
    for c in clients:
        await c.close()
    return count, elapsed


class _RawClient(asyncio.Protocol):
    """Keeps ``depth`` requests in flight with pre-encoded frames; counts responses without decoding."""

    def __init__(self, frame: bytes, depth: int) -> None:
        self.frame = frame
        self.depth = depth
        self.buf = bytearray()
        self.count = 0
        self.running = True
        self.transport: asyncio.Transport | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):  # type: ignore[override]
        self.transport = transport
        transport.write(self.frame * self.depth)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        n = 0
        while len(buf) - pos >= 4:
            end = pos + 4 + int.from_bytes(buf[pos:pos + 4], "big")
            if end > len(buf):
                break
            pos = end
            n += 1
        del buf[:pos]
        self.count += n
        if n and self.running:
            self.transport.write(self.frame * n)

    def connection_lost(self, exc):  # type: ignore[override]
        if not self.lost.done():
            self.lost.set_result(None)


async def _raw_load(addr: str, connections: int, depth: int, duration: float) -> tuple[int, float]:
    host, port = addr.split(":")
    loop = asyncio.get_running_loop()
    frame = encode(RemotingCommand.request(ECHO_CODE, {"n": "1"}, body=REQUEST_BODY))
    protos = []
    start = time.perf_counter()
    for _ in range(connections):
        _t, p = await loop.create_connection(lambda: _RawClient(frame, depth), host, int(port))
        protos.append(p)
    await asyncio.sleep(duration)
    elapsed = time.perf_counter() - start
    count = sum(p.count for p in protos)
    for p in protos:
        p.running = False
        p.transport.close()
    return count, elapsed


def run_case(loop_name: str, connections: int, depth: int, duration: float,
             raw: bool = False) -> tuple[float, float]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", loop_name], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        ps = psutil.Process(proc.pid)
        cpu0 = ps.cpu_times()
        with asyncio.Runner(loop_factory=lambda: new_event_loop(loop_name == "uvloop")) as runner:
            load = _raw_load if raw else _load
            count, elapsed = runner.run(load(f"127.0.0.1:{port}", connections, depth, duration))
        cpu1 = ps.cpu_times()
        server_cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / elapsed
    finally:
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return count / elapsed, server_cpu


class _NullTransport(asyncio.Transport):
    def write(self, data) -> None:  # type: ignore[override]
        pass

    def get_extra_info(self, name, default=None):  # type: ignore[override]
        return ("127.0.0.1", 1) if name in ("peername", "sockname") else default

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass


async def _server_path_cost(per_read: int, requests: int = 100_000) -> float:
    server = RemotingServer("127.0.0.1", 0, name="bench")
    server.register(ECHO_CODE, _echo)
    conn = server.make_connection()
    conn.connection_made(_NullTransport())
    data = encode(RemotingCommand.request(ECHO_CODE, {"n": "1"}, body=REQUEST_BODY)) * per_read
    reads = requests // per_read
    start = time.perf_counter()
    for _ in range(reads):
        conn.data_received(data)
    return (time.perf_counter() - start) / (reads * per_read) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", metavar="LOOP", help=argparse.SUPPRESS)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per case (default 3)")
    ap.add_argument("--loops", default="uvloop,asyncio", help="event loops to compare")
    ap.add_argument("--connections", type=int, default=16)
    args = ap.parse_args()
    if args.serve:
        serve_main(args.serve)
        return
    print(f"mq.remoting echo, loopback, {os.cpu_count()} cores, {args.duration:.0f} s per case, "
          f"{args.connections} connections, request body {len(REQUEST_BODY)} B, reply body {len(REPLY_BODY)} B")
    for per_read in (1, 16):
        cost = asyncio.run(_server_path_cost(per_read))
        print(f"server path without sockets, {per_read:>2} frame(s) per read: {cost:.2f} us/request "
              f"({1e6 / cost:,.0f} requests/s on one core)")
    print(f"{'loop':<8} {'client':<15} {'in flight/conn':>14} {'round trips/s':>14} {'server CPU':>10}")
    for loop_name in args.loops.split(","):
        for raw in (False, True):
            for depth in (1, 16):
                rate, cpu = run_case(loop_name, args.connections, depth, args.duration, raw)
                kind = "raw" if raw else "RemotingClient"
                print(f"{loop_name:<8} {kind:<15} {depth:>14} {rate:>14,.0f} {cpu * 100:>9.0f}%", flush=True)


if __name__ == "__main__":
    main()
