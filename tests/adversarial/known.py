"""Issue 28 defects that are known and being fixed elsewhere.

The generic tests leave out the examples that would only show one of them again (``known_defect``), so that
they keep finding new problems; each defect has a targeted test marked xfail in test_known_defects.py, which
shows it. When a defect is fixed, delete its rule here and its xfail mark there.

- defect 1: a topic name that becomes a path without being checked: a client writing a system topic (the timer
  and schedule topics deliver to REAL_TOPIC), and retry / DLQ topics made from a group name
  (CONSUMER_SEND_MSG_BACK with group ``%RETRY%../../x`` stores into ``consumequeue/x``);
- defect 2: a client-chosen sysFlag with the IPv6 host bits (0x10, 0x20) writes a record the store cannot read
  back (``store verify`` fails, also when the timer re-puts such a message later).
"""

from __future__ import annotations

import re
from typing import Any

from mq.common import sysflag as SF
from mq.common.topic import NOT_ALLOWED_SEND_TOPICS, SYSTEM_TOPIC_PREFIX
from mq.protocol.codes import RequestCode as R

#: Properties with which a client names where the broker delivers later (defect 1).
DELIVERY_TARGET_KEYS = ("REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS", "TIMER_ROLL_TIMES")
#: Request codes whose header names a sysFlag for the record (``sysFlag``, or ``f`` in the V2 send header).
RECORD_CODES = {R.SEND_MESSAGE, R.SEND_MESSAGE_V2, R.SEND_BATCH_MESSAGE, R.SEND_REPLY_MESSAGE,
                R.SEND_REPLY_MESSAGE_V2}
_NOT_NAME = re.compile(r"[^%|a-zA-Z0-9_-]")


def known_sysflag(sys_flag: int) -> bool:
    """Defect 2: the IPv6 host bits, which describe the record layout, taken from the client."""
    return bool(sys_flag & (SF.BORNHOST_V6 | SF.STOREHOST_V6))


def _int(v: Any) -> int | None:
    try:
        return int(str(v).strip().replace("_", ""))
    except ValueError:
        return None


def known_defect(req: Any) -> str | None:
    """The issue 28 defect ``req`` would only show again, or None."""
    ext = {str(k): v for k, v in req.ext.items()}
    text = repr(ext) + repr(req.body)
    if req.code in RECORD_CODES:
        for key in ("sysFlag", "f"):  # "f" is sysFlag in the V2 send header
            flag = _int(ext.get(key, 0))
            if flag is not None and known_sysflag(flag):
                return "issue 28 defect 2: a client-chosen IPv6 sysFlag bit"
        topic = str(ext.get("topic", ext.get("b", "")))
        if topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX) or topic.startswith("%"):
            return "issue 28 defect 1: a client writes a system, retry or DLQ topic"
        if any(k in text for k in DELIVERY_TARGET_KEYS):
            return "issue 28 defect 1: a client names where the timer or schedule delivers"
    if req.code == R.CONSUMER_SEND_MSG_BACK:
        for key in ("group", "originTopic"):
            if _NOT_NAME.search(str(ext.get(key, ""))):
                return "issue 28 defect 1: a retry / DLQ topic made from a name that is not a topic name"
    return None
