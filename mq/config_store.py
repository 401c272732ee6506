"""The broker's message store settings (``StoreConfig``: RocketMQ's MessageStoreConfig keys), read from the broker's
config file beside the broker keys (``mq.config.broker_configs_from_mapping``) and re-exported by ``mq.config``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mq.errors import ConfigError


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Message store settings: RocketMQ ``MessageStoreConfig`` names in snake_case, 4.9 defaults (STORE.md §15).

    Sizes are bytes, intervals milliseconds, ``file_reserved_time`` hours, ratios percent unless named ``*_ratio``
    as a fraction (the two RocketMQ system properties)."""

    #: Store root: commitlog/, consumequeue/, index/, config/ and the checkpoint (``mq broker`` defaults it to
    #: ``$MQ_HOME/store``; ``--store`` overrides it).
    store_path_root_dir: str = str(Path.home() / "store")
    #: Directory of the commit log; empty: ``<storePathRootDir>/commitlog``.
    store_path_commit_log: str = ""
    #: Size of one commit-log segment, bytes. A store must be opened with the size it was written with.
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    #: Size of one consume-queue segment, bytes: 300,000 units of 20 bytes (rounded up to a multiple of 20). A store
    #: must be opened with the size it was written with.
    mapped_file_size_consume_queue: int = 300_000 * 20
    #: ASYNC_FLUSH: answer once the page cache holds the message; SYNC_FLUSH: after fdatasync (group commit).
    flush_disk_type: str = "ASYNC_FLUSH"  # or SYNC_FLUSH
    #: ASYNC_FLUSH: period of the commit log's flush thread, ms.
    flush_interval_commit_log: int = 500
    #: ASYNC_FLUSH: a periodic flush writes back only when at least this many 4 KiB pages are dirty.
    flush_commit_log_least_pages: int = 4
    #: ASYNC_FLUSH: the flush writes back everything at least this often, however few pages are dirty, ms.
    flush_commit_log_thorough_interval: int = 10_000
    #: Period of the consume-queue flush thread, ms.
    flush_interval_consume_queue: int = 1000
    #: A periodic consume-queue flush writes back only when at least this many 4 KiB pages are dirty.
    flush_consume_queue_least_pages: int = 2
    #: Consume queues are flushed whole at least this often, ms.
    flush_consume_queue_thorough_interval: int = 60_000
    #: SYNC_FLUSH: a send not flushed within this many ms is answered FLUSH_DISK_TIMEOUT.
    sync_flush_timeout: int = 5000
    #: SYNC_MASTER: a send no slave has acknowledged within this many ms is answered FLUSH_SLAVE_TIMEOUT.
    slave_timeout: int = 3000
    #: Largest message body accepted, bytes.
    max_message_size: int = 4 * 1024 * 1024
    #: Crash recovery checks every record's body CRC.
    check_crc_on_recover: bool = True
    #: Hours (``04``, or several as ``04;16``) at which expired commit-log segments are deleted.
    delete_when: str = "04"
    #: Disk use, percent, above which expired segments are deleted at any hour.
    disk_max_used_space_ratio: int = 75
    #: Commit-log segments are kept at least this many hours (retention).
    file_reserved_time: int = 72
    #: Period of the retention and disk-space check, ms.
    clean_resource_interval: int = 10_000
    #: Accepted from RocketMQ's broker.conf; not used (segments are deleted at most 10 per pass).
    delete_commit_log_files_interval: int = 100
    #: Accepted from RocketMQ's broker.conf; not used.
    delete_consume_queue_files_interval: int = 100
    #: Accepted from RocketMQ's broker.conf; not used.
    destroy_maped_file_interval_forcibly: int = 120_000
    #: Above diskSpaceCleanForciblyRatio, delete segments that have not expired yet, oldest first.
    clean_file_forcibly_enable: bool = True
    #: Disk use (a fraction) above which segments are deleted before they expire
    #: (rocketmq.broker.diskSpaceCleanForciblyRatio).
    disk_space_clean_forcibly_ratio: float = 0.85
    #: rocketmq.broker.diskSpaceWarningLevelRatio: above it, writes are refused.
    disk_space_warning_level_ratio: float = 0.90
    #: Bytes one pull returns at most while its messages lie within accessMessageInMemoryMaxRatio of RAM of the
    #: log's end.
    max_transfer_bytes_on_message_in_memory: int = 262_144
    #: Messages one pull returns at most while they lie within accessMessageInMemoryMaxRatio of RAM of the log's end.
    max_transfer_count_on_message_in_memory: int = 32
    #: Bytes one pull returns at most once its messages lie further behind the log's end.
    max_transfer_bytes_on_message_in_disk: int = 65_536
    #: Messages one pull returns at most once they lie further behind the log's end.
    max_transfer_count_on_message_in_disk: int = 8
    #: Percent of RAM: messages further behind the log's end count as on disk (smaller pulls; with slaveReadEnable
    #: the consumer is pointed at a slave); a slave uses this minus 10.
    access_message_in_memory_max_ratio: int = 40
    #: Build the key index (index/ files) for queries by key and by unique key.
    message_index_enable: bool = True
    #: Crash recovery starts no later than the index checkpoint, so index entries lost in the crash are rebuilt.
    message_index_safe: bool = False
    #: Hash slots per index file; with maxIndexNum it fixes an index file's size (420 MB by default).
    max_hash_slot_num: int = 5_000_000
    #: Entries per index file.
    max_index_num: int = 20_000_000
    #: Most messages one query by key returns.
    max_msgs_num_batch: int = 64
    #: Most messages a query by unique key (message id) returns.
    default_query_max_num: int = 32
    #: ASYNC_MASTER, SYNC_MASTER (a send is answered once a slave holds it) or SLAVE.
    broker_role: str = "ASYNC_MASTER"
    #: a slave also corrects moved pull offsets (and stores an OffsetMovedEvent) instead of retrying
    offset_check_in_slave: bool = False
    #: Delay of each level 1, 2, ... (suffixes s, m, h, d); retries use levels 3 and up.
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    #: While a put has held the put lock longer than this, ms, puts are refused OS_PAGECACHE_BUSY and (with
    #: brokerFastFailureEnable) sends SYSTEM_BUSY.
    os_page_cache_busy_timeout_mills: int = 1000
    #: Accepted from RocketMQ's broker.conf; not used.
    duplication_enable: bool = False
    #: Warm whole commit-log segments ahead of the writer (overrides warmAheadBytes).
    warm_maped_file_enable: bool = False
    #: Bring the commit log's pages into the page cache this many bytes ahead of the writer, in a background
    #: thread, so puts take no allocating page faults (``mq.store.warm``: MADV_POPULATE_READ where Linux has it,
    #: else zero-fill). -1 chooses: 16 MiB under ASYNC_FLUSH where the kernel can populate and the broker may use
    #: at least 3 CPUs; off with fewer (the thread would take the clients' CPU, not an idle core's) and under
    #: SYNC_FLUSH (it would take the second core from the group commit); 0 is off.
    warm_ahead_bytes: int = -1
    #: The commit log's mapped pages the broker keeps in its address space behind the writer, bytes. Five times
    #: a second (twenty while a consumer drains a backlog) older pages (and earlier segments, and consume-queue
    #: segments no longer written) are released from the mappings (``mq.store.resident``): they stay in the page
    #: cache, a read maps them again with a minor fault, and they leave the broker's RSS. -1 keeps every page
    #: mapped until its segment is unmapped, as RocketMQ's broker does.
    resident_behind_writer_bytes: int = 64 * 1024 * 1024
    #: Accepted from RocketMQ's broker.conf; not used (SYNC_FLUSH always stages records in a write buffer).
    transient_store_pool_enable: bool = False
    #: A store error that repeats (a put refused on a full disk, a record whose topic cannot become a consume
    #: queue, a record recovery sets aside) is logged at most once per this many milliseconds per kind, with a
    #: count of the ones held back in between.
    store_error_log_interval_ms: int = 10_000
    # -- HA: master/slave replication (STORE.md §13; mq.daemon.broker.ha) ---------------------------------------
    #: haListenPort: -1 = listenPort + 1 (what BrokerStartup sets), 0 = an ephemeral port (tests)
    ha_listen_port: int = -1
    #: haMasterAddress ``host:port`` of the master's HA port; empty: learnt from the name server's answer
    ha_master_address: str = ""
    #: A slave reports its offset to the master at least this often, ms.
    ha_send_heartbeat_interval: int = 5000
    #: An HA connection silent this long, ms, is closed.
    ha_housekeeping_interval: int = 20_000
    #: Largest chunk of commit log the master sends a slave at once, bytes.
    ha_transfer_batch_size: int = 32 * 1024
    #: SYNC_MASTER: a slave further behind than this many bytes is "not available"
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    #: slaveReadEnable: masters may suggest pulling from a slave, slaves serve pulls
    slave_read_enable: bool = False
    #: SlaveSynchronize period (RocketMQ: 10 s, first run after 3 s); tests shorten it
    slave_sync_interval: int = 10_000

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type.upper() == "SYNC_FLUSH"

    def commit_log_dir(self) -> Path:
        if self.store_path_commit_log:
            return Path(self.store_path_commit_log.split(",")[0])
        return Path(self.store_path_root_dir) / "commitlog"

    def consume_queue_unit_file_size(self) -> int:
        """``mapped_file_size_consume_queue`` rounded up to whole 20-byte units."""
        return -(-self.mapped_file_size_consume_queue // 20) * 20

    def delay_level_millis(self) -> list[int]:
        """Level 1.. -> delay in ms, parsed from ``message_delay_level`` (s, m, h, d suffixes)."""
        unit = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        out = []
        for tok in self.message_delay_level.split():
            try:
                out.append(int(tok[:-1]) * unit[tok[-1]])
            except (KeyError, ValueError):
                raise ConfigError(f"messageDelayLevel: bad level {tok!r}") from None
        return out
