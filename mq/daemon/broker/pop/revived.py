"""Exactly-once revival across a crash: what the slots re-run after a restart have revived already.

A slot revived after the last revive checkpoint is revived again after a crash (the checkpoint's watermark is
before it). So that no message comes back twice (one copy acked, the other delivered again), every record a
revival writes (retry or DLQ topic) carries ``POP_REVIVE_KEY`` = ``<revive time>:<digest of (topic, queue,
start offset, pop time, group, offset)>``, and each checkpoint is followed by ``<dir>/revived.json`` =
``{"scanFrom": P}``, the commit log's end when the checkpoint was taken: every revival of a slot the checkpoint
has not passed lies at or after P. On open, the commit log from P on is read (properties only) and the keys
found are skipped by the re-run; they are forgotten once the watermark passes their revive times. A missing file
(first start) scans nothing; an older P than needed (a crash between the two writes) only scans more.

The key is stripped when a retried message is handed out (``PopReader``), so consumers never see it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from mq.common.record import MESSAGE_MAGIC_CODE
from mq.daemon.broker.property_filter import record_properties

log = logging.getLogger(__name__)

REVIVE_KEY = "POP_REVIVE_KEY"
FILE = "revived.json"
#: Most bytes of commit log read on open (a few seconds of writes at full speed); beyond, the rest is not checked.
MAX_SCAN = 1 << 30


def revive_key(revive_time: int, topic: str, queue_id: int, start_offset: int, pop_time: int, group: str,
               offset: int) -> str:
    digest = hashlib.blake2b(f"{topic}\x00{queue_id}\x00{start_offset}\x00{pop_time}\x00{group}\x00{offset}"
                             .encode(), digest_size=8).hexdigest()
    return f"{revive_time}:{digest}"


def key_fire(key: str) -> int:
    head, _, _ = key.partition(":")
    try:
        return int(head)
    except ValueError:
        return 0


def read_scan_from(directory: Path) -> int | None:
    try:
        return int(json.loads((directory / FILE).read_text())["scanFrom"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_scan_from(directory: Path, phy: int, fsync: bool = True) -> None:
    path = directory / FILE
    tmp = path.with_name(FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps({"scanFrom": phy}).encode())
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def scan(store: Any, start: int) -> dict[str, int]:
    """Revive keys (-> revive time) of the records from commit-log offset ``start`` to the end."""
    cl = store.commit_log
    phy = max(start, store.get_min_phy_offset())
    end = min(store.get_max_phy_offset(), phy + MAX_SCAN)
    found: dict[str, int] = {}
    while phy < end:
        head = cl.read(phy, 8)
        size = int.from_bytes(head[:4], "big") if head else 0
        if head is None or int.from_bytes(head[4:8], "big") != MESSAGE_MAGIC_CODE or size < 91:
            phy = cl.queue.roll_next_file(phy)  # a BLANK tail (or a gap): the next segment
            continue
        rec = cl.read(phy, size)
        if rec is None:
            break
        key = record_properties(rec).get(REVIVE_KEY)
        if key:
            found[key] = key_fire(key)
        phy += size
    return found
