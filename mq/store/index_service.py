"""The set of index files under ``<root>/index``: build from dispatch, query by key (STORE.md §6).

Files are named by their creation time ``yyyyMMddHHmmssSSS`` (local time) and ordered by name; only the last
one is written. When it is full a new one is created that inherits the last file's end offset and timestamp,
and the full file is queued for ``flush``, which makes it durable and only then advances
``index_msg_timestamp`` (the value the caller copies into the checkpoint's indexMsgTimestamp, as Java's
``IndexService.flush`` does after a full file is forced).

Differences from Java, all on the safe side:

- the replay guard skips a message whose offset is ``<=`` the newest indexed offset (Java: ``<`` the last
  file's endPhyOffset, which re-indexes the newest message a second time on every replay);
- ``truncate_from`` removes entries at or beyond a recovered commit-log end (Java leaves them, and its
  guard then refuses to index the new messages written below them);
- query results carry each offset once, and ``max_num`` is not clamped to maxMsgsNumBatch (64): the broker
  does that before calling.

Thread-safe: one lock serializes building, querying and maintenance (``flush`` holds it during fdatasync).
Callers own the policy around it: when to ``flush``, copying ``index_msg_timestamp`` into the checkpoint,
skipping ROLLBACK records, and clamping ``max_num``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from operator import mul
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from mq.common.sysflag import TRANSACTION_ROLLBACK_TYPE as _ROLLBACK
from mq.store import native
from mq.store.index_file import IndexFile, is_index_file_name, next_file_name
from mq.store.index_hash import _POW31, _hash_u32, build_key, index_key_hash, prefixed_key_hash

(_c_index_items,) = native.load("mq.store._index", "index_items")  # key hashing in C, or None

log = logging.getLogger(__name__)

#: RocketMQ's defaults (MessageStoreConfig.maxHashSlotNum / maxIndexNum).
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 20_000_000

#: ``read_keys(phy_offset)`` -> (topic, keys including the uniq key) of the record there, or None.
ReadKeys = Callable[[int], "tuple[str, list[str]] | None"]


class IndexService:
    """Index files of one store. Call ``load`` once before anything else."""

    def __init__(self, root_dir: Path, *, max_hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM,
                 max_index_num: int = DEFAULT_MAX_INDEX_NUM) -> None:
        if max_hash_slot_num <= 0 or max_index_num <= 1:
            raise ValueError(f"max_hash_slot_num must be > 0 and max_index_num > 1, "
                             f"got {max_hash_slot_num}, {max_index_num}")
        self.dir = Path(root_dir) / "index"
        self.max_hash_slot_num = max_hash_slot_num
        self.max_index_num = max_index_num
        self._files: list[IndexFile] = []
        self._unflushed_full: list[IndexFile] = []
        self._index_msg_timestamp = 0
        self._last_indexed: int | None = None  # offset of the newest message that has entries
        #: entries a failed index-file creation held back, written first by the next ``_put_items``
        self._pending: list[tuple[int, int, int]] = []
        self._prefix_hashes: dict[str, int] = {}  # topic -> unsigned hash of "topic#"
        self._lock = threading.RLock()
        self._loaded = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------------
    def load(self, last_exit_ok: bool, checkpoint_index_ts: int | None = None) -> int | None:
        """Map the existing files in name order.

        After an unclean exit (``last_exit_ok`` False) every file whose endTimestamp is newer than the
        checkpoint's indexMsgTimestamp is deleted, as Java does (None reads as 0, Java's value for a missing
        checkpoint: every non-empty file goes). Returns the lowest beginPhyOffset of a deleted file (the
        caller re-dispatches from there if it wants those entries back), or None if nothing was deleted.
        """
        with self._lock:
            if self._loaded:
                raise RuntimeError("IndexService.load called twice")
            self._loaded = True
            self.dir.mkdir(parents=True, exist_ok=True)
            limit = checkpoint_index_ts or 0
            dropped_from: int | None = None
            for path in sorted(self.dir.iterdir()):
                if not path.is_file() or not is_index_file_name(path.name):
                    log.warning("ignoring %s: not an index file name (yyyyMMddHHmmssSSS)", path)
                    continue
                if path.stat().st_size == 0:
                    log.warning("removing empty index file %s (crash while creating it)", path)
                    path.unlink()
                    continue
                f = IndexFile.open(path, self.max_hash_slot_num, self.max_index_num)
                if not last_exit_ok and f.end_timestamp > limit:
                    log.info("unclean exit: dropping index file %s (end %s > checkpoint %s)",
                             f.name, f.end_timestamp, limit)
                    begin = f.begin_phy_offset
                    dropped_from = begin if dropped_from is None else min(dropped_from, begin)
                    f.destroy()
                    continue
                log.info("loaded index file %r", f)
                self._files.append(f)
            full_ends = [f.end_timestamp for f in self._files if f.is_full]
            self._index_msg_timestamp = max([limit, *full_ends])
            self._last_indexed = self._newest_indexed_offset()
            return dropped_from

    def close(self) -> None:
        """Flush every file and unmap it."""
        with self._lock:
            if self._closed:
                return
            self.flush()
            for f in self._files:
                f.close()
            self._files.clear()
            self._closed = True

    # -- write -------------------------------------------------------------------------------------------
    def build_index(self, topic: str, keys: str | None, uniq_key: str | None, phy_offset: int,
                    store_timestamp: int) -> int:
        """Index one dispatched message; returns the number of entries written.

        Keys are ``uniq_key`` then every non-empty space-separated token of ``keys``, each as ``topic#key``.
        A message at or below the newest indexed offset is skipped (replay). The caller skips ROLLBACK
        transaction records (Java's dispatcher does).
        """
        items: list[tuple[int, int, int]] = []
        self._add_items(items, topic, keys, uniq_key, phy_offset, store_timestamp)
        return self._put_items(items) if items else 0

    def build_batch(self, requests: Sequence[Any]) -> int:
        """``build_index`` for many dispatched records (``DispatchRequest``-shaped: topic, keys, uniq_key,
        phy_offset, store_timestamp, tran_type) in log order, skipping ROLLBACK records: keys are hashed
        outside the lock, then written under one lock hold with one header write per file."""
        items = _c_index_items(requests, _ROLLBACK) if _c_index_items is not None else None
        if items is None:  # no C module, or requests that are not DispatchRequest tuples
            items = self._index_items(requests)
        return self._put_items(items) if items else 0

    def _index_items(self, requests: Iterable[Any]) -> list[tuple[int, int, int]]:
        """(key hash, phyOffset, storeTimestamp) of every key of ``requests``: the Python twin of
        ``mq.store._index.index_items``."""
        items: list[tuple[int, int, int]] = []
        add = items.append
        pw = _POW31
        last_topic = None
        ph = 0
        for r in requests:
            keys = r.keys
            uniq = r.uniq_key
            if not (keys or uniq) or r.tran_type == _ROLLBACK:
                continue
            topic = r.topic
            if topic != last_topic:
                ph = self._prefix_hash(topic)
                last_topic = topic
            phy = r.phy_offset
            ts = r.store_timestamp
            if uniq:
                if uniq.isascii() and len(uniq) <= 1024:  # the usual UNIQ_KEY: 32 hex digits
                    u = uniq.encode("ascii")
                    h = (ph * pw[len(u)] + sum(map(mul, u[::-1], pw))) & 0xFFFFFFFF
                    add((0 if h == 0x80000000 else 0x100000000 - h if h & 0x80000000 else h, phy, ts))
                else:
                    add((prefixed_key_hash(ph, uniq), phy, ts))
            if keys:
                for t in keys.split(" "):
                    if t:
                        add((prefixed_key_hash(ph, t), phy, ts))
        return items

    def _prefix_hash(self, topic: str) -> int:
        ph = self._prefix_hashes.get(topic)
        if ph is None:
            ph = _hash_u32(topic + "#")
            if len(self._prefix_hashes) < 100_000:
                self._prefix_hashes[topic] = ph
        return ph

    def _add_items(self, items: list[tuple[int, int, int]], topic: str, keys: str | None, uniq_key: str | None,
                   phy: int, ts: int) -> None:
        ph = self._prefix_hash(topic)
        if uniq_key:
            items.append((prefixed_key_hash(ph, uniq_key), phy, ts))
        if keys:
            for t in keys.split(" "):
                if t:
                    items.append((prefixed_key_hash(ph, t), phy, ts))

    def _put_items(self, items: list[tuple[int, int, int]]) -> int:
        """Write (hash, phyOffset, storeTimestamp) entries, ascending by offset, skipping replayed ones.

        When the next file cannot be created (a full disk) the entries not yet written are kept and go first
        on the next call (``retry_pending``), so none is lost and none is written twice."""
        with self._lock:
            if self._closed or not self._loaded:
                self._check_open()
            files = self._files
            # Replay guards (per message; offsets only grow, so everything after the first kept item is kept):
            # at or below the newest indexed offset, and Java's own (an empty rolled file carries its
            # predecessor's end offset).
            last = self._last_indexed
            floor = files[-1].end_phy_offset if files else 0
            i = 0
            end = len(items)
            while i < end and ((last is not None and items[i][1] <= last) or items[i][1] < floor):
                i += 1
            retrying = bool(self._pending)
            if retrying:
                items = self._pending + items[i:]
                self._pending = []
                i, end = 0, len(items)
            if i == end:
                return 0
            start = i
            try:
                f = files[-1] if files and files[-1].index_count < self.max_index_num else self._roll()
                while True:
                    j = f.put_hashes(items, i)
                    if j == end:
                        break
                    if j == i and f.index_count < self.max_index_num:  # a file with room always takes an entry
                        raise RuntimeError(f"index file {f.name} refused an entry")
                    i = j
                    f = self._roll()
            except OSError as exc:
                self._pending = items[i:]
                if not retrying:  # once per episode, not once per retry
                    log.error("cannot create or extend an index file (%s); index entries wait for it",
                              exc.strerror or exc)
                raise
            if retrying:
                log.info("index file created; held-back index entries written")
            self._last_indexed = items[-1][1]
            return end - start

    @property
    def pending(self) -> int:
        """Index entries waiting for an index file that could not be created."""
        return len(self._pending)

    def retry_pending(self) -> int:
        """Write the entries a failed file creation held back; returns how many were written."""
        return self._put_items([]) if self._pending else 0

    def _roll(self) -> IndexFile:
        prev = self._files[-1] if self._files else None
        name = next_file_name(prev.name if prev else None, int(time.time() * 1000))
        f = IndexFile.create(self.dir / name, self.max_hash_slot_num, self.max_index_num,
                             end_phy_offset=prev.end_phy_offset if prev else 0,
                             end_timestamp=prev.end_timestamp if prev else 0)
        _fsync_dir(self.dir)
        if prev is not None:
            self._unflushed_full.append(prev)
            log.info("index file %s is full; created %s", prev.name, name)
        self._files.append(f)
        return f

    def flush(self) -> None:
        """Make every written file durable; advance ``index_msg_timestamp`` past the full ones."""
        with self._lock:
            pending, self._unflushed_full = self._unflushed_full, []
            for f in pending:
                if f in self._files:
                    f.flush()
                    if f.is_full:
                        self._index_msg_timestamp = max(self._index_msg_timestamp, f.end_timestamp)
            for f in self._files:
                if f.dirty:
                    f.flush()

    # -- read --------------------------------------------------------------------------------------------
    def _candidates(self, topic: str, key: str, begin_ms: int, end_ms: int) -> Iterator[int]:
        """Offsets whose 31-bit key hash matches, newest file first, each offset once (Java's queryOffset)."""
        h = index_key_hash(build_key(topic, key))
        seen: set[int] = set()
        for f in reversed(self._files):
            if f.is_time_matched(begin_ms, end_ms):
                for phy in f.iter_phy_offsets(h, begin_ms, end_ms):
                    if phy not in seen:
                        seen.add(phy)
                        yield phy
            if f.begin_timestamp < begin_ms:
                return

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Up to ``max_num`` candidate offsets for ``topic``/``key`` stored in [begin_ms, end_ms], newest first.

        Candidates share the key's hash, not necessarily the key: re-check topic and keys against the record
        (or use ``query_verified``).
        """
        out: list[int] = []
        if max_num <= 0 or end_ms < begin_ms:
            return out
        with self._lock:
            self._check_open()
            for phy in self._candidates(topic, key, begin_ms, end_ms):
                out.append(phy)
                if len(out) >= max_num:
                    break
        return out

    def query_verified(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int,
                       read_keys: ReadKeys) -> list[int]:
        """Like ``query`` but keeps only offsets whose record really has this topic and key.

        ``read_keys(phy_offset)`` returns (topic, keys incl. the uniq key) of the record at that offset, or
        None if it is gone; it must not call back into this service. Hash collisions do not use up
        ``max_num``.
        """
        out: list[int] = []
        if max_num <= 0 or end_ms < begin_ms:
            return out
        with self._lock:  # held while reading records: a hot key's chain is walked only as far as needed
            self._check_open()
            for phy in self._candidates(topic, key, begin_ms, end_ms):
                record = read_keys(phy)
                if record is not None and record[0] == topic and key in record[1]:
                    out.append(phy)
                    if len(out) >= max_num:
                        break
        return out

    # -- maintenance -------------------------------------------------------------------------------------
    def delete_expired(self, min_phy_offset: int) -> int:
        """Delete the oldest files whose endPhyOffset < ``min_phy_offset``, always keeping the last file."""
        with self._lock:
            self._check_open()
            doomed: list[IndexFile] = []
            for f in self._files[:-1]:
                if f.end_phy_offset >= min_phy_offset:
                    break
                doomed.append(f)
            for f in doomed:
                log.info("deleting expired index file %r (commit log now starts at %s)", f, min_phy_offset)
                self._files.remove(f)
                if f in self._unflushed_full:
                    self._unflushed_full.remove(f)
                f.destroy()
            if doomed:
                _fsync_dir(self.dir)
            return len(doomed)

    def truncate_from(self, phy_offset: int) -> int:
        """Remove every entry at or beyond ``phy_offset`` (the recovered end of the commit log).

        Entries below it stay, so the returned offset, from which the caller must re-dispatch to complete
        the index, is ``phy_offset`` itself. Files left empty are deleted.
        """
        with self._lock:
            self._check_open()
            while self._files:
                f = self._files[-1]
                removed = f.truncate_from(phy_offset)
                if f.entry_count > 0:
                    if removed:
                        log.info("truncated %d index entries at or beyond %s from %s", removed, phy_offset, f.name)
                    break
                log.info("deleting index file %s: no entries below %s", f.name, phy_offset)
                self._files.pop()
                if f in self._unflushed_full:
                    self._unflushed_full.remove(f)
                f.destroy()
            _fsync_dir(self.dir)
            self._last_indexed = self._newest_indexed_offset()
            return phy_offset

    # -- state -------------------------------------------------------------------------------------------
    @property
    def max_phy_offset(self) -> int:
        """endPhyOffset of the last file (the offset of the newest indexed message), 0 without files."""
        with self._lock:
            return self._files[-1].end_phy_offset if self._files else 0

    @property
    def index_msg_timestamp(self) -> int:
        """endTimestamp of the newest full file made durable: the checkpoint's indexMsgTimestamp."""
        return self._index_msg_timestamp

    @property
    def files(self) -> list[IndexFile]:
        """A snapshot of the loaded files, oldest first (for tools and tests)."""
        with self._lock:
            return list(self._files)

    def _newest_indexed_offset(self) -> int | None:
        for f in reversed(self._files):
            if f.entry_count > 0:
                return f.end_phy_offset
        return None

    def _check_open(self) -> None:
        if not self._loaded:
            raise RuntimeError("IndexService used before load()")
        if self._closed:
            raise RuntimeError("IndexService is closed")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
