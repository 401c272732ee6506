"""Message trace under load: send throughput with tracing off vs on (same run), trace records dropped, and the
dispatcher's reported counts checked against what is really stored in the trace topic.

A name server and a broker (``traceTopicEnable: true``) run as their own processes; this process is the load
generator: one Python ``Producer`` keeping ``--window`` sends in flight for ``--seconds`` per phase, 256-byte
bodies. Phases: trace OFF, trace ON (``enable_trace``; default dispatcher options unless ``--queue-size``).
After the ON phase the dispatcher is shut down (bounded flush), then every trace message stored during the phase
is pulled from RMQ_SYS_TRACE_TOPIC, decoded, and its Pub records of the bench group counted.

    python benchmarks/trace_load_bench.py [--seconds 30] [--window 64] [--queue-size 1024] [--port 31876]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mq.client.producer import Producer  # noqa: E402
from mq.client.pull_api import PullConsumer, PullStatus  # noqa: E402
from mq.common.message import Message, MessageQueue  # noqa: E402
from mq.config import ClientConfig, ProducerConfig  # noqa: E402
from mq.trace.context import RMQ_SYS_TRACE_TOPIC, TraceType  # noqa: E402
from mq.trace.dispatcher import DispatcherOptions  # noqa: E402
from mq.trace.encoder import iter_decode_body  # noqa: E402
from mq.trace.enable import enable_trace  # noqa: E402

TOPIC = "TraceBenchTopic"
BODY = b"t" * 256


def wait_port(port: int, proc: subprocess.Popen) -> None:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"daemon on port {port} exited with {proc.returncode}")
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"nothing listens on {port}")


def start_daemons(root: Path, ns_port: int, broker_port: int) -> list[subprocess.Popen]:
    env = dict(os.environ, MQ_HOME=str(root))
    common = ["--log-level", "WARNING"]
    ns = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--port", str(ns_port),
                           "--pid-file", str(root / "ns.pid"), *common], env=env)
    wait_port(ns_port, ns)
    cfg = root / "broker.yaml"
    cfg.write_text("traceTopicEnable: true\nmappedFileSizeCommitLog: 268435456\n")
    br = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "broker", "start", "--grpc-port", "-1", "--namesrv",
                           f"127.0.0.1:{ns_port}", "--port", str(broker_port), "--store", str(root / "store"),
                           "--config", str(cfg), "--pid-file", str(root / "broker.pid"), *common], env=env)
    wait_port(broker_port, br)
    return [br, ns]


async def phase(producer: Producer, seconds: float, window: int) -> tuple[int, int, float]:
    """Keep ``window`` sends in flight for ``seconds``: (ok, failed, elapsed)."""
    ok = failed = 0
    stop = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal ok, failed
        while time.monotonic() < stop:
            try:
                await producer.send(Message(TOPIC, BODY))
                ok += 1
            except Exception:
                failed += 1

    t0 = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(window)))
    return ok, failed, time.monotonic() - t0


async def route_ready(producer: Producer, topic: str) -> None:
    for _ in range(100):
        try:
            await producer.instance.update_route(topic)  # type: ignore[union-attr]
            return
        except Exception:
            await asyncio.sleep(0.2)
    raise SystemExit(f"no route for {topic}")


async def trace_max_offset(pc: PullConsumer) -> int:
    return await pc.max_offset(MessageQueue(RMQ_SYS_TRACE_TOPIC, "broker-a", 0))


async def count_stored(pc: PullConsumer, start: int, group: str) -> tuple[int, int, int]:
    """(trace messages, Pub records of ``group``, undecodable records) stored from offset ``start``."""
    mq = MessageQueue(RMQ_SYS_TRACE_TOPIC, "broker-a", 0)
    offset, msgs, pubs, bad = start, 0, 0, 0
    while True:
        res = await pc.pull(mq, offset, 32)
        if res.status is not PullStatus.FOUND:
            return msgs, pubs, bad
        for m in res.messages:
            msgs += 1
            for item in iter_decode_body(m.body):
                if isinstance(item, Exception):
                    bad += 1
                elif item.trace_type is TraceType.Pub and item.group_name == group:
                    pubs += 1
        offset = res.next_begin_offset


async def run(args: argparse.Namespace, ns_addr: str) -> None:
    cc = ClientConfig(namesrv_addr=ns_addr, client_ip="127.0.0.1", instance_name="trace-bench")
    results = {}
    warm = Producer(ProducerConfig(group="TraceBenchWarm"), cc)
    await warm.start()
    await route_ready(warm, "TBW102")  # the broker has registered with the name server
    await warm.send(Message(TOPIC, BODY))
    await route_ready(warm, TOPIC)
    await phase(warm, 2.0, args.window)  # warm-up
    await warm.shutdown()

    pc = PullConsumer("TraceBenchReader", ClientConfig(namesrv_addr=ns_addr, client_ip="127.0.0.1",
                                                       instance_name="trace-bench-reader"))
    await pc.start()
    for traced in (False, True):
        group = f"TraceBench{'On' if traced else 'Off'}"
        producer = Producer(ProducerConfig(group=group), cc)
        disp = None
        if traced:
            opts = DispatcherOptions(queue_size=args.queue_size)
            disp = enable_trace(producer, dispatcher_options=opts)
        await producer.start()
        start_offset = await trace_max_offset(pc)
        ok, failed, elapsed = await phase(producer, args.seconds, args.window)
        t0 = time.monotonic()
        await producer.shutdown()  # with trace: bounded flush of the dispatcher
        shutdown_s = time.monotonic() - t0
        results[traced] = (ok, failed, elapsed)
        print(f"trace {'ON ' if traced else 'OFF'}: {ok} sent ({failed} failed) in {elapsed:.1f} s = "
              f"{ok / elapsed:,.0f} msg/s; producer shutdown {shutdown_s * 1000:.0f} ms")
        if disp is not None:
            st = disp.stats()
            await asyncio.sleep(1.0)  # let the broker's reput index the last trace messages
            stored_msgs, stored_pubs, bad = await count_stored(pc, start_offset, group)
            print(f"  dispatcher: offered {st['offered']}, sent {st['sent']} in {st['messagesSent']} trace messages "
                  f"({st['bytesSent'] / max(1, st['messagesSent']):,.0f} B avg), dropped {st['dropped']} "
                  f"{st['droppedByReason']}, pending {st['pending']}")
            print(f"  stored in {RMQ_SYS_TRACE_TOPIC}: {stored_msgs} trace messages, {stored_pubs} Pub records of "
                  f"{group}, {bad} undecodable")
            print(f"  reported sent == stored: {st['sent'] == stored_pubs}; offered == sends OK: {st['offered'] == ok}"
                  f"; offered == sent + dropped + pending: "
                  f"{st['offered'] == st['sent'] + st['dropped'] + st['pending']}")
    await pc.shutdown()
    off, on = results[False][0] / results[False][2], results[True][0] / results[True][2]
    print(f"tracing overhead on send throughput: {100 * (off - on) / off:+.1f} % ({off:,.0f} -> {on:,.0f} msg/s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--window", type=int, default=64, help="sends in flight")
    ap.add_argument("--queue-size", type=int, default=1024, help="dispatcher context queue size")
    ap.add_argument("--port", type=int, default=31876, help="name server port (broker: port + 1)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mq-trace-bench-"))
    procs = start_daemons(root, args.port, args.port + 1)
    try:
        from mq.remoting import run as run_loop

        print(f"trace load bench: {args.seconds:.0f} s per phase, window {args.window}, 256 B bodies, "
              f"dispatcher queue {args.queue_size}; broker and name server in their own processes")
        run_loop(run(args, f"127.0.0.1:{args.port}"))
    finally:
        for p in procs:
            p.send_signal(2)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
