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
"""

from __future__ import annotations

from typing import NamedTuple

from mq.common.record import BLANK, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE
from mq.store.commit_log import DispatchRequest, check_record

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
    chunk must not cross a segment end. Anything else raises ``ValueError``."""
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
