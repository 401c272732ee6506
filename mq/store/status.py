"""Outcomes of store calls (RocketMQ ``PutMessageStatus``, ``GetMessageStatus``) and their result objects.

Expected outcomes are statuses, never exceptions."""

from __future__ import annotations

import enum
import itertools
import time
from collections import deque
from dataclasses import dataclass, field

from mq.common.msg_id import create_offset_msg_id_raw
from mq.errors import MQError


class ReplicaOffsetError(MQError):
    """``append_replica`` was called with an offset that is not this store's max physical offset (the master
    and the slave disagree on where the slave's log ends: the replication connection must start over)."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(f"replica data at offset {got}, but this store's commit log ends at {expected}")
        self.expected = expected
        self.got = got


class PutMessageStatus(enum.Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPPED_FILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9

    @property
    def stored(self) -> bool:
        """True when the message is in the commit log (RocketMQ answers "send OK" with a non-zero code)."""
        return self in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                        PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE)


class GetMessageStatus(enum.Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


@dataclass(slots=True)
class PutMessageResult:
    """Result of a put. For a batch, ``msg_ids`` has one offsetMsgId per message and ``queue_offset`` is the
    first message's; ``wrote_offset`` is the physical offset of the first record, ``wrote_bytes`` the total."""

    status: PutMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    queue_offset: int = 0
    #: physical offset of each stored record (one per message)
    phy_offsets: list[int] = field(default_factory=list)
    store_timestamp: int = 0
    msg_num: int = 0
    remark: str = ""
    #: packed STOREHOST (8 or 20 bytes), for the offsetMsgIds
    store_host: bytes = b""
    #: the topic the records were stored under: SCHEDULE_TOPIC_XXXX for a delayed message, else the message's
    #: own (what RocketMQ's broker statistics count a put under); empty when nothing was stored
    topic: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def msg_ids(self) -> list[str]:
        """offsetMsgId of each stored message (computed on demand)."""
        h = self.store_host
        return [create_offset_msg_id_raw(h, p) for p in self.phy_offsets] if h else []

    @property
    def msg_id(self) -> str:
        """The offsetMsgIds joined by commas (one for a single message, the send path's case)."""
        offs = self.phy_offsets
        if len(offs) == 1 and self.store_host:
            return create_offset_msg_id_raw(self.store_host, offs[0])
        return ",".join(self.msg_ids)


@dataclass(slots=True)
class GetMessageResult:
    """Result of ``get_message``: ``buffers`` are the raw stored records, ready to be sent as a PULL body.

    ``buffers`` holds one ``bytes`` per record, or per run of records adjacent in the commit log when asked
    for ``runs`` (``MessageStore.get_message``)."""

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    buffers: list[bytes] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0
    queue_offsets: list[int] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False

    @property
    def body(self) -> bytes:
        """All records concatenated."""
        return self.buffers[0] if len(self.buffers) == 1 else b"".join(self.buffers)


@dataclass(frozen=True, slots=True)
class QueryMessageResult:
    """Result of ``query_message``: raw records (each re-checked for topic and key)."""

    buffers: list[bytes]
    phy_offsets: list[int]
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    @property
    def body(self) -> bytes:
        return b"".join(self.buffers)


#: RocketMQ StoreStatsService's put-latency buckets: (step ms, how many) -> upper bounds 1..20, 22..50, 55..100,
#: 110..200, 250..500, 600..1000, 2000..10000, then everything beyond
_PX_STEPS = ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9))
PUT_LATENCY_BOUNDS: tuple[int, ...] = tuple(
    itertools.accumulate(step for step, n in _PX_STEPS for _ in range(n))) + (2**63 - 1,)
#: RocketMQ's putMessageDistributeTime ranges (upper bounds in ms, exclusive; the first is "<= 0 ms")
DISTRIBUTE_BOUNDS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
LATENCY_WINDOW_S = 60.0


class PutLatency:
    """One window of put durations, as RocketMQ's StoreStatsService keeps them (rolled every minute). Only puts
    of 1 ms or more are recorded one by one; the shorter ones, nearly all, are the window's puts minus those."""

    __slots__ = ("started", "puts_at_start", "slow")

    def __init__(self, started: float, puts_at_start: int) -> None:
        self.started = started
        self.puts_at_start = puts_at_start
        #: whole milliseconds of each put of 1 ms or more
        self.slow: list[int] = []

    def distribution(self, puts: int) -> list[int]:
        """Counts per putMessageDistributeTime range: [<=0ms], [0~10ms], ..., [10s~]."""
        counts = [0] * (len(DISTRIBUTE_BOUNDS) + 1)
        counts[0] = max(0, puts - self.puts_at_start - len(self.slow))
        for ms in self.slow:
            counts[next((i for i, b in enumerate(DISTRIBUTE_BOUNDS) if ms < b), len(DISTRIBUTE_BOUNDS))] += 1
        return counts

    def percentile(self, puts: int, px: float) -> float:
        """RocketMQ ``findPutMessageEntireTimePX``: linear interpolation inside the latency bucket holding the
        ``px`` quantile."""
        counts = [0] * len(PUT_LATENCY_BOUNDS)
        counts[0] = max(0, puts - self.puts_at_start - len(self.slow))  # under 1 ms: the first bucket (<= 1)
        for ms in self.slow:
            counts[next(i for i, b in enumerate(PUT_LATENCY_BOUNDS) if ms <= b)] += 1
        index = int(sum(counts) * px)
        passed = 0
        for i, count in enumerate(counts):
            if index <= passed + count:
                rel = index - passed
                if i == 0:
                    return 0.0 if count == 0 else PUT_LATENCY_BOUNDS[0] * rel / count
                low = PUT_LATENCY_BOUNDS[i - 1]
                return low + (0.0 if count == 0 else (PUT_LATENCY_BOUNDS[i] - low) * rel / count)
            passed += count
        return 0.0


class StoreStats:
    """Counters plus one sample per second for TPS windows (10 s, 60 s, 600 s)."""

    def __init__(self) -> None:
        self.put_count = 0
        self.put_bytes = 0
        self.put_failures = 0
        self.get_found = 0
        self.get_miss = 0
        self.get_transferred = 0
        #: records and bytes appended from a master (``MessageStore.append_replica``)
        self.replica_count = 0
        self.replica_bytes = 0
        self.samples: deque[tuple[float, int, int, int]] = deque(maxlen=601)
        #: get-miss counts sampled with ``samples`` (RocketMQ's getMissTps)
        self.miss_samples: deque[int] = deque(maxlen=601)
        #: longest put and longest read of a queue since start, seconds (putMessageEntireTimeMax,
        #: getMessageEntireTimeMax)
        self.put_time_max = 0.0
        self.get_time_max = 0.0
        #: put durations of the current minute, and of the last whole one (what brokerStatus shows)
        self.latency = PutLatency(time.monotonic(), 0)
        self.last_latency: PutLatency | None = None
        self.last_latency_puts = 0

    def sample(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.samples.append((now, self.put_count, self.get_found, self.get_transferred))
        self.miss_samples.append(self.get_miss)
        if now - self.latency.started >= LATENCY_WINDOW_S:
            puts = self.put_count + self.put_failures
            self.last_latency, self.last_latency_puts = self.latency, puts
            self.latency = PutLatency(now, puts)

    def slow_put(self, seconds: float) -> None:
        """A put that held the put lock for ``seconds`` >= 1 ms."""
        self.latency.slow.append(int(seconds * 1000))
        if seconds > self.put_time_max:
            self.put_time_max = seconds

    def tps(self, window_s: int) -> dict[str, float]:
        s = list(self.samples)
        if len(s) < 2:
            return {"put": 0.0, "get_found": 0.0, "get_transferred": 0.0}
        last = s[-1]
        first = next((x for x in s if last[0] - x[0] <= window_s), s[0])
        dt = max(last[0] - first[0], 1e-9)
        return {"put": (last[1] - first[1]) / dt, "get_found": (last[2] - first[2]) / dt,
                "get_transferred": (last[3] - first[3]) / dt}
