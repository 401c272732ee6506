"""The C consume-queue unit writer (mq/store/_consume_queue.c) writes the same units, calls back the same way and
stops at the same record as its Python twin, ``mq.store.consume_queue.put_units``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.common import sysflag as SF
from mq.store.commit_log import DispatchRequest
from mq.store.consume_queue import CQ_UNIT, CQ_UNIT_SIZE, ConsumeQueueTable, _c_put_units, put_units

needs_c = pytest.mark.skipif(_c_put_units is None, reason="the C unit writer is not built (no C compiler at "
                             "install) or MQ_PURE_PYTHON is set")

TRANS = [SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE, SF.TRANSACTION_PREPARED_TYPE,
         SF.TRANSACTION_ROLLBACK_TYPE]
UNITS_PER_FILE = 7
WRITERS = [pytest.param(_c_put_units, marks=needs_c, id="c"), pytest.param(put_units, id="python")]


def _requests(plan: list[tuple[int, int, int, int, bool]]) -> list[DispatchRequest]:
    """Requests in log order from (topic, queue, tran index, tags code, re-dispatch of the previous one)."""
    out: list[DispatchRequest] = []
    next_qoff: dict[tuple[str, int], int] = {}
    phy = 0
    for t, q, tran, code, again in plan:
        if again and out:
            out.append(out[-1])
            continue
        topic = ["T", "T|2", "%RETRY%g"][t]
        tt = TRANS[tran]
        takes = tt in (SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE)
        qoff = next_qoff.get((topic, q), 0) if takes else 0
        if takes:
            next_qoff[(topic, q)] = qoff + 1
        size = 100 + t * 7 + q
        out.append(DispatchRequest(topic, q, qoff, phy, size, code, 1_700_000_000_000 + phy, None, None, tt))
        phy += size
    return out


class Run:
    """One writer (C or Python) on its own consume-queue table, recording what it was asked to do."""

    def __init__(self, root: Path, writer, known: list[tuple[str, int]]) -> None:
        self.table = ConsumeQueueTable(root, UNITS_PER_FILE * CQ_UNIT_SIZE)
        for topic, q in known:  # queues that exist before the walk (the rest come from the slow path)
            self.table.find(topic, q)
        self.writer = writer
        self.slow_calls: list[int] = []
        self.notified: list[tuple[str, int, int, int]] = []

    def slow(self, r: DispatchRequest) -> bool:
        self.slow_calls.append(r.phy_offset)
        self.table.find(r.topic, r.queue_id).put(r.queue_offset, r.phy_offset, r.size, r.tags_code)
        return True

    def notify(self, *args) -> None:
        self.notified.append(args)

    def walk(self, requests: list[DispatchRequest], chunk: int) -> int:
        done = 0
        for i in range(0, len(requests), chunk):
            done += self.writer(requests[i:i + chunk], self.table.queues, self.slow, self.notify, pytest.fail)
        return done

    def state(self) -> dict:
        out = {}
        for cq in self.table:
            units = []
            for f in cq.queue.files:
                data = f.mm[:f.wrote_position]
                units += [CQ_UNIT.unpack_from(data, p) for p in range(0, len(data), CQ_UNIT_SIZE)]
            out[(cq.topic, cq.queue_id)] = (units, cq.max_physic_offset, cq.max_offset, cq.min_offset)
        return out


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 3),
                               st.integers(-(1 << 63), (1 << 63) - 1), st.booleans()), max_size=60),
       known=st.lists(st.tuples(st.sampled_from(["T", "T|2"]), st.integers(0, 2)), max_size=4, unique=True),
       chunk=st.integers(1, 16))
def test_c_and_python_writers_agree(plan, known, chunk):
    requests = _requests(plan)
    with tempfile.TemporaryDirectory() as d:
        c = Run(Path(d) / "c", _c_put_units, known)
        py = Run(Path(d) / "py", put_units, known)
        assert c.walk(requests, chunk) == py.walk(requests, chunk) == len(requests)
        assert c.state() == py.state()
        assert c.notified == py.notified
        assert c.slow_calls == py.slow_calls
        takes = [r for r in requests if r.tran_type in (SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE)]
        assert [n[:3] for n in c.notified] == [(r.topic, r.queue_id, r.queue_offset + 1) for r in takes]
        for (topic, q), (units, _max_phy, max_off, _min) in c.state().items():
            mine = {r.queue_offset: r for r in takes if (r.topic, r.queue_id) == (topic, q)}
            assert max_off == len(mine)
            assert units == [(mine[i].phy_offset, mine[i].size, mine[i].tags_code) for i in range(len(mine))]
        c.table.close()
        py.table.close()


@pytest.mark.parametrize("writer", WRITERS)
def test_the_usual_case_writes_without_the_slow_path(tmp_path, writer):
    run = Run(tmp_path, writer, [("T", 0)])
    requests = _requests([(0, 0, 0, 5, False)] * 20)
    assert run.walk(requests, 20) == 20
    # the first unit of each of the three segments needs one (a new segment); the rest are the usual case
    assert run.slow_calls == [requests[0].phy_offset, requests[7].phy_offset, requests[14].phy_offset]
    assert run.walk(requests[3:9], 6) == 6  # re-dispatch: duplicates are skipped, not written again
    assert run.state()[("T", 0)][0] == [(r.phy_offset, r.size, 5) for r in requests]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_refused_unit_stops_the_walk_before_it(tmp_path, writer):
    run = Run(tmp_path, writer, [])
    requests = _requests([(0, 0, 0, 1, False), (1, 0, 0, 2, False), (0, 0, 0, 3, False)])
    refuse = requests[1].phy_offset

    def slow(r):
        return False if r.phy_offset == refuse else run.slow(r)

    assert writer(requests, run.table.queues, slow, run.notify, pytest.fail) == 1
    assert run.notified == [("T", 0, 1, 1)]
    assert run.state() == {("T", 0): ([(0, requests[0].size, 1)], requests[0].size, 1, 0)}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_failing_notify_is_reported_and_the_walk_goes_on(tmp_path, writer):
    run = Run(tmp_path, writer, [("T", 0)])
    requests = _requests([(0, 0, 0, 9, False)] * 3)
    seen, reported = [], []

    def notify(topic, q, nxt, code):
        seen.append(nxt)
        if nxt == 2:
            raise ValueError("listener broke")

    assert writer(requests, run.table.queues, run.slow, notify, reported.append) == 3
    assert seen == [1, 2, 3]
    assert [str(e) for e in reported] == ["listener broke"] and reported[0].__traceback__ is not None
    assert run.state()[("T", 0)][2] == 3

    def interrupt(*_a):
        raise KeyboardInterrupt  # not an Exception: it propagates

    with pytest.raises(KeyboardInterrupt):
        writer(_requests([(0, 0, 0, 9, False)] * 4)[3:], run.table.queues, run.slow, interrupt, reported.append)


@needs_c
def test_the_c_writer_rejects_what_is_not_a_request(tmp_path):
    table = ConsumeQueueTable(tmp_path, UNITS_PER_FILE * CQ_UNIT_SIZE)
    with pytest.raises(TypeError):
        _c_put_units([("T", 0)], table.queues, pytest.fail, None, None)
    with pytest.raises(TypeError):
        _c_put_units(("not", "a", "list"), table.queues, pytest.fail, None, None)
    with pytest.raises(TypeError):  # a queue offset that is not an int
        _c_put_units([DispatchRequest("T", 0, "x", 0, 1, 0, 0, None, None, 0)], table.queues, pytest.fail,
                     None, None)
    # a size the 4-byte field cannot hold goes to the slow path (whose struct raises), even for a queue that
    # exists and would take the unit
    cq = table.find("T", 0)
    cq.put(0, 0, 10, 0)
    slow_seen = []
    assert _c_put_units([DispatchRequest("T", 0, 1, 10, 1 << 31, 0, 0, None, None, 0)], table.queues,
                        lambda r: slow_seen.append(r) or True, None, None) == 1
    assert len(slow_seen) == 1 and cq.max_offset == 1
    with pytest.raises(Exception):
        cq.put(1, 10, 1 << 31, 0)
    assert cq.max_offset == 1
    table.close()
