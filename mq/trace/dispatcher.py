"""``AsyncTraceDispatcher``: buffers trace contexts and ships them as trace messages (TRACE.md §5).

Flow (one dispatcher per traced client; everything runs on the client's event loop)::

    hook --append(ctx)--> context queue (bounded, ``queue_size`` contexts, non-blocking)
                              |  worker: every ``poll_interval`` (or at once when half full)
                              v
                          segment: encoded records + their index keys
                              |  cut when the next record would make the body > ``max_body_bytes``
                              |  or the KEYS property > ``max_keys_bytes``; sent when its first
                              |  record is ``max_batch_age`` old
                              v
                          send backlog (bounded, ``max_pending_batches``) -> ``max_inflight`` concurrent
                          sends by the dedicated trace producer to the trace topic

A trace message::

    +------------+----------------------------------------------------------------+
    | topic      | RMQ_SYS_TRACE_TOPIC (or the customized trace topic)             |
    | KEYS       | traced msgIds + their message keys, de-duplicated, space-joined |
    | body       | records ("\\x01"-separated fields, each ended by "\\x02"),       |
    |            | UTF-8, <= 128,000 bytes; zlib-compressed by the producer when   |
    |            | >= 4 KiB (sysflag 0x1)                                          |
    +------------+----------------------------------------------------------------+

Unlike Java (which only logs ``buffer full<n>`` and silently loses failed batches), no record is lost
without being counted: every record offered is, at any time, exactly one of sent, dropped (by reason, see
``DropReason``) or pending, and ``stats()`` reports the three. Drops are logged at most once per
``drop_log_interval`` with their reasons. ``shutdown`` sends everything still buffered and waits at most
``shutdown_timeout`` for it; what has not been stored by then is counted as ``shutdown_timeout``.

Counts are in *records* (one per traced message per event: a SubBefore of a 32-message batch is 32).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import itertools
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from mq.common import properties as P
from mq.common.message import Message
from mq.config import ClientConfig, ProducerConfig
from mq.trace.context import RMQ_SYS_TRACE_TOPIC, TRACE_GROUP_NAME_PREFIX, TraceContext
from mq.trace.encoder import KEY_SEPARATOR, encode_context, trans_keys

log = logging.getLogger(__name__)

#: Instance name prefix of the trace producers' client (Java ``PID_CLIENT_INNER_TRACE_PRODUCER``).
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
#: Java 4.9 ``maxMsgSize``: the largest trace message body.
MAX_TRACE_BODY = 128_000
#: A stored message's properties are at most 32,767 bytes (a 2-byte length); KEYS must leave room for others.
MAX_TRACE_KEYS = 30_000

_COUNTER = itertools.count(1)
_COUNTER_LOCK = threading.Lock()

#: ``sender(message) -> result``: how a trace message is sent (default: the dedicated trace producer).
Sender = Callable[[Message], Awaitable[Any]]


class DropReason(str, enum.Enum):
    """Why a trace record was not stored."""

    QUEUE_FULL = "queue_full"  # the context queue was full when the hook appended
    OVERSIZE = "oversize"  # one context encodes to more than max_body_bytes (or its keys to max_keys_bytes)
    BACKLOG_FULL = "backlog_full"  # too many trace messages were already waiting to be sent
    SEND_FAILED = "send_failed"  # the trace producer's send raised (timeout, broker refused, no route...)
    ENCODE_ERROR = "encode_error"  # the context could not be encoded (a bug in a hook)
    AFTER_SHUTDOWN = "after_shutdown"  # appended after shutdown() began
    NOT_STARTED = "not_started"  # still queued at shutdown of a dispatcher that never started (start failed)
    SHUTDOWN_TIMEOUT = "shutdown_timeout"  # still unsent when shutdown's bounded wait ended


@dataclass(frozen=True, slots=True)
class DispatcherOptions:
    """Tuning of one dispatcher; defaults follow RocketMQ 4.9.4 where it has an equivalent."""

    queue_size: int = 1024  # traceContextQueue
    max_body_bytes: int = MAX_TRACE_BODY
    max_keys_bytes: int = MAX_TRACE_KEYS
    poll_interval: float = 0.1  # pollingTimeMil
    max_batch_age: float = 0.5  # waitTimeThresholdMil
    max_inflight: int = 8  # concurrent trace sends
    max_pending_batches: int = 256  # trace messages waiting for a send slot (Java's appenderQueue)
    send_timeout: float = 5.0  # the trace producer's sendMsgTimeout
    shutdown_timeout: float = 3.0
    drop_log_interval: float = 10.0


@dataclass(slots=True)
class _Segment:
    parts: list[str]  # encoded records; ``size`` counts their UTF-8 bytes
    keys: dict[str, None]
    size: int = 0
    keys_size: int = 0
    records: int = 0
    first: float = 0.0


def trace_group_name(group: str, kind: str) -> str:
    """``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`` with a process-wide counter (as Java)."""
    with _COUNTER_LOCK:
        n = next(_COUNTER)
    return f"{TRACE_GROUP_NAME_PREFIX}-{group}-{kind}-{n}"


class AsyncTraceDispatcher:
    """Ship trace contexts of one client. ``append`` never blocks; ``start``/``shutdown`` bracket its life.

    ``sender`` replaces the trace producer (tests, or sending through an existing producer); without it the
    dispatcher creates its own ``Producer`` (group ``trace_group_name(group, kind)``, its own client instance
    named after the name server) at ``start``.
    """

    def __init__(self, group: str, kind: str = "PRODUCE", *, client_config: ClientConfig | None = None,
                 trace_topic: str | None = None, options: DispatcherOptions | None = None,
                 sender: Sender | None = None) -> None:
        if kind not in ("PRODUCE", "CONSUME"):
            raise ValueError(f"kind must be PRODUCE or CONSUME, got {kind!r}")
        self.group = group
        self.kind = kind
        self.trace_topic = trace_topic.strip() if trace_topic and trace_topic.strip() else RMQ_SYS_TRACE_TOPIC
        self.options = options or DispatcherOptions()
        self.client_config = client_config or ClientConfig()
        self.producer_group = trace_group_name(group, kind)
        self._sender = sender
        self._producer: Any = None
        self._queue: collections.deque[TraceContext] = collections.deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._sends: set[asyncio.Task] = set()
        self._slots: asyncio.Semaphore | None = None
        self._segment = self._new_segment()
        self._started = False
        self._start_task: asyncio.Task | None = None
        self._closing = False
        self._closed = False
        # counters (records)
        self._offered = 0
        self._queued = 0
        self._in_segment = 0
        self._in_flight = 0
        self._sent = 0
        self._messages_sent = 0
        self._bytes_sent = 0
        self._dropped: collections.Counter[str] = collections.Counter()
        self._unlogged: collections.Counter[str] = collections.Counter()
        self._last_error = ""
        self._last_log = time.monotonic()

    # -- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> "AsyncTraceDispatcher":
        """Start the trace producer (unless a ``sender`` was given) and the worker. Idempotent."""
        if self._started or self._closing:
            return self
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(max(1, self.options.max_inflight))
        if self._sender is None:
            from mq.client.producer import Producer

            ns = re.sub(r"[^0-9A-Za-z_.-]", "_", self.client_config.namesrv_addr)
            cc = dataclasses.replace(self.client_config, instance_name=f"{TRACE_INSTANCE_NAME}_{ns}")
            pc = ProducerConfig(group=self.producer_group, send_msg_timeout=self.options.send_timeout,
                                max_message_size=max(self.options.max_body_bytes, MAX_TRACE_BODY))
            producer = Producer(pc, cc)
            try:
                await producer.start()
            except BaseException:
                self._started = False
                raise
            self._producer = producer
            self._sender = producer.send
        self._worker = self._loop.create_task(self._run(), name=f"trace-dispatcher-{self.producer_group}")
        return self

    @property
    def started(self) -> bool:
        return self._started

    def ensure_started(self) -> None:
        """Start in the background on the running loop if nobody did (a hook calls this; never raises)."""
        if self._started or self._closing or self._start_task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._start_task = loop.create_task(self._start_quietly())

    async def _start_quietly(self) -> None:
        try:
            await self.start()
        except Exception as exc:
            log.warning("trace dispatcher %s cannot start (records queue up, then drop as queue_full): %s",
                        self.producer_group, exc)

    async def flush(self, timeout: float | None = None) -> bool:
        """Send everything buffered now, whatever its age, and wait (bounded) until it is stored or dropped.
        True when nothing is pending any more."""
        timeout = self.options.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        self._drain_queue()
        self._submit_segment()
        while self._sends and time.monotonic() < deadline:
            await asyncio.wait(set(self._sends), timeout=max(0.0, deadline - time.monotonic()))
            self._drain_queue()
            self._submit_segment()
        return self.pending() == 0

    async def shutdown(self, timeout: float | None = None) -> dict[str, Any]:
        """Stop accepting, flush with a bounded wait, count what is left as ``shutdown_timeout``, stop the trace
        producer. Returns the final ``stats()``."""
        if self._closed:
            return self.stats()
        self._closing = True
        if self._start_task is not None and not self._start_task.done():
            await asyncio.wait({self._start_task}, timeout=self.options.shutdown_timeout)
        if self._started:
            if self._worker is not None:
                assert self._wake is not None
                self._wake.set()  # the worker sees _closing and returns
                done, _ = await asyncio.wait({self._worker}, timeout=1.0)
                if not done:
                    self._worker.cancel()
                    await asyncio.wait({self._worker}, timeout=1.0)
            await self.flush(timeout)
            for task in list(self._sends):
                task.cancel()
            if self._sends:
                await asyncio.gather(*self._sends, return_exceptions=True)
        with self._lock:  # never started, or appended while we flushed
            left = list(self._queue)
            self._queue.clear()
            self._queued = 0
        reason = DropReason.SHUTDOWN_TIMEOUT if self._started else DropReason.NOT_STARTED
        for ctx in left:
            self._drop(reason, len(ctx.beans))
        if self._segment.records:
            self._drop(reason, self._segment.records)
            self._in_segment = 0
            self._segment = self._new_segment()
        self._closed = True
        self._log_drops(force=True)
        if self._producer is not None:
            try:
                await self._producer.shutdown()
            except Exception as exc:  # the host is shutting down too; say it, don't fail its shutdown
                log.warning("trace producer %s shutdown failed: %s", self.producer_group, exc)
            self._producer = None
        return self.stats()

    # -- the hooks' side --------------------------------------------------------------------------------
    def append(self, ctx: TraceContext) -> bool:
        """Queue one context (never blocks). False (and counted) when it was dropped."""
        n = len(ctx.beans)
        if n == 0:
            return False
        with self._lock:
            self._offered += n
            if self._closing:
                reason: DropReason | None = DropReason.AFTER_SHUTDOWN
            elif len(self._queue) >= self.options.queue_size:
                reason = DropReason.QUEUE_FULL
            else:
                reason = None
                self._queue.append(ctx)
                self._queued += n
                half = len(self._queue) >= self.options.queue_size // 2
        if reason is not None:
            self._drop(reason, n)
            return False
        if half:
            self._kick()
        return True

    def _kick(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            wake.set()
        else:
            loop.call_soon_threadsafe(wake.set)

    # -- accounting -------------------------------------------------------------------------------------
    def _drop(self, reason: DropReason, records: int, error: str = "") -> None:
        with self._lock:
            self._dropped[reason.value] += records
            self._unlogged[reason.value] += records
            if error:
                self._last_error = error

    def pending(self) -> int:
        """Records accepted but neither stored nor dropped yet."""
        return self._queued + self._in_segment + self._in_flight

    def stats(self) -> dict[str, Any]:
        """Counters, in records. Invariant: ``offered == sent + dropped + pending``."""
        with self._lock:
            dropped = dict(self._dropped)
            return {
                "traceTopic": self.trace_topic, "producerGroup": self.producer_group,
                "offered": self._offered, "sent": self._sent, "dropped": sum(dropped.values()),
                "droppedByReason": dropped, "pending": self._queued + self._in_segment + self._in_flight,
                "queued": self._queued, "messagesSent": self._messages_sent, "bytesSent": self._bytes_sent,
                "inflightSends": len(self._sends), "lastError": self._last_error,
            }

    def _log_drops(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_log < self.options.drop_log_interval:
            return
        with self._lock:
            unlogged = dict(self._unlogged)
            self._unlogged.clear()
            last_error = self._last_error
        elapsed = now - self._last_log
        self._last_log = now
        if unlogged:
            reasons = ", ".join(f"{k}={v}" for k, v in sorted(unlogged.items()))
            log.warning("trace dispatcher %s dropped %d trace record(s) in the last %.0f s (%s)%s",
                        self.producer_group, sum(unlogged.values()), elapsed, reasons,
                        f"; last send error: {last_error}" if last_error and "send_failed" in unlogged else "")

    # -- worker -----------------------------------------------------------------------------------------
    @staticmethod
    def _new_segment() -> _Segment:
        return _Segment(parts=[], keys={})

    async def _run(self) -> None:
        assert self._wake is not None
        opts = self.options
        while not self._closing:
            try:
                async with asyncio.timeout(opts.poll_interval):
                    await self._wake.wait()
            except TimeoutError:
                pass
            if self._closing:
                return
            self._wake.clear()
            try:
                self._drain_queue()
                seg = self._segment
                if seg.records and time.monotonic() - seg.first >= opts.max_batch_age:
                    self._submit_segment()
                self._log_drops()
            except Exception:  # never let the worker die: what it held is accounted for below
                log.exception("trace dispatcher %s worker step failed", self.producer_group)

    def _drain_queue(self) -> None:
        opts = self.options
        while True:
            with self._lock:
                if not self._queue:
                    return
                ctx = self._queue.popleft()
                n = len(ctx.beans)
                self._queued -= n
                self._in_segment += n
            try:
                text = encode_context(ctx)
                keys = trans_keys(ctx)
            except Exception as exc:
                log.error("trace dispatcher %s cannot encode %r: %s", self.producer_group, ctx, exc)
                self._in_segment -= n
                self._drop(DropReason.ENCODE_ERROR, n, str(exc))
                continue
            size = len(text) if text.isascii() else len(text.encode("utf-8"))
            key_sizes = {k: (len(k) if k.isascii() else len(k.encode("utf-8"))) + 1 for k in keys}
            if size > opts.max_body_bytes or sum(key_sizes.values()) > opts.max_keys_bytes:
                self._in_segment -= n
                self._drop(DropReason.OVERSIZE, n)
                continue
            seg = self._segment
            new_keys = [k for k in keys if k not in seg.keys]
            keys_size = sum(key_sizes[k] for k in new_keys)
            if seg.records and (seg.size + size > opts.max_body_bytes
                                or seg.keys_size + keys_size > opts.max_keys_bytes):
                self._in_segment -= n  # not part of the segment being submitted
                self._submit_segment()
                self._in_segment += n
                seg = self._segment
                new_keys, keys_size = keys, sum(key_sizes.values())
            if not seg.records:
                seg.first = time.monotonic()
            seg.parts.append(text)
            seg.size += size
            for k in new_keys:
                seg.keys[k] = None
            seg.keys_size += keys_size
            seg.records += n

    def _submit_segment(self) -> None:
        seg = self._segment
        if not seg.records:
            return
        self._segment = self._new_segment()
        self._in_segment -= seg.records
        if len(self._sends) >= self.options.max_inflight + self.options.max_pending_batches:
            self._drop(DropReason.BACKLOG_FULL, seg.records)
            return
        if self._loop is None:  # not started: nothing can send it
            self._drop(DropReason.SHUTDOWN_TIMEOUT, seg.records)
            return
        self._in_flight += seg.records
        task = self._loop.create_task(self._send(seg))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, seg: _Segment) -> None:
        assert self._slots is not None and self._sender is not None
        body = "".join(seg.parts).encode("utf-8")
        msg = Message(topic=self.trace_topic, body=body)
        msg.properties[P.KEYS] = KEY_SEPARATOR.join(seg.keys)
        outcome: tuple[DropReason, str] | None = None
        try:
            async with self._slots:
                async with asyncio.timeout(self.options.send_timeout + 1.0):
                    await self._sender(msg)
        except asyncio.CancelledError:
            outcome = (DropReason.SHUTDOWN_TIMEOUT, "")
            raise
        except Exception as exc:
            outcome = (DropReason.SEND_FAILED, f"{type(exc).__name__}: {exc}")
            log.debug("trace dispatcher %s: send of %d record(s) failed: %s", self.producer_group, seg.records, exc)
        finally:
            self._in_flight -= seg.records
            if outcome is None:
                with self._lock:
                    self._sent += seg.records
                    self._messages_sent += 1
                    self._bytes_sent += len(body)
            else:
                self._drop(outcome[0], seg.records, outcome[1])
