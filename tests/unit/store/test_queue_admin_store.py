"""Store side of the queue-administration requests: manual commit-log deletion, expired and unused consume
queues, reading units for QUERY_CONSUME_QUEUE; deletion racing a writer never corrupts a queue."""

from __future__ import annotations

import threading
import time

from .conftest import inner

from mq.common.record import decode_record
from mq.common.tags import java_hash_code
from mq.common.topic import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC
from mq.store.consume_queue import CQ_UNIT_SIZE
from mq.store.status import GetMessageStatus as G
from mq.store.status import PutMessageStatus as P


def _put(s, topic, n, queue_id=0, size=900, tags=None):
    out = []
    for _ in range(n):
        r = s.put_message(inner(topic=topic, queue_id=queue_id, body=b"x" * size, tags=tags))
        assert r.status is P.PUT_OK
        out.append(r)
    return out


def test_manual_delete_ignores_the_hour_but_not_the_reserved_time(make_store):
    now = [time.time()]
    s = make_store(_store_kw={"now": lambda: now[0], "disk_ratio": lambda p: 0.1}, delete_when="25")
    _put(s, "T", 200)
    n = len(s.commit_log.queue.files)
    assert n >= 3
    s.clean_expired_files()
    assert len(s.commit_log.queue.files) == n  # not the hour, disk fine: nothing
    assert s.delete_expired_files_manually() == 0  # files younger than fileReservedTime (72 h) stay
    assert len(s.commit_log.queue.files) == n
    now[0] += 73 * 3600
    assert s.delete_expired_files_manually() == n - 1  # never the last segment
    assert s.get_min_phy_offset() == s.commit_log.queue.files[0].start_offset > 0
    assert s.cleaner.manual_passes == 19  # the first of MAX_MANUAL_DELETE_PASSES ran at once
    r = s.get_message("g", "T", 0, 0, 4)
    assert r.status is G.OFFSET_TOO_SMALL  # consume queues followed the commit log


def test_clean_expired_consume_queues_keeps_live_empty_and_delay_queues(make_store):
    s = make_store(file_reserved_time=0, delete_when="25", _store_kw={"disk_ratio": lambda p: 0.1})
    _put(s, "Old", 60, queue_id=0)
    _put(s, "Old", 5, queue_id=1)
    _put(s, SCHEDULE_TOPIC, 3, queue_id=0)  # never destroyed by this request
    _put(s, "New", 120, queue_id=0)
    s.cq_table.find("Empty", 0)  # a queue "created just now": no unit yet
    root = s.root / "consumequeue"
    assert s.delete_expired_files_manually() >= 1
    phy_min = s.get_min_phy_offset()
    assert s.cq_table.find("Old", 0, create=False).last_unit_end() <= phy_min
    assert s.cq_table.find("New", 0, create=False).last_unit_end() > phy_min

    removed = s.clean_expired_consume_queues()
    assert sorted(removed) == [("Old", 0), ("Old", 1)]
    assert not (root / "Old").exists() and (root / "New" / "0").is_dir()
    assert (root / SCHEDULE_TOPIC / "0").is_dir()
    assert s.cq_table.find("Empty", 0, create=False) is not None
    assert s.get_max_offset("Old", 0) == 0
    # the queue starts afresh at offset 0 (its next offset was forgotten, as RocketMQ does)
    assert s.put_message(inner(topic="Old", queue_id=0)).queue_offset == 0
    assert s.get_message("g", "Old", 0, 0, 4).status is G.FOUND
    assert s.get_message("g", "New", 0, s.get_min_offset("New", 0), 4).status is G.FOUND
    assert s.clean_expired_consume_queues() == []


def test_clean_unused_topics(make_store):
    s = make_store()
    for topic in ("Keep", "Drop", SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, "%LMQ%x"):
        _put(s, topic, 3, size=10)
    _put(s, "Drop", 2, queue_id=3, size=10)
    root = s.root / "consumequeue"
    asked = []

    def used(topic):
        asked.append(topic)
        return topic == "Keep"

    assert s.clean_unused_topics(used) == ["Drop"]
    assert set(asked) == {"Keep", "Drop"}  # the always-kept topics are not even asked about
    assert not (root / "Drop").exists()
    for topic in ("Keep", SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, "%LMQ%x"):
        assert (root / topic / "0").is_dir(), topic
    assert s.get_message("g", "Drop", 3, 0, 4).status is G.NO_MATCHED_LOGIC_QUEUE
    assert s.put_message(inner(topic="Drop", queue_id=3)).queue_offset == 0


def test_queue_with_records_in_flight_is_kept(make_store):
    s = make_store()
    _put(s, "Busy", 2, size=10)
    # a record appended but not dispatched yet (a group commit still waiting) shows as next offset > CQ max
    with s.put_lock:
        s.commit_log.topic_queue_table[("Busy", 0)] += 1
    assert s.clean_unused_topics(lambda t: False) == []
    assert (s.root / "consumequeue" / "Busy" / "0").is_dir()
    with s.put_lock:
        s.commit_log.topic_queue_table[("Busy", 0)] -= 1
    assert s.clean_unused_topics(lambda t: False) == ["Busy"]


def test_units_at_follows_get_index_buffer(make_store):
    s = make_store()  # 64 units per consume-queue segment
    tags = ["A", "B", "C"]
    puts = [s.put_message(inner(topic="Q", body=b"m%d" % i, tags=tags[i % 3])) for i in range(70)]
    lo, hi, units = s.query_consume_queue("Q", 0, 2, 3)
    assert (lo, hi) == (0, 70)
    assert units == [(puts[i].wrote_offset, puts[i].wrote_bytes, java_hash_code(tags[i % 3])) for i in (2, 3, 4)]
    raw = decode_record(s.select_one_message_by_offset(units[0][0]))
    assert raw.queue_offset == 2 and raw.body == b"m2"
    # never past the end of the segment holding the index
    assert len(s.query_consume_queue("Q", 0, 60, 10)[2]) == 4
    assert len(s.query_consume_queue("Q", 0, 64, 10)[2]) == 6
    assert s.query_consume_queue("Q", 0, 70, 5)[2] is None  # at the write position
    assert s.query_consume_queue("Q", 0, 1000, 5)[2] is None
    assert s.query_consume_queue("Q", 0, 5, 0)[2] == []
    assert s.query_consume_queue("Q", 1, 0, 5) is None  # no such queue
    assert s.cq_table.find("Q", 0, create=False).max_offset * CQ_UNIT_SIZE == s.cq_table.find(
        "Q", 0, create=False).queue.max_offset


def test_cleaning_while_a_writer_puts_never_corrupts_a_queue(make_store):
    """Deletion takes the put and dispatch locks: every unit left points at the record of its own offset."""
    s = make_store(flush_disk_type="SYNC_FLUSH")
    stop = threading.Event()
    errors = []

    def writer():
        try:
            while not stop.is_set():
                futs = [s.put_message_async(inner(topic="W", queue_id=q, body=b"w")) for q in range(3)]
                for f in futs:
                    assert f.result(5).status is P.PUT_OK
        except Exception as exc:  # surfaced below
            errors.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    removed = 0
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            removed += len(s.clean_unused_topics(lambda topic: False))
            time.sleep(0.002)
    finally:
        stop.set()
        t.join()
    assert not errors
    assert removed > 0
    s.dispatcher.retry()
    for q in range(3):
        cq = s.cq_table.find("W", q, create=False)
        if cq is None:
            continue
        # no unit lost and no gap: the queue holds exactly the offsets the commit log handed out since its start
        assert (cq.min_offset, cq.max_offset) == (0, s.commit_log.topic_queue_table.get(("W", q), 0))
        for off in range(cq.min_offset, cq.max_offset):
            phy, size, _ = cq.get_unit(off)
            rec = decode_record(s.select_one_message_by_offset(phy, size))
            assert (rec.topic, rec.queue_id, rec.queue_offset) == ("W", q, off)
