"""Raw-socket helpers for the hostile-client tests: a blocking client that speaks frames, and a fixture helper
that keeps the daemons' event loop running in a thread while the test blocks on its sockets.

    with serving(loop):               # the in-process daemons answer while the test thread blocks
        r = Raw(broker.address)
        r.send(encode(cmd)); resp = r.response()
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import orjson

from mq.protocol.codec import FrameDecoder, encode
from mq.protocol.codes import FLAG_RESPONSE
from mq.protocol.command import RemotingCommand


def frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def json_header(code: int, ext: dict | None = None, opaque: int = 1) -> bytes:
    return orjson.dumps({"code": code, "language": "JAVA", "version": 401, "opaque": opaque, "flag": 0,
                         "extFields": ext or {}})


class Raw:
    """A blocking connection that writes frames and reads whole commands."""

    def __init__(self, addr: str, *, rcvbuf: int | None = None, timeout: float = 10.0) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect, so the window is small from the start
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, int(port)))
        self.dec = FrameDecoder()
        self._ready: list[RemotingCommand] = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_cmd(self, cmd: RemotingCommand, opaque: int) -> None:
        cmd.opaque = opaque
        self.sock.sendall(encode(cmd))

    def response(self) -> RemotingCommand | None:
        """The next response (requests the daemon sends, such as NOTIFY_CONSUMER_IDS_CHANGED, are skipped), or
        None when the peer closed or nothing came within the timeout."""
        while True:
            while not self._ready:
                try:
                    chunk = self.sock.recv(1 << 20)
                except (ConnectionResetError, socket.timeout, OSError):
                    return None
                if not chunk:
                    return None
                self._ready.extend(self.dec.feed(chunk))
            cmd = self._ready.pop(0)
            if cmd.flag & FLAG_RESPONSE:
                return cmd

    def call(self, cmd: RemotingCommand, opaque: int = 1) -> RemotingCommand | None:
        self.send_cmd(cmd, opaque)
        return self.response()

    def closed_by_peer(self, within: float) -> bool:
        """Wait up to ``within`` seconds for the peer to close (what it sends meanwhile is read and dropped)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if self.sock.recv(1 << 20) == b"":
                    return True
            except (ConnectionResetError, BrokenPipeError):
                return True
            except socket.timeout:
                return False
        return False

    def close(self) -> None:
        self.sock.close()


async def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        await asyncio.sleep(0.005)


@contextmanager
def serving(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Run ``loop`` (the daemons' loop) in a thread for the duration of the block."""
    stop = threading.Event()
    t = threading.Thread(target=lambda: loop.run_until_complete(_spin(stop)), daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(10)


def held_output(server) -> int:
    """Bytes a RemotingServer holds unsent, over all its connections (our buffers plus the transports')."""
    total = 0
    for conn in list(server.connections):
        transport = conn.transport
        total += len(conn._wbuf) + (transport.get_write_buffer_size() if transport is not None else 0)  # noqa: SLF001
    return total
