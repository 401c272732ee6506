"""Dispatch (reput: re-parse the log and rebuild consume queues), reads through a consume queue with a tag
filter, and crash-recovery time per GB.

Usage: python benchmarks/store_read_dispatch.py [--n 200000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from store_common import make_messages, print_disk

from mq.common.tags import java_hash_code
from mq.config import StoreConfig
from mq.store.consume_queue import ConsumeQueueTable
from mq.store.dispatcher import Dispatcher
from mq.store.message_store import MessageStore


def run(n: int, base: str) -> None:
    print_disk(base)
    root = tempfile.mkdtemp(dir=base)
    cfg = StoreConfig(store_path_root_dir=root, message_index_enable=False, mapped_file_size_commit_log=1 << 30)
    s = MessageStore(cfg)
    s.start()
    msgs = make_messages(n)
    t = time.perf_counter()
    for m in msgs:
        s.put_message(m)
    append = n / (time.perf_counter() - t)
    print(f"append (inline dispatch, same run): {append:9.0f} msg/s")

    # dispatch: rebuild every consume queue from the log into a scratch directory
    scratch = ConsumeQueueTable(Path(root) / "cq-rebuild", cfg.consume_queue_unit_file_size())
    d = Dispatcher(scratch)
    t = time.perf_counter()
    end = d.reput(s.commit_log, 0)
    dt = time.perf_counter() - t
    assert end == s.commit_log.max_offset
    print(f"dispatch (reput from log, no CRC): {n / dt:9.0f} msg/s  ({dt:.2f}s)")
    scratch.close()

    # reads: 8 queues, pull 32 at a time, tag filter matching 1 in 4 / all
    for label, flt in (("all tags", None), ("TagA (1 of 4)", {java_hash_code("TagA")})):
        got = 0
        t = time.perf_counter()
        for q in range(8):
            off = 0
            while True:
                r = s.get_message("g", "BenchTopic", q, off, 32, flt)
                got += r.message_count
                if r.next_begin_offset == off or r.status.name.startswith("OFFSET_OVERFLOW"):
                    break
                off = r.next_begin_offset
        dt = time.perf_counter() - t
        print(f"read {label:14s}: {got / dt:9.0f} msg/s returned ({got} msgs, {n / dt:9.0f} units scanned/s)")
    size = s.commit_log.max_offset
    s.shutdown()

    # crash recovery: abort file present, consume queues gone -> full re-dispatch with CRC checks
    shutil.rmtree(Path(root) / "consumequeue")
    shutil.rmtree(Path(root) / "cq-rebuild", ignore_errors=True)
    (Path(root) / "abort").touch()
    (Path(root) / "checkpoint").unlink()
    t = time.perf_counter()
    s = MessageStore(cfg)
    rep = s.load()
    dt = time.perf_counter() - t
    s.shutdown()
    gb = size / (1 << 30)
    print(f"recovery after crash (CRC + re-dispatch of {rep.redispatched} msgs, {size / 1e6:.0f} MB): "
          f"{dt:.2f}s = {dt / gb:.1f} s/GB")
    shutil.rmtree(root)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    run(a.n, a.dir)
