"""The HA replication stream (STORE.md §13.2), sans-IO: encoders and incremental decoders, no sockets.

A raw TCP stream between a slave and its master's ``haListenPort``; no RemotingCommand framing.

Slave -> master, the offset report (the slave's commit log max offset; also its ack)::

    +---------------------------------------+
    | 0..7   int64 BE  slave max phy offset |
    +---------------------------------------+          OFFSET_REPORT = ">q"

Master -> slave, a transfer frame (size 0: a heartbeat carrying the next transfer offset)::

    +---------------------------------------+
    | 0..7   int64 BE  phyOffset            |  where ``body`` starts in the commit log
    | 8..11  int32 BE  size                 |  body length, 0 for a heartbeat
    | 12..   size raw commit log bytes      |  never crosses a segment end
    +---------------------------------------+          TRANSFER_HEADER = ">qi"

The master's reader only cares about the newest report: ``OffsetReportDecoder.feed`` returns the last complete
value in what it was given (RocketMQ reads 8-byte aligned chunks and keeps only the last one).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mq.errors import RemoteProtocolError

OFFSET_REPORT = ">q"
TRANSFER_HEADER = ">qi"
_REPORT = struct.Struct(OFFSET_REPORT)
_HEADER = struct.Struct(TRANSFER_HEADER)
REPORT_SIZE = _REPORT.size  # 8
HEADER_SIZE = _HEADER.size  # 12
#: A transfer body larger than this is a protocol error (the master sends <= haTransferBatchSize).
DEFAULT_MAX_BODY = 64 * 1024 * 1024


def encode_offset_report(offset: int) -> bytes:
    if offset < 0:
        raise ValueError(f"offset report must be >= 0, got {offset}")
    return _REPORT.pack(offset)


def encode_transfer_header(phy_offset: int, size: int) -> bytes:
    if phy_offset < 0 or size < 0:
        raise ValueError(f"bad transfer header: offset {phy_offset}, size {size}")
    return _HEADER.pack(phy_offset, size)


def encode_transfer(phy_offset: int, body: bytes) -> bytes:
    return _HEADER.pack(phy_offset, len(body)) + body


@dataclass(frozen=True, slots=True)
class TransferFrame:
    phy_offset: int
    body: bytes

    @property
    def is_heartbeat(self) -> bool:
        return not self.body


class OffsetReportDecoder:
    """Master side: fed the slave's bytes, returns the newest complete offset report (or None)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> int | None:
        buf = self._buf + data if self._buf else bytes(data)
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._buf = buf[whole:]
        if whole == 0:
            return None
        (offset,) = _REPORT.unpack_from(buf, whole - REPORT_SIZE)
        if offset < 0:
            raise RemoteProtocolError(f"HA offset report is negative: {offset}")
        return offset

    @property
    def pending(self) -> int:
        return len(self._buf)


class TransferDecoder:
    """Slave side: fed the master's bytes, returns the complete frames (heartbeats included) in order."""

    __slots__ = ("_buf", "max_body")

    def __init__(self, max_body: int = DEFAULT_MAX_BODY) -> None:
        self._buf = bytearray()
        self.max_body = max_body

    def feed(self, data: bytes) -> list[TransferFrame]:
        buf = self._buf
        buf += data
        out: list[TransferFrame] = []
        pos = 0
        end = len(buf)
        while end - pos >= HEADER_SIZE:
            phy, size = _HEADER.unpack_from(buf, pos)
            if phy < 0 or size < 0 or size > self.max_body:
                raise RemoteProtocolError(f"bad HA transfer header: offset {phy}, size {size}")
            if end - pos - HEADER_SIZE < size:
                break
            start = pos + HEADER_SIZE
            out.append(TransferFrame(phy, bytes(buf[start:start + size])))
            pos = start + size
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)
