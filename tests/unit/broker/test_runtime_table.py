"""GET_BROKER_RUNTIME_INFO in RocketMQ 4.9.7's formats: Java's Double.toString, humanReadableByteCount, and the put
latency window behind putMessageDistributeTime / putLatency99 / putLatency999 (StoreStatsService)."""

from __future__ import annotations

import pytest

from mq.daemon.broker.runtime_table import _tps_text, human_bytes, java_double
from mq.store.status import PUT_LATENCY_BOUNDS, PutLatency, StoreStats


@pytest.mark.parametrize("value, text", [
    (0.0, "0.0"), (1.0, "1.0"), (12.5, "12.5"), (0.03313617310336829, "0.03313617310336829"), (100.0, "100.0"),
    (0.001, "0.001"), (0.0005, "5.0E-4"), (2.5e-05, "2.5E-5"), (1e7, "1.0E7"), (123456789.0, "1.23456789E8"),
    (-3.0, "-3.0"),
])
def test_java_double(value, text):
    assert java_double(value) == text


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
                                     (270_582_939_648, "252.0 GiB")])
def test_human_bytes(n, text):
    assert human_bytes(n) == text


def test_tps_windows_are_empty_until_there_are_enough_samples():
    samples = [(float(t), 10 * t) for t in range(12)]  # 10 puts a second, 12 samples one second apart
    assert _tps_text(samples) == "10.0  "
    samples = [(float(t), 10 * t) for t in range(601)]
    assert _tps_text(samples) == "10.0 10.0 10.0"


def test_latency_buckets_are_rocketmqs():
    assert PUT_LATENCY_BOUNDS[:3] == (1, 2, 3) and PUT_LATENCY_BOUNDS[19:22] == (20, 22, 24)
    assert PUT_LATENCY_BOUNDS[-2:] == (10_000, 2**63 - 1) and len(PUT_LATENCY_BOUNDS) == 76


def test_put_latency_window():
    w = PutLatency(0.0, 100)
    w.slow += [3, 12, 12, 250, 1500, 12_000]
    # 1,000 puts in the window: 994 under a millisecond
    assert w.distribution(1100) == [994, 1, 2, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1]
    # the 990th of 1,000 lies in the first bucket (<= 1 ms): interpolated inside it
    assert w.percentile(1100, 0.99) == pytest.approx(1 * 990 / 994)
    # the 999th is the 1.5 s put, alone in the (1000, 2000] bucket: its upper end
    assert w.percentile(1100, 0.999) == 2000.0
    assert PutLatency(0.0, 0).percentile(0, 0.99) == 0.0


def test_store_stats_roll_the_window_every_minute():
    st = StoreStats()
    st.latency.started = 0.0
    st.put_count = 50
    st.slow_put(0.004)
    st.sample(now=30.0)
    assert st.last_latency is None
    st.sample(now=60.5)
    assert st.last_latency is not None and st.last_latency.distribution(st.last_latency_puts)[:2] == [49, 1]
    assert st.latency.slow == [] and int(st.put_time_max * 1000) == 4
