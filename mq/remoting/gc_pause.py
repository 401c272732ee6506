"""Hold off Python's full garbage collections while a heavy request is being worked on.

Decoding a 14 MB body creates a million or more objects. Python's collector then runs full (generation 2)
collections that walk every live object while holding the GIL: 1-2 s each on the project's machines, in whichever
thread happened to allocate, so the event loop stops for that long although the decoding itself runs in a worker
thread. While at least one heavy request holds ``gc_pause``, only the young generations are collected (cheap: they
hold only recent objects); the large, short-lived structures are freed by reference counting when the request is
done, and full collections resume with the collector's own thresholds.

The pause is process-wide (the collector is) and shared by every server of the process. So that an endless
stream of heavy requests cannot put full collections off for ever, one runs anyway once the pause has lasted
``MAX_HOLD`` seconds.

``freeze_started_heap`` is the other half: once a daemon has started, what it built to start (modules, configs,
the topic table, the store's files) lives as long as the process, and every full collection would walk all of it
again (14-18 ms for a fresh broker, which took one in its first 100,000 sends in ``broker_inprocess_bench``).
Moved to the collector's permanent generation, it is never walked again; later objects are collected as before.
"""

from __future__ import annotations

import gc
import threading
import time

#: Seconds full collections may be held off in one stretch.
MAX_HOLD = 60.0


class GcPause:
    """A counted hold on full collections (``with gc_pause: ...``); thread-safe."""

    def __init__(self, max_hold: float = MAX_HOLD) -> None:
        self.max_hold = max_hold
        self._lock = threading.Lock()
        self._holders = 0
        self._since = 0.0
        self._saved: tuple[int, int, int] | None = None

    @property
    def holding(self) -> bool:
        return self._holders > 0

    def __enter__(self) -> "GcPause":
        collect = False
        with self._lock:
            if self._holders == 0:
                self._saved = gc.get_threshold()
                gen0, gen1, _gen2 = self._saved
                gc.set_threshold(gen0, gen1, 2**31 - 1)
                self._since = time.monotonic()
            elif time.monotonic() - self._since > self.max_hold:
                self._since = time.monotonic()
                collect = True
            self._holders += 1
        if collect:
            gc.collect()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._saved is not None:
                gc.set_threshold(*self._saved)
                self._saved = None


#: The process's one hold (the collector is process-wide).
gc_pause = GcPause()


def freeze_started_heap() -> int:
    """Collect what starting left behind, then move every object that survives to the permanent generation
    (``gc.freeze``), so that full collections walk only what the daemon allocates from now on. Returns how many
    objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
