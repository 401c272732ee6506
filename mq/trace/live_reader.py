"""Read the trace topic straight from the brokers, the way Spark's Kafka source reads Kafka.

Driver side (``plan_read``): resolve the trace topic's route at the name server (GET_ROUTEINFO_BY_TOPIC),
turn the time range into per-queue offset ranges (SEARCH_OFFSET_BY_TIMESTAMP, GET_MIN/MAX_OFFSET, or the
archive's cursors) and cut each range into ``Chunk`` s. Executor side (``read_chunk``): each Spark task
pulls its chunks (PULL_MESSAGE), decodes the record runs (``mq.common.record``), inflates zlib bodies
(sysflag bit 0x1) and yields ``TraceBody`` tuples: the job (``analytics.readers``) turns them into one row per
trace message and decodes them in Spark SQL (``analytics.sql_decode``).

All I/O here is blocking sockets speaking the remoting frame codec (``mq.protocol``): a Spark Python
worker runs no event loop, is forked and reused, and must not depend on one; a chunk is a strict
request/response sequence on one connection, so a blocking channel is the simplest correct client.

Nothing is skipped silently. A broker (or queue) that cannot be reached while planning, a chunk whose
pull fails half-way, and a range the broker no longer has (OFFSET_MOVED) each become a ``MissingRange``;
on the executors a missing range travels as one marker row whose ``error`` is
``MISSING_PREFIX + json`` (see ``missing_marker_row`` / ``parse_missing``), which the job takes out of
the data and names in the report.

Offset window for event times [since, until): trace messages are stored after the events they carry
(the client batches for up to ~0.5 s, plus clock skew), so the store-time window searched is
[since - slack, until + slack); the job filters rows by event time afterwards.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mq.common import sysflag as SF
from mq.common.record_scan import ask_alone, scan_records, settle
from mq.errors import MQError, RemoteProtocolError
from mq.protocol import headers as H
from mq.protocol.bodies import TopicRouteData
from mq.protocol.codec import FrameDecoder, encode
from mq.protocol.acl import SessionCredentials, sign_request
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

log = logging.getLogger(__name__)

#: Consumer group named in PULL_MESSAGE requests (no offsets are ever committed for it).
PULL_GROUP = "MQ_TRACE_ANALYTICS"
#: ``error`` value prefix of a marker row standing for a range that could not be read.
MISSING_PREFIX = "unavailable:"
DEFAULT_SLACK_MS = 60_000
DEFAULT_CHUNK_MESSAGES = 4_000
PULL_BATCH = 32
#: PULL_MESSAGE sysFlag: the subscription expression travels with the request.
_FLAG_SUBSCRIPTION = 0x4


class ChannelError(MQError):
    """A blocking remoting call failed: connect refused, timeout, closed or garbled stream."""


class BlockingChannel:
    """One blocking TCP connection speaking the remoting protocol: request, then its response."""

    def __init__(self, addr: str, timeout: float = 10.0) -> None:
        self.addr = addr
        host, _, port = addr.rpartition(":")
        try:
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        except (OSError, ValueError) as exc:
            raise ChannelError(f"cannot connect to {addr}: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.opaque = 0
        self.ready: list[RemotingCommand] = []
        ak, sk = os.environ.get("MQ_ACCESS_KEY"), os.environ.get("MQ_SECRET_KEY")
        #: ACL: requests are signed when the job runs with MQ_ACCESS_KEY and MQ_SECRET_KEY
        self.credentials = SessionCredentials(ak, sk) if ak and sk else None

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
        self.opaque += 1
        cmd.opaque = self.opaque
        if self.credentials is not None:
            sign_request(cmd, self.credentials)
        try:
            self.sock.sendall(encode(cmd))
            while True:
                for resp in self.ready:
                    if resp.is_response and resp.opaque == cmd.opaque:
                        self.ready = []
                        return resp
                self.ready = []
                data = self.sock.recv(1 << 20)
                if not data:
                    raise ChannelError(f"{self.addr} closed the connection")
                self.ready = self.decoder.feed(data)
        except (OSError, RemoteProtocolError) as exc:
            self.close()
            raise ChannelError(f"call {cmd.code} to {self.addr} failed: {exc}") from None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "BlockingChannel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------------ the plan


@dataclass(frozen=True, slots=True)
class Chunk:
    """Offsets [start, end) of one queue of the trace topic, read by one Spark task."""

    broker: str
    addr: str
    topic: str
    queue_id: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class QueueRange:
    """What the plan reads of one queue: [start, end), and the queue's min/max offsets at planning."""

    broker: str
    addr: str
    queue_id: int
    start: int
    end: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class MissingRange:
    """Data that could not be read. queue_id/start/end are None when the whole broker was unreachable."""

    broker: str
    addr: str
    queue_id: int | None
    start: int | None
    end: int | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ReadPlan:
    topic: str
    queues: list[QueueRange] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    missing: list[MissingRange] = field(default_factory=list)
    #: brokers named in the route (broker name -> master address)
    brokers: dict[str, str] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        return sum(q.end - q.start for q in self.queues)


def cursor_key(broker: str, topic: str, queue_id: int) -> str:
    """Key of one queue in the archive's cursor file."""
    return f"{broker}/{topic}/{queue_id}"


def fetch_route(namesrv_addrs: Sequence[str], topic: str, timeout: float = 5.0) -> TopicRouteData | None:
    """GET_ROUTEINFO_BY_TOPIC at the first name server that answers; None if the topic has no route."""
    errors = []
    for addr in namesrv_addrs:
        try:
            with BlockingChannel(addr, timeout) as ch:
                resp = ch.call(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                       H.GetRouteInfoRequestHeader(topic=topic).to_ext()))
        except ChannelError as exc:
            errors.append(str(exc))
            continue
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            errors.append(f"{addr}: code {resp.code} {resp.remark}")
            continue
        return TopicRouteData.from_json(resp.body)
    raise ChannelError(f"no name server answered for topic {topic}: {'; '.join(errors)}")


def _offset(ch: BlockingChannel, code: int, header: Any) -> int:
    resp = ch.call(RemotingCommand.request(code, header.to_ext()))
    if resp.code != ResponseCode.SUCCESS:
        raise ChannelError(f"{ch.addr}: request {code} answered {resp.code} {resp.remark}")
    return int(resp.ext_fields.get("offset", "0"))


def split_range(broker: str, addr: str, topic: str, queue_id: int, start: int, end: int,
                chunk_messages: int) -> list[Chunk]:
    """Cut [start, end) into chunks of at most ``chunk_messages`` messages."""
    step = max(1, chunk_messages)
    return [Chunk(broker, addr, topic, queue_id, s, min(s + step, end)) for s in range(start, end, step)]


def plan_read(namesrv_addrs: Sequence[str], topic: str, since_ms: int | None, until_ms: int | None, *,
              cursors: Mapping[str, int] | None = None, chunk_messages: int = DEFAULT_CHUNK_MESSAGES,
              slack_ms: int = DEFAULT_SLACK_MS, timeout: float = 5.0, now_ms: int | None = None) -> ReadPlan:
    """The offset ranges holding trace messages stored in [since - slack, until + slack).

    ``since_ms`` None: from each queue's min offset. ``until_ms`` None (or in the future): up to the max
    offset now. A queue with a cursor starts there instead (the incremental export); its ``since_ms`` is
    then ignored. Unreachable brokers become ``plan.missing``.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    plan = ReadPlan(topic)
    route = fetch_route(namesrv_addrs, topic, timeout)
    if route is None:
        return plan
    addrs = {bd.broker_name: bd.broker_addrs.get(0) or bd.broker_addrs.get("0") for bd in route.broker_datas}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        name = qd.broker_name
        addr = addrs.get(name)
        if not addr:
            plan.missing.append(MissingRange(name, "", None, None, None, "no master address in the route"))
            continue
        plan.brokers[name] = addr
        if not qd.perm & 0x4:  # PERM_READ
            continue
        try:
            with BlockingChannel(addr, timeout) as ch:
                for qid in range(qd.read_queue_nums):
                    lo = _offset(ch, RequestCode.GET_MIN_OFFSET, H.GetMinOffsetRequestHeader(topic=topic, queue_id=qid))
                    hi = _offset(ch, RequestCode.GET_MAX_OFFSET, H.GetMaxOffsetRequestHeader(topic=topic, queue_id=qid))
                    key = cursor_key(name, topic, qid)
                    if cursors and key in cursors:
                        start = cursors[key]
                        if start < lo:
                            plan.missing.append(MissingRange(name, addr, qid, start, lo,
                                                             "expired: the broker no longer keeps these offsets"))
                            start = lo
                    elif since_ms is None:
                        start = lo
                    else:
                        start = _offset(ch, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, H.SearchOffsetRequestHeader(
                            topic=topic, queue_id=qid, timestamp=since_ms - slack_ms))
                    if until_ms is None or until_ms + slack_ms >= now:
                        end = hi
                    else:
                        end = _offset(ch, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, H.SearchOffsetRequestHeader(
                            topic=topic, queue_id=qid, timestamp=until_ms + slack_ms)) + 1
                    start, end = max(lo, min(start, hi)), max(lo, min(end, hi))
                    plan.queues.append(QueueRange(name, addr, qid, start, max(start, end), lo, hi))
                    plan.chunks += split_range(name, addr, topic, qid, start, end, chunk_messages)
        except ChannelError as exc:
            log.warning("trace broker %s (%s) unavailable while planning: %s", name, addr, exc)
            done = {q.queue_id for q in plan.queues if q.broker == name}
            for qid in range(qd.read_queue_nums):
                if qid not in done:
                    plan.missing.append(MissingRange(name, addr, qid, cursors.get(cursor_key(name, topic, qid))
                                                     if cursors else None, None, f"broker unavailable: {exc}"))
    return plan


# ---------------------------------------------------------------------------------- executor side


def missing_marker_row(m: MissingRange, width: int) -> tuple[Any, ...]:
    """A row of ``width`` columns standing for ``m``: all NULL but ``error`` (the last column)."""
    return (None,) * (width - 1) + (MISSING_PREFIX + json.dumps(m.to_json(), separators=(",", ":")),)


def parse_missing(error: str) -> MissingRange:
    d = json.loads(error[len(MISSING_PREFIX):])
    return MissingRange(**d)


def _born_ip(host: Any) -> str | None:
    if isinstance(host, tuple):
        return str(host[0])
    if isinstance(host, str):
        return host.rpartition(":")[0] or host
    return None


def pull_bodies(ch: BlockingChannel, chunk: Chunk, missing: list[MissingRange], *,
                batch: int = PULL_BATCH) -> Iterator[tuple[Any, ...]]:
    """Pull [chunk.start, chunk.end) on ``ch``: yields ``(broker, queue_id, queue_offset, store_time, body,
    compressed, born_ip)``; appends to ``missing`` what the broker no longer has and each record that cannot
    be decoded (an answer that breaks at a record is narrowed down to that record). Raises ChannelError."""
    offset = chunk.start
    alone = False  # the last answer broke at its first record: ask for that record alone
    while offset < chunk.end:
        asked_alone, alone = alone, False
        hdr = H.PullMessageRequestHeader(
            consumer_group=PULL_GROUP, topic=chunk.topic, queue_id=chunk.queue_id, queue_offset=offset,
            max_msg_nums=1 if asked_alone else min(batch, chunk.end - offset), sys_flag=_FLAG_SUBSCRIPTION,
            commit_offset=0, suspend_timeout_millis=0, sub_version=0, subscription="*")
        resp = ch.call(RemotingCommand.request(RequestCode.PULL_MESSAGE, hdr.to_ext()))
        code = resp.code
        nxt = int(resp.ext_fields.get("nextBeginOffset", offset))
        if code == ResponseCode.SUCCESS:
            # bodies stay as stored: trace bodies are inflated leniently by the decoder (TRACE.md §3)
            scan = scan_records(resp.body or b"")
            if ask_alone(scan, hdr.max_msg_nums):
                alone = True
                continue
            nxt, skipped = settle(scan, offset, nxt)
            last = offset - 1
            for m in scan.messages:
                if m.queue_offset >= chunk.end:
                    break
                if m.queue_offset < offset:
                    continue
                last = m.queue_offset
                yield (chunk.broker, chunk.queue_id, m.queue_offset, m.store_timestamp, m.body,
                       bool(m.sys_flag & SF.COMPRESSED), _born_ip(m.born_host))
            for sk in skipped:  # each record stepped over is named; bytes after the last record are not a record
                start = sk.queue_offset
                stop = start + 1 if start is not None else nxt
                if start is None:
                    start = scan.messages[-1].queue_offset + 1 if scan.messages else offset
                if start < stop:
                    missing.append(MissingRange(chunk.broker, chunk.addr, chunk.queue_id, start, stop,
                                                f"undecodable record: {sk.reason}"))
            offset = max(nxt, last + 1, offset + 1)
        elif code == ResponseCode.PULL_OFFSET_MOVED:
            if nxt > offset:
                missing.append(MissingRange(chunk.broker, chunk.addr, chunk.queue_id, offset, min(nxt, chunk.end),
                                            "offset moved: the broker no longer keeps these messages"))
                offset = nxt
            else:
                missing.append(MissingRange(chunk.broker, chunk.addr, chunk.queue_id, offset, chunk.end,
                                            f"offset moved backwards (next {nxt})"))
                return
        elif code == ResponseCode.PULL_RETRY_IMMEDIATELY:
            offset = max(nxt, offset + 1)
        elif code == ResponseCode.PULL_NOT_FOUND:
            if nxt > offset:  # a hole the broker skips over
                offset = nxt
                continue
            missing.append(MissingRange(chunk.broker, chunk.addr, chunk.queue_id, offset, chunk.end,
                                        "not found: the queue ends before the planned range"))
            return
        else:
            raise ChannelError(f"{chunk.addr}: PULL_MESSAGE answered {code} {resp.remark}")


def read_chunk(chunk: Chunk, *, timeout: float = 10.0, retries: int = 1) -> Iterator[tuple[Any, ...] | MissingRange]:
    """Every trace message of ``chunk`` (bodies as in ``pull_bodies``), then any ``MissingRange`` s.

    A failed connection or call is retried ``retries`` times from the first offset not yet read; after
    that the rest of the chunk is reported missing. Never raises for an unreachable broker.
    """
    missing: list[MissingRange] = []
    start = chunk.start
    attempt = 0
    while True:
        part = Chunk(chunk.broker, chunk.addr, chunk.topic, chunk.queue_id, start, chunk.end)
        try:
            with BlockingChannel(chunk.addr, timeout) as ch:
                for item in pull_bodies(ch, part, missing):
                    start = item[2] + 1
                    yield item
            break
        except ChannelError as exc:
            attempt += 1
            if attempt > retries:
                missing.append(MissingRange(chunk.broker, chunk.addr, chunk.queue_id, start, chunk.end,
                                            f"broker unavailable: {exc}"))
                break
            time.sleep(0.2 * attempt)
    yield from missing
