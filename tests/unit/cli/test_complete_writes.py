"""The CLI's standard streams write every byte: a blocking write to a full pipe that returns short (a thread
interrupted mid-write; uvloop's teardown does it to the first such write after its loop closes) must not lose the
rest, which Python's buffered stream did silently (`mq topicList --json | slow-reader` was cut at 64 KiB)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from mq.cli.main import _CompleteWrites

_WRITER = r"""
import asyncio, sys
wrap = sys.argv[1] == "wrapped"
if wrap:
    from mq.cli.main import _complete_stdio
    _complete_stdio()
from mq.remoting import run
async def main():
    await asyncio.sleep(0.01)
run(main())  # uvloop's when installed, as every CLI command
sys.stdout.write("x" * 300_000)
sys.stdout.flush()
"""


def test_short_writes_are_continued_until_every_byte_is_written(monkeypatch) -> None:
    r, w = os.pipe()
    real = os.write
    calls = []

    def short_write(fd, data):
        n = real(fd, bytes(data)[:1000])  # at most 1,000 bytes a call, as an interrupted write returns
        calls.append(n)
        return n

    monkeypatch.setattr(os, "write", short_write)
    raw = _CompleteWrites(w)
    assert raw.write(b"y" * 5000) == 5000
    monkeypatch.undo()
    os.close(w)
    with os.fdopen(r, "rb") as f:
        assert f.read() == b"y" * 5000
    assert calls == [1000] * 5


@pytest.mark.parametrize("attempt", range(3))
def test_output_after_the_event_loop_closed_reaches_a_slow_reader_whole(attempt) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, "wrapped"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    time.sleep(0.5)  # the writer fills the pipe and has to wait for us
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert len(out) == 300_000
