"""RocketMQ 5.x gRPC path against the remoting path: sends/s, received+acked msgs/s and broker CPU per call.

    python benchmarks/grpc_bench.py [--seconds 10] [--size 1024] [--connections 4] [--inflight 64]
                                    [--receivers 16] [--batch 32] [--skip-remoting]

Starts `mq namesrv start` and `mq broker start` (ASYNC_FLUSH, a gRPC endpoint on a free port) as their own
processes, then:

1. **5.x sends**: SendMessage calls, one message each (as the 5.x clients send), ``--connections`` HTTP/2
   connections with ``--inflight`` calls in flight on each;
2. **5.x receive + ack**: ``--receivers`` loops of ReceiveMessage (``--batch`` messages, long polling) and one
   AckMessage per message received (as the clients ack), over the backlog the send phase left;
3. **remoting sends** (``mq bench produce``, 64 in flight) for comparison.

Each phase prints calls or messages per second and the broker's CPU (user + system, from /proc via psutil)
per call / message. The load comes from a minimal HTTP/2 client written here (pre-encoded HPACK literal
headers, upb protobuf), which costs far less CPU per call than a gRPC client library: the official Python
client reaches about 1-2 k calls/s on this machine, so it would measure itself, not the broker. The machine
has 2 cores: the generator runs on the other one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, ROOT)
# the daemons this script starts run this checkout's mq, whatever is installed
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

from benchmarks.bench_daemons import _broker_process, daemons, free_port, wait_port  # noqa: E402
from mq.daemon.proxy.proto import messages as pb  # noqa: E402

SERVICE = "/apache.rocketmq.v2.MessagingService/"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


# -- a minimal gRPC-over-h2c client -------------------------------------------------------------------------------
def _int(v: int, bits: int, first: int = 0) -> bytes:
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
    """A header field as "literal without indexing" (no dynamic table: every request's block is the same)."""
    head = _int(index, 4) if index else b"\x00" + _int(len(name), 7) + name
    return head + _int(len(value), 7) + value


def header_block(method: str, client_id: str) -> bytes:
    b = b"\x83\x86" + _literal(b"", (SERVICE + method).encode(), 4) + _literal(b"", b"127.0.0.1", 1)
    b += _literal(b"", b"application/grpc", 31) + _literal(b"te", b"trailers")
    for k, v in (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"),
                 ("x-mq-protocol", "GRPC_V2"), ("grpc-timeout", "30S")):
        b += _literal(k.encode(), v.encode())
    return b


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


class H2Client(asyncio.Protocol):
    """Calls on one connection; ``call`` returns the gRPC messages of the response once the stream ends."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.next_stream = 1
        self.calls: dict[int, tuple[asyncio.Future, bytearray]] = {}
        self.ready = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.tr = transport
        transport.write(PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 1 << 30)) +
                        frame(8, 0, 0, struct.pack(">I", 1 << 30)))
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
        self.tr.write(frame(1, 4, sid, block) + frame(0, 1, sid, b"\x00" + struct.pack(">I", len(message)) + message))
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
                    entry[0].set_result(_messages(entry[1]))
        del b[:pos]
        if credit:
            self.tr.write(frame(8, 0, 0, struct.pack(">I", credit)))


def _messages(data: bytearray) -> list[bytes]:
    out, pos = [], 0
    while pos + 5 <= len(data):
        n = struct.unpack_from(">I", data, pos + 1)[0]
        out.append(bytes(data[pos + 5:pos + 5 + n]))
        pos += 5 + n
    return out


async def connect(port: int) -> H2Client:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(H2Client, "127.0.0.1", port)
    await proto.ready
    return proto


# -- phases ------------------------------------------------------------------------------------------------------
def cpu_of(proc) -> float:
    t = proc.cpu_times()
    return t.user + t.system


async def send_phase(port: int, topic: str, seconds: float, size: int, conns: int, inflight: int, broker) -> dict:
    clients = [await connect(port) for _ in range(conns)]
    block = header_block("SendMessage", "bench-producer")
    body = os.urandom(size // 2).hex().encode()[:size]
    prefix = uuid.uuid4().hex[:10].upper()
    counter = iter(range(1 << 62))
    stats = {"ok": 0, "failed": 0}
    stop = time.monotonic() + seconds + 1.0

    def request() -> bytes:
        mid = f"01{prefix}{next(counter):022X}"
        m = pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(
            message_id=mid, tag="TagA", keys=[mid[-8:]], message_type=pb.MessageType.NORMAL))
        return pb.SendMessageRequest(messages=[m]).SerializeToString()

    async def loop(client: H2Client) -> None:
        while time.monotonic() < stop:
            msgs = await client.call(block, request())
            if msgs and pb.SendMessageResponse.FromString(msgs[0]).status.code == pb.Code.OK:
                stats["ok"] += 1
            else:
                stats["failed"] += 1

    tasks = [asyncio.ensure_future(loop(c)) for c in clients for _ in range(inflight)]
    await asyncio.sleep(1.0)  # warm-up
    ok0, cpu0, t0 = stats["ok"], cpu_of(broker), time.perf_counter()
    await asyncio.sleep(seconds)
    ok1, cpu1, t1 = stats["ok"], cpu_of(broker), time.perf_counter()
    await asyncio.gather(*tasks)
    for c in clients:
        c.tr.close()
    n = ok1 - ok0
    return {"phase": "5.x SendMessage", "per_second": round(n / (t1 - t0)), "broker_cpu_pct": round(
        100 * (cpu1 - cpu0) / (t1 - t0)), "broker_cpu_us_per_call": round(1e6 * (cpu1 - cpu0) / max(1, n), 1),
        "failed": stats["failed"], "total_sent": stats["ok"]}


async def receive_phase(port: int, topic: str, group: str, seconds: float, receivers: int, batch: int,
                        broker) -> dict:
    conns = max(1, min(4, receivers))
    clients = [await connect(port) for _ in range(conns)]
    recv_block = header_block("ReceiveMessage", "bench-consumer")
    ack_block = header_block("AckMessage", "bench-consumer")
    req = pb.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=batch,
        invisible_duration=pb.Duration(seconds=60), long_polling_timeout=pb.Duration(seconds=5)).SerializeToString()
    stats = {"acked": 0, "received": 0, "failed": 0, "empty": 0}
    stop = time.monotonic() + seconds + 1.0

    async def ack(client: H2Client, mid: str, handle: str) -> None:
        a = pb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic))
        a.entries.add(message_id=mid, receipt_handle=handle)
        msgs = await client.call(ack_block, a.SerializeToString())
        if msgs and pb.AckMessageResponse.FromString(msgs[0]).status.code == pb.Code.OK:
            stats["acked"] += 1
        else:
            stats["failed"] += 1

    async def loop(client: H2Client) -> None:
        while time.monotonic() < stop:
            got = []
            for raw in await client.call(recv_block, req):
                r = pb.ReceiveMessageResponse.FromString(raw)
                if r.HasField("message"):
                    sp = r.message.system_properties
                    got.append((sp.message_id, sp.receipt_handle))
            if not got:
                stats["empty"] += 1
                continue
            stats["received"] += len(got)
            await asyncio.gather(*(ack(client, mid, h) for mid, h in got))

    tasks = [asyncio.ensure_future(loop(clients[i % conns])) for i in range(receivers)]
    await asyncio.sleep(1.0)
    a0, cpu0, t0 = stats["acked"], cpu_of(broker), time.perf_counter()
    await asyncio.sleep(seconds)
    a1, cpu1, t1 = stats["acked"], cpu_of(broker), time.perf_counter()
    await asyncio.gather(*tasks)
    for c in clients:
        c.tr.close()
    n = a1 - a0
    return {"phase": "5.x ReceiveMessage + AckMessage", "per_second": round(n / (t1 - t0)),
            "broker_cpu_pct": round(100 * (cpu1 - cpu0) / (t1 - t0)),
            "broker_cpu_us_per_msg": round(1e6 * (cpu1 - cpu0) / max(1, n), 1), "failed": stats["failed"],
            "empty_receives": stats["empty"]}


def remoting_phase(ns: str, env: dict, topic: str, seconds: float, size: int, broker) -> dict:
    cpu0, t0 = cpu_of(broker), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mq.cli.main", "bench", "produce", "-n", ns, "-t", topic, "-s",
                           str(size), "-w", "64", "-d", str(seconds), "--interval", str(seconds + 10), "--json"],
                          capture_output=True, text=True, env=env, timeout=seconds + 120)
    cpu1, t1 = cpu_of(broker), time.perf_counter()
    summary = {}
    dec, text, pos = json.JSONDecoder(), proc.stdout, 0
    while True:  # the last JSON document printed (they may span lines)
        start = text.find("{", pos)
        if start < 0:
            break
        try:
            obj, pos = dec.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if isinstance(obj, dict) and "per_second" in obj:
            summary = obj
    ok = summary.get("ok", 0)
    return {"phase": "remoting SEND_MESSAGE_V2 (mq bench produce, 64 in flight)",
            "per_second": summary.get("per_second"), "broker_cpu_pct": round(100 * (cpu1 - cpu0) / (t1 - t0)),
            "broker_cpu_us_per_call": round(1e6 * (cpu1 - cpu0) / max(1, ok), 1),
            "note": "CPU over the whole run, client start-up included"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--receivers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--skip-remoting", action="store_true")
    ap.add_argument("--skip-receive", action="store_true")
    ap.add_argument("--broker-yaml", default="", help="extra broker.yaml lines, e.g. 'messageIndexEnable: false'")
    a = ap.parse_args()
    grpc_port = free_port()
    yaml = f"flushDiskType: ASYNC_FLUSH\ngrpcServerPort: {grpc_port}\n{a.broker_yaml.replace(';', chr(10))}\n"
    with daemons(broker_yaml=yaml) as (ns, env):
        wait_port(grpc_port)
        broker = _broker_process(["broker", os.path.join(env["MQ_HOME"], "store")])
        subprocess.run([sys.executable, "-m", "mq.cli.main", "updateTopic", "-n", ns, "-t", "GrpcBench", "-c",
                        "DefaultCluster", "-r", "8", "-w", "8"], env=env, capture_output=True, timeout=60)
        try:
            import uvloop

            run = uvloop.run
        except ImportError:
            run = asyncio.run
        results = [run(send_phase(grpc_port, "GrpcBench", a.seconds, a.size, a.connections, a.inflight, broker))]
        try:
            if a.skip_receive:
                raise RuntimeError("skipped")
            results.append(run(receive_phase(grpc_port, "GrpcBench", "GrpcBenchGroup", a.seconds, a.receivers,
                                             a.batch, broker)))
        except Exception as exc:  # a broker without pop consumption
            results.append({"phase": "5.x ReceiveMessage + AckMessage", "error": f"{type(exc).__name__}: {exc}"})
        if not a.skip_remoting:
            results.append(remoting_phase(ns, env, "RemotingBench", a.seconds, a.size, broker))
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
