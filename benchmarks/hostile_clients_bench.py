"""Memory and fairness of the daemons under hostile clients, ours or RocketMQ 4.9's (``--broker rocketmq``).

    python benchmarks/hostile_clients_bench.py [--broker mq|rocketmq] [--only memory,heavy,slowloris]

Each part starts a fresh name server and broker as their own processes (``bench_daemons.brokers``) and prints:

- memory: the broker's peak RSS while 4 connections pipeline 300 pulls each of one 4 MB message and never read
  their answers, and the name server's while 4 connections pipeline 300 GET_KVLIST_BY_NAMESPACE each of a 4 MB
  namespace and never read; meanwhile another client's round-trip latency (p50/p99/max, and how many got no
  answer within 30 s). Targets: broker under 512 MB, name server under 256 MB.
- heavy: another client's send latency while one 14 MB request is processed: LOCK_BATCH_MQ and HEART_BEAT, each in
  standard JSON and in fastjson-style JSON (bare member names, which only a tolerant reader accepts); and how long
  the large request took. Target: under 0.5 s.
- slowloris: 20 connections each send 1 MB of a frame that claims 16 MB, then one byte every 10 s; the time until
  the daemon closes them (or that it did not within ``--slowloris-wait`` seconds), and the broker's RSS meanwhile.

Raw blocking sockets, one thread per role; nothing here is asserted: the figures are printed.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_daemons import BROKER_KINDS, brokers, percentile  # noqa: E402
from mq.protocol import headers as H  # noqa: E402
from mq.protocol.bodies import ClusterInfo  # noqa: E402
from mq.protocol.codec import FrameDecoder, encode  # noqa: E402
from mq.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from mq.protocol.command import RemotingCommand  # noqa: E402

MB = 1024 * 1024


# ---------------------------------------------------------------------------------------------
# wire helpers
# ---------------------------------------------------------------------------------------------
class Raw:
    def __init__(self, addr: str, *, rcvbuf: int | None = None, timeout: float = 30.0) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, int(port)))
        self.dec = FrameDecoder()
        self.ready: list[RemotingCommand] = []
        self.opaque = 0

    def call(self, cmd: RemotingCommand) -> RemotingCommand | None:
        self.opaque += 1
        cmd.opaque = self.opaque
        self.sock.sendall(encode(cmd))
        return self.response()

    def response(self) -> RemotingCommand | None:
        """The next response (requests the daemon sends, such as NOTIFY_CONSUMER_IDS_CHANGED, are skipped)."""
        while True:
            while not self.ready:
                try:
                    chunk = self.sock.recv(1 << 20)
                except OSError:
                    return None
                if not chunk:
                    return None
                self.ready.extend(self.dec.feed(chunk))
            cmd = self.ready.pop(0)
            if cmd.flag & 1:
                return cmd

    def close(self) -> None:
        self.sock.close()


def send_cmd(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    h = H.SendMessageRequestHeaderV2(producer_group="BenchPG", topic=topic, default_topic="TBW102",
                                     default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                     born_timestamp=int(time.time() * 1000), flag=0, properties="")
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_ext(), body)


def pull_cmd(topic: str, offset: int) -> RemotingCommand:
    h = H.PullMessageRequestHeader(consumer_group="BenchCG", topic=topic, queue_id=0, queue_offset=offset,
                                   max_msg_nums=1, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                                   sub_version=0, subscription="*", expression_type="TAG")
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())


def json_frame(code: int, body: bytes, opaque: int = 1) -> bytes:
    header = orjson.dumps({"code": code, "language": "JAVA", "version": 401, "opaque": opaque, "flag": 0,
                           "extFields": {}})
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def broker_address(namesrv: str) -> str:
    r = Raw(namesrv)
    for _ in range(100):
        resp = r.call(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        if resp is not None and resp.code == ResponseCode.SUCCESS and resp.body:
            info = ClusterInfo.from_json(resp.body)
            for data in info.broker_addr_table.values():
                addr = data.broker_addrs.get(0)
                if addr:
                    r.close()
                    return addr
        time.sleep(0.2)
    raise SystemExit("the broker did not register with the name server")


def namesrv_process(namesrv: str) -> psutil.Process:
    port = int(namesrv.rsplit(":", 1)[1])
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "namesrv" not in cmd.lower():
            continue
        try:
            if any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
                   for c in p.net_connections("tcp")):
                return p
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    raise SystemExit(f"no name server process listens on {port}")


def rss_mb(proc: psutil.Process) -> float:
    try:
        return proc.memory_info().rss / MB
    except psutil.NoSuchProcess:
        return float("nan")


class Probe(threading.Thread):
    """Another client: one round trip every ``every`` seconds, its latencies recorded."""

    def __init__(self, addr: str, make, every: float = 0.02, timeout: float = 30.0) -> None:
        super().__init__(daemon=True)
        self.addr, self.make, self.every, self.timeout = addr, make, every, timeout
        self.latencies: list[float] = []
        self.failures = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        r = Raw(self.addr, timeout=self.timeout)
        while not self.stop_flag.is_set():
            t = time.perf_counter()
            resp = r.call(self.make())
            if resp is None:
                self.failures += 1
                r.close()
                r = Raw(self.addr, timeout=self.timeout)
            else:
                self.latencies.append(time.perf_counter() - t)
            self.stop_flag.wait(self.every)
        r.close()

    def stop(self) -> str:
        self.stop_flag.set()
        self.join(self.timeout + 5)
        lat = self.latencies
        return (f"{len(lat)} round trips: p50 {percentile(lat, 50) * 1000:.1f} ms, p99 "
                f"{percentile(lat, 99) * 1000:.1f} ms, max {max(lat, default=0) * 1000:.1f} ms, "
                f"{self.failures} without an answer")


# ---------------------------------------------------------------------------------------------
# memory: clients that do not read (defect 3)
# ---------------------------------------------------------------------------------------------
def _hogs(addr: str, frames: bytes, n: int = 4) -> list[Raw]:
    hogs = []
    for _ in range(n):
        h = Raw(addr, rcvbuf=64 * 1024)
        h.sock.setblocking(False)
        hogs.append(h)
    pending = [memoryview(frames) for _ in hogs]
    deadline = time.monotonic() + 20
    while any(len(p) for p in pending) and time.monotonic() < deadline:  # the daemon may stop reading: no block
        for i, h in enumerate(hogs):
            if len(pending[i]):
                try:
                    sent = h.sock.send(pending[i])
                    pending[i] = pending[i][sent:]
                except BlockingIOError:
                    pass
        select.select([], [h.sock for h, p in zip(hogs, pending) if len(p)], [], 0.1)
    return hogs


def _watch(proc: psutil.Process, seconds: float) -> float:
    peak = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(proc))
        time.sleep(0.25)
    return peak


def memory(kind: str, pulls: int, watch: float) -> None:
    with brokers(kind) as (namesrv, broker_proc):
        broker = broker_address(namesrv)
        r = Raw(broker)
        resp = r.call(send_cmd("BenchBig", b"m" * 4_000_000))
        assert resp is not None and resp.code == ResponseCode.SUCCESS, resp
        r.close()
        base = rss_mb(broker_proc)
        probe = Probe(broker, lambda: send_cmd("BenchProbe", b"p" * 100))
        probe.start()
        frames = b"".join(encode(_with_opaque(pull_cmd("BenchBig", 0), i)) for i in range(pulls))
        hogs = _hogs(broker, frames)
        peak = _watch(broker_proc, watch)
        print(f"[{kind}] broker: RSS {base:.0f} MB before, peak {peak:.0f} MB while 4 connections pipelined "
              f"{pulls} pulls of a 4 MB message each without reading (target < 512 MB); another client: "
              f"{probe.stop()}")
        for h in hogs:
            h.close()

        ns_proc = namesrv_process(namesrv)
        r = Raw(namesrv)
        for i in range(16):
            put = H.PutKVConfigRequestHeader(namespace="BenchNS", key=f"k{i}", value="v" * (256 * 1024))
            resp = r.call(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, put.to_ext()))
            assert resp is not None and resp.code == ResponseCode.SUCCESS, resp
        r.close()
        base = rss_mb(ns_proc)
        route = H.GetRouteInfoRequestHeader(topic="BenchBig").to_ext()
        probe = Probe(namesrv, lambda: RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(route)))
        probe.start()
        get = H.GetKVListByNamespaceRequestHeader(namespace="BenchNS").to_ext()
        frames = b"".join(encode(_with_opaque(RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                                                      dict(get)), i)) for i in range(pulls))
        hogs = _hogs(namesrv, frames)
        peak = _watch(ns_proc, watch)
        print(f"[{kind}] name server: RSS {base:.0f} MB before, peak {peak:.0f} MB while 4 connections pipelined "
              f"{pulls} KV lists of a 4 MB namespace each without reading (target < 256 MB); another client: "
              f"{probe.stop()}")
        for h in hogs:
            h.close()


def _with_opaque(cmd: RemotingCommand, opaque: int) -> RemotingCommand:
    cmd.opaque = opaque
    return cmd


# ---------------------------------------------------------------------------------------------
# heavy: one 14 MB request (defect 5)
# ---------------------------------------------------------------------------------------------
def _lock_body(target: int) -> bytes:
    n = target // 70
    mqs = [{"brokerName": "broker-a", "queueId": i % 8, "topic": f"BenchLockTopic{i:08d}"} for i in range(n)]
    return orjson.dumps({"clientId": "hog@1", "consumerGroup": "BenchHogGroup", "mqSet": mqs})


def _heartbeat_body(target: int) -> bytes:
    n = target // 95
    subs = [{"topic": f"BenchHbTopic{i:08d}", "subString": "*", "subVersion": 1, "expressionType": "TAG"}
            for i in range(n)]
    return orjson.dumps({"clientID": "hog@1", "producerDataSet": [],
                         "consumerDataSet": [{"groupName": "BenchHogConsumers", "consumeType": "CONSUME_PASSIVELY",
                                              "messageModel": "CLUSTERING",
                                              "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                              "subscriptionDataSet": subs, "unitMode": False}]})


def _fastjson_style(body: bytes, member: bytes) -> bytes:
    return body.replace(b'"' + member + b'":', member + b":")


def heavy(kind: str, size: int) -> None:
    lock = _lock_body(size)
    hb = _heartbeat_body(size)
    cases = [("LOCK_BATCH_MQ", RequestCode.LOCK_BATCH_MQ, lock),
             ("LOCK_BATCH_MQ fastjson-style", RequestCode.LOCK_BATCH_MQ, _fastjson_style(lock, b"brokerName")),
             ("HEART_BEAT", RequestCode.HEART_BEAT, hb),
             ("HEART_BEAT fastjson-style", RequestCode.HEART_BEAT, _fastjson_style(hb, b"subString"))]
    for name, code, body in cases:
        with brokers(kind) as (namesrv, _proc):
            broker = broker_address(namesrv)
            warm = Raw(broker)
            warm.call(send_cmd("BenchProbe", b"p"))
            warm.close()
            probe = Probe(broker, lambda: send_cmd("BenchProbe", b"p" * 100))
            probe.start()
            time.sleep(0.5)
            hog = Raw(broker, timeout=600)
            t = time.perf_counter()
            hog.sock.sendall(json_frame(code, body))
            answer = hog.response()
            took = time.perf_counter() - t
            time.sleep(0.2)
            print(f"[{kind}] {name} of {len(body) / MB:.1f} MB answered "
                  f"{ResponseCode(answer.code).name if answer is not None else 'never'} in {took:.2f} s; another "
                  f"client meanwhile: {probe.stop()} (target < 0.5 s)")
            hog.close()


# ---------------------------------------------------------------------------------------------
# slowloris (defect 7)
# ---------------------------------------------------------------------------------------------
def slowloris(kind: str, conns: int, wait: float, trickle: float) -> None:
    with brokers(kind) as (namesrv, broker_proc):
        broker = broker_address(namesrv)
        base = rss_mb(broker_proc)
        header = orjson.dumps({"code": RequestCode.SEND_MESSAGE, "language": "JAVA", "version": 401,
                               "opaque": 1, "flag": 0, "extFields": {}})
        prefix = struct.pack(">ii", 16 * MB - 16, len(header)) + header + b"x" * MB
        socks = []
        for _ in range(conns):
            s = socket.create_connection(tuple(_split(broker)), timeout=5)
            s.sendall(prefix)
            socks.append(s)
        start = time.monotonic()
        closed_at: dict[int, float] = {}
        peak = 0.0
        next_byte = start + trickle
        while len(closed_at) < conns and time.monotonic() - start < wait:
            peak = max(peak, rss_mb(broker_proc))
            live = [s for i, s in enumerate(socks) if i not in closed_at]
            readable, _, _ = select.select(live, [], [], 0.2)
            for s in readable:
                try:
                    gone = s.recv(4096) == b""
                except OSError:
                    gone = True
                if gone:
                    closed_at[socks.index(s)] = time.monotonic() - start
            if time.monotonic() >= next_byte:
                next_byte += trickle
                for i, s in enumerate(socks):
                    if i not in closed_at:
                        try:
                            s.send(b"x")
                        except OSError:
                            closed_at[i] = time.monotonic() - start
        times = sorted(closed_at.values())
        if times:
            closing = f"{len(times)} closed after {times[0]:.1f}-{times[-1]:.1f} s"
        else:
            closing = "none closed"
        print(f"[{kind}] slowloris: {conns} connections each holding 1 MB of a 16 MB frame, one byte every "
              f"{trickle:.0f} s: {closing}, {conns - len(times)} still open after {time.monotonic() - start:.0f} s; "
              f"broker RSS {base:.0f} MB before, peak {peak:.0f} MB")
        for s in socks:
            s.close()


def _split(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=BROKER_KINDS, default="mq")
    ap.add_argument("--only", default="memory,heavy,slowloris", help="comma-separated parts to run")
    ap.add_argument("--pulls", type=int, default=300, help="pipelined requests per non-reading connection")
    ap.add_argument("--watch", type=float, default=12.0, help="seconds the non-reading clients are watched")
    ap.add_argument("--size", type=int, default=14 * MB, help="bytes of the large request's body")
    ap.add_argument("--slowloris-connections", type=int, default=20)
    ap.add_argument("--slowloris-wait", type=float, default=150.0, help="give up waiting after this many seconds")
    ap.add_argument("--trickle", type=float, default=10.0, help="seconds between two trickled bytes")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    print(f"machine: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}")
    if "memory" in parts:
        memory(args.broker, args.pulls, args.watch)
    if "heavy" in parts:
        heavy(args.broker, args.size)
    if "slowloris" in parts:
        slowloris(args.broker, args.slowloris_connections, args.slowloris_wait, args.trickle)


if __name__ == "__main__":
    main()
