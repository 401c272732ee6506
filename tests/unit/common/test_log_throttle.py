import logging

import pytest

from mq.common.log_throttle import LogThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logger_and_records():
    logger = logging.getLogger("test.log_throttle")
    logger.setLevel(logging.DEBUG)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    yield logger, records
    logger.removeHandler(handler)


def test_one_record_per_interval_then_the_count(logger_and_records):
    logger, records = logger_and_records
    clock = Clock()
    throttle = LogThrottle(logger, interval=10.0, clock=clock)
    assert throttle.warning("bad-frame", "closing %s", "peer-1")
    for _ in range(1204):
        clock.now += 0.001
        assert not throttle.warning("bad-frame", "closing %s", "peer-2")
    assert throttle.suppressed("bad-frame") == 1204
    clock.now += 10.0
    assert throttle.warning("bad-frame", "closing %s", "peer-3")
    assert [r.getMessage() for r in records] == [
        "closing peer-1", "closing peer-3 (1,204 more like this in the last 10 s)"]
    assert throttle.suppressed("bad-frame") == 0


def test_kinds_are_independent_and_levels_kept(logger_and_records):
    logger, records = logger_and_records
    clock = Clock()
    throttle = LogThrottle(logger, interval=5.0, clock=clock)
    throttle.error("disk-full", "put refused")
    throttle.warning(("poison", "TopicA"), "undeliverable")
    throttle.warning(("poison", "TopicB"), "undeliverable")
    throttle.error("disk-full", "put refused")
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.ERROR, "put refused"), (logging.WARNING, "undeliverable"), (logging.WARNING, "undeliverable")]


def test_traceback_only_on_an_emitted_record(logger_and_records):
    logger, records = logger_and_records
    throttle = LogThrottle(logger, interval=60.0, clock=Clock())
    try:
        raise ValueError("boom")
    except ValueError:
        throttle.error("decode", "bad request", exc_info=True)
        throttle.error("decode", "bad request", exc_info=True)
    assert len(records) == 1 and records[0].exc_info is not None


def test_the_table_of_kinds_is_bounded(logger_and_records):
    logger, records = logger_and_records
    clock = Clock()
    throttle = LogThrottle(logger, interval=60.0, max_kinds=3, clock=clock)
    for i in range(100):
        throttle.warning(f"kind-{i}", "x")
    assert len(throttle._kinds) == 3
    assert len(records) == 100
    # the oldest kinds were forgotten: kind-0 logs again at once, kind-99 is still held back
    assert throttle.warning("kind-0", "x")
    assert not throttle.warning("kind-99", "x")


def test_disabled_level_costs_nothing_and_counts_nothing(logger_and_records):
    logger, records = logger_and_records
    logger.setLevel(logging.ERROR)
    throttle = LogThrottle(logger, interval=1.0, clock=Clock())
    assert not throttle.warning("k", "x")
    assert throttle.suppressed("k") == 0 and records == []


def test_bad_arguments():
    with pytest.raises(ValueError):
        LogThrottle(logging.getLogger("x"), interval=-1)
    with pytest.raises(ValueError):
        LogThrottle(logging.getLogger("x"), max_kinds=0)
