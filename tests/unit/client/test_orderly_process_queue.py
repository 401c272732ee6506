"""ProcessQueue as the orderly consumer uses it: take / commit / put back / rollback, dispatch, lock state."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from mq.client.process_queue import ProcessQueue
from mq.common.message import MessageExt


def msg(offset: int, size: int = 10) -> MessageExt:
    m = MessageExt(topic="T", body=b"x" * size)
    m.queue_offset = offset
    return m


def offsets(msgs) -> list[int]:
    return [m.queue_offset for m in msgs]


def test_put_dispatches_once_until_a_take_finds_nothing():
    pq = ProcessQueue()
    assert pq.put([msg(0), msg(1)]) is True
    assert pq.put([msg(2)]) is False  # a run is already under way
    assert offsets(pq.take_messages(10)) == [0, 1, 2]
    assert pq.put([msg(3)]) is False  # still consuming: the run will see it
    assert offsets(pq.take_messages(10)) == [3]
    assert pq.take_messages(10) == [] and pq.consuming is False
    assert pq.put([]) is False  # nothing cached: no run
    assert pq.put([msg(4)]) is True


def test_take_moves_the_lowest_offsets_and_commit_returns_highest_plus_one():
    pq = ProcessQueue()
    pq.put([msg(i, size=i + 1) for i in range(5, 10)])
    assert (pq.msg_count, pq.msg_size) == (5, 6 + 7 + 8 + 9 + 10)
    batch = pq.take_messages(2)
    assert offsets(batch) == [5, 6]
    assert sorted(pq.consuming_msgs) == [5, 6] and list(pq.msgs) == [7, 8, 9]
    assert pq.msg_count == 5  # consuming messages still count for flow control until committed
    assert pq.commit() == 7
    assert (pq.msg_count, pq.msg_size) == (3, 8 + 9 + 10)
    assert pq.consuming_msgs == {}
    assert pq.commit() == -1  # nothing consuming


def test_put_back_comes_first_again_and_rollback_restores_everything():
    pq = ProcessQueue()
    pq.put([msg(i) for i in range(4)])
    batch = pq.take_messages(2)
    pq.put([msg(4), msg(1)])  # a duplicate of a consuming offset is ignored
    assert pq.msg_count == 5
    pq.make_messages_consume_again(batch)
    assert list(pq.msgs) == [0, 1, 2, 3, 4] and pq.consuming_msgs == {}
    assert offsets(pq.take_messages(3)) == [0, 1, 2]
    pq.rollback()
    assert list(pq.msgs) == [0, 1, 2, 3, 4]
    assert pq.msg_count == 5 and pq.commit() == -1


def test_partial_put_back_keeps_the_rest_for_the_next_commit():
    pq = ProcessQueue()
    pq.put([msg(i) for i in range(3)])
    batch = pq.take_messages(3)
    pq.make_messages_consume_again([batch[1]])  # 0 and 2 were sent to the retry topic: they stay consuming
    assert list(pq.msgs) == [1] and sorted(pq.consuming_msgs) == [0, 2]
    assert offsets(pq.take_messages(1)) == [1]
    assert pq.commit() == 3 and pq.msg_count == 0


def test_lock_state_and_expiry():
    pq = ProcessQueue()
    assert pq.locked is False
    pq.mark_locked(now=100.0)
    assert pq.locked and pq.last_lock_time == 100.0
    assert not pq.lock_expired(30.0, now=130.0)
    assert pq.lock_expired(30.0, now=130.5)
    info = pq.info()
    assert info["locked"] is True and info["tryUnlockTimes"] == 0


def test_clear_forgets_cache_and_consuming():
    pq = ProcessQueue()
    pq.put([msg(i) for i in range(4)])
    pq.take_messages(1)
    pq.clear()
    assert (pq.msg_count, pq.msg_size, pq.msgs, pq.consuming_msgs) == (0, 0, {}, {})
    assert not pq.has_temp_message() and pq.commit() == -1


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=15), st.integers(0, 2**32 - 1))
def test_random_runs_consume_each_offset_in_order(pulls, seed):
    """Pulls of increasing offsets, batches that succeed or are put back at random: the successful batches,
    concatenated, are every offset once, ascending, and each commit is the next offset to consume."""
    rnd = random.Random(seed)
    pq = ProcessQueue()
    nxt = 0
    consumed: list[int] = []
    for n in pulls:
        pq.put([msg(o) for o in range(nxt, nxt + n)])
        nxt += n
        while True:
            batch = pq.take_messages(rnd.randint(1, 4))
            if not batch:
                break
            if rnd.random() < 0.3:
                pq.make_messages_consume_again(batch)
                continue
            consumed.extend(offsets(batch))
            assert pq.commit() == consumed[-1] + 1
    assert consumed == list(range(nxt))
    assert pq.msg_count == 0 and pq.msg_size == 0
