"""Shared helpers for the store benchmarks: raw disk figures and message factories."""

from __future__ import annotations

import os
import tempfile
import time

from mq.common.hosts import pack_host
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties


def raw_disk(directory: str, mb: int = 256) -> dict[str, float]:
    """Sequential buffered write MB/s (1 MiB writes into a preallocated file + one fdatasync) and
    pwrite(4 KiB)+fdatasync per second on a preallocated file."""
    fd, path = tempfile.mkstemp(dir=directory)
    try:
        os.ftruncate(fd, mb << 20)
        chunk = os.urandom(1 << 20)
        t = time.perf_counter()
        for i in range(mb):
            os.pwrite(fd, chunk, i << 20)
        os.fdatasync(fd)
        seq = mb / (time.perf_counter() - t)
        small = os.urandom(4096)
        n = 0
        t = time.perf_counter()
        while time.perf_counter() - t < 1.0:
            os.pwrite(fd, small, (n % 1024) * 4096)
            os.fdatasync(fd)
            n += 1
        syncs = n / (time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return {"seq_write_MBps": seq, "fdatasync_per_s": syncs}


def print_disk(directory: str) -> None:
    d = raw_disk(directory)
    print(f"raw disk: sequential write {d['seq_write_MBps']:.0f} MB/s, pwrite+fdatasync {d['fdatasync_per_s']:.0f}/s")


def make_messages(n: int, size: int = 1024, queues: int = 8, topic: str = "BenchTopic",
                  tags=("TagA", "TagB", "TagC", "TagD")) -> list[MessageExtBrokerInner]:
    """Messages as the broker hands them over: properties parsed once, string kept for storage, the born host
    packed (the broker packs it once per connection)."""
    body = os.urandom(size)
    born = pack_host("10.0.0.1", 50000)
    out = []
    for i in range(n):
        p = {"TAGS": tags[i % len(tags)], "UNIQ_KEY": f"7F0000010001{i:020X}"}
        out.append(MessageExtBrokerInner(topic=topic, body=body, queue_id=i % queues, properties=p,
                                         properties_string=encode_properties(p), born_host=born,
                                         born_timestamp=1_700_000_000_000))
    return out
