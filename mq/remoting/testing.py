"""In-memory transports for testing remoting code without sockets (after h11's ``ConnectionPair``).

``MemoryTransport`` is an ``asyncio.Transport`` whose writes are delivered to the peer protocol on the next
loop iteration; everything written meanwhile arrives in one ``data_received`` (as TCP coalesces), or in
pieces of ``chunk_size`` bytes to exercise frame reassembly. It honours ``pause_reading``/``resume_reading``
(undelivered bytes wait), reports the peer's undelivered bytes as its write-buffer size and calls
``pause_writing``/``resume_writing`` on its high/low-water marks, so flow control can be tested too.

- ``ConnectionPair(server)``: one server-side ``Connection`` made by ``server.make_connection()`` (so
  ``server.connections`` and close callbacks see it) joined to one client-side ``Connection``.
- ``MemoryNetwork``: ``bind(addr, server)`` then ``RemotingClient(connector=net.connect)``: the client's own
  connection management (first use, reconnect, refused) runs over memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from mq.remoting.client import split_addr
from mq.remoting.connection import Connection
from mq.remoting.server import HandlerRegistry, RemotingServer


class MemoryTransport(asyncio.Transport):
    """One end of an in-memory byte pipe."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol, local: str, remote: str,
                 chunk_size: int | None = None) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._local = split_addr(local)
        self._remote = split_addr(remote)
        self._chunk = chunk_size
        self.peer: MemoryTransport | None = None
        self._inbox: deque[bytes] = deque()
        self._inbox_size = 0
        self._delivery_scheduled = False
        self._reading = True
        self._closing = False
        self._lost = False
        self._write_paused = False
        self._high = 64 * 1024
        self._low = 16 * 1024
        self.writes = 0  # number of write() calls, to check coalescing

    # -- asyncio.BaseTransport ----------------------------------------------------------------
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._remote
        if name == "sockname":
            return self._local
        return default

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._shutdown(deliver=True)

    def abort(self) -> None:
        self._shutdown(deliver=False)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol  # type: ignore[assignment]

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    # -- reading --------------------------------------------------------------------------------
    def is_reading(self) -> bool:
        return self._reading and not self._closing

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        if not self._reading:
            self._reading = True
            self._schedule_delivery()

    def _schedule_delivery(self) -> None:
        if not self._delivery_scheduled and self._inbox and not self._lost:
            self._delivery_scheduled = True
            self._loop.call_soon(self._deliver)

    def _deliver(self) -> None:
        self._delivery_scheduled = False
        if self._lost or not self._reading or not self._inbox:
            return
        data = b"".join(self._inbox)
        self._inbox.clear()
        self._inbox_size = 0
        if self._chunk:
            pieces = [data[i:i + self._chunk] for i in range(0, len(data), self._chunk)]
        else:
            pieces = [data]
        for i, piece in enumerate(pieces):
            if self._lost:
                return
            if not self._reading:  # the protocol paused mid-way: keep the rest for resume_reading
                rest = b"".join(pieces[i:])
                self._inbox.append(rest)
                self._inbox_size = len(rest)
                break
            self._protocol.data_received(piece)
        if self.peer is not None:
            self.peer._maybe_resume_protocol()

    # -- writing --------------------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not data:
            return
        peer = self.peer
        if peer is None or peer._lost:
            return
        self.writes += 1
        peer._inbox.append(bytes(data))
        peer._inbox_size += len(data)
        if not self._write_paused and peer._inbox_size > self._high:
            self._write_paused = True
            self._protocol.pause_writing()
        peer._schedule_delivery()

    def _maybe_resume_protocol(self) -> None:
        peer = self.peer
        if self._write_paused and peer is not None and peer._inbox_size <= self._low and not self._lost:
            self._write_paused = False
            self._protocol.resume_writing()

    def get_write_buffer_size(self) -> int:
        return self.peer._inbox_size if self.peer is not None else 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is None:
            high = 64 * 1024 if low is None else 4 * low
        if low is None:
            low = high // 4
        self._high, self._low = high, low

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def can_write_eof(self) -> bool:
        return False

    # -- closing --------------------------------------------------------------------------------
    def _shutdown(self, deliver: bool) -> None:
        if self._closing:
            return
        self._closing = True
        peer = self.peer
        self._loop.call_soon(self._finish, peer, deliver)

    def _finish(self, peer: "MemoryTransport | None", deliver: bool) -> None:
        if peer is not None and not peer._lost:
            if deliver and peer._inbox:
                peer._reading = True
                peer._deliver()
            peer._closing = True
            peer._lose()
        self._lose()

    def _lose(self) -> None:
        if self._lost:
            return
        self._lost = True
        self._closing = True
        self._inbox.clear()
        self._inbox_size = 0
        self._protocol.connection_lost(None)


def connect_memory(a: asyncio.Protocol, b: asyncio.Protocol, *, a_addr: str = "10.0.0.2:50000",
                   b_addr: str = "10.0.0.1:10911",
                   chunk_size: int | None = None) -> tuple[MemoryTransport, MemoryTransport]:
    """Join protocols ``a`` and ``b`` (``connection_made`` is called on both, ``b`` first)."""
    loop = asyncio.get_running_loop()
    ta = MemoryTransport(loop, a, a_addr, b_addr, chunk_size)
    tb = MemoryTransport(loop, b, b_addr, a_addr, chunk_size)
    ta.peer, tb.peer = tb, ta
    b.connection_made(tb)
    a.connection_made(ta)
    return ta, tb


class ConnectionPair:
    """A server-side and a client-side ``Connection`` joined in memory. Create inside a running loop."""

    def __init__(self, server: RemotingServer, client_registry: HandlerRegistry | None = None, *,
                 client_addr: str = "10.0.0.2:50000", server_addr: str = "10.0.0.1:10911",
                 chunk_size: int | None = None) -> None:
        self.server = server
        self.client_registry = client_registry or HandlerRegistry("client")
        self.client_conn = Connection(self.client_registry, frame_limits=server.frame_limits, name="client",
                                      pause_reading_on_write_block=False)
        self.server_conn = server.make_connection()
        self.client_transport, self.server_transport = connect_memory(
            self.client_conn, self.server_conn, a_addr=client_addr, b_addr=server_addr, chunk_size=chunk_size)

    def send_raw(self, data: bytes) -> None:
        """Write raw bytes from the client to the server (e.g. a malformed frame)."""
        self.client_transport.write(data)

    async def settle(self, rounds: int = 5) -> None:
        """Let queued deliveries and callbacks run."""
        for _ in range(rounds):
            await asyncio.sleep(0)


class MemoryNetwork:
    """Addresses bound to servers; ``connect`` is a ``RemotingClient`` connector over memory."""

    def __init__(self, chunk_size: int | None = None) -> None:
        self._servers: dict[str, RemotingServer] = {}
        self._next_port = 40000
        self._chunk = chunk_size

    def bind(self, addr: str, server: RemotingServer) -> None:
        self._servers[addr] = server

    def unbind(self, addr: str) -> None:
        self._servers.pop(addr, None)

    async def connect(self, addr: str, factory: Callable[[], Connection]) -> Connection:
        server = self._servers.get(addr)
        if server is None:
            raise ConnectionRefusedError(111, f"Connect call failed {addr}")
        self._next_port += 1
        client = factory()
        connect_memory(client, server.make_connection(), a_addr=f"10.0.0.99:{self._next_port}", b_addr=addr,
                       chunk_size=self._chunk)
        await asyncio.sleep(0)
        return client
