"""Replication, store side: ``read_replica`` on a master and ``append_replica`` on a slave, in one process.

A master store (ASYNC_FLUSH) is filled with ``--n`` messages of ``--size`` bytes (8 queues, TAGS and UNIQ_KEY as
a producer sends them), then:

1. read: the whole log is read back with ``read_replica`` in ``--chunk``-byte chunks (what the master's HA
   connection does per frame), timed;
2. append: those chunks are appended to an empty SLAVE store (ASYNC_FLUSH) with ``append_replica``, timed until
   the last call returns (validation, copy, consume queues, per-queue offsets inline), and then until its index
   thread has caught up too.

Each line prints msg/s, MB/s and the CPU per message (``time.process_time``: every thread of the process). The
load average and raw disk figures come first, as in the other store benchmarks.

Usage: python benchmarks/store_replica_bench.py [--n 100000] [--size 1024] [--chunk 32768] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from store_common import make_messages, print_disk

from mq.config import StoreConfig
from mq.store.message_store import MessageStore

SEGMENT = 256 << 20


def _store(root: str, role: str) -> MessageStore:
    s = MessageStore(StoreConfig(store_path_root_dir=root, broker_role=role, flush_disk_type="ASYNC_FLUSH",
                                 mapped_file_size_commit_log=SEGMENT))
    s.start()
    return s


def _line(label: str, n: int, nbytes: int, dt: float, cpu: float) -> None:
    print(f"{label:34s}: {n / dt:9.0f} msg/s  {nbytes / dt / 1e6:7.1f} MB/s  CPU {cpu / n * 1e6:6.2f} us/msg",
          flush=True)


def run(n: int, size: int, chunk: int, base: str) -> None:
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print_disk(base)
    root = tempfile.mkdtemp(dir=base, prefix="mq-replica-bench-")
    try:
        master = _store(os.path.join(root, "master"), "ASYNC_MASTER")
        msgs = make_messages(n, size)
        for m in msgs:
            assert master.put_message(m).ok
        total = master.get_max_phy_offset()
        print(f"master: {n} messages of {size} B, {total / 1e6:.1f} MB in the commit log, chunk {chunk} B")

        chunks: list[tuple[int, bytes]] = []
        t, c = time.perf_counter(), time.process_time()
        off = 0
        while True:
            data = master.read_replica(off, chunk)
            if not data:
                break
            chunks.append((off, data))
            off += len(data)
        _line("read_replica", n, total, time.perf_counter() - t, time.process_time() - c)
        assert off == total

        slave = _store(os.path.join(root, "slave"), "SLAVE")
        t, c = time.perf_counter(), time.process_time()
        for off, data in chunks:
            slave.append_replica(off, data)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        _line("append_replica (returned)", n, total, dt, dc)
        if slave.index_dispatcher is not None:
            slave.index_dispatcher.wait_idle(120)
        _line("append_replica (+ index caught up)", n, total, time.perf_counter() - t, time.process_time() - c)
        assert slave.get_max_phy_offset() == total
        assert slave.get_max_offset("BenchTopic", 0) == master.get_max_offset("BenchTopic", 0)
        print(f"{len(chunks)} chunks, {total / len(chunks) / 1024:.1f} KiB on average")
        slave.shutdown()
        master.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--chunk", type=int, default=32 * 1024)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    run(args.n, args.size, args.chunk, args.dir)


if __name__ == "__main__":
    main()
