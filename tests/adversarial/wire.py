"""Raw frames for the adversarial suite, built by hand so that anything a hostile client can put on the wire can
be put there: extFields values of any JSON type, bytes that are not UTF-8, wrong lengths, truncated frames.

A frame is ``length int32 | serialize type int8 | header length int24 | header | body`` (mq.protocol.codec). The
JSON header is written from a plain dict (``json_frame``), or given as raw bytes (``raw_json_frame``);
``binary_frame`` writes RocketMQ's binary header with byte-string keys and values.

``Peer`` is one blocking connection: ``send`` bytes, ``response(opaque)`` waits for the answer with that opaque
(None when none comes in time or the daemon closed the connection).
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

from mq.errors import RemoteProtocolError
from mq.protocol.codec import FrameDecoder
from mq.protocol.command import RemotingCommand

FLAG_ONEWAY = 0x2


def frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def json_header(code: int, ext: dict[str, Any] | None, *, opaque: int, flag: int = 0, version: int = 399,
                language: Any = "JAVA", remark: Any = None) -> bytes:
    """The JSON header; values may be any JSON (numbers past 64 bits, lone surrogates written as UTF-8 bytes
    that are not UTF-8), which is why this is the standard library's encoder and not orjson."""
    header: dict[str, Any] = {"code": code, "extFields": ext if ext is not None else {}, "flag": flag,
                              "language": language, "opaque": opaque, "serializeTypeCurrentRPC": "JSON",
                              "version": version}
    if remark is not None:
        header["remark"] = remark
    return json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass")


def json_frame(code: int, ext: dict[str, Any] | None, body: bytes = b"", *, opaque: int, flag: int = 0,
               version: int = 399) -> bytes:
    return frame(0, json_header(code, ext, opaque=opaque, flag=flag, version=version), body)


def raw_json_frame(header: bytes, body: bytes = b"") -> bytes:
    return frame(0, header, body)


def binary_header(code: int, ext: dict[bytes, bytes], *, opaque: int, flag: int = 0, version: int = 399,
                  language: int = 0, remark: bytes = b"") -> bytes:
    """RocketMQ's binary header. Its code is a short: Java casts a larger code (RocketMQ 5's pop codes) to one,
    and so does this."""
    code = (code + 0x8000) % 0x10000 - 0x8000
    parts = [struct.pack(">hbhii", code, language, version, opaque, flag), struct.pack(">i", len(remark)), remark]
    fields = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext.items())
    parts += [struct.pack(">i", len(fields)), fields]
    return b"".join(parts)


def binary_frame(code: int, ext: dict[bytes, bytes], body: bytes = b"", *, opaque: int, flag: int = 0) -> bytes:
    return frame(1, binary_header(code, ext, opaque=opaque, flag=flag), body)


class Peer:
    """One blocking TCP connection to a daemon."""

    def __init__(self, addr: str, timeout: float = 5.0) -> None:
        host, _, port = addr.rpartition(":")
        self.addr = addr
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.ready: list[RemotingCommand] = []
        self.closed_by_peer = False

    def send(self, data: bytes) -> bool:
        """False when the daemon already closed the connection (a refusal, not a failure)."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed_by_peer = True
            return False

    def response(self, opaque: int, timeout: float) -> RemotingCommand | None:
        deadline = time.monotonic() + timeout
        while True:
            for i, cmd in enumerate(self.ready):
                if cmd.is_response and cmd.opaque == opaque:
                    del self.ready[i]
                    return cmd
            left = deadline - time.monotonic()
            if left <= 0 or self.closed_by_peer:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                return None
            except OSError:
                self.closed_by_peer = True
                return None
            if not data:
                self.closed_by_peer = True
                return None
            try:
                self.ready.extend(self.decoder.feed(data))
            except RemoteProtocolError as exc:  # the daemon sent bytes that are not frames: a real failure
                raise AssertionError(f"{self.addr} answered with an undecodable frame: {exc}") from None

    def call(self, data: bytes, opaque: int, timeout: float) -> RemotingCommand | None:
        return self.response(opaque, timeout) if self.send(data) else None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Peer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
