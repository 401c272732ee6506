"""``MessageStore``: the store facade the broker uses (RocketMQ ``DefaultMessageStore``).

Synchronous and thread-safe; no asyncio. Writes: ``put_message``/``put_messages`` block until the flush mode
is satisfied; ``put_message_async``/``put_messages_async`` return a ``concurrent.futures.Future`` that the
asyncio broker can ``await asyncio.wrap_future(...)`` (the write half is ``put_path.PutPath``, a base class).
Reads return the stored record bytes unchanged.

Threads: group commit + flush watcher (SYNC) or periodic flush (ASYNC), consume-queue flush + checkpoint,
index builder (none when the owner runs the index passes: ``index_scheduler``), cleaner. Lifecycle:
``MessageStore(config).load()`` (lock, recover) -> ``start()`` -> ``shutdown()``.

Replication (STORE.md §13): a master hands raw commit-log chunks out with ``read_replica``; a SLAVE store refuses
every put and is written only by ``append_replica``, which copies the master's bytes to the same offsets and
dispatches them as local appends are. The checkpoint's physicMsgTimestamp on a slave moves only when the commit
log is flushed (with the store time of the replicated records), never on a consume-queue write as RocketMQ's
slave does: min(physic, logics) then never claims more than is on disk, so crash recovery starts early enough.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from mq.common import sysflag as SF
from mq.common.message import MessageExt
from mq.config import StoreConfig
from mq.store import lookup, queue_admin, replica
from mq.store.checkpoint import StoreCheckpoint
from mq.store.cleaner import Cleaner, DiskRatio, disk_used_ratio
from mq.store.commit_log import CommitLog
from mq.store.consume_queue import ConsumeQueueTable
from mq.store.dispatcher import Dispatcher, OnDispatch
from mq.store.index_dispatcher import IndexDispatcher, IndexScheduler
from mq.store.flush import AsyncFlushService, ConsumeQueueFlushService, GroupCommitService
from mq.store.index_service import IndexService
from mq.store.reader import MessageFilter, TagFilter, read_queue
from mq.store.put_path import PutPath
from mq.store.recovery import RecoveryReport, rebuild_topic_queue_table, recover
from mq.store.resident import ResidentTrimmer
from mq.store.runtime_files import AbortFile, StoreLock
from mq.store.status import GetMessageResult, GetMessageStatus, QueryMessageResult, StoreStats
from mq.store.warm import WarmAheadService, default_ahead as warm_default_ahead

log = logging.getLogger(__name__)

_G = GetMessageStatus
_NOT, _COMMIT = SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE


def _total_ram() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


class MessageStore(PutPath):
    def __init__(self, config: StoreConfig, *, store_host: tuple[str, int] = ("127.0.0.1", 10911),
                 on_dispatch: OnDispatch | None = None, now: Callable[[], float] = time.time,
                 disk_ratio: DiskRatio = disk_used_ratio, fsync: Callable[[int], None] = os.fdatasync,
                 index_scheduler: IndexScheduler | None = None) -> None:
        self.config = config
        self.root = Path(config.store_path_root_dir)
        self.now = now
        self.fsync = fsync
        self.delay_levels_ms = config.delay_level_millis()
        self.commit_log = CommitLog(config.commit_log_dir(), config.mapped_file_size_commit_log, store_host,
                                    max_message_size=config.max_message_size,
                                    delay_levels_ms=self.delay_levels_ms,
                                    log_interval=config.store_error_log_interval_ms / 1000.0)
        self.cq_table = ConsumeQueueTable(self.root / "consumequeue", config.consume_queue_unit_file_size())
        self.index: IndexService | None = None
        self.index_dispatcher: IndexDispatcher | None = None
        if config.message_index_enable:
            self.index = IndexService(self.root, max_hash_slot_num=config.max_hash_slot_num,
                                      max_index_num=config.max_index_num)
            self.index_dispatcher = IndexDispatcher(self.index)
            if index_scheduler is not None:  # the owner runs the index passes (the broker: on its event loop)
                self.index_dispatcher.drive(index_scheduler)
        self.dispatcher = Dispatcher(self.cq_table, index=self.index_dispatcher, on_dispatch=on_dispatch,
                                     log_interval=config.store_error_log_interval_ms / 1000.0)
        self.checkpoint: StoreCheckpoint | None = None
        self.lock_file = StoreLock(self.root)
        self.abort_file = AbortFile(self.root)
        self.put_lock = threading.Lock()
        self.stats = StoreStats()
        self.sync_flush = config.sync_flush
        self.group_commit: GroupCommitService | None = None
        self.async_flush: AsyncFlushService | None = None
        if self.sync_flush:
            self.commit_log.staging = True  # one pwrite per group commit (CommitLog.staging)
            self.group_commit = GroupCommitService(
                self.commit_log, self.put_lock, self.dispatcher.dispatch, timeout_ms=config.sync_flush_timeout,
                on_flushed=self._on_commit_log_flushed, on_error=self._on_flush_error, fsync=fsync)
        else:
            self.async_flush = AsyncFlushService(
                self.commit_log, interval_ms=config.flush_interval_commit_log,
                least_pages=config.flush_commit_log_least_pages,
                thorough_ms=config.flush_commit_log_thorough_interval,
                on_flushed=self._on_commit_log_flushed, on_error=self._on_flush_error, fsync=fsync)
        self.cq_flush = ConsumeQueueFlushService(
            lambda: list(self.cq_table), interval_ms=config.flush_interval_consume_queue,
            least_pages=config.flush_consume_queue_least_pages,
            thorough_ms=config.flush_consume_queue_thorough_interval, after=self._after_cq_flush)
        ahead = config.mapped_file_size_commit_log if config.warm_maped_file_enable else config.warm_ahead_bytes
        if ahead < 0:  # the flush mode chooses (StoreConfig.warm_ahead_bytes)
            ahead = warm_default_ahead(self.sync_flush)
        self.warm = WarmAheadService(self.commit_log.queue, self.put_lock, ahead=ahead,
                                     append_end=self.commit_log.append_end) if ahead > 0 else None
        keep = config.resident_behind_writer_bytes
        self.trimmer = ResidentTrimmer(self.commit_log.queue, lambda: list(self.cq_table),
                                       keep_bytes=keep) if keep >= 0 else None
        self.cleaner = Cleaner(config, self.commit_log, self.cq_table, cq_lock=self.dispatcher.lock,
                               index=self.index, now=now, disk_ratio=disk_ratio)
        self.recovery: RecoveryReport | None = None
        self.flush_error: str | None = None
        self._loaded = False
        self._running = False
        self._shutdown = False
        self._checkpoint_failing = False  # logged once until a checkpoint write succeeds again
        self._begin_in_lock = 0.0
        self._slave = config.broker_role.upper() == "SLAVE"
        self._stats_thread: threading.Thread | None = None
        self._stop_stats = threading.Event()
        self._mem_limit = _total_ram() * config.access_message_in_memory_max_ratio // 100

    # -- lifecycle ---------------------------------------------------------------------------------------
    def load(self) -> RecoveryReport:
        """Lock the directory, map the files and recover (normal or after a crash)."""
        if self._loaded:
            assert self.recovery is not None
            return self.recovery
        self.lock_file.acquire()
        try:
            last_exit_ok = not self.abort_file.exists()
            self.abort_file.create()
            self.commit_log.load()
            self.cq_table.load()
            self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
            dropped_from = None
            if self.index is not None:
                dropped_from = self.index.load(last_exit_ok, self.checkpoint.index_msg_timestamp)
            cp = self.checkpoint
            min_ts = (cp.min_timestamp_index() if self.index is not None and self.config.message_index_safe
                      else cp.min_timestamp())
            self.recovery = recover(self.commit_log, self.cq_table, self.dispatcher, last_exit_ok=last_exit_ok,
                                    min_timestamp=min_ts, check_crc=self.config.check_crc_on_recover,
                                    delay_levels_ms=self.delay_levels_ms, index=self.index,
                                    redispatch_from=dropped_from)
        except BaseException:
            self.lock_file.release()
            raise
        self._loaded = True
        return self.recovery

    def start(self) -> None:
        if not self._loaded:
            self.load()
        # Catch up on records the consume queues do not hold yet (RocketMQ's reput from the max CQ offset),
        # unless recovery left records waiting in the dispatcher's backlog: it holds them up to the log's end.
        frm = max(self.cq_table.max_physic_offset(), self.commit_log.min_offset, 0)
        if frm < self.commit_log.max_offset and self.dispatcher.error is None:
            self.dispatcher.reput(self.commit_log, frm, delay_levels_ms=self.delay_levels_ms)
            rebuild_topic_queue_table(self.commit_log, self.cq_table, self.dispatcher)
        if self.dispatcher.error is None:
            self.dispatcher.dispatched_offset = self.commit_log.max_offset
        if self.index_dispatcher is not None:
            self.index_dispatcher.start()
        if self.group_commit is not None:
            self.group_commit.start()
        if self.async_flush is not None:
            self.async_flush.start()
        self.cq_flush.start()
        if self.warm is not None:
            self.commit_log.warm = self.warm
            self.warm.start()
        if self.trimmer is not None:
            self.trimmer.start()
        self.cleaner.check_disk()
        self.cleaner.start()
        self._stop_stats.clear()
        self._stats_thread = threading.Thread(target=self._stats_loop, name="mq-store-stats", daemon=True)
        self._stats_thread.start()
        self._running = True

    def shutdown(self) -> None:
        """Flush, dispatch what is pending, persist the checkpoint, remove ``abort`` (if clean), unlock."""
        if self._shutdown:
            return
        self._shutdown = True
        was_running = self._running
        self._running = False
        if was_running:
            self.cleaner.stop(final_pass=False)
            self._stop_stats.set()
            if self._stats_thread is not None:
                self._stats_thread.join()
            if self.group_commit is not None:
                self.group_commit.stop()
            if self.async_flush is not None:
                self.async_flush.stop()
            if self.index_dispatcher is not None:
                self.index_dispatcher.stop()
            self.cq_flush.stop()
            if self.warm is not None:
                self.warm.stop()
            if self.trimmer is not None:
                self.trimmer.stop(final_pass=False)
        if self.index is not None and self._loaded:
            self.index.close()
        clean = (self.flush_error is None and not self.cleaner.disk_full
                 and self.dispatch_behind_bytes() == 0 and was_running)
        if self.checkpoint is not None:
            try:
                self.checkpoint.close()
            except OSError as exc:  # the next start then recovers as after a crash, which is safe
                log.error("cannot write the checkpoint at shutdown (%s); the abort file stays", exc.strerror)
                clean = False
        self.commit_log.close()
        self.cq_table.close()
        if self._loaded:
            if clean:
                self.abort_file.remove()
            self.lock_file.release()

    close = shutdown

    @property
    def loaded(self) -> bool:
        """True once ``load`` has succeeded (recovered and locked the store)."""
        return self._loaded

    def __enter__(self) -> "MessageStore":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- flush callbacks ---------------------------------------------------------------------------------
    def _on_commit_log_flushed(self, ts: int) -> None:
        if self.checkpoint is not None and ts:
            self.checkpoint.physic_msg_timestamp = ts

    def _on_flush_error(self, exc: BaseException) -> None:
        self.flush_error = f"commit log flush failed: {exc}"
        log.error("%s; the store refuses writes from now on", self.flush_error)

    def _after_cq_flush(self) -> None:
        cp = self.checkpoint
        if cp is None:
            return
        logics = self.dispatcher.last_timestamp
        idx = self.index_dispatcher
        if idx is not None and idx.last_timestamp and idx.backlog:
            logics = min(logics, idx.last_timestamp)
        if logics:
            cp.logics_msg_timestamp = logics
        if self.index is not None:
            cp.index_msg_timestamp = max(cp.index_msg_timestamp, self.index.index_msg_timestamp)
        try:
            cp.flush()
        except (OSError, ValueError) as exc:
            if not self._checkpoint_failing:
                log.error("checkpoint flush failed: %s", exc)
            self._checkpoint_failing = True
        else:
            if self._checkpoint_failing:
                log.info("checkpoint written again")
            self._checkpoint_failing = False

    def _stats_loop(self) -> None:
        while not self._stop_stats.wait(1.0):
            self.stats.sample()
            if self.dispatcher.error is not None:
                try:
                    self.dispatcher.retry()
                except Exception:
                    log.exception("retrying the dispatch of held-back records failed")

    # -- replication (STORE.md §13; ``mq.store.replica`` draws the chunk) ---------------------------------
    def read_replica(self, phy_offset: int, max_bytes: int) -> bytes | None:
        """Master side: raw commit-log bytes from ``phy_offset`` for a slave (``replica.read_replica``)."""
        return replica.read_replica(self, phy_offset, max_bytes)

    def append_replica(self, phy_offset: int, data: bytes) -> int:
        """Slave side: append a chunk of the master's log at ``phy_offset`` (``replica.append_replica``)."""
        return replica.append_replica(self, phy_offset, data)

    def update_config(self, **changes: Any) -> None:
        """Change settings while the store runs, as RocketMQ's store re-reads them on every use: retention, disk
        and transfer limits, put timeouts, maxMessageSize, the flush services' intervals and page thresholds,
        accessMessageInMemoryMaxRatio. Others (sizes, paths, flush mode) need a restart."""
        self.config = cfg = dataclasses.replace(self.config, **changes)
        self.cleaner.config = cfg
        if "max_message_size" in changes:
            self.commit_log.set_max_message_size(cfg.max_message_size)
        if self.async_flush is not None:
            self.async_flush.interval_ms = cfg.flush_interval_commit_log
            self.async_flush.least_pages = cfg.flush_commit_log_least_pages
            self.async_flush.thorough_ms = cfg.flush_commit_log_thorough_interval
        if self.group_commit is not None:
            self.group_commit.timeout_ms = cfg.sync_flush_timeout
        self.cq_flush.interval_ms = cfg.flush_interval_consume_queue
        self.cq_flush.least_pages = cfg.flush_consume_queue_least_pages
        self.cq_flush.thorough_ms = cfg.flush_consume_queue_thorough_interval
        self._mem_limit = _total_ram() * cfg.access_message_in_memory_max_ratio // 100

    # -- get ---------------------------------------------------------------------------------------------
    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                    tag_filter: TagFilter = None, max_total_bytes: int | None = None, *,
                    runs: bool = False, message_filter: MessageFilter = None) -> GetMessageResult:
        """Read up to ``max_count`` records of one queue from ``offset`` (RocketMQ getMessage).

        ``tag_filter`` is None (all), a set of tag hash codes, or a callable(tags_code) -> bool. ``buffers``
        holds one record each, or with ``runs`` one copy per run of records adjacent in the commit log (what
        a PULL body needs: the records concatenated, copied once). ``message_filter`` (None, or a
        callable(record bytes) -> bool) is applied to each record after the tag filter; a refused record is
        skipped as a tag mismatch is. ``mq.store.reader`` does the reading."""
        if self._shutdown or not self._loaded:
            return GetMessageResult(_G.NO_MATCHED_LOGIC_QUEUE, offset)
        cq = self.cq_table.find(topic, queue_id, create=False)
        if cq is None:
            self.stats.get_miss += 1
            return GetMessageResult(_G.NO_MATCHED_LOGIC_QUEUE, 0)
        began = time.monotonic()
        r = read_queue(cq, self.commit_log, self.config, self.stats, self._mem_limit, offset, max_count,
                       tag_filter, max_total_bytes, runs, message_filter)
        took = time.monotonic() - began
        if took > self.stats.get_time_max:  # getMessageEntireTimeMax
            self.stats.get_time_max = took
        return r

    # -- lookups (``mq.store.lookup``) -------------------------------------------------------------------
    def select_one_message_by_offset(self, phy_offset: int, size: int | None = None) -> bytes | None:
        """Raw record at a physical offset (size read from the record when not given)."""
        if size is None:
            return self.commit_log.read_record(phy_offset)
        return self.commit_log.read(phy_offset, size)

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        """Decoded record at a physical offset (for VIEW_MESSAGE_BY_ID / offsetMsgId)."""
        return lookup.look_message_by_offset(self, phy_offset)

    def query_message(self, topic: str, key: str, max_num: int, begin_ms: int = 0,
                      end_ms: int = 2**63 - 1) -> QueryMessageResult:
        """Messages of ``topic`` carrying ``key`` stored in [begin, end], each re-checked (RocketMQ #3613)."""
        return lookup.query_message(self, topic, key, max_num, begin_ms, end_ms)

    # -- offsets -----------------------------------------------------------------------------------------
    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.cq_table.find(topic, queue_id, create=False)
        return cq.max_offset if cq else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.cq_table.find(topic, queue_id, create=False)
        return cq.min_offset if cq else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.cq_table.find(topic, queue_id, create=False)
        unit = cq.get_unit(cq_offset) if cq else None
        return unit[0] if unit else 0

    def search_offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self.cq_table.find(topic, queue_id, create=False)
        if cq is None:
            return 0
        return cq.search_offset_by_timestamp(timestamp, self.commit_log.store_timestamp_of)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.cq_table.find(topic, queue_id, create=False)
        unit = cq.get_unit(cq_offset) if cq else None
        if not unit:
            return -1
        ts = self.commit_log.store_timestamp_of(unit[0], unit[1])
        return -1 if ts is None else ts

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.cq_table.find(topic, queue_id, create=False)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)

    def get_min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    def get_max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.max_offset - self.dispatcher.dispatched_offset)

    def topics(self) -> list[str]:
        return sorted(self.cq_table.queues)

    def queue_ids(self, topic: str) -> list[int]:
        """The queue ids of ``topic`` that have a consume queue, sorted."""
        return sorted(self.cq_table.queues.get(topic) or ())

    # -- admin (``mq.store.queue_admin``) -----------------------------------------------------------------
    def delete_topics(self, topics: Iterable[str]) -> int:
        """Destroy the consume queues of ``topics`` (their records stay in the log until retention)."""
        return queue_admin.delete_topics(self, topics)

    def delete_topic(self, topic: str) -> bool:
        return self.delete_topics((topic,)) == 1

    def clean_expired_files(self) -> None:
        """Run one retention pass now (the cleaner thread does this every clean interval)."""
        self.cleaner.run_once()

    def clean_expired_consume_queues(self) -> list[tuple[str, int]]:
        """RocketMQ ``cleanExpiredConsumerQueue``: the (topic, queueId) destroyed."""
        return queue_admin.clean_expired_consume_queues(self)

    def clean_unused_topics(self, is_used: Callable[[str], bool]) -> list[str]:
        """RocketMQ ``cleanUnusedTopic``: the topics destroyed."""
        return queue_admin.clean_unused_topics(self, is_used)

    def delete_expired_files_manually(self) -> int:
        """RocketMQ ``executeDeleteFilesManually``: arm the cleaner's manual passes and run the first now
        (segments older than ``file_reserved_time``, whatever the hour); returns the segments it deleted."""
        return self.cleaner.delete_files_manually()

    def query_consume_queue(self, topic: str, queue_id: int, index: int, count: int
                            ) -> tuple[int, int, list[tuple[int, int, int]] | None] | None:
        return queue_admin.query_consume_queue(self, topic, queue_id, index, count)

    def runtime_info(self) -> dict[str, object]:
        st = self.stats
        return {
            "put_count": st.put_count, "put_bytes": st.put_bytes, "put_failures": st.put_failures,
            "get_found": st.get_found, "get_miss": st.get_miss, "get_transferred": st.get_transferred,
            "tps_10s": st.tps(10), "tps_60s": st.tps(60), "tps_600s": st.tps(600),
            "disk_ratio": self.cleaner.last_ratio, "disk_full": self.cleaner.disk_full,
            "commit_log_min_offset": self.commit_log.min_offset, "commit_log_max_offset": self.commit_log.max_offset,
            "commit_log_flushed_offset": self.commit_log.queue.flushed_where,
            "dispatch_behind_bytes": self.dispatch_behind_bytes(),
            "index_backlog": self.index_dispatcher.backlog if self.index_dispatcher else 0,
            "flush_disk_type": self.config.flush_disk_type,
            "group_commits": self.group_commit.flush_count if self.group_commit else 0,
            "flush_error": self.flush_error or "",
            "replica_count": st.replica_count, "replica_bytes": st.replica_bytes,
        }
