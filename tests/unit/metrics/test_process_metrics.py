"""The ``process_*`` collector: the families prometheus_client's ProcessCollector exports, with the same names,
types and help, and a descriptor count that does not list ``/proc/self/fd`` on a kernel that gives its size."""

from __future__ import annotations

import os
import types

from prometheus_client import CollectorRegistry, ProcessCollector

from mq.daemon.metrics import process as P


def families(collector) -> dict[str, tuple[str, str, float]]:
    return {m.name: (m.type, m.documentation, m.samples[0].value) for m in collector.collect()}


def test_the_same_families_as_the_library_with_current_values():
    ours = families(P.ProcessMetrics())
    theirs = families(ProcessCollector(registry=CollectorRegistry()))
    assert set(ours) == set(theirs)
    for name, (kind, doc, value) in theirs.items():
        assert ours[name][:2] == (kind, doc), name
    assert abs(ours["process_start_time_seconds"][2] - theirs["process_start_time_seconds"][2]) < 1.0
    assert ours["process_max_fds"][2] == theirs["process_max_fds"][2]
    assert ours["process_resident_memory_bytes"][2] > 0


def test_open_descriptors_are_counted():
    before = families(P.ProcessMetrics())["process_open_fds"][2]
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(50)]
    try:
        assert families(P.ProcessMetrics())["process_open_fds"][2] == before + 50
    finally:
        for fd in fds:
            os.close(fd)


def test_an_old_kernel_is_listed_at_most_once_per_interval(monkeypatch):
    real_stat, listed = os.stat, []
    monkeypatch.setattr(P.os, "stat", lambda path: types.SimpleNamespace(st_size=0) if path == P._FD_DIR
                        else real_stat(path))
    real_listdir = os.listdir
    monkeypatch.setattr(P.os, "listdir", lambda path: listed.append(path) or real_listdir(path))
    now = [100.0]
    count = P.FdCounter(clock=lambda: now[0])
    first = count()
    assert first == len(real_listdir(P._FD_DIR)) - 1 and listed == [P._FD_DIR]
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        assert count() == first and len(listed) == 1  # within the interval: the count is reused
        now[0] += P.FD_LIST_INTERVAL
        assert count() == first + 1 and len(listed) == 2
    finally:
        os.close(fd)
