"""Retention and disk-full protection (RocketMQ CleanCommitLogService, CleanConsumeQueueService).

Each pass (every ``clean_resource_interval`` ms):

1. Measure disk use of the commit-log and consume-queue partitions. Above
   ``disk_space_warning_level_ratio`` (0.90) the store is marked DISK_FULL and refuses writes
   (SERVICE_NOT_AVAILABLE, remark "disk full"); at or below ``disk_space_clean_forcibly_ratio`` (0.85) the
   flag clears. Above 0.85, unexpired segments may be deleted too ("clean immediately").
2. Delete commit-log segments (oldest first, never the last, at most 10 per pass) whose mtime is older than
   ``file_reserved_time`` hours, when the local hour is in ``delete_when``, or at once when disk use passes
   ``disk_max_used_space_ratio`` percent.
3. When the commit log's min offset moved: drop consume-queue segments and index files that only point
   below it, and correct every queue's min offset.

An admin's DELETE_EXPIRED_COMMITLOG arms ``MAX_MANUAL_DELETE_PASSES`` passes that run step 2 whatever the
hour and disk use (still only segments older than ``file_reserved_time``); the first runs at once.

"now" and disk usage are injectable for tests.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Callable

from mq.config import StoreConfig
from mq.store.commit_log import CommitLog
from mq.store.consume_queue import ConsumeQueueTable
from mq.store.flush import PeriodicService

log = logging.getLogger(__name__)

DiskRatio = Callable[[Path], float]
#: passes a DELETE_EXPIRED_COMMITLOG request arms (RocketMQ MAX_MANUAL_DELETE_FILE_TIMES)
MAX_MANUAL_DELETE_PASSES = 20


def disk_used_ratio(path: Path) -> float:
    """RocketMQ ``getDiskPartitionSpaceUsedPercent``: used / (used + available), rounded up to a percent;
    -1 on error."""
    path = Path(path)
    while not path.exists() and path != path.parent:  # not created yet: measure its partition
        path = path.parent
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    free = st.f_bfree * st.f_frsize
    avail = st.f_bavail * st.f_frsize
    used = total - free
    if used + avail <= 0:
        return -1.0
    return math.ceil(used * 100.0 / (used + avail)) / 100.0


def is_time_to_delete(delete_when: str, now: float) -> bool:
    hour = time.localtime(now).tm_hour
    for tok in delete_when.split(";"):
        tok = tok.strip()
        if tok and tok.isdigit() and int(tok) == hour:
            return True
    return False


class Cleaner(PeriodicService):
    name = "mq-store-clean"

    def __init__(self, config: StoreConfig, commit_log: CommitLog, cq_table: ConsumeQueueTable, *,
                 cq_lock: threading.Lock, index=None, now: Callable[[], float] = time.time,
                 disk_ratio: DiskRatio = disk_used_ratio, cq_root: Path | None = None) -> None:
        super().__init__(config.clean_resource_interval)
        self.config = config
        self.commit_log = commit_log
        self.cq_table = cq_table
        self.cq_lock = cq_lock
        self.index = index
        self.now = now
        self.disk_ratio = disk_ratio
        self.cq_root = cq_root or cq_table.root
        self.disk_full = False
        self._last_min_offset = commit_log.min_offset
        self.last_ratio = 0.0
        self.deleted_files = 0
        #: passes left that delete expired segments whatever the hour or disk use (DELETE_EXPIRED_COMMITLOG)
        self.manual_passes = 0
        self._pass_lock = threading.Lock()  # one pass at a time: the thread's or a manual one

    def check_disk(self) -> tuple[bool, bool]:
        """Update the disk-full flag; returns (space short, clean immediately)."""
        cfg = self.config
        short = False
        immediately = False
        ratios = [self.disk_ratio(self.commit_log.queue.directory), self.disk_ratio(self.cq_root)]
        self.last_ratio = max(ratios)
        for r in ratios:
            if r < 0:
                short = True
                continue
            if r > cfg.disk_space_warning_level_ratio:
                if not self.disk_full:
                    log.error("disk usage %.0f%% above %.0f%%: refusing writes", r * 100,
                              cfg.disk_space_warning_level_ratio * 100)
                self.disk_full = True
                immediately = True
            elif r > cfg.disk_space_clean_forcibly_ratio:
                immediately = True
            if r > min(max(cfg.disk_max_used_space_ratio, 10), 95) / 100.0:
                short = True
        if all(0 <= r <= cfg.disk_space_clean_forcibly_ratio for r in ratios) and self.disk_full:
            log.info("disk usage back to %.0f%%: accepting writes", self.last_ratio * 100)
            self.disk_full = False
        return short, immediately

    def delete_commit_log_files(self) -> int:
        cfg = self.config
        now = self.now()
        short, immediately = self.check_disk()
        manual = self.manual_passes > 0
        if not (is_time_to_delete(cfg.delete_when, now) or short or manual):
            return 0
        if manual:
            self.manual_passes -= 1
        force = immediately and cfg.clean_file_forcibly_enable
        deleted = self.commit_log.queue.delete_expired_by_time(cfg.file_reserved_time * 3_600_000, now,
                                                               force=force, max_files=10)
        if deleted:
            log.info("deleted %d commit log segment(s); min offset now %d", deleted, self.commit_log.min_offset)
            self.deleted_files += deleted
        return deleted

    def clean_consume_queues(self) -> None:
        phy_min = self.commit_log.min_offset
        if phy_min <= self._last_min_offset:
            return
        self._last_min_offset = phy_min
        with self.cq_lock:
            for cq in self.cq_table:
                cq.delete_expired(phy_min)
        if self.index is not None:
            try:
                self.index.delete_expired(phy_min)
            except Exception:
                log.exception("index cleanup failed")

    def _pass(self) -> None:
        self.delete_commit_log_files()
        self.clean_consume_queues()
        self.commit_log.queue.retry_graveyard()

    def run_once(self) -> None:
        with self._pass_lock:
            self._pass()

    def delete_files_manually(self, passes: int = MAX_MANUAL_DELETE_PASSES) -> int:
        """RocketMQ ``executeDeleteFilesManually``: the next ``passes`` passes delete segments older than
        ``file_reserved_time`` whatever the hour and disk use. The first of them runs now, in the caller's
        thread; returns how many segments it deleted."""
        with self._pass_lock:
            self.manual_passes = passes
            before = self.deleted_files
            self._pass()
            return self.deleted_files - before
