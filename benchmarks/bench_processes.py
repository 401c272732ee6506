"""The processes a side-by-side benchmark watches: RocketMQ's benchmark tools, each in its own JVM with its
output collected, and a process's CPU time (all of it, and its busiest thread's), peak RSS and TCP segments sent
(``vs_rocketmq.py``)."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time

import psutil


def cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def thread_times(p: psutil.Process) -> dict[int, tuple[float, float]]:
    """User and system CPU seconds of each of ``p``'s threads, by thread id."""
    return {t.id: (t.user_time, t.system_time) for t in p.threads()}


def busiest_thread(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]]
                   ) -> tuple[float, float]:
    """(user, system) CPU seconds between two ``thread_times`` of the thread that used the most; a thread
    started in between counts from zero."""
    best = (0.0, 0.0)
    for tid, (u1, s1) in after.items():
        u0, s0 = before.get(tid, (0.0, 0.0))
        d = (u1 - u0, s1 - s0)
        if d[0] + d[1] > best[0] + best[1]:
            best = d
    return best


class JavaTool:
    """One of RocketMQ's benchmark programs in its own JVM; its stdout lines are collected by a thread."""

    def __init__(self, classpath: str, main: str, args: list[str]) -> None:
        self.proc = subprocess.Popen(["java", "-cp", classpath, f"org.apache.rocketmq.example.benchmark.{main}",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line.rstrip()))

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                _, line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise SystemExit(f"{self.proc.args[3]} exited ({self.proc.returncode}) before printing {text!r}")
                continue
            if text in line:
                return
        raise SystemExit(f"{self.proc.args[3]} did not print {text!r} within {timeout:.0f} s")

    def drain_lines(self) -> list[tuple[float, str]]:
        out = []
        while True:
            try:
                out.append(self.lines.get_nowait())
            except queue.Empty:
                return out

    def cpu(self) -> float:
        try:
            return cpu_s(psutil.Process(self.proc.pid))
        except psutil.Error:
            return 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class RssSampler:
    """The broker's peak RSS, sampled every ``period`` seconds in a thread; the peak without the pages of the
    store's mapped files (commit log, consume queues, index) is sampled every ``maps_every``-th time."""

    def __init__(self, proc: psutil.Process, period: float = 0.5, maps_every: int = 10) -> None:
        self.proc = proc
        self.peak = 0
        self.peak_own = 0
        self._period = period
        self._maps_every = maps_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def own(self) -> int:
        rss = self.proc.memory_info().rss
        mapped = sum(m.rss for m in self.proc.memory_maps(grouped=True) if "/store/" in m.path)
        return rss - mapped

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
                if i % self._maps_every == 0:
                    self.peak_own = max(self.peak_own, self.own())
            except psutil.Error:
                return
            i += 1
            self._stop.wait(self._period)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self.peak_own = max(self.peak_own, self.own())
        except psutil.Error:
            pass


_SEGS_OUT = re.compile(r"\bdata_segs_out:(\d+)")


def data_segments_out(pid: int) -> int | None:
    """TCP segments with data that process ``pid`` has sent over its established connections (``ss -tinp``):
    the Consumer writes each PULL as it is issued, so this counts its requests (and its few heartbeats); None
    when ``ss`` cannot be run."""
    try:
        out = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True, text=True,
                             timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    total, mine = 0, False
    for line in out.splitlines():
        if not line[:1].isspace():  # a socket's line; its counters follow on the next, indented
            mine = f"pid={pid}," in line
        elif mine:
            m = _SEGS_OUT.search(line)
            total += int(m.group(1)) if m else 0
    return total
