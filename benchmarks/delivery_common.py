"""Shared by the delivery benchmarks: a broker in its own process (``mq broker start``, no name server), its
memory without the store's mapped files, and a pipelined raw sender of per-message frames."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mq.protocol import headers as H  # noqa: E402
from mq.protocol.codec import encode  # noqa: E402
from mq.protocol.codes import RequestCode  # noqa: E402
from mq.protocol.command import RemotingCommand  # noqa: E402

_LEN = struct.Struct(">i")


def start_broker(port: int, root: str, extra: dict[str, object] | None = None) -> subprocess.Popen:
    """Start ``mq broker start`` on ``port`` with its store under ``root``/data; wait until it answers a send."""
    Path(root).mkdir(parents=True, exist_ok=True)
    cfg = Path(root) / "broker.yaml"
    lines = {"mappedFileSizeCommitLog": 268435456, **(extra or {})}
    cfg.write_text("".join(f"{k}: {v}\n" for k, v in lines.items()))
    proc = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "broker", "start",
                             "--grpc-port", "-1", "--namesrv", "", "--port",
                             str(port), "--store", str(Path(root) / "data"), "--config", str(cfg),
                             "--log-level", "WARNING", "--pid-file", str(Path(root) / "broker.pid")],
                            env=dict(os.environ, MQ_HOME=root))
    for _ in range(1200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("broker exited at start-up")
            time.sleep(0.02)
    else:
        proc.kill()
        raise SystemExit("broker did not start")
    return proc


def stop_broker(proc: subprocess.Popen) -> None:
    proc.send_signal(2)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def memory(proc: psutil.Process, root: str) -> tuple[float, float]:
    """(RSS MiB, RSS MiB without the resident pages of mapped files under ``root``)."""
    rss = proc.memory_info().rss
    mapped = sum(m.rss for m in proc.memory_maps() if m.path.startswith(root))
    return rss / 2**20, (rss - mapped) / 2**20


def send_frame(topic: str, props: str, body: bytes, queue_id: int = -1) -> bytes:
    h = H.SendMessageRequestHeaderV2(producer_group="BenchPG", topic=topic, default_topic="TBW102",
                                     default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                     born_timestamp=int(time.time() * 1000), flag=0, properties=props)
    return encode(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_ext(), body))


class _Pipe(asyncio.Protocol):
    def __init__(self, make: Callable[[int], bytes], total: int, inflight: int, done: asyncio.Future) -> None:
        self.make, self.total, self.inflight, self.fut = make, total, inflight, done
        self.sent = self.acked = self.errors = 0
        self.buf = bytearray()

    def connection_made(self, t) -> None:
        self.t = t
        self._more(self.inflight)

    def _more(self, n: int) -> None:
        n = min(n, self.total - self.sent)
        if n > 0:
            self.t.write(b"".join(self.make(self.sent + i) for i in range(n)))
            self.sent += n

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = n = 0
        while len(buf) - pos >= 4:
            (ln,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos - 4 < ln:
                break
            if b'"code":0' not in bytes(buf[pos + 8:pos + 8 + 200]):
                self.errors += 1
            pos += 4 + ln
            n += 1
        del buf[:pos]
        self.acked += n
        self._more(n)
        if self.acked >= self.total and not self.fut.done():
            self.fut.set_result(None)


async def pipeline_send(port: int, make: Callable[[int], bytes], total: int, inflight: int = 64) -> tuple[float, int]:
    """Send ``total`` frames (``make(i)``) keeping ``inflight`` outstanding; (seconds, errors)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    t0 = time.perf_counter()
    t, p = await loop.create_connection(lambda: _Pipe(make, total, inflight, fut), "127.0.0.1", port)
    await fut
    t.close()
    return time.perf_counter() - t0, p.errors
