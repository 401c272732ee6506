"""The store's ``checkpoint`` file: how far the commit log, consume queues and index are durable (STORE.md §7).

Layout (RocketMQ ``StoreCheckpoint``; a 4 KiB page, big-endian, bytes 24..4095 unused and zero)::

    +--------+-------+--------------------+----------------------------------------------------------+
    | offset | bytes | field              | meaning (epoch ms)                                       |
    +--------+-------+--------------------+----------------------------------------------------------+
    | 0      | 8     | physicMsgTimestamp | store time of the last message flushed in the commit log |
    | 8      | 8     | logicsMsgTimestamp | store time of the last message written to a consume queue|
    | 16     | 8     | indexMsgTimestamp  | endTimestamp of the last full index file flushed         |
    | 24     | 4072  | (unused)           | zero                                                     |
    +--------+-------+--------------------+----------------------------------------------------------+

The three values live in memory and are written by ``flush`` (pwrite + fdatasync: cheaper than msync and
it releases the GIL), as Java copies them into its mapping and forces it.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from mq.store.mapped_file import reserve_blocks

#: physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp.
CHECKPOINT_FORMAT = ">qqq"
CHECKPOINT_FILE_SIZE = 4096
#: Recovery starts this much before the older of the physic and logics timestamps.
MIN_TIMESTAMP_MARGIN_MS = 3000

_CHECKPOINT = struct.Struct(CHECKPOINT_FORMAT)


class StoreCheckpoint:
    """Read at construction (zeros for a new file), written by ``flush``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(self._fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(self._fd, CHECKPOINT_FILE_SIZE)  # Java maps a full page, which extends it
            # Its block reserved, so rewriting it in place never needs space a full disk lacks.
            reserve_blocks(self._fd, CHECKPOINT_FILE_SIZE, self.path, new=False)
            data = os.pread(self._fd, _CHECKPOINT.size, 0)
        except BaseException:
            os.close(self._fd)
            raise
        if existed and len(data) == _CHECKPOINT.size:
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = \
                _CHECKPOINT.unpack(data)
        else:
            self.physic_msg_timestamp = self.logics_msg_timestamp = self.index_msg_timestamp = 0

    def min_timestamp(self) -> int:
        """Where abnormal recovery may start: min(physic, logics) - 3 s, at least 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - MIN_TIMESTAMP_MARGIN_MS)

    def min_timestamp_index(self) -> int:
        """``min_timestamp`` also bounded by the index timestamp (used when messageIndexSafe)."""
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def pack(self) -> bytes:
        return _CHECKPOINT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        """Write the three timestamps and make them durable."""
        if self._fd < 0:
            raise ValueError(f"checkpoint {self.path} is closed")
        os.pwrite(self._fd, self.pack(), 0)
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Flush, then close (Java's ``shutdown``)."""
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "StoreCheckpoint":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"StoreCheckpoint(physic={self.physic_msg_timestamp}, logics={self.logics_msg_timestamp}, "
                f"index={self.index_msg_timestamp})")
