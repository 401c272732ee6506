"""A minimal gRPC-over-h2c client for benchmarks: many calls in flight on one connection, little CPU per call.

The official 5.x Python client reaches about 1-2 k calls/s on this machine (its grpc.aio channel costs more
CPU per call than the server), so a benchmark driven by it measures the client. This one writes pre-encoded
HPACK blocks ("literal without indexing": no dynamic table, every request's block is the same), never reads
the server's header blocks (a call ends with its END_STREAM or RST_STREAM frame) and hands back the raw gRPC
messages of each response for the caller to parse.

    client = await connect(port)
    raw = await client.call(header_block("SendMessage", client_id), request_bytes)   # [message bytes, ...]

``SendTemplate`` makes SendMessage requests with distinct message ids without building a protobuf per call.
"""

from __future__ import annotations

import asyncio
import struct

SERVICE = "/apache.rocketmq.v2.MessagingService/"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_U32 = struct.Struct(">I")


def _int(v: int, bits: int, first: int = 0) -> bytes:
    """An HPACK integer with a ``bits``-bit prefix (RFC 7541 §5.1)."""
    m = (1 << bits) - 1
    if v < m:
        return bytes([first | v])
    out = [first | m]
    v -= m
    while v >= 128:
        out.append((v & 127) | 128)
        v >>= 7
    out.append(v)
    return bytes(out)


def _literal(name: bytes, value: bytes, index: int = 0) -> bytes:
    """A header field as "literal without indexing", its name by static-table ``index`` or spelled out."""
    head = _int(index, 4) if index else b"\x00" + _int(len(name), 7) + name
    return head + _int(len(value), 7) + value


def header_block(method: str, client_id: str) -> bytes:
    """The request header block of a MessagingService call with the metadata the 5.x clients send."""
    b = b"\x83\x86" + _literal(b"", (SERVICE + method).encode(), 4) + _literal(b"", b"127.0.0.1", 1)
    b += _literal(b"", b"application/grpc", 31) + _literal(b"te", b"trailers")
    for k, v in (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"),
                 ("x-mq-protocol", "GRPC_V2"), ("grpc-timeout", "30S")):
        b += _literal(k.encode(), v.encode())
    return b


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return _U32.pack(len(payload))[1:] + bytes((kind, flags)) + _U32.pack(stream) + payload


class H2Client(asyncio.Protocol):
    """Calls on one connection; ``call`` returns the gRPC messages of the response once the stream ends."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.next_stream = 1
        self.calls: dict[int, tuple[asyncio.Future, bytearray]] = {}
        self.ready = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.tr = transport
        # SETTINGS (initial window 1 GiB) and a connection WINDOW_UPDATE: flow control never stalls a call
        transport.write(PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 1 << 30)) +
                        frame(8, 0, 0, _U32.pack(1 << 30)))
        self.ready.set_result(None)

    def connection_lost(self, exc) -> None:
        for fut, _ in self.calls.values():
            if not fut.done():
                fut.set_result([])
        self.calls.clear()

    def call(self, block: bytes, message: bytes) -> asyncio.Future:
        sid = self.next_stream
        self.next_stream += 2
        fut = asyncio.get_running_loop().create_future()
        if self.tr.is_closing():
            fut.set_result([])
            return fut
        self.calls[sid] = (fut, bytearray())
        self.tr.write(frame(1, 4, sid, block) + frame(0, 1, sid, b"\x00" + _U32.pack(len(message)) + message))
        return fut

    def data_received(self, data: bytes) -> None:
        b = self.buf
        b += data
        pos = 0
        credit = 0
        while len(b) - pos >= 9:
            n = int.from_bytes(b[pos:pos + 3], "big")
            if len(b) - pos < 9 + n:
                break
            kind, flags = b[pos + 3], b[pos + 4]
            sid = int.from_bytes(b[pos + 5:pos + 9], "big") & 0x7FFFFFFF
            payload = b[pos + 9:pos + 9 + n]
            pos += 9 + n
            if kind == 0:
                credit += n
                entry = self.calls.get(sid)
                if entry is not None:
                    entry[1].extend(payload)
            elif kind == 4 and not flags & 1:
                self.tr.write(frame(4, 1, 0, b""))
            elif kind == 6 and not flags & 1:
                self.tr.write(frame(6, 1, 0, bytes(payload)))
            if kind in (0, 1) and flags & 1 or kind == 3:
                entry = self.calls.pop(sid, None)
                if entry is not None and not entry[0].done():
                    entry[0].set_result(messages(entry[1]))
        del b[:pos]
        if credit:
            self.tr.write(frame(8, 0, 0, _U32.pack(credit)))


def messages(data: bytearray) -> list[bytes]:
    """The length-prefixed gRPC messages of a response body."""
    out, pos = [], 0
    while pos + 5 <= len(data):
        n = _U32.unpack_from(data, pos + 1)[0]
        out.append(bytes(data[pos + 5:pos + 5 + n]))
        pos += 5 + n
    return out


async def connect(port: int, host: str = "127.0.0.1") -> H2Client:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(H2Client, host, port)
    await proto.ready
    return proto


class SendTemplate:
    """SendMessage requests of one message each, ``next()`` giving a new message id every time.

    The request is serialized once with a 34-character placeholder id; ``next()`` splices a counter into
    the id's place (an id is UNIQ_KEY: a fixed-length string, so no length prefix changes)."""

    def __init__(self, pb, topic: str, body: bytes, prefix: str) -> None:
        placeholder = "01" + prefix[:10].upper().ljust(10, "0") + "#" * 22
        m = pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(
            message_id=placeholder, tag="TagA", keys=["bench"], message_type=pb.MessageType.NORMAL))
        raw = pb.SendMessageRequest(messages=[m]).SerializeToString()
        at = raw.index(b"#" * 22)
        self.head, self.tail = raw[:at], raw[at + 22:]
        self.count = 0

    def next(self) -> bytes:
        self.count += 1
        return self.head + b"%022X" % self.count + self.tail
