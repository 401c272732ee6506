"""Saying what a reader skipped: the report of a record that could not be decoded.

Every client path that decodes stored messages (pull and push consumers, admin queries) steps over a record it
cannot decode (``mq.common.record_scan``) and hands a ``SkippedRecord`` to a reporter: a callable that takes it.
The default, ``LogReporter``, logs a WARNING naming the record (topic, queue, queue offset, commit-log offset)
and why, at most once per queue and interval with a count of the others (a producer can store many such
records); the CLI passes its own reporter that prints to stderr.
"""

from __future__ import annotations

import logging
from typing import Callable

from mq.common.log_throttle import LogThrottle
from mq.common.record_scan import SkippedRecord

#: Takes each record a reader stepped over.
UndecodableReporter = Callable[[SkippedRecord], None]


class LogReporter:
    """Logs each skipped record at WARNING, throttled per (source, topic, queue)."""

    def __init__(self, logger: logging.Logger, prefix: str = "", interval: float = 10.0) -> None:
        self.prefix = prefix
        self.count = 0
        self._throttle = LogThrottle(logger, interval)

    def __call__(self, skipped: SkippedRecord) -> None:
        self.count += 1
        self._throttle.warning(("undecodable", skipped.source, skipped.topic, skipped.queue_id),
                               "%sskipped %s", self.prefix, skipped.describe())
