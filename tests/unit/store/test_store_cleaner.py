"""Retention with an injected clock and disk usage; disk-full refusal."""

import os
import time

from .conftest import inner

from mq.store.status import GetMessageStatus as G
from mq.store.status import PutMessageStatus as P


def _fill(s, n=300):
    for i in range(n):
        s.put_message(inner(body=b"x" * 800, queue_id=i % 2, keys=f"k{i}"))


def test_expired_segments_deleted_at_delete_when(make_store, tmp_path):
    now = [time.time()]
    ratio = [0.10]
    s = make_store(_store_kw={"now": lambda: now[0], "disk_ratio": lambda p: ratio[0]},
                   delete_when=str(time.localtime(now[0]).tm_hour))
    _fill(s)
    files = s.commit_log.queue.files
    assert len(files) >= 4
    s.clean_expired_files()
    assert len(s.commit_log.queue.files) == len(files)  # nothing expired yet
    now[0] += 73 * 3600
    s.cleaner.config = _with(s.config, delete_when=str(time.localtime(now[0]).tm_hour))
    s.clean_expired_files()
    assert len(s.commit_log.queue.files) == 1  # never the last one
    assert s.get_min_phy_offset() == s.commit_log.queue.files[0].start_offset
    # consume queues follow: the min offset moved past deleted records
    r = s.get_message("g", "T", 0, 0, 32)
    assert r.status is G.OFFSET_TOO_SMALL and r.next_begin_offset == s.get_min_offset("T", 0) > 0
    assert s.get_message("g", "T", 0, r.next_begin_offset, 1).status is G.FOUND
    assert s.query_message("T", "k299", 4).buffers


def _with(cfg, **kw):
    import dataclasses

    return dataclasses.replace(cfg, **kw)


def test_space_pressure_deletes_unexpired_and_full_disk_refuses(make_store):
    ratio = [0.10]
    s = make_store(_store_kw={"disk_ratio": lambda p: ratio[0]}, delete_when="25")
    _fill(s)
    n = len(s.commit_log.queue.files)
    ratio[0] = 0.80  # above diskMaxUsedSpaceRatio 75 %, below forcible 85 %: only expired files go
    s.clean_expired_files()
    assert len(s.commit_log.queue.files) == n
    ratio[0] = 0.88  # clean immediately
    s.clean_expired_files()
    assert len(s.commit_log.queue.files) == 1
    ratio[0] = 0.95
    s.clean_expired_files()
    r = s.put_message(inner())
    assert r.status is P.SERVICE_NOT_AVAILABLE and "disk full" in r.remark
    assert s.runtime_info()["disk_full"]
    assert s.get_message("g", "T", 0, s.get_min_offset("T", 0), 1).status is G.FOUND  # reads still work
    ratio[0] = 0.50
    s.clean_expired_files()
    assert s.put_message(inner()).ok
    assert not any(n.endswith(".creating") for n in os.listdir(s.commit_log.queue.directory))
