"""Master/slave replication, store side (RocketMQ ``HAConnection`` reads, ``HAClient.appendToCommitLog``).

The master ships raw commit-log bytes; the slave appends them byte for byte at the same physical offsets and
dispatches them as it would its own appends. One *replica chunk* lies inside one segment and holds whole
records, optionally followed by the segment's BLANK tail (the 8-byte BLANK record and every byte after it up
to the segment end, whatever they are)::

    phy_offset (a record start: its PHYSICALOFFSET field equals phy_offset)
    v
    +------------------+-----+------------------+----------------------------+----------------------+
    | record           | ... | record           | int32 remaining | int32    | filler (raw bytes)   |
    | TOTALSIZE bytes  |     | TOTALSIZE bytes  | (= seg end - here)| 0xCBD43194 | up to the segment end |
    +------------------+-----+------------------+----------------------------+----------------------+
                                                 ^ optional BLANK tail, always whole        segment end ^

``chunk_end`` (master) decides where a chunk read from a segment stops: at a record boundary within
``max_bytes``, except that the first unit is always whole (a record larger than ``max_bytes``, or a BLANK tail,
goes alone). ``parse_chunk`` (slave) validates a received chunk completely before anything is written and
returns the dispatch requests for its records. Both are pure functions of bytes.

RocketMQ's own master does not keep to record boundaries: it sends up to ``haTransferBatchSize`` (32 KiB) of
raw log at a time, cutting records anywhere, and its slave appends whatever arrives. ``ChunkAssembler`` lets our
slave follow such a master: it gathers the transferred bytes and hands out only whole units (``whole_units``),
keeping a cut record until the rest of it arrives. From our own master every transfer is whole already.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from mq.common import sysflag as SF
from mq.common.record import BLANK, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE
from mq.store.prepared import DispatchRequest
from mq.store.log_scan import check_record, misflagged
from mq.store.mapped_file import StoreError
from mq.store.status import ReplicaOffsetError

if TYPE_CHECKING:
    from mq.store.commit_log import CommitLog
    from mq.store.message_store import MessageStore

_NOT, _COMMIT = SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE

#: TOTALSIZE, MAGICCODE: the first 8 bytes of a record or of the BLANK record (``mq.common.record.BLANK``)
UNIT_HEAD = BLANK
MIN_RECORD_SIZE = 91


class ParsedChunk(NamedTuple):
    """A validated replica chunk: its records' dispatch requests, in log order."""

    requests: list[DispatchRequest]
    #: store time of the last record (0 if none)
    last_store_timestamp: int


def chunk_end(buf, rel: int, wrote: int, file_size: int, max_bytes: int) -> int:
    """Master side: the segment-relative end of the chunk starting at ``rel`` in ``buf`` (the segment's
    bytes; ``wrote`` is its write position, below which every record is whole).

    Stops at the last record boundary within ``rel + max_bytes``; the first unit is taken whole even when it
    is larger. A BLANK record takes the rest of the segment with it. Raises ``ValueError`` when ``rel`` or a
    later position is neither a record nor a BLANK record (the caller's offset is not a record start)."""
    limit = rel + max(max_bytes, 1)
    pos = rel
    unpack = UNIT_HEAD.unpack_from
    while pos < wrote:
        if pos + 8 > wrote:
            raise ValueError(f"no whole record at segment position {pos}")
        total, magic = unpack(buf, pos)
        if magic == MESSAGE_MAGIC_CODE:
            if total < MIN_RECORD_SIZE or pos + total > wrote:
                raise ValueError(f"record at segment position {pos} has an impossible size {total}")
            if pos > rel and pos + total > limit:
                break
            pos += total
        elif magic == BLANK_MAGIC_CODE:
            if total != file_size - pos or wrote != file_size:
                raise ValueError(f"BLANK record at segment position {pos} does not close the segment")
            if pos > rel and file_size > limit:
                break  # the tail goes alone in the next chunk
            return file_size
        else:
            raise ValueError(f"no record starts at segment position {pos}")
    return pos


def parse_chunk(data: bytes, phy_offset: int, file_size: int, *, delay_levels_ms: list[int],
                check_crc: bool = True) -> ParsedChunk:
    """Slave side: validate ``data`` received for ``phy_offset`` and return its dispatch requests.

    Every record must be whole and valid (``check_record`` with CRC, its PHYSICALOFFSET equal to where it
    lies); a BLANK record must say exactly how far the segment end is, and the chunk must end there; the
    chunk must not cross a segment end. Anything else raises ``ValueError``. A record whose host-address bits
    misdescribe it (an older master wrote them at a client's request; ``log_scan.misflagged``: exactly one
    reading makes it whole, with a matching CRC) is copied as it is and dispatched as what it is. A record that
    fails its CRC is refused even when a master's recovery set it aside: the slave cannot tell it from bytes
    damaged on the way."""
    n = len(data)
    seg_end = phy_offset - phy_offset % file_size + file_size
    if phy_offset + n > seg_end:
        raise ValueError(f"replica chunk of {n} bytes at {phy_offset} crosses the segment end {seg_end}")
    view = memoryview(data)
    requests: list[DispatchRequest] = []
    add = requests.append
    pos = 0
    try:
        while pos < n:
            size, req = check_record(view, pos, check_crc=check_crc, delay_levels_ms=delay_levels_ms,
                                     expect_phy=phy_offset + pos)
            if size < 0:
                fixed = misflagged(view, pos, expect_phy=phy_offset + pos, delay_levels_ms=delay_levels_ms)
                if fixed is not None:
                    _flag, size, req = fixed
            if size > 0:
                add(req)  # type: ignore[arg-type]
                pos += size
                continue
            if size == 0:  # BLANK: the segment's tail, which must be the rest of this chunk
                remaining = BLANK.unpack_from(view, pos)[0]
                here = phy_offset + pos
                if remaining != seg_end - here or pos + remaining != n:
                    raise ValueError(f"BLANK record at {here} does not end the segment with the chunk "
                                     f"(remaining {remaining}, segment end {seg_end}, chunk end {phy_offset + n})")
                break
            raise ValueError(f"replica chunk at {phy_offset}: no whole valid record at {phy_offset + pos}")
    finally:
        view.release()
    return ParsedChunk(requests, requests[-1].store_timestamp if requests else 0)


def whole_units(data: bytes | bytearray | memoryview, phy_offset: int, file_size: int) -> int:
    """How many leading bytes of ``data`` (log bytes from ``phy_offset``) form whole units: records, or a BLANK
    record with the rest of its segment. Reads sizes and magic codes only (``parse_chunk`` checks the rest);
    ``ValueError`` when a unit starts with neither magic code or with an impossible size."""
    n = len(data)
    seg_end = file_size - phy_offset % file_size  # relative to data[0]
    unpack = UNIT_HEAD.unpack_from
    pos = 0
    while pos + 8 <= n:
        total, magic = unpack(data, pos)
        if magic == MESSAGE_MAGIC_CODE:
            if total < MIN_RECORD_SIZE or pos + total > seg_end:
                raise ValueError(f"record at {phy_offset + pos} has an impossible size {total}")
            if pos + total > n:
                break
            pos += total
        elif magic == BLANK_MAGIC_CODE:
            if pos + total != seg_end:
                raise ValueError(f"BLANK record at {phy_offset + pos} does not close its segment")
            return seg_end if seg_end <= n else pos
        else:
            raise ValueError(f"no record starts at {phy_offset + pos}")
    return pos


class ChunkAssembler:
    """Slave side: the master's transfer frames in, whole-unit chunks for ``append_replica`` out.

    ``feed(frame offset, body, local max offset)`` checks that the frame continues the stream (at the local max
    offset plus what is held back; an empty store starts anywhere, ``append_replica`` checks where) and returns
    ``[(offset, bytes)]`` to append in order. Bytes of a unit not yet whole are held back; ``held`` says how many.
    ``ValueError`` for a frame that does not continue the stream or bytes that are not log units."""

    __slots__ = ("file_size", "_buf", "_at")

    def __init__(self, file_size: int) -> None:
        self.file_size = file_size
        self._buf = bytearray()
        self._at = 0

    @property
    def held(self) -> int:
        return len(self._buf)

    def expected(self, local_max: int) -> int:
        """Where the next frame must start."""
        return self._at + len(self._buf) if self._buf else local_max

    def feed(self, phy_offset: int, body: bytes, local_max: int, *, empty: bool = False) -> list[tuple[int, bytes]]:
        if phy_offset != self.expected(local_max) and not (empty and not self._buf):
            raise ValueError(f"offset mismatch: master sends {phy_offset}, slave expects {self.expected(local_max)}")
        if not body:
            return []
        if not self._buf:
            self._at = phy_offset
        buf = self._buf
        buf += body
        out: list[tuple[int, bytes]] = []
        while buf:
            n = whole_units(buf, self._at, self.file_size)
            if n == 0:
                break
            out.append((self._at, bytes(buf[:n])))
            del buf[:n]
            self._at += n
        return out


def read_chunk(cl: "CommitLog", phy: int, max_bytes: int) -> bytes | None:
    """Master side: whole records (and a whole BLANK tail) from ``phy``, within its segment and, past the
    first unit, within ``max_bytes``. None when the segment is gone (deleted meanwhile)."""
    mf = cl.queue.find_by_offset(phy)
    if mf is None:
        return None
    wrote = mf.wrote_position  # every record below it is whole (``append`` moves it last)
    rel = phy - mf.start_offset
    if rel >= wrote:
        return b""
    try:
        end = chunk_end(mf.mm, rel, wrote, mf.file_size, max_bytes)
    except ValueError:
        if mf.closed:
            return None
        raise
    return mf.read(rel, end - rel)


def append_raw(cl: "CommitLog", phy: int, data: bytes) -> None:
    """Slave side (put lock held): copy ``data`` (validated by the caller) to ``phy``, the end of the log or
    the start of the next segment, opening that segment if needed. ``OSError`` (no room for a new segment)
    leaves the log unchanged. The write position moves only once every byte is in place."""
    cl.commit()  # a store that staged records (SYNC_FLUSH) before it became a slave
    q = cl.queue
    files = q.files
    mf = files[-1] if files else None
    if mf is None or mf.is_full:
        mf = q.get_last_file(phy)  # creates the segment at phy (a boundary) or after the full last one
    rel = phy - mf.start_offset
    end = rel + len(data)
    if rel != mf.wrote_position or end > mf.file_size:  # pragma: no cover - the store checked both
        raise ValueError(f"replica write at {phy} does not continue segment {mf.path.name}")
    if end > mf.reserved_to:
        mf.reserve_to(end)  # OSError: no room, nothing written
    if end > mf.zeroing_from:  # the warm-ahead thread is zeroing where this goes
        cl.warm.wait_until_clear(mf, end)  # type: ignore[union-attr]
    mf.mm[rel:end] = data
    mf.wrote_position = end


def read_replica(store: "MessageStore", phy_offset: int, max_bytes: int) -> bytes | None:
    """Master side: raw commit-log bytes from ``phy_offset`` for a slave, whole records only.

    ``b""`` when ``phy_offset`` is the max offset (nothing new); None when it lies outside [min offset,
    max offset] (e.g. deleted by retention). The bytes stay inside the segment holding ``phy_offset`` and
    within ``max_bytes``, except that the first unit is always whole: a record larger than ``max_bytes``,
    or the segment's BLANK tail (the BLANK record and the raw bytes after it up to the segment end), comes
    alone and whole. Only bytes below the write position are read (never a half-written record).
    ``ValueError`` when no record starts at ``phy_offset`` (a slave whose log diverged)."""
    cl = store.commit_log
    if phy_offset == cl.max_offset:
        return b""
    if phy_offset < cl.min_offset or phy_offset > cl.max_offset:
        return None
    return read_chunk(cl, phy_offset, max_bytes)


def append_replica(store: "MessageStore", phy_offset: int, data: bytes) -> int:
    """Slave side: append ``data`` (a chunk from the master's ``read_replica``) at ``phy_offset`` byte for
    byte; returns the new max physical offset.

    ``phy_offset`` must be the max offset (``ReplicaOffsetError`` otherwise), except on an empty store,
    which starts its log at any segment boundary. The chunk is validated first (``ValueError``: nothing
    written), then written, flushed as the flush mode promises (SYNC_FLUSH: before returning) and
    dispatched as local appends are: consume queues, index, ``on_dispatch``, the per-queue offset table.
    ``OSError`` (no room for a segment, a failed SYNC flush) propagates with nothing made visible.
    ``StoreError`` when the store is not a running SLAVE or a flush already failed."""
    if store._shutdown or not store._loaded:
        raise StoreError("message store is not running")
    if not store._slave:
        raise StoreError("append_replica needs a SLAVE store (broker_role)")
    cl = store.commit_log
    with store.put_lock:
        if store.flush_error is not None:
            raise StoreError(store.flush_error)
        end = cl.max_offset
        empty = end == cl.min_offset
        if phy_offset != end and not (empty and phy_offset % cl.file_size == 0 and phy_offset >= 0):
            raise ReplicaOffsetError(end, phy_offset)
        if not data:
            return end
        chunk = parse_chunk(data, phy_offset, cl.file_size, delay_levels_ms=store.delay_levels_ms)
        if phy_offset != end:  # an empty log restarted elsewhere: nothing derived from it may stay
            cl.queue.reset_to(phy_offset)
            with store.dispatcher.lock:
                store.cq_table.destroy_all()
            cl.topic_queue_table.clear()
            store.dispatcher.dispatched_offset = phy_offset
        append_raw(cl, phy_offset, data)
        new_end = phy_offset + len(data)
        reqs = chunk.requests
        if store.group_commit is not None:
            try:
                cl.queue.flush(0, store.fsync)
            except OSError as exc:
                cl.queue.files[-1].wrote_position = phy_offset - cl.queue.files[-1].start_offset
                store._on_flush_error(exc)
                raise
        if reqs:
            cl.last_store_timestamp = chunk.last_store_timestamp
            table = cl.topic_queue_table
            for r in reqs:
                if r.tran_type == _NOT or r.tran_type == _COMMIT:
                    table[(r.topic, r.queue_id)] = r.queue_offset + 1
            store.dispatcher.dispatch(reqs)
        if store.dispatcher.error is None:
            store.dispatcher.dispatched_offset = new_end
        if store.group_commit is not None and reqs:
            store._on_commit_log_flushed(chunk.last_store_timestamp)
    st = store.stats
    st.replica_count += len(reqs)
    st.replica_bytes += len(data)
    return new_end
