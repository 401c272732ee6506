"""The name server's KV config: its bounds (kvConfigMaxEntries, kvConfigMaxBytes) and their accounting."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.daemon.namesrv.kv_config import KVConfig
from mq.errors import KVConfigFullError


def _recount(kv: KVConfig) -> tuple[int, int]:
    table = orjson.loads(kv.snapshot())["configTable"]
    return (sum(len(t) for t in table.values()),
            sum(len(ns.encode()) + len(k.encode()) + len(v.encode()) for ns, t in table.items() for k, v in t.items()))


def test_a_new_key_past_the_entry_bound_is_refused_and_changes_nothing():
    kv = KVConfig(None, max_entries=2)
    kv.put("ns", "a", "1")
    kv.put("ns", "b", "2")
    before = kv.snapshot()
    with pytest.raises(KVConfigFullError, match=r"2 keys of 2 \(kvConfigMaxEntries\)"):
        kv.put("other", "c", "3")
    assert kv.snapshot() == before
    kv.put("ns", "a", "changed")  # replacing a key is no new entry
    assert kv.delete("ns", "b") and kv.entries == 1
    kv.put("other", "c", "3")


def test_a_value_past_the_byte_bound_is_refused_and_a_smaller_one_always_fits():
    kv = KVConfig(None, max_bytes=100)
    kv.put("n", "k", "x" * 90)
    with pytest.raises(KVConfigFullError, match="kvConfigMaxBytes"):
        kv.put("n", "k2", "y" * 10)
    with pytest.raises(KVConfigFullError):
        kv.put("n", "k", "x" * 99)  # growing the value past the bound
    kv.put("n", "k", "x" * 10)
    kv.put("n", "k2", "y" * 10)
    assert (kv.entries, kv.bytes) == (2, (1 + 1 + 10) + (1 + 2 + 10))


def test_a_file_over_the_bounds_loads_and_only_shrinks(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_bytes(orjson.dumps({"configTable": {"ns": {f"k{i}": "v" for i in range(5)}}}))
    kv = KVConfig(path, max_entries=3)
    kv.load()
    assert kv.entries == 5 and kv.get("ns", "k4") == "v"
    with pytest.raises(KVConfigFullError):
        kv.put("ns", "new", "v")
    kv.put("ns", "k0", "w")  # a value of a key it holds can still change
    kv.delete("ns", "k1")
    assert kv.entries == 4


ops = st.lists(st.tuples(st.sampled_from(["put", "delete"]), st.sampled_from(["a", "b", "é"]),
                         st.text(max_size=3), st.text(max_size=12)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(1, 6), st.integers(1, 60))
def test_the_counts_always_match_the_table_and_stay_within_the_bounds(steps, max_entries, max_bytes):
    kv = KVConfig(None, max_entries=max_entries, max_bytes=max_bytes)
    for op, ns, key, value in steps:
        if op == "put":
            try:
                kv.put(ns, key, value)
            except KVConfigFullError:
                pass
        else:
            kv.delete(ns, key)
        assert (kv.entries, kv.bytes) == _recount(kv)
        assert kv.entries <= max_entries and kv.bytes <= max_bytes
