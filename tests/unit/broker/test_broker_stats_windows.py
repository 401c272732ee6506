"""The broker's per-key stats items: Java ``StatsItem`` minute / hour / day windows, with an injected clock."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from mq.daemon.broker.stats import (BROKER_GET_NUMS, BROKER_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS,
                                    TOPIC_PUT_SIZE, BrokerStats)

T0 = 1_700_000_000_000  # boot time, epoch ms
SEC, MIN, HOUR = 1000, 60_000, 3_600_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make(now: int = T0) -> tuple[BrokerStats, Clock]:
    clock = Clock(now)
    ctrl = SimpleNamespace(config=SimpleNamespace(broker_cluster_name="DefaultCluster"))
    return BrokerStats(ctrl, clock=clock), clock  # type: ignore[arg-type]


def at(stats: BrokerStats, clock: Clock, ms: int) -> None:
    clock.now = ms
    stats.tick()


def fig(view, window: str) -> tuple[int, float, float]:
    s = view[window]
    return s.sum, round(s.tps, 6), round(s.avgpt, 6)


def test_unknown_items_do_not_exist_and_new_ones_read_zero_until_sampled():
    stats, clock = make()
    at(stats, clock, T0)  # the boot sample: no item yet
    assert stats.view(TOPIC_PUT_NUMS, "T") is None
    assert stats.view("NO_SUCH_STATS", "T") is None
    stats.on_topic_put("T", 3, 300)
    at(stats, clock, T0 + 5 * SEC)  # not due yet (every 10 s from boot)
    view = stats.view(TOPIC_PUT_NUMS, "T")
    assert {w: fig(view, w) for w in view} == {"minute": (0, 0.0, 0.0), "hour": (0, 0.0, 0.0), "day": (0, 0.0, 0.0)}
    assert stats.view(GROUP_GET_NUMS, "T@G") is None
    assert stats.view(GROUP_GET_NUMS, "T") is None  # no '@': not a group key


def test_minute_window_first_sample_is_seeded_ten_seconds_back():
    stats, clock = make()
    at(stats, clock, T0)
    clock.now = T0 + 1 * SEC
    stats.on_topic_put("T", 3, 100)  # a batch of 3: times 1
    stats.on_topic_put("T", 2, 50)
    at(stats, clock, T0 + 10 * SEC)
    nums = stats.view(TOPIC_PUT_NUMS, "T")
    size = stats.view(TOPIC_PUT_SIZE, "T")
    # snapshots (T0, 0, 0) seed and (T0+10s, times 2, 5 msgs, 150 bytes)
    assert fig(nums, "minute") == (5, 0.5, 2.5)
    assert fig(size, "minute") == (150, 15.0, 75.0)
    # the hour and day windows were sampled at boot, before the item existed: nothing yet
    assert fig(nums, "hour") == (0, 0.0, 0.0) and fig(nums, "day") == (0, 0.0, 0.0)
    assert stats.msg_put_total == 5


def test_minute_window_keeps_seven_snapshots_sixty_seconds():
    stats, clock = make()
    at(stats, clock, T0)
    for i in range(1, 13):  # 12 intervals of 10 s; in interval i, i requests of 4 messages
        clock.now = T0 + i * 10 * SEC - 5 * SEC
        for _ in range(i):
            stats.on_topic_put("T", 4, 40)
        at(stats, clock, T0 + i * 10 * SEC)
    # the last 7 snapshots are at 60s..120s: the sum covers intervals 7..12
    msgs = sum(4 * i for i in range(7, 13))  # 156
    times = sum(range(7, 13))  # 39
    assert fig(stats.view(TOPIC_PUT_NUMS, "T"), "minute") == (msgs, round(msgs / 60, 6), 4.0)
    assert stats.view(TOPIC_PUT_NUMS, "T")["minute"].times == times


def test_hour_and_day_windows():
    stats, clock = make()
    at(stats, clock, T0)
    stats.on_topic_put("T", 1, 10)
    # every 10 s for 26 hours would be slow; tick every minute (each tick samples the minute window once)
    t = T0
    for minute in range(1, 26 * 60 + 1):
        t = T0 + minute * MIN
        clock.now = t - 30 * SEC
        stats.on_topic_put("T", 1, 10)  # one message per minute
        at(stats, clock, t)
        if minute == 10:
            # hour window: seed (T0, 0) and (T0+10min, 11 messages)
            assert fig(stats.view(TOPIC_PUT_NUMS, "T"), "hour") == (11, round(11 * 1000 / (10 * MIN), 6), 1.0)
        if minute == 60:
            # day window: seed at T0 and the sample at T0+1h: all 61 messages in one hour
            assert fig(stats.view(TOPIC_PUT_NUMS, "T"), "day") == (61, round(61 * 1000 / HOUR, 6), 1.0)
    view = stats.view(TOPIC_PUT_NUMS, "T")
    # hour: 7 samples 10 min apart, the last at 26h: the last 60 minutes -> 60 messages
    assert fig(view, "hour") == (60, round(60 * 1000 / HOUR, 6), 1.0)
    # day: 25 samples 1 h apart, the last at 26h: the last 24 hours -> 1440 messages
    assert fig(view, "day") == (1440, round(1440 * 1000 / (24 * HOUR), 6), 1.0)
    # minute: ticked once a minute here, so its 7 snapshots span 6 minutes -> 6 messages in 360 s
    assert fig(view, "minute") == (6, round(6 / 360, 6), 1.0)


def test_a_late_tick_samples_once_and_reschedules_from_now():
    stats, clock = make()
    at(stats, clock, T0)
    stats.on_topic_put("T", 10, 1)
    at(stats, clock, T0 + 35 * SEC)  # due since T0+10s: one sample (seed at T0+25s)
    assert fig(stats.view(TOPIC_PUT_NUMS, "T"), "minute") == (10, 1.0, 10.0)
    stats.on_topic_put("T", 10, 1)
    at(stats, clock, T0 + 44 * SEC)  # next due at T0+45s: nothing
    assert fig(stats.view(TOPIC_PUT_NUMS, "T"), "minute") == (10, 1.0, 10.0)
    at(stats, clock, T0 + 45 * SEC)
    assert fig(stats.view(TOPIC_PUT_NUMS, "T"), "minute") == (20, 1.0, 10.0)  # 20 over 25..45 s


def test_group_get_items_consume_tps_and_broker_totals():
    stats, clock = make()
    at(stats, clock, T0)
    stats.on_group_get("T", "G1", 32, 3200)
    stats.on_group_get("T", "G1", 8, 800)
    stats.on_group_get("T", "G2", 5, 500)
    stats.on_topic_put("T", 45, 4500)
    stats.on_put(2)  # send-back: totals only
    at(stats, clock, T0 + 10 * SEC)
    assert fig(stats.view(GROUP_GET_NUMS, "T@G1"), "minute") == (40, 4.0, 20.0)
    assert fig(stats.view(GROUP_GET_SIZE, "T@G1"), "minute") == (4000, 400.0, 2000.0)
    assert fig(stats.view(GROUP_GET_NUMS, "T@G2"), "minute") == (5, 0.5, 5.0)
    assert stats.consume_tps("G1", "T") == pytest.approx(4.0)
    assert stats.consume_tps("G3", "T") == 0.0
    # broker items: keyed by cluster name, value only (times 0 -> avgpt 0)
    assert fig(stats.view(BROKER_PUT_NUMS, "DefaultCluster"), "minute") == (47, 4.7, 0.0)
    assert fig(stats.view(BROKER_GET_NUMS, "DefaultCluster"), "minute") == (45, 4.5, 0.0)
    assert stats.view(BROKER_PUT_NUMS, "OtherCluster") is None
    assert (stats.msg_put_total, stats.msg_get_total) == (47, 45)


def test_a_deleted_topic_forgets_its_items_but_not_the_broker_totals():
    stats, clock = make()
    at(stats, clock, T0)
    stats.on_topic_put("Gone", 4, 400)
    stats.on_group_get("Gone", "G", 4, 400)
    stats.on_topic_put("Kept", 1, 100)
    at(stats, clock, T0 + 10 * SEC)
    stats.remove_topic("Gone")
    assert stats.view(TOPIC_PUT_NUMS, "Gone") is None and stats.view(GROUP_GET_NUMS, "Gone@G") is None
    assert fig(stats.view(TOPIC_PUT_NUMS, "Kept"), "minute") == (1, 0.1, 1.0)
    assert (stats.msg_put_total, stats.msg_get_total) == (5, 4)
    stats.remove_topic("NeverSeen")  # no error


def test_morning_snapshots_follow_the_local_date():
    evening = int(dt.datetime(2024, 5, 1, 23, 59, 50).timestamp() * 1000)
    stats, clock = make(evening)
    stats.on_topic_put("T", 7, 70)
    stats.on_group_get("T", "G", 3, 30)
    at(stats, clock, evening + 5 * SEC)
    assert (stats._put_today_morning, stats._get_today_morning) == (0, 0)
    at(stats, clock, evening + 20 * SEC)  # 00:00:10 the next day
    assert (stats._put_today_morning, stats._get_today_morning) == (7, 3)
    stats.on_topic_put("T", 1, 10)
    at(stats, clock, evening + 20 * SEC + 24 * HOUR)
    assert (stats._put_yesterday_morning, stats._put_today_morning) == (7, 8)


def test_a_clock_that_goes_back_does_not_stop_sampling():
    stats, clock = make()
    at(stats, clock, T0)
    at(stats, clock, T0 - HOUR)  # wall clock set back an hour: nothing sampled, next one 10 s from now
    stats.on_topic_put("T", 4, 40)
    at(stats, clock, T0 - HOUR + 10 * SEC)
    assert fig(stats.view(TOPIC_PUT_NUMS, "T"), "minute") == (4, 0.4, 4.0)
