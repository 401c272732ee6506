"""GET_BROKER_RUNTIME_INFO (28) as RocketMQ 4.9.7 writes it: mqadmin brokerStatus, the dashboard and
exportMetrics read these keys and formats.

``BrokerStats.runtime_info`` gathers the figures; this module puts them in RocketMQ's keys and formats and adds
the store's own (StoreStatsService.getRuntimeInfo, DefaultMessageStore.getRuntimeInfo and
AdminBrokerProcessor.prepareRuntimeInfo):

- TPS windows (``putTps``, ``getFoundTps``, ``getMissTps``, ``getTransferedTps``): three figures over the last
  10, 60 and 600 one-second samples, each Java's ``Double.toString``, or empty while there are not that many
  samples yet; ``getTotalTps`` is found + miss, always three figures.
- ``putMessageDistributeTime``, ``putLatency99``, ``putLatency999``: the put durations of the last whole minute
  (RocketMQ's ranges and interpolated percentiles, ``%.2f``); ``putMessageEntireTimeMax`` and
  ``getMessageEntireTimeMax`` the longest put and read since start, whole milliseconds. A put's duration here is
  the time it holds the put lock (under SYNC_FLUSH without the wait for its group commit).
- ``putMessageTimesTotal`` is at least 1 and ``putMessageAverageSize`` is bytes over it, as RocketMQ computes
  them; ``putMessageFailedTimes`` counts refused puts.
- ``commitLogDiskRatio`` (and ``commitLogDiskRatio_<dir>`` per commit-log directory) and
  ``consumeQueueDiskRatio`` are the used fractions of their partitions (RocketMQ rounds up to a percent);
  ``commitLogMinOffset`` is -1 while the commit log has no segment.
- ``dispatchMaxBuffer`` is 0: RocketMQ 4.9.7 never sets it, and records here are dispatched as appended.
- ``remainTransientStoreBufferNumbs`` is Integer.MAX_VALUE, what RocketMQ answers without a transient store pool;
  ``remainHowManyDataToFlush`` and ``commitLogDirCapacity`` use MixAll.humanReadableByteCount.
- queue sizes, capacities and head waits are those of the worker groups serving each kind of request (pulls and
  END_TRANSACTION's are answered on the event loop or in the default group: see admin_config).
"""

from __future__ import annotations

import decimal
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mq.store.cleaner import disk_used_ratio
from mq.store.status import DISTRIBUTE_BOUNDS

if TYPE_CHECKING:  # pragma: no cover
    from mq.daemon.broker.controller import BrokerController

INT_MAX = 2**31 - 1
_DISTRIBUTE_NAMES = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
                     "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")
assert len(_DISTRIBUTE_NAMES) == len(DISTRIBUTE_BOUNDS) + 1


def java_double(x: float) -> str:
    """Java's ``Double.toString``: shortest digits, ``.0`` for whole numbers, ``E`` notation outside
    [1e-3, 1e7)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if "." in text else text + ".0"
    sign, digits, exponent = decimal.Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{exp}"


def human_bytes(n: int) -> str:
    """MixAll.humanReadableByteCount(bytes, false): ``512 B``, ``1.5 KiB``, ``252.0 GiB``."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _window(samples: list[tuple[float, int]], n: int) -> str:
    """CallSnapshot.getTPS between the last sample and the one ``n`` before it; "" when there is none yet."""
    if len(samples) <= n:
        return ""
    (t0, c0), (t1, c1) = samples[-(n + 1)], samples[-1]
    ms = (t1 - t0) * 1000.0
    return java_double((c1 - c0) / ms * 1000.0 if ms > 0 else 0.0)


def _tps_text(samples: list[tuple[float, int]]) -> str:
    return " ".join(_window(samples, n) for n in (10, 60, 600))


def _total_tps(found: list[tuple[float, int]], miss: list[tuple[float, int]]) -> str:
    out = []
    for n in (10, 60, 600):
        total = 0.0
        for s in (found, miss):
            w = _window(s, n)
            total += float(w) if w else 0.0
        out.append(java_double(total))
    return " ".join(out)


def _ratio(path: Path) -> str:
    """The used fraction of ``path``'s partition (RocketMQ creates the directories at start; a directory this
    broker has not created yet is measured on the partition that will hold it)."""
    return java_double(disk_used_ratio(path))


def _head_wait_ms(group: object | None, now: float) -> str:
    arrived = getattr(group, "oldest_arrival", None)
    return str(int((now - arrived) * 1000)) if arrived is not None else "0"


def rocketmq_runtime_table(c: "BrokerController", base: dict[str, str]) -> dict[str, str]:
    """``base`` (``BrokerStats.runtime_info``) with RocketMQ 4.9.7's keys and formats."""
    out = dict(base)
    store = c.store
    scfg = c.store_config
    groups = c.server.registry.groups
    default = groups.get("default")
    now = time.monotonic()
    out.update({
        "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueCapacity": "0",  # pulls are never queued
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "EndTransactionQueueSize": str(default.queued if default else 0),
        "EndTransactionThreadPoolQueueCapacity": str(default.limits.queue_capacity if default else 0),
        "sendThreadPoolQueueHeadWaitTimeMills": _head_wait_ms(groups.get("send"), now),
        "queryThreadPoolQueueHeadWaitTimeMills": _head_wait_ms(groups.get("query"), now),
        "remainTransientStoreBufferNumbs": str(INT_MAX),
    })
    if store is None:
        return out
    st = store.stats
    samples = list(st.samples)
    misses = list(st.miss_samples)
    found = [(s[0], s[2]) for s in samples]
    miss = [(s[0], m) for s, m in zip(samples[-len(misses):], misses)] if misses else []
    puts_total = max(1, st.put_count)
    put_window = st.last_latency
    puts_now = st.last_latency_puts
    out.update({
        "putTps": _tps_text([(s[0], s[1]) for s in samples]),
        "getFoundTps": _tps_text(found),
        "getMissTps": _tps_text(miss),
        "getTransferedTps": _tps_text([(s[0], s[3]) for s in samples]),
        "getTotalTps": _total_tps(found, miss),
        "putMessageTimesTotal": str(puts_total),
        "putMessageSizeTotal": str(st.put_bytes),
        "putMessageAverageSize": java_double(st.put_bytes / puts_total),
        "putMessageFailedTimes": str(st.put_failures),
        "putMessageEntireTimeMax": str(int(st.put_time_max * 1000)),
        "getMessageEntireTimeMax": str(int(st.get_time_max * 1000)),
        "dispatchMaxBuffer": "0",
        "putMessageDistributeTime": "null" if put_window is None else "".join(
            f"{name}:{count} " for name, count in zip(_DISTRIBUTE_NAMES, put_window.distribution(puts_now))),
        "putLatency99": f"{put_window.percentile(puts_now, 0.99) if put_window else 0.0:.2f}",
        "putLatency999": f"{put_window.percentile(puts_now, 0.999) if put_window else 0.0:.2f}",
        "pageCacheLockTimeMills": str(int((now - store._begin_in_lock) * 1000)) if store._begin_in_lock else "0",
    })
    cl = store.commit_log
    out["commitLogMinOffset"] = str(cl.min_offset) if cl.queue.files else "-1"
    out["commitLogMaxOffset"] = str(cl.max_offset)
    out["remainHowManyDataToFlush"] = human_bytes(max(0, cl.max_offset - cl.queue.flushed_where))
    root = Path(scfg.store_path_root_dir)
    dirs = [Path(p.strip()) for p in scfg.store_path_commit_log.split(",") if p.strip()] \
        if scfg.store_path_commit_log else [root / "commitlog"]
    ratios = []
    for d in dirs:
        out[f"commitLogDiskRatio_{d}"] = _ratio(d)
        ratios.append(float(out[f"commitLogDiskRatio_{d}"]))
    out["commitLogDiskRatio"] = java_double(min(ratios))
    out["consumeQueueDiskRatio"] = _ratio(root / "consumequeue")
    try:
        vfs = os.statvfs(root)  # File.getTotalSpace / getUsableSpace
        total, free = vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
        out["commitLogDirCapacity"] = f"Total : {human_bytes(total)}, Free : {human_bytes(free)}."
    except OSError:
        out.pop("commitLogDirCapacity", None)  # RocketMQ leaves it out when the directory does not exist
    return out
