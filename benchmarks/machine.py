"""What the machine gave a benchmark run: the CPU time the hypervisor took away (steal), read from /proc/stat.

This project's machines are shared VMs. Steal time is the share of the guest's CPU time that the hypervisor spent
on other guests while ours wanted to run; it was measured at 24 % on average (43 % at peak) during one
end-to-end run, and 1-8 % with the machine idle. A run with much steal time reports lower rates and longer
tails for the same code, so every benchmark prints the steal share of its own window next to its figures.

    with CpuWindow() as w:
        ...  # the measured run
    print(w.summary())
"""

from __future__ import annotations

import os
import timeit

#: /proc/stat "cpu" fields: user nice system idle iowait irq softirq steal (guest time is inside user)
_FIELDS = 8


def _read() -> tuple[int, ...] | None:
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
    except OSError:
        return None
    if not parts or parts[0] != "cpu" or len(parts) < 1 + _FIELDS:
        return None
    return tuple(int(x) for x in parts[1:1 + _FIELDS])


class CpuWindow:
    """CPU accounting of the whole machine between ``__enter__`` and ``__exit__`` (or ``stop``)."""

    def __init__(self) -> None:
        self._start: tuple[int, ...] | None = None
        self._end: tuple[int, ...] | None = None

    def __enter__(self) -> "CpuWindow":
        self._start = _read()
        self._end = None
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._end is None:
            self._end = _read()

    def _share(self, *idx: int) -> float | None:
        end = self._end or _read()
        if self._start is None or end is None:
            return None
        delta = [b - a for a, b in zip(self._start, end)]
        total = sum(delta)
        return 100.0 * sum(delta[i] for i in idx) / total if total > 0 else None

    @property
    def steal_pct(self) -> float | None:
        """Percent of the machine's CPU time stolen by the hypervisor (None where /proc/stat is missing)."""
        return self._share(7)

    @property
    def busy_pct(self) -> float | None:
        """Percent of the machine's CPU time spent running (user, nice, system, irq, softirq)."""
        return self._share(0, 1, 2, 5, 6)

    def split(self) -> str:
        """``machine 84 % busy (user 41, system 35, softirq 6 %)``: where all the machine's CPUs' time went, in
        percent of it (system includes hard interrupts)."""
        busy = self.busy_pct
        if busy is None:
            return "machine busy ? (no /proc/stat)"
        user, system, softirq = self._share(0, 1), self._share(2, 5), self._share(6)
        return f"machine {busy:.0f} % busy (user {user:.0f}, system {system:.0f}, softirq {softirq:.0f} %)"

    def short(self) -> str:
        """``steal 12 %``: for the end of a figure's line."""
        steal = self.steal_pct
        return "steal ?" if steal is None else f"steal {steal:.0f} %"

    def summary(self) -> str:
        steal, busy = self.steal_pct, self.busy_pct
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        if steal is None or busy is None:
            return f"machine: load average {load} (no /proc/stat: steal time unknown)"
        return (f"machine during the run: CPU steal {steal:.1f} % (taken by the hypervisor), busy {busy:.1f} % "
                f"of {os.cpu_count()} CPUs, load average {load}")


class _Ref:
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: int) -> None:
        self.a = a
        self.b = b


def _ref_op(x: int) -> int:
    r = _Ref(x, x + 1)
    return r.a + r.b


def python_speed() -> float:
    """Nanoseconds per call of a fixed small Python function (an object built, two attributes read): the
    best of five rounds. This VM's CPU speed drifts by a quarter over hours with no steal reported; a put
    path's user time per message moves with this figure, so runs printed with it can be compared."""
    n = 200_000
    return min(timeit.repeat(lambda: _ref_op(7), number=n, repeat=5)) / n * 1e9
