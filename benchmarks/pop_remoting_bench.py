"""Pop over remoting: received + acked messages/s and broker CPU per call, for a backlog drained with pop.

The broker runs in its own process (``mq broker start``, no name server, ASYNC_FLUSH); this process prefills a
4-queue topic with 1 KiB messages (batches of 32), then consumers on raw asyncio connections pop (32 at most,
queueId -1, 60 s invisible) and ack what they got, either one ACK_MESSAGE per message (what the 5.x clients send:
one ack per message) or one BATCH_ACK_MESSAGE per pop. Each consumer keeps one pop outstanding and sends its acks
pipelined as soon as the pop answer arrives. Lines print messages/s (received and acked), pops/s, acks/s, the
broker process's CPU time (user + system) per message and per call, and the machine's CPU shares.

    python benchmarks/pop_remoting_bench.py [--seconds 5] [--consumers 4] [--port 30931] [--prefill 120000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.append(str(Path(__file__).resolve().parents[1]))  # an installed or PYTHONPATH mq wins
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_send_bench import _cpu, prefill, start_broker, stop_broker  # noqa: E402
from machine import CpuWindow  # noqa: E402

from mq.protocol import extra_info as X  # noqa: E402
from mq.protocol import headers as H  # noqa: E402
from mq.protocol.codec import FrameDecoder, encode  # noqa: E402
from mq.protocol.codes import RequestCode  # noqa: E402
from mq.protocol.command import RemotingCommand  # noqa: E402
from mq.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody, encode_bitset  # noqa: E402

TOPIC = "BenchPop"
GROUP = "BenchPopG"
QUEUES = 4
BROKER = "broker-a"
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def pop_frame() -> bytes:
    h = H.PopMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=32,
                                  invisible_time=60_000, poll_time=0, born_time=int(time.time() * 1000),
                                  init_mode=0, exp_type="TAG", exp="*")
    return encode(RemotingCommand.request(RequestCode.POP_MESSAGE, h.to_ext()))


def queue_offsets(body: bytes) -> list[tuple[int, int]]:
    """(queue id, queue offset) of each record of a pop answer (read at their fixed positions)."""
    out = []
    pos, end = 0, len(body)
    while pos < end:
        size = _I32.unpack_from(body, pos)[0]
        out.append((_I32.unpack_from(body, pos + 12)[0], _I64.unpack_from(body, pos + 20)[0]))
        pos += size
    return out


class PopConsumer(asyncio.Protocol):
    """One pop in flight; each answer's messages are acked at once (pipelined), then the next pop is sent."""

    def __init__(self, batch_ack: bool) -> None:
        self.batch_ack = batch_ack
        self.dec = FrameDecoder()
        self.pops = self.acks = self.msgs = self.errors = self.empty = 0
        self.running = True
        self.pending_acks = 0
        self.frame = pop_frame()

    def connection_made(self, t) -> None:
        self.t = t
        t.write(self.frame)

    def data_received(self, data: bytes) -> None:
        out = []
        for cmd in self.dec.feed(data):
            if cmd.code not in (0, 210) and not (cmd.code == 208 and self.pending_acks):
                self.errors += 1
            if self.pending_acks and cmd.ext_fields.get("popTime") is None:  # an ack answer
                self.pending_acks -= 1
                self.acks += 1
                continue
            self.pops += 1
            if cmd.code != 0:
                self.empty += 1
                if self.running:
                    out.append(self.frame)
                continue
            out += self.ack_frames(cmd)
            if self.running:
                out.append(self.frame)
        if out:
            self.t.write(b"".join(out))

    def ack_frames(self, cmd: RemotingCommand) -> list[bytes]:
        rh = H.PopMessageResponseHeader.from_ext(cmd.ext_fields)
        starts = X.parse_start_offset_info(rh.start_offset_info)
        got = queue_offsets(bytes(cmd.body))
        self.msgs += len(got)
        frames = []
        if self.batch_ack:
            by_queue: dict[int, list[int]] = {}
            for qid, off in got:
                by_queue.setdefault(qid, []).append(off)
            acks = [BatchAck(GROUP, TOPIC, "0", starts[f"0@{q}"], q, rh.revive_qid, rh.pop_time, rh.invisible_time,
                             encode_bitset([o - starts[f"0@{q}"] for o in offs])) for q, offs in by_queue.items()]
            body = BatchAckMessageRequestBody(BROKER, acks).to_json()
            frames.append(encode(RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body)))
        else:
            for qid, off in got:
                extra = X.build(starts[f"0@{qid}"], rh.pop_time, rh.invisible_time, rh.revive_qid, "0", BROKER, qid,
                                off)
                h = H.AckMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=qid, extra_info=extra,
                                              offset=off)
                frames.append(encode(RemotingCommand.request(RequestCode.ACK_MESSAGE, h.to_ext())))
        self.pending_acks += len(frames)
        return frames


async def measure(port: int, consumers: int, seconds: float, batch_ack: bool, proc: psutil.Process) -> dict:
    loop = asyncio.get_running_loop()
    protos = []
    for _ in range(consumers):
        _t, p = await loop.create_connection(lambda: PopConsumer(batch_ack), "127.0.0.1", port)
        protos.append(p)
    await asyncio.sleep(0.5)  # warm up
    s0 = [(p.msgs, p.pops, p.acks) for p in protos]
    c0 = _cpu(proc)
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    dt = time.perf_counter() - t0
    cpu = _cpu(proc) - c0
    msgs = sum(p.msgs for p in protos) - sum(s[0] for s in s0)
    pops = sum(p.pops for p in protos) - sum(s[1] for s in s0)
    acks = sum(p.acks for p in protos) - sum(s[2] for s in s0)
    for p in protos:
        p.running = False
    await asyncio.sleep(0.5)
    for p in protos:
        p.t.close()
    return {"msgs": msgs / dt, "pops": pops / dt, "acks": acks / dt, "cpu_msg": cpu / max(msgs, 1),
            "cpu_call": cpu / max(pops + acks, 1), "errors": sum(p.errors for p in protos),
            "empty": sum(p.empty for p in protos)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--port", type=int, default=30931)
    ap.add_argument("--prefill", type=int, default=120_000, help="messages in the backlog (per case)")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for batch_ack in (False, True):
        tmp = tempfile.mkdtemp(prefix="mq-bench-pop-")
        proc = start_broker(args.port, tmp, "ASYNC_FLUSH")
        try:
            ps = psutil.Process(proc.pid)
            asyncio.run(prefill(args.port, TOPIC, QUEUES, args.prefill // QUEUES))
            with CpuWindow() as w:
                r = asyncio.run(measure(args.port, args.consumers, args.seconds, batch_ack, ps))
            how = "one BATCH_ACK per pop" if batch_ack else "one ACK per message"
            print(f"pop 32 + {how:22s} {args.consumers} consumers: {r['msgs']:8,.0f} msgs/s received+acked  "
                  f"pops/s {r['pops']:6,.0f}  acks/s {r['acks']:7,.0f}  broker CPU {r['cpu_msg'] * 1e6:6.1f} us/msg "
                  f"{r['cpu_call'] * 1e6:6.1f} us/call  errors {r['errors']} empty pops {r['empty']}   {w.short()}",
                  flush=True)
        finally:
            stop_broker(proc)


if __name__ == "__main__":
    main()
