"""Latency and throughput bookkeeping for the CLI's ``--count`` summaries and the benchmarks."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 when empty)."""
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


@dataclass
class Stats:
    started: float = field(default_factory=time.monotonic)
    latencies_ms: list[float] = field(default_factory=list)
    ok: int = 0
    bytes: int = 0
    failures: Counter = field(default_factory=Counter)

    def record(self, latency_ms: float, nbytes: int = 0) -> None:
        self.ok += 1
        self.bytes += nbytes
        self.latencies_ms.append(latency_ms)

    def fail(self, cause: str) -> None:
        self.failures[cause] += 1

    def summary(self) -> dict:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        lat = sorted(self.latencies_ms)
        return {
            "ok": self.ok, "failed": sum(self.failures.values()), "elapsed_s": round(elapsed, 3),
            "per_second": round(self.ok / elapsed, 1), "mib_per_second": round(self.bytes / elapsed / 1048576, 2),
            "p50_ms": round(percentile(lat, 50), 3), "p99_ms": round(percentile(lat, 99), 3),
            "max_ms": round(lat[-1], 3) if lat else 0.0, "failures": dict(self.failures),
        }


def cause_of(exc: BaseException) -> str:
    """A short failure cause for grouping: the exception class and the start of its message."""
    text = str(exc).split(" (after ", 1)[0]
    return f"{type(exc).__name__}: {text[:80]}"
