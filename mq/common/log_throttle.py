"""Log each kind of problem at most once per interval, with a count of what was held back.

A hostile or broken peer can make the same problem happen thousands of times a second (a malformed frame, a
refused put on a full disk, a timer message that cannot be delivered). Logging every occurrence costs the daemon
its CPU and the operator their disk, and hides everything else in the log. ``LogThrottle`` logs the first
occurrence of a kind at once, counts the next ones silently, and when the kind happens again after the interval
logs it once more with how many were suppressed in between::

    throttle = LogThrottle(logging.getLogger(__name__), interval=10.0)
    throttle.warning("bad-frame", "closing %s: %s", peer, error)
    # later, after 10 s: "closing 1.2.3.4:5: frame too long (1,204 more like this in the last 10.0 s)"

The kind is any hashable key (a string, or a tuple such as ``("poison-timer", topic)``). The number of kinds
remembered is bounded (``max_kinds``), so a peer that invents a new kind per request cannot grow the table: the
oldest kind is forgotten first. Thread-safe: the store's threads and the event loop may share one throttle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

DEFAULT_INTERVAL = 10.0
DEFAULT_MAX_KINDS = 1024


class LogThrottle:
    """Rate-limits log records per kind: one record per ``interval`` seconds, with a suppressed count."""

    def __init__(self, logger: logging.Logger, interval: float = DEFAULT_INTERVAL,
                 max_kinds: int = DEFAULT_MAX_KINDS, clock: Callable[[], float] = time.monotonic) -> None:
        if interval < 0:
            raise ValueError(f"interval must be >= 0, got {interval}")
        if max_kinds < 1:
            raise ValueError(f"max_kinds must be >= 1, got {max_kinds}")
        self.logger = logger
        self.interval = interval
        self.max_kinds = max_kinds
        self._clock = clock
        self._lock = threading.Lock()
        #: kind -> [time of the last record logged, occurrences suppressed since]
        self._kinds: OrderedDict[Hashable, list] = OrderedDict()

    def log(self, level: int, kind: Hashable, msg: str, *args: object, exc_info: object = None) -> bool:
        """Log ``msg % args`` at ``level`` unless ``kind`` was logged less than ``interval`` seconds ago.

        Returns True when a record was emitted. ``exc_info`` is passed on only for an emitted record, so a
        traceback appears at most once per interval too."""
        if not self.logger.isEnabledFor(level):
            return False
        now = self._clock()
        with self._lock:
            entry = self._kinds.get(kind)
            if entry is not None and now - entry[0] < self.interval:
                entry[1] += 1
                return False
            suppressed = entry[1] if entry is not None else 0
            if entry is None:
                if len(self._kinds) >= self.max_kinds:
                    self._kinds.popitem(last=False)
                self._kinds[kind] = [now, 0]
            else:
                entry[0], entry[1] = now, 0
                self._kinds.move_to_end(kind)
        if suppressed:
            msg = f"{msg} ({suppressed:,} more like this in the last {self.interval:g} s)"
        self.logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def warning(self, kind: Hashable, msg: str, *args: object, exc_info: object = None) -> bool:
        return self.log(logging.WARNING, kind, msg, *args, exc_info=exc_info)

    def error(self, kind: Hashable, msg: str, *args: object, exc_info: object = None) -> bool:
        return self.log(logging.ERROR, kind, msg, *args, exc_info=exc_info)

    def info(self, kind: Hashable, msg: str, *args: object, exc_info: object = None) -> bool:
        return self.log(logging.INFO, kind, msg, *args, exc_info=exc_info)

    def suppressed(self, kind: Hashable) -> int:
        """Occurrences of ``kind`` held back since its last record (0 for an unknown kind)."""
        with self._lock:
            entry = self._kinds.get(kind)
            return entry[1] if entry is not None else 0
