"""GET_ROUTEINFO_BY_TOPIC requests/s against our name server from concurrent loopback connections.

The name server runs in its own process (``mq namesrv start``); this script registers one broker with a
few topics, then drives pre-encoded route requests from N connections, each keeping K requests in flight.

    python benchmarks/namesrv_route_bench.py [--connections 16] [--inflight 1] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemons import free_port  # noqa: E402

from mq.protocol import codec
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand


class Driver(asyncio.Protocol):
    def __init__(self, frame: bytes, inflight: int, stop_at: float, done: asyncio.Future) -> None:
        self.frame, self.inflight, self.stop_at, self.done = frame, inflight, stop_at, done
        self.buf = bytearray()
        self.count = 0

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.frame * self.inflight)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        got = 0
        pos = 0
        while len(self.buf) - pos >= 4:
            (n,) = struct.unpack_from(">i", self.buf, pos)
            if len(self.buf) - pos - 4 < n:
                break
            pos += 4 + n
            got += 1
        del self.buf[:pos]
        self.count += got
        if time.monotonic() < self.stop_at:
            self.transport.write(self.frame * got)
        elif not self.done.done():
            self.done.set_result(None)


async def drive(port: int, connections: int, inflight: int, seconds: float) -> float:
    loop = asyncio.get_running_loop()
    frame = codec.encode(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}))
    stop_at = time.monotonic() + seconds
    drivers = []
    for _ in range(connections):
        done = loop.create_future()
        _, proto = await loop.create_connection(lambda d=done: Driver(frame, inflight, stop_at, d), "127.0.0.1", port)
        drivers.append(proto)
    started = time.monotonic()
    await asyncio.gather(*(d.done for d in drivers))
    elapsed = time.monotonic() - started
    for d in drivers:
        d.transport.close()
    return sum(d.count for d in drivers) / elapsed


async def register(port: int) -> None:
    import zlib

    from mq.protocol import headers as h
    from mq.protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
    from mq.remoting import RemotingClient

    topics = {f"T{i}": TopicConfig(topic_name=f"T{i}") for i in range(50)}
    topics["TopicTest"] = TopicConfig(topic_name="TopicTest", read_queue_nums=8, write_queue_nums=8)
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(topics, DataVersion(1, 1)), []).encode()
    hdr = h.RegisterBrokerRequestHeader(broker_name="broker-a", broker_addr="127.0.0.1:10911",
                                        cluster_name="DefaultCluster", ha_server_addr="127.0.0.1:10912",
                                        broker_id=0, body_crc32=zlib.crc32(body) & 0x7FFFFFFF)
    async with RemotingClient() as c:
        resp = await c.invoke(f"127.0.0.1:{port}", RemotingCommand.request(RequestCode.REGISTER_BROKER,
                                                                           hdr.to_ext(), body))
        assert resp.code == 0, resp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--inflight", type=int, nargs="*", default=[1, 16])
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    port = free_port()
    home = tempfile.mkdtemp()
    env = dict(os.environ, MQ_HOME=home)
    server = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--port", str(port),
                               "--log-level", "WARNING"], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("name server did not start")
                time.sleep(0.1)
        import uvloop

        uvloop.run(register(port))
        import psutil

        proc = psutil.Process(server.pid)
        print(f"GET_ROUTEINFO_BY_TOPIC, {args.connections} loopback connections, {args.seconds:.0f} s each")
        for k in args.inflight:
            proc.cpu_percent(None)
            rate = uvloop.run(drive(port, args.connections, k, args.seconds))
            cpu = proc.cpu_percent(None)
            print(f"  {k:>3} in flight per connection: {rate:>10,.0f} requests/s  (name server CPU {cpu:.0f} %)")
    finally:
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
