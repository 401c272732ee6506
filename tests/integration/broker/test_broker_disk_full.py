"""A disk that fills up under a running broker: the broker process keeps running, every send gets either
SUCCESS or a clear error, nothing acknowledged is lost, and sends succeed again once there is room.

The store lives on a 16 MiB tmpfs mounted for the test (skipped where mounting is not permitted). The broker
runs as its own process: a store into a memory-mapped hole that the file system cannot fill raises SIGBUS, which
before segments reserved their blocks killed the broker at the first send after the disk filled."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from mq.protocol.codes import ResponseCode as RC

from ..broker_process import BrokerProcess
from .wire import pull_cmd, records, send_cmd


@pytest.fixture
def small_fs(tmp_path: Path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=20)


def _fill(path: Path) -> int:
    """Write a file until the file system has no room left; returns its size."""
    chunk = b"\0" * 65536
    n = 0
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                n += f.write(chunk)
            except OSError:
                break
        for size in (4096, 512, 1):  # the last partial blocks
            while True:
                try:
                    n += f.write(b"\0" * size)
                except OSError:
                    break
    return n


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_broker_survives_a_full_disk_and_loses_nothing(small_fs, tmp_path, client, run, flush):
    broker = BrokerProcess(tmp_path / "broker", {
        "brokerName": "broker-full", "storePathRootDir": small_fs / "store", "flushDiskType": flush,
        "mappedFileSizeCommitLog": 1048576, "mappedFileSizeConsumeQueue": 40000, "maxHashSlotNum": 1000,
        "maxIndexNum": 4000, "cleanResourceInterval": 200, "cleanFileForciblyEnable": "false"})
    addr = broker.address
    try:
        broker.start()

        acked: dict[int, list[bytes]] = {q: [] for q in range(4)}
        errors: list[tuple[int, str]] = []

        async def send(i: int) -> bool:
            body = f"{i:06d}".encode() + b"x" * 1018
            r = await client.invoke(addr, send_cmd("FullDisk", body, queue_id=i % 4), timeout=10)
            if r.code == RC.SUCCESS:
                acked[i % 4].append(body)
                return True
            errors.append((r.code, r.remark or ""))
            return False

        async def phase(start: int, count: int) -> int:
            return sum([await send(i) for i in range(start, start + count)])

        assert run(phase(0, 300)) == 300
        hog = small_fs / "hog"
        _fill(hog)
        # The disk is full. Segments reserve their blocks, so the current ones still take records (about 700 more
        # fit in the first 1 MiB commit-log segment) until the cleaner's disk check refuses writes or the next
        # segment cannot be created; 1,500 sends reach one or the other whatever the timing.
        run(phase(300, 1500), timeout=180)
        assert broker.alive(), "the broker died when the disk filled:\n" + broker.log()
        assert errors, "the disk filled but every send succeeded"
        for code, remark in errors:
            assert code in (RC.SERVICE_NOT_AVAILABLE, RC.SYSTEM_ERROR), (code, remark)
            assert "disk full" in remark or "No space left on device" in remark, remark

        hog.unlink()

        async def until_writable() -> None:
            i = 1800
            while not await send(i):
                i += 1
                await asyncio.sleep(0.1)

        run(until_writable(), timeout=30)
        n = sum(len(v) for v in acked.values())
        assert run(phase(10_000, 100)) == 100
        assert broker.alive()

        async def pull_all(q: int) -> list[bytes]:
            out, offset = [], 0
            while True:
                r = await client.invoke(addr, pull_cmd("FullDisk", q, offset, max_nums=32), timeout=10)
                if r.code != RC.SUCCESS:
                    return out
                out += [m.body for m in records(r)]
                offset = int(r.ext_fields["nextBeginOffset"])

        for q in range(4):
            assert run(pull_all(q)) == acked[q], f"queue {q}: what was acknowledged is not what is stored"
        assert sum(len(v) for v in acked.values()) == n + 100 >= 400
    finally:
        stopped = broker.stop()
    assert stopped, broker.log()
