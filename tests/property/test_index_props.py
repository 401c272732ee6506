"""Property: whatever messages are indexed, a (verified) query returns exactly those put in the time range.

Tiny files (few slots, few entries) force hash-slot sharing and roll-overs. Store times are whole seconds
after the first message, so an entry's recorded time (whole seconds after its file's first entry) is exact.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from mq.common.tags import java_hash_code
from mq.store.index_hash import _java_string_hash
from mq.store.index_service import IndexService

T0 = 1_700_000_000_000
TOPICS = ["Aa", "BB", "TopicTest"]  # "Aa" and "BB" collide in Java's hash
KEYS = st.sampled_from(["Aa", "BB", "k1", "k2", "order-7", "\u952e", "x y"])  # "x y" is two keys

message = st.tuples(
    st.sampled_from(TOPICS),
    st.lists(KEYS, max_size=3),
    st.booleans(),                          # with a uniq key
    st.integers(min_value=1, max_value=500),  # record size
    st.integers(min_value=0, max_value=3),    # seconds since the previous message
)


def _index(svc: IndexService, messages, start: int = 0) -> dict[int, tuple[str, list[str], int]]:
    """Dispatch ``messages[start:]``; returns offset -> (topic, keys incl. uniq, store time) for all of them."""
    records: dict[int, tuple[str, list[str], int]] = {}
    phy, ts = 0, T0
    for i, (topic, keys, with_uniq, size, gap) in enumerate(messages):
        ts += gap * 1000
        uniq = f"U{i}" if with_uniq else None
        key_text = " ".join(keys)
        tokens = ([uniq] if uniq else []) + [k for k in key_text.split(" ") if k]
        records[phy] = (topic, tokens, ts)
        if i >= start:
            assert svc.build_index(topic, key_text, uniq, phy, ts) == len(tokens)
        phy += size
    return records


def _check(svc: IndexService, records: dict[int, tuple[str, list[str], int]], begin: int, end: int,
           max_num: int) -> None:
    def read_keys(off: int) -> tuple[str, list[str]] | None:
        topic, keys, _ts = records[off]
        return topic, keys

    queried = {(t, k) for t, ks, _ in records.values() for k in ks} | {("TopicTest", "nothing")}
    for topic, key in queried:
        want = sorted((off for off, (t, ks, when) in records.items()
                       if t == topic and key in ks and begin <= when <= end), reverse=True)
        assert svc.query_verified(topic, key, 1000, begin, end, read_keys) == want
        assert svc.query_verified(topic, key, max_num, begin, end, read_keys) == want[:max_num]
        raw = svc.query(topic, key, 1000, begin, end)
        assert set(want) <= set(raw)
        assert raw == sorted(set(raw), reverse=True)  # newest first, each offset once


def _service(tmp: str, slots: int, num: int) -> IndexService:
    svc = IndexService(Path(tmp), max_hash_slot_num=slots, max_index_num=num)
    svc.load(True)
    return svc


@settings(max_examples=100, deadline=None)
@given(messages=st.lists(message, min_size=1, max_size=40),
       slots=st.integers(min_value=1, max_value=7), num=st.integers(min_value=2, max_value=9),
       window=st.tuples(st.integers(min_value=-2, max_value=130), st.integers(min_value=0, max_value=130)),
       max_num=st.integers(min_value=1, max_value=50))
def test_query_finds_exactly_what_was_put_in_range(messages, slots, num, window, max_num) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        svc = _service(tmp, slots, num)
        try:
            records = _index(svc, messages)
            _check(svc, records, T0 + window[0] * 1000, T0 + window[1] * 1000, max_num)
        finally:
            svc.close()


@settings(max_examples=60, deadline=None)
@given(messages=st.lists(message, min_size=1, max_size=30),
       slots=st.integers(min_value=1, max_value=5), num=st.integers(min_value=2, max_value=6),
       cut=st.integers(min_value=0, max_value=29), reopen=st.booleans())
def test_truncate_then_redispatch_equals_never_truncated(messages, slots, num, cut, reopen) -> None:
    """Recovery: cut the index at a message's offset, replay the log from there (all of it: replay is
    idempotent), and every query answers as if nothing had happened."""
    with tempfile.TemporaryDirectory() as tmp:
        svc = _service(tmp, slots, num)
        try:
            records = _index(svc, messages)
            offsets = sorted(records)
            cut_at = offsets[min(cut, len(offsets) - 1)]
            assert svc.truncate_from(cut_at) == cut_at
            assert all(o < cut_at for o in _all_offsets(svc, records))
            if reopen:
                svc.close()
                svc = _service(tmp, slots, num)
            for off, (topic, keys, ts) in records.items():
                svc.build_index(topic, " ".join(keys), None, off, ts)  # replay from the start
            _check(svc, records, 0, 2**62, 1000)
        finally:
            svc.close()


def _all_offsets(svc: IndexService, records) -> set[int]:
    return {o for t, ks, _ in records.values() for k in ks for o in svc.query(t, k, 10_000, 0, 2**62)}


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_index_hash_agrees_with_the_common_java_hash(text: str) -> None:
    assert _java_string_hash(text) == java_hash_code(text)
