"""Reading the commit log back record by record: recovery, the start-up reput and ``mq store verify``.

``check_record`` validates the record at a position (RocketMQ ``checkMessageAndReturnSize``). RocketMQ's recovery
ends the log at the first record that fails, so one bad record in the middle (a bit flip, or a record whose
sysFlag misdescribes its layout, as a client could once make the broker write) cuts every later record of every
topic, acknowledged or not. Here a scan that meets a bad record first asks:

1. ``misflagged``: is it a whole record whose host-address bits (BORNHOST_V6, STOREHOST_V6) say a layout it
   does not have? Exactly one choice of those bits must make every length add up and the body CRC match; the
   record is then good, and recovery writes the right bits back (``repair``).
2. ``find_resync``: where does the next unit start? First where the bad record's own TOTALSIZE points (the bad
   record is framed), else the next position holding the message magic code where a whole record lies with its
   PHYSICALOFFSET equal to that position and a matching body CRC, or a BLANK record that closes the segment. A
   candidate stored before the last good record (an older store time) is never taken: bytes left behind a
   previous recovery's cut are stale records of a log that has since been rewritten, and taking them back would
   give two records one queue offset. Holes of a sparse segment are skipped without reading them (SEEK_DATA).

No candidate: the log ends at the bad record, as a crash's torn tail does.
"""

from __future__ import annotations

import errno
import os
import struct

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.properties import decode_properties
from mq.common.record import BLANK, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, RECORD_PREFIX, body_crc
from mq.common.tags import tags_code as compute_tags_code
from mq.common.topic import SCHEDULE_TOPIC
from mq.store.prepared import DispatchRequest

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TAIL_V4 = struct.Struct(">iqi")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
_MAGIC_BYTES = MESSAGE_MAGIC_CODE.to_bytes(4, "big")
_HOST_BITS = SF.BORNHOST_V6 | SF.STOREHOST_V6
MIN_RECORD_SIZE = 91
SYSFLAG_POS = 36


def check_record(buf, pos: int, *, check_crc: bool, delay_levels_ms: list[int],
                 expect_phy: int | None = None, sys_flag: int | None = None) -> tuple[int, DispatchRequest | None]:
    """RocketMQ ``checkMessageAndReturnSize``: validate the record at ``buf[pos]``.

    Returns ``(size, request)``: ``(0, None)`` for a BLANK record (end of segment), ``(-1, None)`` for
    anything else that is not a whole valid record (zeros, torn, corrupt), ``(size, request)`` otherwise.
    ``sys_flag`` reads the record as if its SYSFLAG field held that value (``misflagged``)."""
    end = len(buf)
    if pos + 8 > end:
        return -1, None
    total, magic = BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return 0, None
    if magic != MESSAGE_MAGIC_CODE:
        return -1, None
    if total < MIN_RECORD_SIZE or pos + total > end:
        return -1, None
    try:
        (_t, _m, crc, qid, _flag, qoff, phy, stored_flag, _born_ts) = RECORD_PREFIX.unpack_from(buf, pos)
        if sys_flag is None:
            sys_flag = stored_flag
        if (expect_phy is not None and phy != expect_phy) or qid < 0 or qoff < 0:
            return -1, None
        p = pos + 48 + (20 if sys_flag & SF.BORNHOST_V6 else 8)
        (store_ts,) = _I64.unpack_from(buf, p)
        p += 8 + (20 if sys_flag & SF.STOREHOST_V6 else 8)
        _rt, _prep, body_len = _TAIL_V4.unpack_from(buf, p)
        p += 16
        if body_len < 0 or p + body_len > pos + total:
            return -1, None
        if check_crc and body_len and body_crc(buf[p:p + body_len]) != crc:
            return -1, None
        if check_crc and not body_len and crc != 0:
            return -1, None
        p += body_len
        tlen = buf[p]
        if tlen == 0 or tlen > 127:
            return -1, None
        topic_b = bytes(buf[p + 1:p + 1 + tlen])
        p += 1 + tlen
        (plen,) = _I16.unpack_from(buf, p)
        p += 2
        if plen < 0 or p + plen != pos + total:
            return -1, None
        # Torn-tail guard beyond RocketMQ's checks (the CRC covers only the body): a zero-filled topic or
        # properties tail is a record cut short, never a real one (topics are [%|a-zA-Z0-9_-], and the store
        # refuses properties that end in NUL).
        if b"\x00" in topic_b or (plen and buf[p + plen - 1] == 0):
            return -1, None
        topic = topic_b.decode("utf-8")
        keys = uniq = None
        tc = 0
        if plen:
            props = decode_properties(bytes(buf[p:p + plen]).decode("utf-8", "replace"))
            keys = props.get(P.KEYS)
            uniq = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            tc = compute_tags_code(props.get(P.TAGS))
            if topic == SCHEDULE_TOPIC and delay_levels_ms:
                lv = props.get(P.DELAY_TIME_LEVEL)
                if lv:
                    try:
                        level = min(int(lv), len(delay_levels_ms))
                        tc = store_ts + (delay_levels_ms[level - 1] if level > 0 else 1000)
                    except ValueError:
                        tc = store_ts + 1000
    except (struct.error, IndexError, UnicodeDecodeError):
        return -1, None
    return total, DispatchRequest(topic, qid, qoff, phy, total, tc, store_ts, keys, uniq,
                                  sys_flag & SF.TRANSACTION_MASK)


def misflagged(buf, pos: int, *, expect_phy: int | None, delay_levels_ms: list[int]
               ) -> tuple[int, int, DispatchRequest] | None:
    """A record at ``pos`` that fails ``check_record`` only because its host-address bits are wrong:
    ``(right sysFlag, size, request)`` when exactly one other choice of BORNHOST_V6 / STOREHOST_V6 makes it a
    whole record with a matching body CRC; None otherwise."""
    if pos + 40 > len(buf):
        return None
    total, magic = BLANK.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_SIZE:
        return None
    (stored,) = _I32.unpack_from(buf, pos + SYSFLAG_POS)
    found = None
    for bits in (0, SF.BORNHOST_V6, SF.STOREHOST_V6, _HOST_BITS):
        flag = (stored & ~_HOST_BITS) | bits
        if flag == stored:
            continue
        size, req = check_record(buf, pos, check_crc=True, delay_levels_ms=delay_levels_ms,
                                 expect_phy=expect_phy, sys_flag=flag)
        if size > 0:
            if found is not None:
                return None  # two readings fit: nothing says which is right
            found = (flag, size, req)
    return found  # type: ignore[return-value]


def repair(mm, pos: int, sys_flag: int) -> None:
    """Write ``sys_flag`` into the SYSFLAG field of the record at ``mm[pos]`` (a writable mapping whose blocks
    hold the record, so the store cannot fault)."""
    _I32.pack_into(mm, pos + SYSFLAG_POS, sys_flag)


def find_resync(buf, pos: int, base: int, *, end: int, min_store_ts: int, check_crc: bool,
                delay_levels_ms: list[int], fd: int | None = None, whole_to_end: bool = False) -> int:
    """Where a scan may go on after the record at ``buf[pos]`` failed its checks (see the module docstring):
    a position in ``(pos, end)`` where a valid record (or a BLANK record closing the segment) starts, or -1.

    ``buf`` is a memoryview of a segment (its mapping) whose first byte has physical offset ``base``;
    ``end`` bounds the search (the segment's size, or its written end); ``fd``, the segment's file, lets the
    search skip holes. ``whole_to_end``: every byte below ``end`` was written whole (a write position), so a
    bad record whose TOTALSIZE reaches exactly ``end`` is the last one and the scan ends after it."""
    seg_end = len(buf)

    def valid(at: int) -> bool:
        if at + 8 > end:
            return False
        limit = end if fd is None else _data_end(fd, at, end)  # what a record there may span: no hole
        if at + 8 > limit:
            return False
        total, magic = BLANK.unpack_from(buf, at)
        if magic == BLANK_MAGIC_CODE:
            return total == seg_end - at
        with buf[:limit] as view:
            size, req = check_record(view, at, check_crc=check_crc, delay_levels_ms=delay_levels_ms,
                                     expect_phy=base + at)
        return size > 0 and req.store_timestamp >= min_store_ts  # type: ignore[union-attr]

    if pos + 8 <= (end if fd is None else _data_end(fd, pos, end)):
        total, magic = BLANK.unpack_from(buf, pos)
        if magic == MESSAGE_MAGIC_CODE and total >= MIN_RECORD_SIZE:
            if pos + total < end and valid(pos + total):
                return pos + total  # a bad record framed by good ones
            if pos + total == end and whole_to_end:
                return end
    find = (buf.obj if isinstance(buf, memoryview) else buf).find
    at = pos + 1
    while at < end:
        if fd is not None:
            at = _next_data(fd, at, end)
            if at < 0:
                return -1
            stop = _data_end(fd, at, end)
        else:
            stop = end
        while True:
            hit = find(_MAGIC_BYTES, max(at, pos + 1) + 4, stop)  # within the data: never into a hole
            if hit < 0:
                break
            cand = hit - 4
            if valid(cand):
                return cand
            at = cand + 1
        at = stop
    return -1


def _next_data(fd: int, at: int, end: int) -> int:
    """The first offset >= ``at`` (and < ``end``) that is not in a hole of ``fd``; -1 when none."""
    try:
        nxt = os.lseek(fd, at, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return -1
        return at  # the file system cannot say: read everything
    return nxt if nxt < end else -1


def _data_end(fd: int, at: int, end: int) -> int:
    try:
        return min(end, os.lseek(fd, at, os.SEEK_HOLE))
    except OSError:
        return end
