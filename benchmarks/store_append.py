"""Append throughput of 1 KB messages: ASYNC_FLUSH single and batches of 32, SYNC_FLUSH from 64 writers.

SYNC_FLUSH's 64 concurrent writers are measured two ways. ``sync64``: 64 threads, each blocking in
``put_message`` until its group commit completes (every message costs its thread a wake-up). ``sync64cb``: 64
writers with one put outstanding each, driven the way the broker drives the store: one thread issues the puts
with ``put_messages_nowait(msgs, callback)``, the flush thread calls back once the group commit covering a put is
on disk, and that writer's next put follows (the broker's 64 connections with one sync send in flight each).

Each line prints the wall-clock rate and the CPU cost per message (``time.process_time``: every thread of this
process, including the flush, index and warm-ahead threads, until the index has caught up), which is the figure
to compare on a shared, noisy machine. The ASYNC single line also shows the putting thread's own user and system
CPU per message (what the put path costs the caller; page faults show up as system time). The load average at
the start is printed too.

Usage: python benchmarks/store_append.py [--n 200000] [--dir DIR] [--no-index] [--warm-ahead BYTES]
                                        [--cases single,batch,sync64,sync64cb,syncasync]
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import resource
import shutil
import tempfile
import threading
import time

from machine import CpuWindow, python_speed
from store_common import make_messages, print_disk

from mq.config import StoreConfig
from mq.store.commit_log import C_WRITER
from mq.store.message_store import MessageStore
from mq.store.status import PutMessageStatus


WARM_AHEAD = StoreConfig().warm_ahead_bytes


def _store(root: str, mode: str, index: bool) -> MessageStore:
    s = MessageStore(StoreConfig(store_path_root_dir=root, flush_disk_type=mode, message_index_enable=index,
                                 mapped_file_size_commit_log=1 << 30, warm_ahead_bytes=WARM_AHEAD))
    s.start()
    return s


def _line(label: str, n: int, size: int, dt: float, cpu: float, extra: str = "") -> None:
    print(f"{label:30s}: {n / dt:9.0f} msg/s  {n * size / dt / 1e6:6.1f} MB/s  "
          f"CPU {cpu / n * 1e6:6.2f} us/msg{extra}", flush=True)


def _finish(s: MessageStore, root: str, cpu_start: float) -> tuple[float, float, int]:
    """Wait for the index to catch up, then close and delete the store.
    Returns (index catch-up seconds, CPU seconds since ``cpu_start``, group commits)."""
    ib = time.perf_counter()
    if s.index_dispatcher is not None:
        s.index_dispatcher.wait_idle(60)
    idx = time.perf_counter() - ib
    cpu = time.process_time() - cpu_start
    commits = s.group_commit.flush_count if s.group_commit is not None else 0
    s.shutdown()
    shutil.rmtree(root)
    return idx, cpu, commits


CASES = ("single", "batch", "sync64", "sync64cb", "syncasync")


def run(n: int, base: str, index: bool, cases: tuple[str, ...] = CASES) -> None:
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print_disk(base)
    msgs = make_messages(n)
    size = len(msgs[0].body)
    print(f"messages: {n} x {size} B, index {'on' if index else 'off'}, record writer: "
          f"{'C (mq.store._append)' if C_WRITER else 'Python (MQ_PURE_PYTHON set, or the C writer not built)'}")
    for case in cases:
        {"single": _single, "batch": _batch, "sync64": _sync64, "sync64cb": _sync64_callbacks,
         "syncasync": _sync_async}[case](msgs, size, base, index)


def _single(msgs: list, size: int, base: str, index: bool) -> None:
    n = len(msgs)
    root = tempfile.mkdtemp(dir=base)
    s = _store(root, "ASYNC_FLUSH", index)
    put = s.put_message
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    c = time.process_time()
    t = time.perf_counter()
    for m in msgs:
        put(m)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    idx, cpu, _ = _finish(s, root, c)
    _line("ASYNC single", n, size, dt, cpu, f"  (putting thread: user {(r1.ru_utime - r0.ru_utime) / n * 1e6:.2f}"
          f" sys {(r1.ru_stime - r0.ru_stime) / n * 1e6:.2f} us/msg; index catch-up after: {idx:.2f}s)")


def _batch(msgs: list, size: int, base: str, index: bool) -> None:
    n = len(msgs)
    root = tempfile.mkdtemp(dir=base)
    s = _store(root, "ASYNC_FLUSH", index)
    batches = [msgs[i:i + 32] for i in range(0, n, 32)]
    for b in batches:  # one queue per batch, as a batch request has
        q = b[0].queue_id
        for m in b:
            m.queue_id = q
    c = time.process_time()
    t = time.perf_counter()
    for b in batches:
        s.put_messages(b)
    dt = time.perf_counter() - t
    _, cpu, _ = _finish(s, root, c)
    _line("ASYNC batch32", n, size, dt, cpu)


def _sync64(msgs: list, size: int, base: str, index: bool) -> None:
    n = len(msgs)
    root = tempfile.mkdtemp(dir=base)
    s = _store(root, "SYNC_FLUSH", index)
    per = n // 64
    barrier = threading.Barrier(65)

    def writer(k: int) -> None:
        mine = msgs[k * per:(k + 1) * per]
        barrier.wait()
        for m in mine:
            s.put_message(m)

    ts = [threading.Thread(target=writer, args=(k,)) for k in range(64)]
    for th in ts:
        th.start()
    barrier.wait()
    c = time.process_time()
    t = time.perf_counter()
    for th in ts:
        th.join()
    dt = time.perf_counter() - t
    _, cpu, commits = _finish(s, root, c)
    _line("SYNC 64 threads", per * 64, size, dt, cpu,
          f"  ({commits} group commits, {per * 64 / max(commits, 1):.1f} msgs per fdatasync)")


def _sync64_callbacks(msgs: list, size: int, base: str, index: bool) -> None:
    n = len(msgs)
    root = tempfile.mkdtemp(dir=base)
    s = _store(root, "SYNC_FLUSH", index)
    per = n // 64
    mine = [iter(msgs[k * per:(k + 1) * per]) for k in range(64)]
    ready: collections.deque[int] = collections.deque(range(64))  # writers whose last put is on disk
    wake = threading.Event()
    failed = []

    def done(k: int, res) -> None:  # the flush thread, once per put, after its group's fdatasync
        if res.status is not PutMessageStatus.PUT_OK:
            failed.append(res.status)
        ready.append(k)
        if not wake.is_set():  # one wake-up per group commit, not per put (the broker's LoopPoster does so too)
            wake.set()

    callbacks = [functools.partial(done, k) for k in range(64)]
    put = s.put_messages_nowait
    stored = 0
    c = time.process_time()
    t = time.perf_counter()
    live = 64
    while live:
        while not ready:
            wake.wait()
            wake.clear()
        k = ready.popleft()
        m = next(mine[k], None)
        if m is None:
            live -= 1
            continue
        res = put((m,), callbacks[k])
        stored += 1
        if res is not None:  # answered at once (a failure): the writer goes on
            callbacks[k](res)
    dt = time.perf_counter() - t
    _, cpu, commits = _finish(s, root, c)
    assert not failed, failed[:5]
    _line("SYNC 64 writers (callbacks)", stored, size, dt, cpu,
          f"  ({commits} group commits, {stored / max(commits, 1):.1f} msgs per fdatasync)")


def _sync_async(msgs: list, size: int, base: str, index: bool) -> None:
    n = len(msgs)
    root = tempfile.mkdtemp(dir=base)
    s = _store(root, "SYNC_FLUSH", index)
    c = time.process_time()
    t = time.perf_counter()
    futs = [s.put_message_async(m) for m in msgs]
    for f in futs:
        f.result()
    dt = time.perf_counter() - t
    _, cpu, commits = _finish(s, root, c)
    _line("SYNC async 1 thread (futures)", n, size, dt, cpu, f"  ({n / max(commits, 1):.0f} msgs per fdatasync)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--no-index", action="store_true")
    ap.add_argument("--warm-ahead", type=int, default=WARM_AHEAD,
                    help="warmAheadBytes (0: off; -1, the default: the flush mode chooses)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    a = ap.parse_args()
    chosen = tuple(c.strip() for c in a.cases.split(",") if c.strip())
    if not chosen or set(chosen) - set(CASES):
        ap.error(f"--cases takes a comma-separated subset of {','.join(CASES)}")
    WARM_AHEAD = a.warm_ahead
    print(f"warm-ahead: {WARM_AHEAD} bytes; reference Python call {python_speed():.0f} ns (the CPU's speed now)")
    with CpuWindow() as window:
        run(a.n, a.dir, not a.no_index, chosen)
    print(window.summary())
