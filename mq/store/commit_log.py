"""The commit log: every message of every topic, appended in arrival order (RocketMQ ``CommitLog``).

Records are message format v1, byte for byte (``mq.common.record`` draws the table). A record never spans
two segments: when ``size + 8 > remaining`` an 8-byte BLANK record closes the segment::

    +--------+------+---------------------------------------+
    | offset | size | field                                 |
    +--------+------+---------------------------------------+
    |      0 |    4 | remaining bytes of the segment (int32) |
    |      4 |    4 | BLANK magic 0xCBD43194                 |
    +--------+------+---------------------------------------+

This class only encodes, appends and reads; locking, flushing and dispatch belong to ``MessageStore``.
``append`` (and ``replica.append_raw``, a slave's copy of the master's bytes) must be called under the store's put lock.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.hosts import pack_host
from mq.common.log_throttle import DEFAULT_INTERVAL, LogThrottle
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import decode_properties, encode_properties
from mq.common.record import (BLANK, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, RECORD_HEADER_V4, RECORD_PREFIX, body_crc,
                              crc32)
from mq.common.tags import tags_code as compute_tags_code
from mq.common.topic import SCHEDULE_TOPIC, is_valid_topic
from mq.store import native
from mq.store.mapped_file_queue import MappedFileQueue
from mq.store.prepared import I64_MAX, I64_MIN, DispatchRequest, Prepared, bad_fields, waits_for_flush
from mq.store.status import PutMessageStatus
from mq.store.warm import WarmAheadService

log = logging.getLogger(__name__)

_append_v4, _prepare_v4, _put_one_v4 = native.load("mq.store._append", "append_v4", "prepare_v4",
                                                   "put_one_v4")  # the C writer, or Nones
#: whether records are encoded and written by the C writer (the benchmarks say which one ran)
C_WRITER = _append_v4 is not None

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_TAIL_V4 = struct.Struct(">iqi")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
_NOT, _COMMIT = SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE
_PREPARED, _ROLLBACK = SF.TRANSACTION_PREPARED_TYPE, SF.TRANSACTION_ROLLBACK_TYPE
_STORE_TS_POS_V4 = 56
#: blocks of a commit-log segment are reserved this many bytes at a time ahead of the writer (1.2-1.8 ms per
#: GiB on this machine's ext4: about 0.1 ms per step), so a fresh 1 GiB segment takes the disk its records need
CL_RESERVE_STEP = 64 * 1024 * 1024
_new = tuple.__new__  # builds a NamedTuple without its Python-level __new__ (hot path)
#: SYNC_FLUSH staging: a put that would take the staged bytes past this commits them itself (``CommitLog.staging``)
STAGE_LIMIT = 4 << 20


class CommitLog:
    def __init__(self, directory: Path, file_size: int, store_host: tuple[str, int], *,
                 max_message_size: int = 4 * 1024 * 1024, delay_levels_ms: list[int] | None = None,
                 log_interval: float = DEFAULT_INTERVAL) -> None:
        self.queue = MappedFileQueue(Path(directory), file_size, reserve_step=CL_RESERVE_STEP,
                                     size_key="mappedFileSizeCommitLog")
        self.file_size = file_size
        self.store_host = pack_host(*store_host)
        self.max_message_size = max_message_size
        self._store_host_extra = 12 if len(self.store_host) == 20 else 0
        self._store_host_flag = SF.STOREHOST_V6 if len(self.store_host) == 20 else 0
        self._max_total = max_message_size + 65536
        #: the C encoder and writer (``mq.store._append``) where built; None: this module's Python code
        self._c_prepare = _prepare_v4 if not self._store_host_extra else None
        self._c_append = _append_v4
        #: SYNC_FLUSH sets it: appended records are staged in a user-space buffer (``_stage``) and handed to the OS
        #: with one ``os.pwrite`` per group commit (``commit``, RocketMQ's transientStorePool writeBuffer +
        #: CommitRealTimeService) instead of being stored through the mapping. The pages are then never dirtied
        #: through a writable mapping, so the group commit's fdatasync does not write-protect them again (TLB
        #: shootdowns across cores: fdatasync of ~48 KB took p50 195-235 µs instead of 466-474 on this machine),
        #: and a put costs no system call (one pwrite per put cost the putting thread 1.3-1.5 µs of system time).
        #: Staged records are past ``wrote_position``: readers, replication and flushes see them only once
        #: committed, and a put is acknowledged only after its commit (and, with WAIT, its fdatasync).
        self.staging = False
        self._stage = bytearray(1 << 20)
        #: bytes staged: the records at [wrote_position, wrote_position + _staged) of the last segment
        self._staged = 0
        self.delay_levels_ms = delay_levels_ms or []
        #: (topic, queue_id) -> next queue offset
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self._topic_prefix: dict[str, bytes] = {}
        #: store timestamp of the last appended record (for the checkpoint)
        self.last_store_timestamp = 0
        #: zero-fills ahead of the writer (``mq.store.warm``); set by the store while it runs
        self.warm: WarmAheadService | None = None
        #: why the last CREATE_MAPPED_FILE_FAILED happened
        self.create_error = ""
        #: why ``prepare`` last refused a message (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED)
        self.reject_reason = ""
        #: a full disk refuses every put: its cause is logged once per interval, with a count
        self._throttle = LogThrottle(log, log_interval)
        #: ``put_one``'s C call (prepare and append fused) and its fixed arguments; None with the C encoder off
        self._c_put = _put_one_v4 if self._c_prepare is not None else None
        self._c_put_config = (self._topic_prefix, max_message_size, self._max_total, Prepared, crc32, self.store_host,
                              DispatchRequest, STAGE_LIMIT)

    def set_max_message_size(self, size: int) -> None:
        """Change the largest body accepted (maxMessageSize, changed at run time by UPDATE_BROKER_CONFIG)."""
        self.max_message_size = size
        self._max_total = size + 65536
        self._c_put_config = (self._topic_prefix, size, self._max_total, *self._c_put_config[3:])

    # -- geometry ----------------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    # -- put path ----------------------------------------------------------------------------------------
    def prepare(self, msg: MessageExtBrokerInner) -> Prepared | PutMessageStatus:
        """Validate and encode what does not depend on the log position (RocketMQ checkMessage + encode).

        Every field that reaches the record layout is checked here, whoever built the message (a send, the
        timer, the schedule service, a transaction, a retry): a valid topic name (it becomes a directory of the
        consume queues), a queue id in [0, 2^31), each integer within its field, properties that encode as
        UTF-8 within 32,767 bytes (a property separator is added to properties that end in NUL, which recovery
        would read as a torn record). The sysFlag keeps only what a producer chooses (``sysflag.store_sys_flag``);
        the layout bits are set from what is written. A record written here always passes ``check_record``.
        A refusal is MESSAGE_ILLEGAL (or PROPERTIES_SIZE_EXCEEDED) with ``reject_reason`` saying why."""
        if self._c_prepare is not None:
            p = self._c_prepare(msg, self._topic_prefix, self.max_message_size, self._max_total, Prepared, crc32)
            if p is not None:  # None: a case the C encoder leaves to this code (a new topic, a delay level...)
                return p
        topic = msg.topic
        prefix = self._topic_prefix.get(topic)
        if prefix is None:
            if not is_valid_topic(topic):
                return self._reject(f"the topic {str(topic)[:200]!r} is not a valid topic name")
            prefix = bytes((len(topic),)) + topic.encode("ascii")
            if len(self._topic_prefix) < 100_000:
                self._topic_prefix[topic] = prefix
        body = msg.body or b""
        if len(body) > self.max_message_size:
            return self._reject(f"the body is {len(body)} bytes; the limit is {self.max_message_size}")
        queue_id = msg.queue_id
        bad = bad_fields(msg)
        if bad:
            return self._reject(bad)
        props = msg.properties
        sys_flag = msg.sys_flag & SF.PRODUCER_BITS
        tran = sys_flag & SF.TRANSACTION_MASK
        props_s = msg.properties_string
        delay_ms = 0
        if tran == _NOT or tran == _COMMIT:
            level = props.get(P.DELAY_TIME_LEVEL) if props else None
            if level and level != "0" and self.delay_levels_ms:
                try:
                    lv = int(level)
                except ValueError:
                    lv = 0
                if lv > 0:
                    lv = min(lv, len(self.delay_levels_ms))
                    props = dict(props)
                    props[P.REAL_TOPIC] = topic
                    props[P.REAL_QUEUE_ID] = str(queue_id)
                    props[P.DELAY_TIME_LEVEL] = str(lv)
                    if props_s is not None:
                        base = decode_properties(props_s)
                        base.update({P.REAL_TOPIC: topic, P.REAL_QUEUE_ID: str(queue_id),
                                     P.DELAY_TIME_LEVEL: str(lv)})
                        # RocketMQ re-encodes a parked message from its property map, which still holds the
                        # WAIT the send path cut from the stored string; delivered, the message carries it
                        wait = props.get(P.WAIT_STORE_MSG_OK)
                        if wait is not None:
                            base.setdefault(P.WAIT_STORE_MSG_OK, wait)
                        props_s = encode_properties(base)
                    topic, queue_id = SCHEDULE_TOPIC, lv - 1
                    prefix = bytes((len(SCHEDULE_TOPIC),)) + SCHEDULE_TOPIC.encode()
                    delay_ms = self.delay_levels_ms[lv - 1]
        if props_s is None:
            props_s = encode_properties(props)
        try:
            props_b = props_s.encode("utf-8")
        except UnicodeEncodeError as exc:
            return self._reject(f"the properties are not valid text: {exc.reason}")
        if props_b.endswith(b"\x00"):  # recovery would take the record for one cut short (``check_record``):
            props_b += b"\x02"  # end it with a property separator, which every reader skips
        if len(props_b) > 32767:
            self.reject_reason = f"the properties are {len(props_b)} bytes; a record holds at most 32767"
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        born = msg.born_host
        try:
            born_b = born if born.__class__ is bytes else pack_host(*born)
        except (TypeError, ValueError, OSError) as exc:
            return self._reject(f"bad born host {born!r}: {exc}")
        if len(born_b) != 8 and len(born_b) != 20:
            return self._reject(f"bad born host: {len(born_b)} bytes")
        total = 90 + len(body) + len(prefix) + len(props_b) + self._store_host_extra
        if len(born_b) == 20:
            sys_flag |= SF.BORNHOST_V6
            total += 12
        sys_flag |= self._store_host_flag
        if total > self._max_total:
            return self._reject(f"the record would be {total} bytes; the limit is {self._max_total}")
        tc = msg.tags_code
        if props:
            if tc is None:
                tc = compute_tags_code(props.get(P.TAGS))
            keys = props.get(P.KEYS)
            uniq = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        else:
            if tc is None:
                tc = 0
            keys = uniq = None
        if tc.__class__ is not int or not I64_MIN <= tc <= I64_MAX:
            return self._reject(f"bad tags code {tc!r}")
        return _new(Prepared, (
            topic, queue_id, body, prefix + _I16.pack(len(props_b)) + props_b, body_crc(body),
            msg.flag, sys_flag, msg.born_timestamp, born_b, msg.reconsume_times,
            msg.prepared_transaction_offset, total, tran, tc, delay_ms, keys, uniq, waits_for_flush(msg),
        ))

    def _reject(self, why: str) -> PutMessageStatus:
        self.reject_reason = why
        return PutMessageStatus.MESSAGE_ILLEGAL

    def put_one(self, msg: MessageExtBrokerInner, store_ts: int) -> list[DispatchRequest] | PutMessageStatus:
        """``prepare`` and ``append`` of one message; caller holds the put lock. The usual put (a message the C
        encoder takes, whose record fits the last segment's reserved room where the warm-ahead thread is not
        zeroing, and the staging buffer when staging) is one C call, ``mq.store._append.put_one_v4``; anything
        else takes both steps. Returns what ``append`` does, or ``prepare``'s failure status."""
        files = self.queue.files
        if files and self._c_put is not None:
            if self.staging:
                staged = self._staged
                requests = self._c_put(msg, files[-1], store_ts, self.topic_queue_table, self._c_put_config,
                                       self._stage, staged)
                if requests is not None:
                    self._staged = staged + requests[0].size
            else:
                requests = self._c_put(msg, files[-1], store_ts, self.topic_queue_table, self._c_put_config, None, 0)
            if requests is not None:
                self.last_store_timestamp = store_ts
                return requests
        p = self.prepare(msg)
        if p.__class__ is PutMessageStatus:
            return p  # type: ignore[return-value]
        return self.append([p], store_ts)  # type: ignore[list-item]

    def append(self, batch: list[Prepared], store_ts: int) -> list[DispatchRequest] | PutMessageStatus:
        """Append ``batch`` (all-or-nothing, one segment); caller holds the put lock.

        Returns one ``DispatchRequest`` per record, in log order (physical and queue offsets, size, store
        time: everything a put result needs), or the failure status."""
        files = self.queue.files
        if len(batch) == 1:
            need = batch[0].total
        else:
            need = 0
            for m in batch:
                need += m.total
        mf = files[-1] if files else None
        staged = self._staged
        if mf is None or need + 8 > mf.file_size - mf.wrote_position - staged:
            if staged:  # the segment's staged records go out before its BLANK end
                if not self.try_commit():
                    return PutMessageStatus.UNKNOWN_ERROR
                staged = 0
            mf = self._segment_for(mf, need)
            if mf.__class__ is PutMessageStatus:
                return mf
        pos = mf.wrote_position + staged
        if pos + need > mf.reserved_to and not self._reserve(mf, pos + need):
            return PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        if pos + need > mf.zeroing_from:  # the warm-ahead thread is zeroing where this batch goes
            self.warm.wait_until_clear(mf, pos + need)  # type: ignore[union-attr]
        table = self.topic_queue_table
        if self.staging:
            if staged + need > STAGE_LIMIT and staged:  # the flush thread is behind: bound the buffer
                if not self.try_commit():
                    return PutMessageStatus.UNKNOWN_ERROR
                staged = 0
            buf = self._stage
            if len(buf) < staged + need:
                buf.extend(bytes(staged + need - len(buf)))
            at, base = staged, mf.start_offset + mf.wrote_position
        else:
            buf, at, base = mf.mm, pos, mf.start_offset
        requests = None
        if self._c_append is not None:  # None back: an IPv6 host, which the Python writer handles
            requests = self._c_append(buf, at, base, batch, store_ts, self.store_host, table, DispatchRequest)
        if requests is None:
            requests = self._write(buf, at, base, batch, store_ts, table)
        if self.staging:
            self._staged = staged + need
        else:
            mf.wrote_position = pos + need
        self.last_store_timestamp = store_ts
        return requests

    def _write(self, buf, pos: int, base: int, batch: list[Prepared], store_ts: int,
               table: dict[tuple[str, int], int]) -> list[DispatchRequest]:
        """Encode ``batch`` into ``buf`` from ``pos`` (the record at ``pos`` has physical offset ``base + pos``),
        assigning queue offsets from ``table``: the Python twin of ``mq.store._append.append_v4``."""
        store_host = self.store_host
        v4 = len(store_host) == 8
        pack_into = RECORD_HEADER_V4.pack_into
        requests = []
        add = requests.append
        for m in batch:
            topic, qid, tran = m.topic, m.queue_id, m.tran_type
            if tran == _NOT or tran == _COMMIT:
                key = (topic, qid)
                qoff = table.get(key, 0)
                table[key] = qoff + 1
            else:
                qoff = 0
            total = m.total
            phy = base + pos
            body = m.body
            n = len(body)
            if v4 and len(m.born_host) == 8:
                b = pos + 88
                buf[b:b + n] = body
                buf[b + n:pos + total] = m.tail
                pack_into(buf, pos, total, MESSAGE_MAGIC_CODE, m.crc, qid, m.flag, qoff, phy, m.sys_flag,
                          m.born_ts, m.born_host, store_ts, store_host, m.reconsume, m.prepared_tx, n)
            else:
                buf[pos:pos + total] = b"".join((
                    RECORD_PREFIX.pack(total, MESSAGE_MAGIC_CODE, m.crc, qid, m.flag, qoff, phy, m.sys_flag,
                                       m.born_ts),
                    m.born_host, _I64.pack(store_ts), store_host, _TAIL_V4.pack(m.reconsume, m.prepared_tx, n),
                    body, m.tail))
            pos += total
            delay = m.delay_ms
            add(_new(DispatchRequest, (topic, qid, qoff, phy, total, store_ts + delay if delay else m.tags_code,
                                       store_ts, m.keys, m.uniq_key, tran)))
        return requests

    @property
    def staged_bytes(self) -> int:
        return self._staged

    def append_end(self, mf) -> int:
        """Where the next record goes in segment ``mf``: past its staged records when it is the last one."""
        files = self.queue.files
        return mf.wrote_position + (self._staged if files and mf is files[-1] else 0)

    def commit(self) -> None:
        """(Put lock held.) Hand the staged records to the OS: one ``os.pwrite`` at the last segment's write
        position, which then moves past them. ``OSError`` leaves them staged and the position where it was;
        the next commit writes them again (bytes a partial write got out are overwritten with the same)."""
        n = self._staged
        if not n:
            return
        mf = self.queue.files[-1]
        pos = mf.wrote_position
        with memoryview(self._stage) as view:
            done = 0
            while done < n:
                done += os.pwrite(mf.fd, view[done:n], pos + done)
        mf.wrote_position = pos + n
        self._staged = 0

    def try_commit(self) -> bool:
        """``commit``; False when it failed (``create_error`` says why, and it is logged)."""
        try:
            self.commit()
        except OSError as exc:
            self._write_failed(self.queue.files[-1], exc)
            return False
        return True

    def _write_failed(self, mf, exc: OSError) -> None:
        self.create_error = f"cannot write to the commit log segment {mf.path.name}: {exc.strerror or exc}"
        self._throttle.error("write", "%s", self.create_error)

    def _segment_for(self, mf, need: int):
        """The segment the next ``need`` bytes go to: closes the current one with a BLANK record when they
        do not fit (a record never spans two segments) and opens the next."""
        if need + 8 > self.file_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        q = self.queue
        if mf is not None and mf.wrote_position < mf.file_size:
            pos = mf.wrote_position
            if pos + 8 > mf.reserved_to and not self._reserve(mf, pos + 8):
                return PutMessageStatus.CREATE_MAPPED_FILE_FAILED
            if pos + 8 > mf.zeroing_from:
                self.warm.wait_until_clear(mf, pos + 8)  # type: ignore[union-attr]
            BLANK.pack_into(mf.mm, pos, mf.file_size - pos, BLANK_MAGIC_CODE)
            mf.wrote_position = mf.file_size
        try:
            mf = q.get_last_file(0)
        except OSError as exc:
            self.create_error = f"cannot create a commit log segment: {exc.strerror or exc}"
            self._throttle.error("create", "%s", self.create_error)
            return PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        if need + 8 > mf.file_size - mf.wrote_position:  # pragma: no cover - a fresh segment always fits
            return PutMessageStatus.MESSAGE_ILLEGAL
        return mf

    def _reserve(self, mf, end: int) -> bool:
        """Reserve the segment's blocks up to ``end`` before a store; False (and ``create_error``) when the disk
        has no room, so nothing is stored into a hole that could fault."""
        try:
            mf.reserve_to(end)
        except OSError as exc:
            self.create_error = f"no room in the commit log segment {mf.path.name}: {exc.strerror or exc}"
            self._throttle.error("reserve", "%s", self.create_error)
            return False
        return True

    def msg_id(self, phy: int) -> str:
        return (self.store_host + _I64.pack(phy)).hex().upper()

    # -- read path ---------------------------------------------------------------------------------------
    def read(self, phy: int, size: int) -> bytes | None:
        """Copy of ``size`` bytes at physical offset ``phy`` (None if removed or not yet written)."""
        mf = self.queue.find_by_offset(phy)
        if mf is None:
            return None
        rel = phy - mf.start_offset
        if rel + size > mf.wrote_position:
            return None
        return mf.read(rel, size)

    def read_record(self, phy: int) -> bytes | None:
        """The whole record at ``phy`` (size read from its TOTALSIZE field)."""
        head = self.read(phy, 8)
        if head is None:
            return None
        size, magic = BLANK.unpack(head)
        if magic != MESSAGE_MAGIC_CODE or size < 91:
            return None
        return self.read(phy, size)

    def store_timestamp_of(self, phy: int, size: int = 0) -> int | None:
        """STORETIMESTAMP of the record at ``phy`` (IPv4 or IPv6 born host)."""
        head = self.read(phy, 48)
        if head is None:
            return None
        sys_flag = _I32.unpack_from(head, 36)[0]
        pos = 56 if not sys_flag & SF.BORNHOST_V6 else 68
        raw = self.read(phy + pos, 8)
        return _I64.unpack(raw)[0] if raw else None

    def segment_view(self, phy: int) -> tuple[memoryview, int, int] | None:
        """(view of the segment's readable bytes, segment start, relative pos) for scanning from ``phy``."""
        mf = self.queue.find_by_offset(phy)
        if mf is None:
            return None
        return memoryview(mf.mm)[:mf.wrote_position], mf.start_offset, phy - mf.start_offset

    # -- lifecycle ---------------------------------------------------------------------------------------
    def load(self) -> None:
        self.queue.load()

    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    def close(self) -> None:
        self.queue.close()

