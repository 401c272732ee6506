"""Hostile input over a raw socket: each case gets its documented answer or a closed connection, and the
broker keeps serving other clients."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from mq.protocol.codec import FrameDecoder, encode
from mq.protocol.codes import ResponseCode as RC

from .wire import pull_cmd, records, send_cmd


def _frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _json_header(code: int, ext: dict | None = None, opaque: int = 1) -> bytes:
    return json.dumps({"code": code, "language": "JAVA", "version": 401, "opaque": opaque, "flag": 0,
                       "extFields": ext or {}}).encode()


class Raw:
    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.dec = FrameDecoder()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self):
        while True:
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            cmds = self.dec.feed(chunk)
            if cmds:
                return cmds[0]

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_broker(broker_factory, run):
    b = broker_factory(max_message_size=128 * 1024)
    # the broker serves on the fixture loop: run it in a thread-free way by driving the loop while we block
    import threading

    stop = threading.Event()
    loop = b.server._server.get_loop()  # noqa: SLF001 - the test drives the daemon's own loop
    t = threading.Thread(target=lambda: loop.run_until_complete(_spin(stop)), daemon=True)
    t.start()
    yield b
    stop.set()
    t.join(5)


async def _spin(stop):
    import asyncio

    while not stop.is_set():
        await asyncio.sleep(0.005)


def _healthy(addr: str) -> None:
    r = Raw(addr)
    try:
        r.send(encode(send_cmd("Healthy", b"ok")))
        resp = r.response()
        assert resp is not None and resp.code == RC.SUCCESS
        r.send(encode(pull_cmd("Healthy", 0, 0, max_nums=1)))
        resp = r.response()
        assert resp.code == RC.SUCCESS and records(resp)[0].body == b"ok"
    finally:
        r.close()


def test_hostile_frames(raw_broker):
    addr = raw_broker.address
    # 1. unknown request code -> REQUEST_CODE_NOT_SUPPORTED
    r = Raw(addr)
    r.send(_frame(_json_header(4242)))
    resp = r.response()
    assert resp.code == RC.REQUEST_CODE_NOT_SUPPORTED and "4242" in resp.remark
    # 2. a garbage header -> the connection is closed
    r.send(_frame(b"{not json at all"))
    assert r.response() is None
    r.close()
    _healthy(addr)
    # 3. a 100 MB length prefix -> closed before anything is allocated
    r = Raw(addr)
    r.send(struct.pack(">ii", 100 * 1024 * 1024, 20) + b"x" * 20)
    assert r.closed_by_peer()
    r.close()
    # 4. header length larger than the frame -> closed
    r = Raw(addr)
    r.send(struct.pack(">ii", 10, 5000) + b"abcdef")
    assert r.closed_by_peer()
    r.close()
    # 5. a truncated frame then the client goes away
    r = Raw(addr)
    r.send(_frame(_json_header(310, {"a": "PG"}), b"body")[:15])
    r.close()
    _healthy(addr)
    # 6. requests with bad fields get answers, the connection stays usable
    r = Raw(addr)
    r.send(encode(send_cmd("bad/topic", b"x")))
    assert r.response().code == RC.SYSTEM_ERROR
    r.send(encode(send_cmd("", b"x")))
    assert r.response().code == RC.SYSTEM_ERROR
    r.send(encode(send_cmd("Big", b"z" * (128 * 1024 + 1))))
    resp = r.response()
    assert resp.code == RC.MESSAGE_ILLEGAL and "131072" in resp.remark
    r.send(_frame(_json_header(310, {"a": "PG", "b": "T"})))  # required fields missing
    assert r.response().code == RC.SYSTEM_ERROR
    r.send(_frame(_json_header(11, {"consumerGroup": "G", "topic": "T", "queueId": "abc", "queueOffset": "0",
                                    "maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0",
                                    "suspendTimeoutMillis": "0", "subVersion": "0"})))
    assert r.response().code == RC.SYSTEM_ERROR
    r.send(_frame(_json_header(34), b"\xff\xfe garbage"))
    assert r.response().code == RC.SYSTEM_ERROR
    r.send(_frame(_json_header(320, {"a": "PG", "b": "BatchT", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                     "g": "0", "h": "0", "m": "true"}), b"\x00\x00\x00\x30garbage"))
    assert r.response().code == RC.MESSAGE_ILLEGAL
    r.close()
    # 7. a frame above the 16 MiB frame limit -> closed
    r = Raw(addr)
    r.send(struct.pack(">ii", 17 * 1024 * 1024, 20))
    assert r.closed_by_peer()
    r.close()
    _healthy(addr)
