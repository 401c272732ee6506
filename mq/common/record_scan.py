"""Reading a run of message records leniently: every record that decodes, and each one skipped with why.

A PULL_MESSAGE or QUERY_MESSAGE answer is records laid end to end (``mq.common.record``). One bad record must
not cost the reader the others, nor pass unnoticed:

    +--------------------------------------+-------------------------------------------------------------+
    | what is wrong                        | what ``scan_records`` does                                  |
    +--------------------------------------+-------------------------------------------------------------+
    | content: a body flagged compressed   | the record is skipped (``SkippedRecord`` with its topic,    |
    | that does not inflate, inflates too  | queue, queue offset and commit-log offset, and ``stored``:  |
    | far or uses a codec we lack; a topic | the record as stored); its size is right, so the scan goes  |
    | that is not UTF-8                    | on with the next record                                     |
    | framing: bad magic, a size that      | the rest of the run is skipped (``framing_lost``): where the|
    | overruns the run or disagrees with   | next record starts cannot be known. What the first 36 bytes |
    | the lengths inside the record        | still say (queue, queue offset, commit-log offset) is kept  |
    +--------------------------------------+-------------------------------------------------------------+

The Java client (``MessageDecoder.decodes``) stops silently at the first record it cannot decode, and its push
consumer then moves on to ``nextBeginOffset``: the bad record and every record after it in that answer are lost
without a word. A puller here narrows a lost framing down to the one record instead (``ask_alone``,
``settle``): it delivers what decoded, pulls again from the record that broke the run, and when that record
alone still does not decode, steps over it and says so.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace

from mq.common.message import MessageExt
from mq.common.record import MAX_INFLATED_BODY, MESSAGE_MAGIC_CODE, decode_record
from mq.errors import RecordContentError, RemoteProtocolError

#: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET: the start of every record.
_LOCATION = struct.Struct(">iIiiiqq")


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A record (or, ``framing_lost``, the rest of a run) that could not be decoded. Fields a reader could
    not learn are None."""

    #: byte position in the run
    position: int
    #: bytes passed over: the record's size, or everything left in the run when its framing is lost
    size: int
    reason: str
    framing_lost: bool = False
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    commit_log_offset: int | None = None
    #: where the run came from (a broker name or address), when the reader knows it
    source: str = ""
    #: the record as stored (body not inflated), when its framing held
    stored: MessageExt | None = field(default=None, compare=False, repr=False)

    def where(self) -> str:
        """"topic T, queue 3 of broker-a, queue offset 5, commit-log offset 1234" (what is known of it)."""
        parts = []
        if self.topic is not None:
            parts.append(f"topic {self.topic}")
        if self.queue_id is not None:
            parts.append(f"queue {self.queue_id}" + (f" of {self.source}" if self.source else ""))
        elif self.source:
            parts.append(f"from {self.source}")
        parts.append(f"queue offset {'unknown' if self.queue_offset is None else self.queue_offset}")
        parts.append(f"commit-log offset {'unknown' if self.commit_log_offset is None else self.commit_log_offset}")
        return ", ".join(parts)

    def describe(self) -> str:
        what = (f"{self.size} unreadable byte(s)" if self.framing_lost else f"a {self.size}-byte record")
        return f"{what} ({self.where()}): {self.reason}"

    def located(self, **fields: object) -> "SkippedRecord":
        """A copy with the fields the reader knows from context (topic, queue_id, source, queue_offset, ...)
        filled in where the record itself did not say."""
        known = {k: v for k, v in fields.items() if v is not None and getattr(self, k) in (None, "")}
        return replace(self, **known) if known else self


@dataclass(slots=True)
class RecordScan:
    messages: list[MessageExt] = field(default_factory=list)
    skipped: list[SkippedRecord] = field(default_factory=list)

    @property
    def framing_lost(self) -> SkippedRecord | None:
        """The skip that ended the run early, if one did (always the last skip)."""
        return self.skipped[-1] if self.skipped and self.skipped[-1].framing_lost else None


def _peek_location(mv: memoryview, pos: int) -> tuple[int | None, int | None, int | None]:
    """(queue id, queue offset, commit-log offset) from a record's first 36 bytes when its magic is right."""
    if len(mv) - pos < _LOCATION.size:
        return None, None, None
    _total, magic, _crc, queue_id, _flag, queue_offset, phy = _LOCATION.unpack_from(mv, pos)
    if magic != MESSAGE_MAGIC_CODE:
        return None, None, None
    return queue_id, queue_offset, phy


def scan_records(buf: bytes | bytearray | memoryview, *, decompress: bool = False,
                 max_inflated: int = MAX_INFLATED_BODY) -> RecordScan:
    """Decode every record of a run that can be decoded; see the module docstring for what is skipped."""
    mv = buf if buf.__class__ is memoryview else memoryview(buf)
    out = RecordScan()
    pos, end = 0, len(mv)
    while pos < end:
        try:
            msg = decode_record(mv, pos, decompress=decompress, max_inflated=max_inflated)
        except RecordContentError as exc:
            st = exc.stored if isinstance(exc.stored, MessageExt) else None
            out.skipped.append(SkippedRecord(
                pos, exc.size, str(exc), topic=st.topic if st else None, queue_id=st.queue_id if st else None,
                queue_offset=st.queue_offset if st else None, commit_log_offset=st.commit_log_offset if st else None,
                stored=st))
            pos += exc.size
            continue
        except RemoteProtocolError as exc:
            queue_id, queue_offset, phy = _peek_location(mv, pos)
            out.skipped.append(SkippedRecord(pos, end - pos, str(exc), framing_lost=True, queue_id=queue_id,
                                             queue_offset=queue_offset, commit_log_offset=phy))
            break
        out.messages.append(msg)
        pos += msg.store_size
    return out


def ask_alone(scan: RecordScan, max_nums: int) -> bool:
    """True when a pull's answer broke at its first record and held more than one: the puller then asks for
    that first record alone (max 1), so that the answer ends where the record ends."""
    return scan.framing_lost is not None and not scan.messages and max_nums > 1


def settle(scan: RecordScan, request_offset: int, next_begin_offset: int) -> tuple[int, list[SkippedRecord]]:
    """(where the next pull of the queue starts, the records stepped over) for the answer to a pull from
    ``request_offset`` whose broker said ``next_begin_offset``, after ``ask_alone`` was honoured.

    When the framing broke after some records decoded, the next pull starts at the record after the last one
    decoded, so that the record that broke the run is read again at the start of an answer, and nothing is
    stepped over yet. When it broke at the first record of an answer of one record, that record is stepped
    over: it is at ``next_begin_offset - 1``."""
    skipped = list(scan.skipped)
    lost = scan.framing_lost
    if lost is None:
        return next_begin_offset, skipped
    if scan.messages:
        nxt = scan.messages[-1].queue_offset + 1
        if request_offset < nxt < next_begin_offset:
            skipped.pop()
            return nxt, skipped
        return next_begin_offset, skipped  # bytes after the answer's last record: nothing to read again
    skipped[-1] = lost.located(queue_offset=next_begin_offset - 1)
    return next_begin_offset, skipped
