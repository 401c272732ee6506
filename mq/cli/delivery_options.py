"""Parsing for `mq send`'s delivery options (--delay, --deliver-at, --transaction); kept apart from send.py."""

from __future__ import annotations

import re
import time
from datetime import datetime

import click

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: str) -> float:
    """'90s', '5m', '1h30m', '2d', '1500ms' or a bare number of seconds -> seconds."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    pos, total = 0, 0.0
    for m in _PART.finditer(t):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(t) or not t:
        raise click.BadParameter(f"{text!r} is not a duration such as 90s, 5m, 1h30m, 2d", param_hint="--delay")
    return total


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Epoch ms, or ISO 8601 (local time unless it carries an offset) -> epoch ms."""
    t = text.strip()
    if re.fullmatch(r"\d{10,}", t):
        return int(t)
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither epoch ms nor an ISO 8601 time "
                                 "(2030-01-31T08:00:00, optionally +02:00)", param_hint="--deliver-at") from None
    return int(dt.timestamp() * 1000)


def delivery_properties(delay: str | None, deliver_at: str | None) -> dict[str, str]:
    """The property asking for an arbitrary delay: TIMER_DELAY_SEC (relative, whole seconds) for --delay,
    __STARTDELIVERTIME (absolute epoch ms) for --deliver-at."""
    if delay and deliver_at:
        raise click.UsageError("give either --delay or --deliver-at, not both")
    if delay:
        secs = parse_duration(delay)
        if secs < 1:
            raise click.BadParameter("the delay must be at least 1 s", param_hint="--delay")
        return {"TIMER_DELAY_SEC": str(int(round(secs)))}
    if deliver_at:
        return {"__STARTDELIVERTIME": str(parse_time(deliver_at, int(time.time() * 1000)))}
    return {}


def transaction_producer(state: str, config, client_config):
    """A TransactionProducer whose local transaction (and check answer) is ``state``."""
    from mq.client.transaction import LocalTransactionState as S
    from mq.client.transaction import TransactionProducer

    st = {"commit": S.COMMIT_MESSAGE, "rollback": S.ROLLBACK_MESSAGE, "unknown": S.UNKNOW}[state]
    return TransactionProducer(config, client_config, executor=lambda m, arg: st, checker=lambda m: st)
