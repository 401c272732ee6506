"""StoreCheckpoint: the 4 KiB big-endian layout of STORE.md §7, round trips, derived timestamps."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mq.store.checkpoint import StoreCheckpoint


def test_new_checkpoint_is_a_zeroed_page(tmp_path: Path) -> None:
    path = tmp_path / "store" / "checkpoint"
    cp = StoreCheckpoint(path)
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (0, 0, 0)
    assert path.stat().st_size == 4096
    cp.close()
    assert path.read_bytes() == bytes(4096)


def test_layout_matches_the_spec_table(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    cp = StoreCheckpoint(path)
    cp.physic_msg_timestamp = 1_700_000_000_123
    cp.logics_msg_timestamp = 1_700_000_000_456
    cp.index_msg_timestamp = 0x0102030405060708
    cp.flush()
    data = path.read_bytes()
    assert len(data) == 4096
    assert data[0:8] == (1_700_000_000_123).to_bytes(8, "big")
    assert data[8:16] == (1_700_000_000_456).to_bytes(8, "big")
    assert data[16:24] == bytes([1, 2, 3, 4, 5, 6, 7, 8])
    assert data[24:] == bytes(4096 - 24)
    cp.close()


def test_round_trip_and_close_flushes(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    with StoreCheckpoint(path) as cp:
        cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 11, 22, 33
    again = StoreCheckpoint(path)
    assert (again.physic_msg_timestamp, again.logics_msg_timestamp, again.index_msg_timestamp) == (11, 22, 33)
    again.close()
    again.close()  # idempotent
    with pytest.raises(ValueError):
        again.flush()


def test_reads_a_file_written_by_java(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(struct.pack(">qqq", 1_690_000_000_000, 1_690_000_001_000, 1_689_000_000_000) + bytes(4072))
    cp = StoreCheckpoint(path)
    assert cp.physic_msg_timestamp == 1_690_000_000_000
    assert cp.logics_msg_timestamp == 1_690_000_001_000
    assert cp.index_msg_timestamp == 1_689_000_000_000
    cp.close()


def test_a_short_file_is_extended_to_a_page(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(struct.pack(">qqq", 5, 6, 7))
    cp = StoreCheckpoint(path)
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (5, 6, 7)
    cp.close()
    assert path.stat().st_size == 4096


def test_min_timestamps_follow_rocketmq(tmp_path: Path) -> None:
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 10_000, 8_000, 9_000
    assert cp.min_timestamp() == 5_000  # min(physic, logics) - 3 s
    assert cp.min_timestamp_index() == 5_000
    cp.index_msg_timestamp = 4_000
    assert cp.min_timestamp_index() == 4_000
    cp.physic_msg_timestamp = 2_000
    assert cp.min_timestamp() == 0  # never negative
    assert cp.min_timestamp_index() == 0
    cp.close()
