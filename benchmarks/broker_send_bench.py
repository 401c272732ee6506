"""Broker throughput: sends/s (1, 4, 16 in flight), batches of 32, SYNC vs ASYNC flush, backlog drain, RSS.

The broker runs in its own process (``mq broker start``, no name server); this process is the load generator.
It sends PRE-ENCODED frames over raw asyncio Protocols (the Python client would be the bottleneck) and only
counts response frames (for pulls it decodes the response header to follow ``nextBeginOffset``). 1 KB bodies
over loopback. Each line also prints the broker process's CPU time (user + system, ``psutil``) per message
over the measured window: on a shared, noisy machine that is the figure to compare. Memory: the broker's RSS
minus the resident pages of its mapped store files (commit log, consume queues, index:
``psutil.Process.memory_maps()`` entries under the store directory); USS would count those file pages too,
since no other process maps them.

    python benchmarks/broker_send_bench.py [--seconds 5] [--port 30911]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from machine import CpuWindow

sys.path.append(str(Path(__file__).resolve().parents[1]))  # an installed or PYTHONPATH mq wins

from mq.common import properties as P  # noqa: E402
from mq.common.message import Message  # noqa: E402
from mq.common.record import encode_batch  # noqa: E402
from mq.protocol import headers as H  # noqa: E402
from mq.protocol.codec import FrameDecoder, encode  # noqa: E402
from mq.protocol.codes import RequestCode  # noqa: E402
from mq.protocol.command import RemotingCommand  # noqa: E402

BODY = b"x" * 1024
_LEN = struct.Struct(">i")


def send_frame(topic: str, queue_id: int, batch: int = 0) -> bytes:
    props = P.encode_properties({P.TAGS: "TagA", P.KEYS: "k", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "0" * 32,
                                 P.WAIT_STORE_MSG_OK: "true"})
    h = H.SendMessageRequestHeaderV2(producer_group="BenchPG", topic=topic, default_topic="TBW102",
                                     default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                     born_timestamp=int(time.time() * 1000), flag=0,
                                     properties="" if batch else props, batch=bool(batch))
    if batch:
        body = encode_batch([Message(topic, BODY, properties={P.TAGS: "TagA"}) for _ in range(batch)])
        return encode(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, h.to_ext(), body))
    return encode(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_ext(), BODY))


class Counter(asyncio.Protocol):
    """Keeps ``inflight`` requests outstanding: each response frame triggers the next request."""

    def __init__(self, frame: bytes, inflight: int) -> None:
        self.frame = frame
        self.inflight = inflight
        self.buf = bytearray()
        self.done = 0
        self.errors = 0
        self.running = True

    def connection_made(self, transport) -> None:
        self.t = transport
        transport.write(self.frame * self.inflight)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        n = 0
        while len(buf) - pos >= 4:
            (ln,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos - 4 < ln:
                break
            code = buf[pos + 8:pos + 40]
            if b'"code":0' not in code and b'"code":0,' not in bytes(buf[pos + 8:pos + 8 + 200]):
                self.errors += 1
            pos += 4 + ln
            n += 1
        del buf[:pos]
        self.done += n
        if self.running and n:
            self.t.write(self.frame * n)


def _cpu(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    t = proc.cpu_times()
    return t.user + t.system


async def measure_sends(port: int, frame: bytes, conns: int, inflight: int, seconds: float,
                        proc: psutil.Process | None = None) -> tuple[float, int, float]:
    """(requests/s, errors, broker CPU seconds per request) over ``seconds`` after a warm-up."""
    loop = asyncio.get_running_loop()
    protos = []
    for _ in range(conns):
        _t, p = await loop.create_connection(lambda: Counter(frame, inflight), "127.0.0.1", port)
        protos.append(p)
    await asyncio.sleep(0.5)  # warm up
    start = sum(p.done for p in protos)
    c0 = _cpu(proc)
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    done = sum(p.done for p in protos) - start
    dt = time.perf_counter() - t0
    cpu = _cpu(proc) - c0
    for p in protos:
        p.running = False
    await asyncio.sleep(0.3)
    errors = sum(p.errors for p in protos)
    for p in protos:
        p.t.close()
    return done / dt, errors, cpu / max(done, 1)


async def drain(port: int, topic: str, queues: int, per_queue: int,
                proc: psutil.Process | None = None) -> tuple[float, float]:
    """Pull ``per_queue`` messages from each queue, one pull in flight per queue (like a push consumer)."""
    loop = asyncio.get_running_loop()

    class Puller(asyncio.Protocol):
        def __init__(self, qid: int, fut: asyncio.Future) -> None:
            self.qid, self.fut = qid, fut
            self.dec = FrameDecoder()
            self.offset = 0
            self.got = 0

        def connection_made(self, t) -> None:
            self.t = t
            self.ask()

        def ask(self) -> None:
            h = H.PullMessageRequestHeader(consumer_group="BenchCG", topic=topic, queue_id=self.qid,
                                           queue_offset=self.offset, max_msg_nums=32, sys_flag=4, commit_offset=0,
                                           suspend_timeout_millis=0, sub_version=0, subscription="*")
            self.t.write(encode(RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())))

        def data_received(self, data: bytes) -> None:
            for cmd in self.dec.feed(data):
                nxt = int(cmd.ext_fields["nextBeginOffset"])
                self.got += nxt - self.offset
                self.offset = nxt
                if cmd.code != 0 or self.got >= per_queue:
                    if not self.fut.done():
                        self.fut.set_result(self.got)
                    return
                self.ask()

    futs = []
    c0 = _cpu(proc)
    t0 = time.perf_counter()
    for q in range(queues):
        f = loop.create_future()
        await loop.create_connection(lambda q=q, f=f: Puller(q, f), "127.0.0.1", port)
        futs.append(f)
    got = sum(await asyncio.gather(*futs))
    dt = time.perf_counter() - t0
    return got / dt, (_cpu(proc) - c0) / max(got, 1)


async def prefill(port: int, topic: str, queues: int, per_queue: int) -> None:
    loop = asyncio.get_running_loop()
    for q in range(queues):
        frame = send_frame(topic, q, batch=32)
        done = asyncio.Event()

        class Filler(Counter):
            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                if self.done * 32 >= per_queue:
                    self.running = False
                    done.set()

        t, p = await loop.create_connection(lambda: Filler(frame, 8), "127.0.0.1", port)
        await done.wait()
        t.close()


def start_broker(port: int, store: str, flush: str) -> subprocess.Popen:
    cfg = Path(store) / "broker.yaml"
    Path(store).mkdir(parents=True, exist_ok=True)
    cfg.write_text(f"flushDiskType: {flush}\nmappedFileSizeCommitLog: 268435456\n")
    env = dict(os.environ, MQ_HOME=store)
    proc = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "broker", "start",
                             "--grpc-port", "-1", "--namesrv", "", "--port",
                             str(port), "--store", str(Path(store) / "data"), "--config", str(cfg),
                             "--log-level", "WARNING", "--pid-file", str(Path(store) / "broker.pid")], env=env)
    import socket

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("broker did not start")


def stop_broker(proc: subprocess.Popen) -> None:
    proc.send_signal(2)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--port", type=int, default=30911)
    ap.add_argument("--drain-per-queue", type=int, default=100_000)
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    results = {}
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        tmp = tempfile.mkdtemp(prefix=f"mq-bench-{flush}-")
        proc = start_broker(args.port, tmp, flush)
        try:
            ps = psutil.Process(proc.pid)
            frame = send_frame("BenchT", 0)
            # create the topic first (auto-create from TBW102)
            asyncio.run(measure_sends(args.port, frame, 1, 1, 0.2))
            for inflight in (1, 4, 16):
                with CpuWindow() as w:
                    rate, err, cpu = asyncio.run(measure_sends(args.port, frame, 1, inflight, args.seconds, ps))
                results[(flush, f"send 1 conn x {inflight} in flight")] = (rate, err)
                print(f"{flush:11s} sends/s, 1 connection, {inflight:2d} in flight: {rate:10,.0f}  errors {err}  "
                      f"broker CPU {cpu * 1e6:6.1f} us/msg   {w.short()}", flush=True)
            with CpuWindow() as w:
                rate, err, cpu = asyncio.run(measure_sends(args.port, frame, 16, 1, args.seconds, ps))
            print(f"{flush:11s} sends/s, 16 connections x 1 in flight:   {rate:10,.0f}  errors {err}  "
                  f"broker CPU {cpu * 1e6:6.1f} us/msg   {w.short()}", flush=True)
            results[(flush, "send 16 conns x 1")] = (rate, err)
            bframe = send_frame("BenchT", 1, batch=32)
            with CpuWindow() as w:
                rate, err, cpu = asyncio.run(measure_sends(args.port, bframe, 1, 16, args.seconds, ps))
            print(f"{flush:11s} msgs/s in batches of 32, 16 in flight:  {rate * 32:10,.0f}  errors {err}  "
                  f"broker CPU {cpu / 32 * 1e6:6.1f} us/msg   {w.short()}", flush=True)
            results[(flush, "batch32")] = (rate * 32, err)
            if flush == "ASYNC_FLUSH":
                queues = 4
                asyncio.run(prefill(args.port, "DrainT", queues, args.drain_per_queue))
                time.sleep(1.0)
                with CpuWindow() as w:
                    rate, cpu = asyncio.run(drain(args.port, "DrainT", queues, args.drain_per_queue, ps))
                print(f"{flush:11s} backlog drain msgs/s ({queues} queues x {args.drain_per_queue:,}, 32 per pull): "
                      f"{rate:10,.0f}  broker CPU {cpu * 1e6:6.2f} us/msg   {w.short()}", flush=True)
            rss = ps.memory_info().rss
            mapped = sum(m.rss for m in ps.memory_maps() if m.path.startswith(tmp))
            print(f"{flush:11s} broker memory: RSS {rss / 2**20:.1f} MiB, of which mapped store files "
                  f"{mapped / 2**20:.1f} MiB -> RSS excluding store mappings {(rss - mapped) / 2**20:.1f} MiB",
                  flush=True)
        finally:
            stop_broker(proc)
            shutil.rmtree(tmp, ignore_errors=True)
    a = results[("ASYNC_FLUSH", "send 1 conn x 16 in flight")][0]
    s = results[("SYNC_FLUSH", "send 1 conn x 16 in flight")][0]
    print(f"SYNC/ASYNC ratio (1 conn x 16 in flight): {s / a:.0%}")


if __name__ == "__main__":
    main()
