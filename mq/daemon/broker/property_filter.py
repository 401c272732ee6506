"""SQL92 property filtering on the broker (RocketMQ ``ConsumerFilterManager`` + ``ExpressionMessageFilter`` +
``ExpressionForRetryMessageFilter``), FEATURES.md §9.

- ``Sql92Cache`` compiles selectors once per ``(topic, expression)``, remembering compile errors too (Java keeps
  a parse cache of the same kind); bounded, oldest entry dropped first.
- ``record_properties`` reads only the PROPERTIES field of a stored record (the body is skipped, never
  decoded); ``commit_log_filter`` turns a compiled selector into the store's ``message_filter``
  (callable(record bytes) -> bool), evaluated on the commit-log record as ``isMatchedByCommitLog`` does.
- ``retry_filter``: with ``filterSupportRetry`` a message pulled from ``%RETRY%<group>`` is evaluated against
  the group's selector of its original topic (its ``RETRY_TOPIC`` property); without one it passes.

Where the PROPERTIES field sits in a record (offsets of MESSAGE.md §1 / ``mq.common.record``)::

    +-----------------------+---------------------------------------------------------------+
    | field                 | offset                                                        |
    +-----------------------+---------------------------------------------------------------+
    | SYSFLAG               | 36 (int32)                                                    |
    | BODYLENGTH (n)        | 84, + 12 if BORNHOST_V6, + 12 if STOREHOST_V6 (int32)         |
    | TOPICLENGTH (t)       | BODYLENGTH + 4 + n (int8)                                     |
    | PROPERTIESLENGTH (p)  | TOPICLENGTH + 1 + t (int16)                                   |
    | PROPERTIES            | PROPERTIESLENGTH + 2, p bytes of UTF-8                        |
    +-----------------------+---------------------------------------------------------------+
"""

from __future__ import annotations

import logging
import struct
from collections import OrderedDict
from typing import Callable

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.properties import decode_properties
from mq.common.sql_filter import Sql92Filter, Sql92SyntaxError, compile_sql92

log = logging.getLogger(__name__)

SQL92 = "SQL92"
SYSFLAG_FORMAT = ">i"
BODY_LENGTH_FORMAT = ">i"
PROPERTIES_LENGTH_FORMAT = ">h"
_SYSFLAG = struct.Struct(SYSFLAG_FORMAT)
_BODY_LEN = struct.Struct(BODY_LENGTH_FORMAT)
_PROPS_LEN = struct.Struct(PROPERTIES_LENGTH_FORMAT)
SYSFLAG_OFFSET = 36
BODY_LENGTH_OFFSET_V4 = 84
_V6_SHIFT = 12


def record_properties(rec: bytes | memoryview) -> dict[str, str]:
    """The properties of one stored record (only that field is decoded); {} when the record is malformed."""
    try:
        (sys_flag,) = _SYSFLAG.unpack_from(rec, SYSFLAG_OFFSET)
        p = BODY_LENGTH_OFFSET_V4
        if sys_flag & (SF.BORNHOST_V6 | SF.STOREHOST_V6):
            if sys_flag & SF.BORNHOST_V6:
                p += _V6_SHIFT
            if sys_flag & SF.STOREHOST_V6:
                p += _V6_SHIFT
        (body_len,) = _BODY_LEN.unpack_from(rec, p)
        p += 4 + body_len
        p += 1 + rec[p]
        (props_len,) = _PROPS_LEN.unpack_from(rec, p)
        p += 2
        if props_len <= 0 or p + props_len > len(rec):
            return {}
        return decode_properties(str(rec[p:p + props_len], "utf-8", "replace"))
    except (struct.error, IndexError):
        return {}


class Sql92Cache:
    """Compiled selectors by ``(topic, expression)``; a compile error is cached and raised again."""

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[tuple[str, str], Sql92Filter | Sql92SyntaxError] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def compile(self, topic: str, expression: str) -> Sql92Filter:
        """The compiled selector; raises Sql92SyntaxError when it does not compile."""
        key = (topic, expression)
        got = self._items.get(key)
        if got is None:
            try:
                got = compile_sql92(expression)
            except Sql92SyntaxError as exc:
                got = exc
            self._items[key] = got
            if len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        if isinstance(got, Sql92SyntaxError):
            raise got
        return got

    def try_compile(self, topic: str, expression: str) -> Sql92Filter | None:
        """``compile`` that answers None on a failure, logged when first seen (a heartbeat's subscription)."""
        seen = (topic, expression) in self._items
        try:
            return self.compile(topic, expression)
        except Sql92SyntaxError as exc:
            if not seen:
                log.error("SQL92 subscription of topic %s does not compile: %r: %s", topic, expression, exc)
            return None


def commit_log_filter(flt: Sql92Filter) -> Callable[[bytes], bool]:
    """The store's ``message_filter`` for one selector: evaluate it on the record's properties."""
    matches = flt.matches

    def message_filter(rec: bytes) -> bool:
        return matches(record_properties(rec))
    return message_filter


def retry_filter(lookup: Callable[[str], Sql92Filter | None]) -> Callable[[bytes], bool]:
    """``message_filter`` for a ``%RETRY%<group>`` pull (filterSupportRetry): ``lookup(real_topic)`` gives the
    group's selector of the message's original topic (None: TAG or unknown subscription, the message passes)."""

    def message_filter(rec: bytes) -> bool:
        props = record_properties(rec)
        real = props.get(P.RETRY_TOPIC)
        flt = lookup(real) if real else None
        return True if flt is None else flt.matches(props)
    return message_filter
