"""Allocation strategies, the process queue (offsets and flow-control counters), offset stores."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.client.offset_store import LocalFileOffsetStore, ReadOffsetType
from mq.client.process_queue import ProcessQueue
from mq.client.rebalance import allocate_averagely, allocate_averagely_by_circle, allocate_consistent_hash
from mq.common.message import MessageExt, MessageQueue


def qs(n: int, topic: str = "T") -> list[MessageQueue]:
    return sorted(MessageQueue(topic, f"b{i // 4}", i % 4) for i in range(n))


def test_averagely_8_over_3_as_documented():
    mqs, cids = qs(8), ["c0", "c1", "c2"]
    got = [allocate_averagely("G", c, mqs, cids) for c in cids]
    assert got == [mqs[0:3], mqs[3:6], mqs[6:8]]


@pytest.mark.parametrize("n,m,sizes", [(4, 3, [2, 1, 1]), (3, 5, [1, 1, 1, 0, 0]), (10, 4, [3, 3, 2, 2]),
                                       (1, 1, [1]), (6, 3, [2, 2, 2])])
def test_averagely_uneven(n, m, sizes):
    mqs, cids = qs(n), [f"c{i}" for i in range(m)]
    assert [len(allocate_averagely("G", c, mqs, cids)) for c in cids] == sizes


def test_unknown_client_gets_nothing():
    assert allocate_averagely("G", "zz", qs(4), ["a", "b"]) == []
    assert allocate_averagely("G", "a", [], ["a"]) == []


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.sampled_from(["avg", "circle", "hash"]))
def test_every_strategy_partitions_the_queues(n, m, which):
    fn = {"avg": allocate_averagely, "circle": allocate_averagely_by_circle, "hash": allocate_consistent_hash}[which]
    mqs, cids = qs(n), sorted(f"10.0.0.1@{i}" for i in range(m))
    parts = [fn("G", c, mqs, cids) for c in cids]
    flat = [q for p in parts for q in p]
    assert sorted(flat) == mqs  # each queue exactly once
    if which != "hash":
        assert max(map(len, parts)) - min(map(len, parts)) <= 1


def msg(off: int, size: int = 10) -> MessageExt:
    return MessageExt(topic="T", body=b"x" * size, queue_offset=off)


def test_process_queue_commit_offset_never_passes_unconsumed():
    pq = ProcessQueue()
    assert pq.remove([msg(0)]) == -1
    ms = [msg(i) for i in range(10, 15)]
    pq.put(ms)
    assert (pq.msg_count, pq.msg_size, pq.max_span()) == (5, 50, 4)
    assert pq.remove([ms[1], ms[2]]) == 10       # 10 still cached
    assert pq.remove([ms[0]]) == 13
    assert pq.remove([ms[4]]) == 13
    assert pq.remove([ms[3]]) == 15              # empty: max + 1
    assert (pq.msg_count, pq.msg_size, pq.max_span()) == (0, 0, 0)
    pq.put([msg(15), msg(15)])                   # duplicates ignored
    assert pq.msg_count == 1


def test_process_queue_flow_control_thresholds(client_config):
    from mq.client.consumer import PushConsumer
    from mq.config import ConsumerConfig

    c = PushConsumer(ConsumerConfig(group="G", pull_threshold_for_queue=5, pull_threshold_size_for_queue=1000,
                                    consume_concurrently_max_span=50), lambda m, c: None)
    pq = ProcessQueue()
    pq.put([msg(i) for i in range(5)])
    assert not c._flow_controlled(pq)
    pq.put([msg(5)])
    assert c._flow_controlled(pq)                 # 6 > 5 messages
    pq = ProcessQueue()
    pq.put([msg(0, 600), msg(1, 600)])
    assert c._flow_controlled(pq)                 # 1200 > 1000 bytes
    pq = ProcessQueue()
    pq.put([msg(0), msg(51)])
    assert c._flow_controlled(pq)                 # span 51 > 50


async def test_local_file_offset_store_persists_and_reloads(tmp_path):
    s = LocalFileOffsetStore(tmp_path, "127.0.0.1@x", "G")
    a, b = MessageQueue("T", "b0", 0), MessageQueue("T", "b0", 1)
    s.update(a, 10)
    s.update(a, 5, increase_only=True)
    s.update(b, 7)
    assert await s.read(a, ReadOffsetType.READ_FROM_MEMORY) == 10
    await s.persist_all([a, b])
    s.update(a, 11)
    await s.persist_all([a, b])
    path = tmp_path / "127.0.0.1@x" / "G" / "offsets.json"
    raw = path.read_text()
    assert '"offsetTable"' in raw and '"brokerName":"b0"' in raw
    assert (path.parent / "offsets.json.bak").exists()
    s2 = LocalFileOffsetStore(tmp_path, "127.0.0.1@x", "G")
    s2.load()
    assert s2.table == {a: 11, b: 7}
    assert await s2.read(MessageQueue("T", "b0", 9), ReadOffsetType.READ_FROM_STORE) == -1
    # a torn main file falls back to the backup
    path.write_text("{not json")
    s3 = LocalFileOffsetStore(tmp_path, "127.0.0.1@x", "G")
    s3.load()
    assert s3.table == {a: 10, b: 7}
