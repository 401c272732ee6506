"""``process_*``: the daemon process's CPU, memory, start time and file descriptors, as Prometheus clients name them.

prometheus_client's ``ProcessCollector`` counts the open descriptors by listing ``/proc/self/fd``: a broker with
thousands of topics holds a descriptor per consume-queue segment, and the listing (4,000 entries: about 5 ms, and
an object per entry) became a fifth of a large broker's scrape. Linux 6.2 and later give the count as the size of
that directory (one ``stat``), which is used when the kernel reports it; older kernels are listed, at most once
per ``FD_LIST_INTERVAL`` seconds. The other values come from psutil in one pass. Names, help and types are those
of prometheus_client's collector, so dashboards built on them work unchanged.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Callable, Iterable

import psutil
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

#: how often an old kernel's descriptor directory is listed (the count is reused in between)
FD_LIST_INTERVAL = 10.0
_FD_DIR = "/proc/self/fd"


class FdCounter:
    """The number of open descriptors of this process, as cheaply as the kernel allows."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._listed_at = -FD_LIST_INTERVAL
        self._count = 0

    def __call__(self) -> int:
        size = os.stat(_FD_DIR).st_size  # the count itself on Linux 6.2+, 0 before
        if size > 0:
            return size
        now = self._clock()
        if now - self._listed_at >= FD_LIST_INTERVAL:
            self._count = len(os.listdir(_FD_DIR)) - 1  # less the descriptor the listing itself opened
            self._listed_at = now
        return self._count


class ProcessMetrics:
    """A collector of the ``process_*`` families for this process (empty where ``/proc`` is missing)."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._fds = FdCounter() if os.path.isdir(_FD_DIR) else None

    def collect(self) -> Iterable[Metric]:
        try:
            with self._proc.oneshot():
                mem = self._proc.memory_info()
                cpu = self._proc.cpu_times()
                started = self._proc.create_time()
        except psutil.Error:
            return []
        out: list[Metric] = [
            GaugeMetricFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", value=mem.vms),
            GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.", value=mem.rss),
            GaugeMetricFamily("process_start_time_seconds",
                              "Start time of the process since unix epoch in seconds.", value=started),
            CounterMetricFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                                value=cpu.user + cpu.system),
        ]
        if self._fds is not None:
            try:
                out.append(GaugeMetricFamily("process_open_fds", "Number of open file descriptors.",
                                             value=self._fds()))
            except OSError:
                pass
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY:
            out.append(GaugeMetricFamily("process_max_fds", "Maximum number of open file descriptors.", value=soft))
        return out


__all__ = ["FD_LIST_INTERVAL", "FdCounter", "ProcessMetrics"]
