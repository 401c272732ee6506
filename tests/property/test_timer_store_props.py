"""TimerStore properties (hypothesis): random deliver times, batches, clock steps, checkpoints and crashes ->
every entry is popped at or after its fire time, within a slot and a step of it, in fire order between
reopenings, and none is lost across reopen (re-enqueued from the checkpoint, as the service does)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mq.daemon.broker.timer.buckets import ENTRY_SIZE, TimerStore

PREC = 100
SPAN = 1000
STEP = 50

ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.integers(-300, 6000), min_size=1, max_size=12)),
    st.tuples(st.just("tick"), st.integers(1, 15)),
    st.tuples(st.just("checkpoint"), st.none()),
    st.tuples(st.just("crash"), st.none()),
    st.tuples(st.just("tear"), st.none()),
), min_size=1, max_size=40)


class Driver:
    def __init__(self, d: Path) -> None:
        self.dir = d
        self.clock = 1_700_000_000_000
        self.cq: list[tuple[int, int, int, int]] = []
        self.added_at: dict[int, int] = {}
        self.first: dict[int, int] = {}
        self.count: dict[int, int] = {}
        self.last_fire = None
        self.store = self._open()

    def _open(self) -> TimerStore:
        s = TimerStore(self.dir, precision_ms=PREC, bucket_span_ms=SPAN, fsync=False)
        s.open(self.clock)
        # the service re-enqueues the consume queue from the checkpoint's offset
        s.add([e for e in self.cq if e[3] >= s.enqueue_offset], len(self.cq))
        self.last_fire = None
        return s

    def add(self, rels: list[int]) -> None:
        es = []
        for r in rels:
            i = len(self.cq)
            e = (self.clock + r, 1000 + i, 100, i)
            self.cq.append(e)
            self.added_at[i] = self.clock
            es.append(e)
        self.store.add(es, len(self.cq))

    def step(self) -> None:
        self.clock += STEP
        s = self.store
        s.load_ahead(self.clock)
        while (due := s.next_due(self.clock)) is not None:
            slot, entries = due
            for fire, _phy, _size, i in entries:
                assert fire <= self.clock, "popped before its fire time"
                if slot != -1:
                    assert self.last_fire is None or fire >= self.last_fire - PREC, "popped out of order"
                    self.last_fire = max(self.last_fire or fire, fire)
                self.first.setdefault(i, self.clock)
                self.count[i] = self.count.get(i, 0) + 1
            s.finish(slot)
        s.advance(self.clock)

    def crash(self) -> None:
        self.store = self._open()  # nothing flushed or checkpointed since the last checkpoint

    def tear(self) -> None:
        """A crash that leaves a torn entry at the end of one bucket file."""
        files = sorted((self.dir / "buckets").iterdir())
        if files:
            with open(files[-1], "ab") as fh:
                fh.write(b"\x01" * (ENTRY_SIZE // 2))
        self.crash()


@settings(max_examples=120, deadline=None)
@given(ops)
def test_random_timers_pop_in_order_and_survive_reopen(script):
    with tempfile.TemporaryDirectory() as d:
        dr = Driver(Path(d))
        for op, arg in script:
            if op == "add":
                dr.add(arg)
            elif op == "tick":
                for _ in range(arg):
                    dr.step()
            elif op == "checkpoint":
                dr.store.checkpoint()
            elif op == "crash":
                dr.crash()
            else:
                dr.tear()
        # run on until everything is due, and at least two spans from now (a reopen may just have re-enqueued
        # entries as overdue: they leave at the next step)
        end = max(max((e[0] for e in dr.cq), default=dr.clock), dr.clock) + 2 * SPAN
        while dr.clock < end:
            dr.step()
        assert set(dr.first) == set(range(len(dr.cq))), "an entry was lost"
        for i, e in enumerate(dr.cq):
            fire = max(e[0], dr.added_at[i])
            assert dr.first[i] - fire <= PREC + STEP, (i, dr.first[i] - fire)
        assert dr.store.in_memory == 0 and not dr.store.slots


def test_memory_holds_only_the_near_window(tmp_path):
    s = TimerStore(tmp_path, precision_ms=PREC, bucket_span_ms=SPAN, fsync=False)
    now = 1_700_000_000_000
    s.open(now)
    s.add([(now + 10 * SPAN + i, i, 1, i) for i in range(5000)], 5000)  # far away
    s.add([(now + 100 + i % 500, 10_000 + i, 1, 5000 + i) for i in range(50)], 5050)
    s.load_ahead(now)
    assert s.in_memory == 50
    s.checkpoint()
    t = TimerStore(tmp_path, precision_ms=PREC, bucket_span_ms=SPAN, fsync=False)
    t.open(now)
    assert t.enqueue_offset == 5050 and t.pending() == 5050
    t.load_ahead(now)
    assert t.in_memory == 50
