"""RocketMQ 5.x gRPC path beside the remoting path, on one broker: sends/s, received+acked msgs/s, broker CPU.

    python benchmarks/grpc_bench.py [--seconds 5] [--rounds 2] [--connections 4] [--inflight 64]
                                    [--receivers 16] [--batch 32] [--backlog 100000] [--only grpc|remoting]

Starts `mq namesrv start` and `mq broker start` (ASYNC_FLUSH, a gRPC endpoint on a free port) as their own
processes and drives that one broker from this process, in rounds that alternate the two protocols so that
both see the same machine (it is shared: compare figures of one run). Each round:

=========================  ===================================================================================
grpc send                  SendMessage, one message each (as the 5.x clients send), pre-encoded, distinct ids;
                           ``--connections`` HTTP/2 connections x ``--inflight`` calls in flight on each
remoting send              SEND_MESSAGE_V2, pre-encoded frames, 4 connections x 16 in flight
grpc receive               ReceiveMessage (``--batch`` messages at most, 300 s invisible, no ack) by
                           ``--receivers`` loops; the receipt handles are kept for the two ack phases
grpc ack x1                AckMessage with one entry (what the 5.x clients send: one ack per message)
grpc ack x{batch}          AckMessage with ``--batch`` entries
grpc receive+ack x1        ReceiveMessage, then one AckMessage per message received
grpc receive+ack batched   ReceiveMessage, then one AckMessage for all messages received
remoting pop+ack x1        POP_MESSAGE of 32 + one ACK_MESSAGE per message (``pop_remoting_bench.py``)
remoting pop+batch ack     POP_MESSAGE of 32 + one BATCH_ACK_MESSAGE per pop
=========================  ===================================================================================

Each phase line gives calls or messages per second and the broker process's CPU (user + system, from /proc
through psutil) per call and per message, split into its event-loop thread (where every gRPC handler and the
grpc.aio machinery run: the one that limits throughput) and its other threads (gRPC's C-core event engine,
the store's); then this process's own CPU per call: the machine has 2 cores, and the load generator takes
its share of them. The load comes from a minimal HTTP/2 client (``grpc_h2.py``) and raw remoting frames,
which cost far less CPU per call than the client libraries. The receive phases read a backlog written over
remoting before each phase that consumes (``--backlog`` 1 KiB messages; what a phase leaves is read by the
next). The summary at the end gives each figure's median over the rounds. The broker's revive service reads
the checkpoint and ack records of every pop about an invisible time after it: in a later round that work from
an earlier one lands in the window, so consume figures of round 2 on carry it (as a steady state would).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = str(HERE.parent)
sys.path.insert(0, ROOT)
sys.path.insert(0, str(HERE))
# the daemons this script starts run this checkout's mq, whatever is installed
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

import pop_remoting_bench as popbench  # noqa: E402
from bench_daemons import _broker_process, daemons, free_port, wait_port  # noqa: E402
from broker_send_bench import Counter, prefill, send_frame  # noqa: E402
from grpc_h2 import SendTemplate, connect, header_block  # noqa: E402
from machine import CpuWindow  # noqa: E402

from mq.daemon.proxy.proto import messages as pb  # noqa: E402

TOPIC = "GrpcBench"
GROUP = "GrpcBenchGroup"
QUEUES = 8
RECV_INVISIBLE_S = 300


class Cpu:
    """CPU seconds of the broker (event-loop thread, other threads) and of this process, between marks."""

    def __init__(self, broker: psutil.Process) -> None:
        self.broker = broker
        self.me = psutil.Process()

    def read(self) -> tuple[float, float, float, float]:
        main = other = 0.0
        for t in self.broker.threads():
            if t.id == self.broker.pid:
                main += t.user_time + t.system_time
            else:
                other += t.user_time + t.system_time
        c = self.me.cpu_times()
        return main, other, c.user + c.system, time.perf_counter()


class Phase:
    """One phase's counters; ``mark()`` at the start and end of the measured window."""

    def __init__(self, cpu: Cpu) -> None:
        self.cpu = cpu
        self.calls = self.msgs = self.failed = self.empty = 0
        self.marks: list[tuple] = []

    def mark(self) -> None:
        self.marks.append((self.calls, self.msgs) + self.cpu.read())

    def result(self, name: str) -> dict:
        (c0, m0, bm0, bo0, me0, t0), (c1, m1, bm1, bo1, me1, t1) = self.marks[0], self.marks[-1]
        dt, calls, msgs = t1 - t0, max(1, c1 - c0), c1 - c0 if m1 == m0 == 0 else m1 - m0
        r = {"phase": name, "calls_s": (c1 - c0) / dt, "msgs_s": msgs / dt, "broker_cpu_pct": 100 * (
            bm1 - bm0 + bo1 - bo0) / dt, "main_us_call": 1e6 * (bm1 - bm0) / calls,
             "other_us_call": 1e6 * (bo1 - bo0) / calls, "client_us_call": 1e6 * (me1 - me0) / calls,
             "failed": self.failed, "empty": self.empty}
        r["broker_us_call"] = r["main_us_call"] + r["other_us_call"]
        r["broker_us_msg"] = 1e6 * (bm1 - bm0 + bo1 - bo0) / max(1, msgs)
        return r


async def _window(ph: Phase, seconds: float, tasks: list) -> None:
    await asyncio.sleep(1.0)  # warm-up
    ph.mark()
    await asyncio.sleep(seconds)
    ph.mark()
    await asyncio.gather(*tasks)


# -- gRPC phases -------------------------------------------------------------------------------------------------
async def grpc_send(port: int, seconds: float, conns: int, inflight: int, cpu: Cpu) -> dict:
    clients = [await connect(port) for _ in range(conns)]
    block = header_block("SendMessage", "bench-producer")
    tpl = SendTemplate(pb, TOPIC, os.urandom(512).hex().encode(), os.urandom(5).hex())
    ph, stop = Phase(cpu), time.monotonic() + seconds + 1.0
    ok = pb.Code.OK

    async def loop(client) -> None:
        while time.monotonic() < stop:
            msgs = await client.call(block, tpl.next())
            ph.calls += 1
            if not msgs or pb.SendMessageResponse.FromString(msgs[0]).status.code != ok:
                ph.failed += 1

    await _window(ph, seconds, [asyncio.ensure_future(loop(c)) for c in clients for _ in range(inflight)])
    for c in clients:
        c.tr.close()
    return ph.result("grpc send")


def _receive_request(batch: int, invisible_s: int) -> bytes:
    return pb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP), message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=batch,
        invisible_duration=pb.Duration(seconds=invisible_s), long_polling_timeout=pb.Duration(seconds=5)
    ).SerializeToString()


def _handles(raw: list[bytes]) -> list[tuple[str, str]]:
    out = []
    for r in raw:
        resp = pb.ReceiveMessageResponse.FromString(r)
        if resp.HasField("message"):
            sp = resp.message.system_properties
            out.append((sp.message_id, sp.receipt_handle))
    return out


def _ack_request(entries: list[tuple[str, str]]) -> bytes:
    a = pb.AckMessageRequest(group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC))
    for mid, handle in entries:
        a.entries.add(message_id=mid, receipt_handle=handle)
    return a.SerializeToString()


async def _ack_call(client, block: bytes, entries: list, ph: "Phase") -> None:
    """One AckMessage call of ``entries``: a call, and the entries acked or the call failed."""
    msgs = await client.call(block, _ack_request(entries))
    ph.calls += 1
    if msgs and pb.AckMessageResponse.FromString(msgs[0]).status.code == pb.Code.OK:
        ph.msgs += len(entries)
    else:
        ph.failed += 1


async def grpc_receive(port: int, seconds: float, receivers: int, batch: int, cpu: Cpu,
                       keep: list | None = None, ack: str = "") -> dict:
    """ReceiveMessage loops; ``ack`` "" keeps the handles in ``keep``, "x1" acks each message with its own
    call, "batch" acks all of a receive's messages with one call. Counts received messages (acked ones when
    acking) and ReceiveMessage calls (plus AckMessage calls when acking)."""
    clients = [await connect(port) for _ in range(max(1, min(4, receivers)))]
    recv_block, ack_block = header_block("ReceiveMessage", "bench-consumer"), header_block("AckMessage",
                                                                                          "bench-consumer")
    req = _receive_request(batch, RECV_INVISIBLE_S if not ack else 60)
    ph, stop = Phase(cpu), time.monotonic() + seconds + 1.0

    async def loop(client) -> None:
        while time.monotonic() < stop:
            got = _handles(await client.call(recv_block, req))
            ph.calls += 1
            if not got:
                ph.empty += 1
                continue
            if ack == "x1":
                await asyncio.gather(*(_ack_call(client, ack_block, [e], ph) for e in got))
            elif ack == "batch":
                await _ack_call(client, ack_block, got, ph)
            else:
                ph.msgs += len(got)
                keep.extend(got)  # type: ignore[union-attr]

    await _window(ph, seconds, [asyncio.ensure_future(loop(clients[i % len(clients)])) for i in range(receivers)])
    for c in clients:
        c.tr.close()
    name = {"": "grpc receive", "x1": "grpc receive+ack x1", "batch": "grpc receive+ack batched"}[ack]
    return ph.result(name)


async def grpc_ack(port: int, seconds: float, conns: int, inflight: int, per_call: int, handles: list,
                   cpu: Cpu) -> dict:
    """AckMessage calls of ``per_call`` entries each, taking from ``handles`` until they or the time run out
    (no warm-up: the window is the whole phase)."""
    clients = [await connect(port) for _ in range(conns)]
    block = header_block("AckMessage", "bench-consumer")
    ph, stop = Phase(cpu), time.monotonic() + seconds

    async def loop(client) -> None:
        while time.monotonic() < stop and handles:
            await _ack_call(client, block, [handles.pop() for _ in range(min(per_call, len(handles)))], ph)

    ph.mark()
    await asyncio.gather(*(loop(c) for c in clients for _ in range(inflight)))
    ph.mark()
    for c in clients:
        c.tr.close()
    return ph.result(f"grpc ack x{per_call}")


# -- remoting phases ---------------------------------------------------------------------------------------------
async def remoting_send(port: int, seconds: float, cpu: Cpu) -> dict:
    loop = asyncio.get_running_loop()
    frame = send_frame("RemotingBench", 0)
    protos = [(await loop.create_connection(lambda: Counter(frame, 16), "127.0.0.1", port))[1] for _ in range(4)]
    ph = Phase(cpu)

    def mark() -> None:
        ph.calls = sum(p.done for p in protos)
        ph.mark()

    await asyncio.sleep(1.0)
    mark()
    await asyncio.sleep(seconds)
    mark()
    for p in protos:
        p.running = False
    await asyncio.sleep(0.3)
    for p in protos:
        p.t.close()
    ph.failed = sum(p.errors for p in protos)
    return ph.result("remoting send")


async def remoting_pop(port: int, seconds: float, batch_ack: bool, cpu: Cpu) -> dict:
    before = cpu.read()
    r = await popbench.measure(port, 4, seconds, batch_ack, cpu.broker)
    after = cpu.read()
    share_main = (after[0] - before[0]) / max(1e-9, after[0] - before[0] + after[1] - before[1])
    calls = 1e6 * r["cpu_call"]
    return {"phase": "remoting pop+batch ack" if batch_ack else "remoting pop+ack x1",
            "calls_s": r["pops"] + r["acks"], "msgs_s": r["msgs"], "broker_cpu_pct": None,
            "main_us_call": calls * share_main, "other_us_call": calls * (1 - share_main), "broker_us_call": calls,
            "broker_us_msg": 1e6 * r["cpu_msg"], "client_us_call": None, "failed": r["errors"], "empty": r["empty"],
            "note": "CPU split between threads over the whole phase (warm-up and drain included)"}


# -- output ------------------------------------------------------------------------------------------------------
def line(r: dict) -> str:
    def f(key: str, fmt: str = "{:7.1f}") -> str:
        v = r.get(key)
        return " " * len(fmt.format(0)) if v is None else fmt.format(v)
    text = (f"{r['phase']:26s} {f('msgs_s', '{:8,.0f}')} msgs/s {f('calls_s', '{:8,.0f}')} calls/s | broker "
            f"{f('broker_us_call')} us/call = loop {f('main_us_call')} + other {f('other_us_call')}, "
            f"{f('broker_us_msg')} us/msg | client {f('client_us_call', '{:5.1f}')} us/call")
    extra = [f"{k} {r[k]}" for k in ("failed", "empty") if r.get(k)] + ([r["note"]] if r.get("note") else [])
    return text + (f"  ({'; '.join(extra)})" if extra else "")


def summary(results: list[dict]) -> None:
    print("\nmedian over the rounds:")
    names = list(dict.fromkeys(r["phase"] for r in results))
    for name in names:
        rows = [r for r in results if r["phase"] == name]
        med = {"phase": name}
        for k in ("msgs_s", "calls_s", "broker_us_call", "main_us_call", "other_us_call", "broker_us_msg",
                  "client_us_call"):
            vals = [r[k] for r in rows if r.get(k) is not None]
            med[k] = statistics.median(vals) if vals else None
        print(line(med))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--receivers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--backlog", type=int, default=100_000, help="messages written before each receive phase")
    ap.add_argument("--only", choices=("grpc", "remoting"), help="run one protocol's phases only")
    ap.add_argument("--broker-yaml", default="", help="extra broker.yaml lines, e.g. 'messageIndexEnable: false'")
    a = ap.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    grpc_port, port = free_port(), free_port()
    yaml = f"flushDiskType: ASYNC_FLUSH\ngrpcServerPort: {grpc_port}\n{a.broker_yaml.replace(';', chr(10))}\n"
    results: list[dict] = []
    with daemons(broker_yaml=yaml, broker_port=port) as (ns, env):
        wait_port(grpc_port)
        cpu = Cpu(_broker_process(["broker", os.path.join(env["MQ_HOME"], "store")]))
        for topic in (TOPIC, popbench.TOPIC):
            subprocess.run([sys.executable, "-m", "mq.cli.main", "updateTopic", "-n", ns, "-t", topic, "-c",
                            "DefaultCluster", "-r", str(QUEUES), "-w", str(QUEUES)], env=env, capture_output=True,
                           timeout=60)
        print(f"broker pid {cpu.broker.pid}, gRPC :{grpc_port}, remoting :{port}; load average "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        grpc, remoting = a.only != "remoting", a.only != "grpc"
        for rnd in range(1, a.rounds + 1):
            with CpuWindow() as w:
                handles: list = []
                fill_grpc = lambda: prefill(port, TOPIC, QUEUES, a.backlog // QUEUES)  # noqa: E731
                fill_pop = lambda: prefill(port, popbench.TOPIC, popbench.QUEUES,  # noqa: E731
                                           a.backlog // popbench.QUEUES)
                phases = []  # (prefill before the phase or None, the phase)
                if grpc:
                    phases.append((None, lambda: grpc_send(grpc_port, a.seconds, a.connections, a.inflight, cpu)))
                if remoting:
                    phases.append((None, lambda: remoting_send(port, a.seconds, cpu)))
                if grpc:
                    phases += [
                        (fill_grpc, lambda: grpc_receive(grpc_port, a.seconds, a.receivers, a.batch, cpu,
                                                         keep=handles)),
                        (None, lambda: grpc_ack(grpc_port, a.seconds, a.connections, a.inflight, 1, handles, cpu)),
                        (None, lambda: grpc_ack(grpc_port, a.seconds, a.connections, max(1, a.inflight // a.batch),
                                                a.batch, handles, cpu)),
                        (fill_grpc, lambda: grpc_receive(grpc_port, a.seconds, a.receivers, a.batch, cpu,
                                                         ack="x1")),
                        (fill_grpc, lambda: grpc_receive(grpc_port, a.seconds, a.receivers, a.batch, cpu,
                                                         ack="batch"))]
                if remoting:
                    phases += [(fill_pop, lambda: remoting_pop(port, a.seconds, False, cpu)),
                               (fill_pop, lambda: remoting_pop(port, a.seconds, True, cpu))]
                print(f"-- round {rnd}", flush=True)
                for fill, make in phases:
                    if fill is not None:
                        run(fill())
                    r = run(make())
                    r["round"] = rnd
                    results.append(r)
                    print(line(r), flush=True)
            print(f"   {w.summary()}", flush=True)
    summary(results)


if __name__ == "__main__":
    main()
