"""A generator of realistic RocketMQ trace messages, with deliberately planted anomalies and their truth.

Messages are published at a steady rate over ``duration_ms`` by several producer groups into several
topics (some transactional, some delayed); every consumer group subscribed to a topic consumes each
stored message once. Each (message, group) pair gets at most one planted anomaly, so the truth is exact:

- ``send_failed``: the Pub record says success=false and nobody consumes the message;
- ``retried``: k (1-3) failed attempts (SubAfter success=false, contextCode FAILED/EXCEPTION) before success;
- ``dead_lettered``: max_reconsume_times + 1 failed attempts (retry_times 0..max), never successful;
- ``stuck``: no SubBefore at all for that group;
- ``unfinished``: a SubBefore without its SubAfter;
- ``duplicated``: two successful deliveries (different requestIds);
- ``skewed``: the consumer host's clock is 5 s behind, so SubBefore precedes the Pub;
- transactional messages rolled back are never delivered (not an anomaly);
- ``malformed``: extra garbage records mixed into bodies.

Records are emitted in time order per emitting host (producer or consumer), batched into trace message
bodies the way ``AsyncTraceDispatcher`` does (flush at 500 ms age or a size limit), zlib-compressed at
4 KiB, and spread over the trace topic's queues, each body with provenance (``TraceBody``).
"""

from __future__ import annotations

import base64
import heapq
import json
import os
import random
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mq.trace.analytics.schema import TraceBody
from mq.trace.context import (
    ConsumeReturnType,
    LocalTransactionState,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
)
from mq.trace.encoder import encode_body, trace_message_keys

#: Retry delays of a concurrently consumed message (delay levels 3.. of the broker's schedule), ms.
RETRY_DELAYS_MS = (10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
                   480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)  # fmt: skip
SKEW_MS = 5_000


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    producer_group: str
    consumer_groups: tuple[str, ...]
    msg_type: MessageType = MessageType.Normal_Msg
    weight: float = 1.0


DEFAULT_TOPICS = (
    TopicSpec("OrderTopic", "PG_order", ("CG_billing", "CG_audit"), weight=3.0),
    TopicSpec("PayTopic", "PG_pay", ("CG_billing",), MessageType.Trans_Msg_Half, weight=1.0),
    TopicSpec("LogTopic", "PG_log", ("CG_archive",), weight=2.0),
    TopicSpec("DelayTopic", "PG_order", ("CG_timer",), MessageType.Delay_Msg, weight=0.5),
)


@dataclass(frozen=True, slots=True)
class SyntheticConfig:
    """What to generate. Rates are per message (send_failed) or per (message, group) pair (the rest)."""

    messages: int = 1000
    seed: int = 7
    start_ms: int = 1_700_000_000_000
    duration_ms: int = 3_600_000
    topics: tuple[TopicSpec, ...] = DEFAULT_TOPICS
    store_hosts: tuple[str, ...] = ("10.0.0.1:10911", "10.0.0.2:10911")
    producer_hosts: tuple[str, ...] = ("10.1.0.1", "10.1.0.2", "10.1.0.3")
    consumer_hosts: tuple[str, ...] = ("10.2.0.1", "10.2.0.2", "10.2.0.3", "10.2.0.4")
    trace_queues: tuple[tuple[str, int], ...] = (("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1))
    send_fail_rate: float = 0.01
    retry_rate: float = 0.03
    dlq_rate: float = 0.003
    stuck_rate: float = 0.004
    unfinished_rate: float = 0.003
    duplicate_rate: float = 0.005
    skew_rate: float = 0.003
    rollback_rate: float = 0.05
    malformed_rate: float = 0.002
    max_reconsume_times: int = 16
    max_records_per_body: int = 60
    flush_age_ms: int = 500
    #: Keys drawn from a small hot set this often (the rest are unique order ids).
    hot_key_rate: float = 0.05
    hot_keys: tuple[str, ...] = ("HOT-1", "HOT-2", "HOT-3")
    #: Consumer groups whose first attempt at every message fails (a failing consumer): each of their
    #: pairs is retried once and then succeeds (no other anomaly is planted on them).
    failing_groups: tuple[str, ...] = ()
    #: (group, fraction): the group stops consuming after that fraction of ``duration_ms`` (a subscribed
    #: group that no longer consumes): every later pair of it is stuck.
    stalled_groups: tuple[tuple[str, float], ...] = ()


@dataclass(slots=True)
class GroundTruth:
    """What the generator planted. Pairs are (msg_id, consumer_group)."""

    records: int = 0
    bodies: int = 0
    compressed_bodies: int = 0
    malformed: int = 0
    published: int = 0
    pub_per_topic: dict[str, int] = field(default_factory=dict)
    send_failed: set[str] = field(default_factory=set)
    rolled_back: set[str] = field(default_factory=set)
    retried: dict[tuple[str, str], int] = field(default_factory=dict)
    dead_lettered: set[tuple[str, str]] = field(default_factory=set)
    stuck: set[tuple[str, str]] = field(default_factory=set)
    unfinished: set[tuple[str, str]] = field(default_factory=set)
    duplicated: dict[tuple[str, str], int] = field(default_factory=dict)
    skewed: set[tuple[str, str]] = field(default_factory=set)
    min_timestamp: int = 0
    max_timestamp: int = 0


def _msg_id(rng: random.Random, host_ip: str, n: int) -> str:
    """A client unique id shaped like MessageClientIDSetter's: ip, pid, loader hash, time, counter (hex)."""
    ip = "".join(f"{int(p):02X}" for p in host_ip.split("."))
    return f"{ip}{rng.randrange(1 << 16):04X}{0x1B6D4A3C:08X}{n >> 16 & 0xFFFFFFFF:08X}{n & 0xFFFF:04X}"


def _offset_msg_id(store_host: str, phys: int) -> str:
    ip, port = store_host.split(":")
    return "".join(f"{int(p):02X}" for p in ip.split(".")) + f"{int(port):08X}{phys:016X}"


class _Emitter:
    """Orders records by time, batches them per emitting host into bodies and assigns trace queues."""

    def __init__(self, cfg: SyntheticConfig, truth: GroundTruth) -> None:
        self.cfg = cfg
        self.truth = truth
        self.heap: list[tuple[int, int, str, object]] = []
        self.seq = 0
        self.buffers: dict[str, list] = {}
        self.first_ts: dict[str, int] = {}
        self.queue_offsets = {q: 0 for q in cfg.trace_queues}
        self.rr = 0
        self.latest = 0

    def push(self, ts: int, host: str, record: object) -> None:
        self.seq += 1
        self.latest = max(self.latest, ts)
        heapq.heappush(self.heap, (ts, self.seq, host, record))

    def advance(self, now: int) -> Iterator[TraceBody]:
        heap = self.heap
        while heap and heap[0][0] <= now:
            ts, _, host, record = heapq.heappop(heap)
            buf = self.buffers.setdefault(host, [])
            if not buf:
                self.first_ts[host] = ts
            buf.append(record)
            if len(buf) >= self.cfg.max_records_per_body:
                yield self._flush(host, ts)
        for host in [h for h, b in self.buffers.items() if b and now - self.first_ts[h] >= self.cfg.flush_age_ms]:
            yield self._flush(host, now)

    def drain(self) -> Iterator[TraceBody]:
        yield from self.advance(self.latest)
        for host in [h for h, b in self.buffers.items() if b]:
            yield self._flush(host, self.first_ts[host] + self.cfg.flush_age_ms)

    def _flush(self, host: str, now: int) -> TraceBody:
        records = self.buffers[host]
        self.buffers[host] = []
        contexts = [r for r in records if isinstance(r, TraceContext)]
        garbage = [r for r in records if isinstance(r, bytes)]
        body, compressed = encode_body(contexts)
        if garbage:  # garbage records are spliced in uncompressed, then the body is re-compressed if needed
            raw = zlib.decompress(body) if compressed else body
            raw = b"".join([raw, *garbage])
            compressed = len(raw) >= 4096
            body = zlib.compress(raw, 5) if compressed else raw
        q = self.cfg.trace_queues[self.rr % len(self.cfg.trace_queues)]
        self.rr += 1
        offset = self.queue_offsets[q]
        self.queue_offsets[q] = offset + 1
        self.truth.bodies += 1
        self.truth.compressed_bodies += int(compressed)
        return TraceBody(q[0], q[1], offset, now + 3, body, compressed, host, trace_message_keys(contexts))


def generate(cfg: SyntheticConfig, truth: GroundTruth | None = None) -> Iterator[TraceBody]:
    """Yield trace message bodies for ``cfg``; fills ``truth`` (pass your own to read it afterwards)."""
    truth = truth if truth is not None else GroundTruth()
    rng = random.Random(cfg.seed)
    em = _Emitter(cfg, truth)
    weights = [t.weight for t in cfg.topics]
    step = cfg.duration_ms / max(cfg.messages, 1)
    phys = {h: 0 for h in cfg.store_hosts}
    tags = ("TagA", "TagA", "TagA", "TagB", "TagB", "TagC", None)
    truth.min_timestamp = cfg.start_ms
    max_ts = cfg.start_ms

    def emit(ts: int, host: str, ctx: TraceContext) -> None:
        nonlocal max_ts
        truth.records += 1
        max_ts = max(max_ts, ts)
        em.push(ts, host, ctx)

    for n in range(cfg.messages):
        pub_ts = cfg.start_ms + int(n * step)
        yield from em.advance(pub_ts)
        topic = rng.choices(cfg.topics, weights)[0]
        producer = rng.choice(cfg.producer_hosts)
        store_host = rng.choice(cfg.store_hosts)
        msg_id = _msg_id(rng, producer, n)
        if rng.random() < cfg.hot_key_rate:
            keys: str | None = rng.choice(cfg.hot_keys)
        elif rng.random() < 0.1:
            keys = None
        else:
            keys = f"order-{n}"
        tag = rng.choice(tags)
        body_len = rng.randint(64, 4096)
        cost = max(1, int(rng.lognormvariate(1.3, 0.6)))
        failed = rng.random() < cfg.send_fail_rate
        off_id = _offset_msg_id(store_host, phys[store_host])
        phys[store_host] += body_len + 200
        pub = TraceContext(
            TraceType.Pub, timestamp=pub_ts, region_id="DefaultRegion", group_name=topic.producer_group,
            cost_time=cost, success=not failed,
            beans=(TraceBean(topic=topic.name, msg_id=msg_id, offset_msg_id=off_id, tags=tag, keys=keys,
                             store_host=store_host, body_length=body_len, msg_type=topic.msg_type),),
        )  # fmt: skip
        emit(pub_ts, producer, pub)
        truth.published += 1
        truth.pub_per_topic[topic.name] = truth.pub_per_topic.get(topic.name, 0) + 1
        if failed:
            truth.send_failed.add(msg_id)
            continue
        store_ts = pub_ts + cost // 2
        deliver_ts = store_ts
        if topic.msg_type is MessageType.Trans_Msg_Half:
            end_ts = pub_ts + cost + rng.randint(5, 50)
            rollback = rng.random() < cfg.rollback_rate
            state = LocalTransactionState.ROLLBACK_MESSAGE if rollback else LocalTransactionState.COMMIT_MESSAGE
            tx = TraceContext(
                TraceType.EndTransaction, timestamp=end_ts, region_id="DefaultRegion",
                group_name=topic.producer_group,
                beans=(TraceBean(topic=topic.name, msg_id=msg_id, tags=tag, keys=keys, store_host=store_host,
                                 msg_type=MessageType.Trans_msg_Commit, transaction_id=f"TX{n:012d}",
                                 transaction_state=state, from_transaction_check=rng.random() < 0.1),),
            )  # fmt: skip
            emit(end_ts, producer, tx)
            if rollback:
                truth.rolled_back.add(msg_id)
                continue
            deliver_ts = end_ts
        elif topic.msg_type is MessageType.Delay_Msg:
            deliver_ts = store_ts + 10_000
        for group in topic.consumer_groups:
            _consume(cfg, rng, truth, emit, msg_id, keys, group, deliver_ts, pub_ts)
    yield from em.advance(max_ts)
    n_bad = int(round(truth.records * cfg.malformed_rate))
    garbage = (b"Pub\x01notanumber\x01R\x01PG\x02", b"Bogus\x011\x012\x02", b"SubBefore\x011\x02",
               b"EndTransaction\x011\x01R\x01PG\x01T\x01M\x01t\x01k\x01h\x012\x01TX\x01MAYBE\x01false\x02")  # fmt: skip
    for i in range(n_bad):
        em.push(cfg.start_ms + rng.randrange(cfg.duration_ms), rng.choice(cfg.consumer_hosts), garbage[i % 4])
    truth.malformed = n_bad
    truth.max_timestamp = max_ts
    yield from em.drain()


def _consume(cfg, rng, truth, emit, msg_id, keys, group, deliver_ts, pub_ts) -> None:  # type: ignore[no-untyped-def]
    pair = (msg_id, group)
    r = rng.random()
    stall = dict(cfg.stalled_groups).get(group)
    if stall is not None and pub_ts >= cfg.start_ms + stall * cfg.duration_ms:
        truth.stuck.add(pair)
        return
    if group in cfg.failing_groups:
        host = rng.choice(cfg.consumer_hosts)
        ts = deliver_ts + rng.randint(2, 80)
        truth.retried[pair] = 1
        _attempt(rng, emit, host, ts, msg_id, keys, group, 0, ok=False)
        _attempt(rng, emit, host, ts + RETRY_DELAYS_MS[0] + rng.randint(2, 80), msg_id, keys, group, 1, ok=True)
        return
    kinds = (
        ("stuck", cfg.stuck_rate), ("unfinished", cfg.unfinished_rate), ("dlq", cfg.dlq_rate),
        ("retry", cfg.retry_rate), ("dup", cfg.duplicate_rate), ("skew", cfg.skew_rate),
    )  # fmt: skip
    kind = "ok"
    for name, rate in kinds:
        if r < rate:
            kind = name
            break
        r -= rate
    if kind == "stuck":
        truth.stuck.add(pair)
        return
    host = rng.choice(cfg.consumer_hosts)
    ts = deliver_ts + rng.randint(2, 80)
    if kind == "skew":
        truth.skewed.add(pair)
        ts -= SKEW_MS
    failures = {"retry": rng.randint(1, 3), "dlq": cfg.max_reconsume_times + 1}.get(kind, 0)
    if kind == "retry":
        truth.retried[pair] = failures
    for attempt in range(failures):
        _attempt(rng, emit, host, ts, msg_id, keys, group, attempt, ok=False)
        ts += RETRY_DELAYS_MS[min(attempt, len(RETRY_DELAYS_MS) - 1)] + rng.randint(2, 80)
    if kind == "dlq":
        truth.dead_lettered.add(pair)
        return
    if kind == "unfinished":
        truth.unfinished.add(pair)
        _attempt(rng, emit, host, ts, msg_id, keys, group, 0, ok=True, finish=False)
        return
    _attempt(rng, emit, host, ts, msg_id, keys, group, failures, ok=True)
    if kind == "dup":
        truth.duplicated[pair] = 2
        _attempt(rng, emit, rng.choice(cfg.consumer_hosts), ts + rng.randint(1000, 20_000), msg_id, keys, group, 0, ok=True)


def _attempt(rng, emit, host, ts, msg_id, keys, group, retry_times, ok, finish=True) -> None:  # type: ignore[no-untyped-def]
    req = f"{rng.getrandbits(96):024X}"
    emit(ts, host, TraceContext(
        TraceType.SubBefore, timestamp=ts, region_id=None, group_name=group, request_id=req,
        beans=(TraceBean(msg_id=msg_id, keys=keys, retry_times=retry_times),),
    ))  # fmt: skip
    if not finish:
        return
    cost = max(1, int(rng.lognormvariate(2.0, 0.8)))
    code = ConsumeReturnType.SUCCESS if ok else rng.choice((ConsumeReturnType.FAILED, ConsumeReturnType.EXCEPTION))
    emit(ts + cost, host, TraceContext(
        TraceType.SubAfter, timestamp=ts + cost, group_name=group, request_id=req, cost_time=cost, success=ok,
        context_code=int(code), beans=(TraceBean(msg_id=msg_id, keys=keys),),
    ))  # fmt: skip


def write_raw_jsonl(bodies: Iterable[TraceBody], path: str | os.PathLike[str], bodies_per_file: int = 0) -> int:
    """Write bodies in the job's ``raw`` input format (one JSON object per line, body base64).

    ``path`` is a directory; files are ``part-00000.jsonl``, ... with ``bodies_per_file`` lines each
    (0: one file). Returns the number of bodies written.
    """
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    n, part, f = 0, 0, None
    try:
        for b in bodies:
            if f is None or (bodies_per_file and n % bodies_per_file == 0):
                if f is not None:
                    f.close()
                f = open(out / f"part-{part:05d}.jsonl", "w", encoding="ascii")
                part += 1
            f.write(json.dumps({
                "broker": b.broker, "queue_id": b.queue_id, "queue_offset": b.queue_offset,
                "store_time": b.store_time, "born_host": b.born_host, "compressed": b.compressed,
                "body": base64.b64encode(b.body).decode("ascii"),
            }, separators=(",", ":")) + "\n")  # fmt: skip
            n += 1
    finally:
        if f is not None:
            f.close()
    return n


# ------------------------------------------------------------------------------------ into a broker


@dataclass(slots=True)
class SendStats:
    messages: int = 0
    bytes: int = 0
    seconds: float = 0.0


async def send_bodies(broker_addr: str, topic: str, bodies: Iterable[TraceBody], *, queues: int = 1,
                      connections: int = 4, in_flight: int = 32, producer_group: str = "_INNER_TRACE_PRODUCER",
                      timeout: float = 30.0) -> SendStats:
    """Send trace bodies to ``broker_addr`` as trace messages (SEND_MESSAGE_V2), the way the trace producer
    does: KEYS = the trans keys, sysflag 0x1 on compressed bodies, queue ``i % queues``.

    ``connections`` remoting clients with ``in_flight`` outstanding requests each. Raises BrokerError
    if the broker refuses one.
    """
    import asyncio
    import time

    from mq.common import properties as P
    from mq.errors import BrokerError
    from mq.protocol import headers as H
    from mq.protocol.codes import RequestCode, ResponseCode
    from mq.protocol.command import RemotingCommand
    from mq.remoting import RemotingClient

    stats = SendStats()
    it = iter(bodies)
    seq = [0]
    clients = [RemotingClient(name=f"trace-feed-{i}") for i in range(max(1, connections))]
    prefix = f"{os.getpid():08X}{random.getrandbits(32):08X}"

    async def worker(client: RemotingClient) -> None:
        for b in it:
            n = seq[0]
            seq[0] += 1
            props = {P.WAIT_STORE_MSG_OK: "true", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"{prefix}{n:016X}"}
            if b.keys:
                props[P.KEYS] = b.keys
            hdr = H.SendMessageRequestHeaderV2(
                producer_group=producer_group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
                queue_id=n % max(queues, 1), sys_flag=1 if b.compressed else 0,
                born_timestamp=int(time.time() * 1000), flag=0, properties=P.encode_properties(props))
            resp = await client.invoke(broker_addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, hdr.to_ext(),
                                                                             b.body), timeout)
            if resp.code != ResponseCode.SUCCESS:
                raise BrokerError.from_response(resp.code, resp.remark, broker_addr)
            stats.messages += 1
            stats.bytes += len(b.body)

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(worker(c) for c in clients for _ in range(max(1, in_flight))))
    finally:
        for c in clients:
            await c.close()
    stats.seconds = time.perf_counter() - t0
    return stats
