"""The index's C key hashing and entry writer (mq/store/_index.c) give the same items, entries, slots and headers
as the Python code in mq.store.index_service and mq.store.index_file, and check their input before writing."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from mq.store import index_file, index_service, native
from mq.store.commit_log import DispatchRequest
from mq.store.index_file import IndexFile
from mq.store.index_hash import index_key_hash
from mq.store.index_service import IndexService

try:
    from mq.store import _index
except ImportError:  # pragma: no cover - depends on the install
    _index = None

needs_c = pytest.mark.skipif(_index is None or index_file._c_put_entries is None,
                             reason="the C index is not built (no C compiler at install) or MQ_PURE_PYTHON is set")

# keys and topics with what the hash must get right: non-ASCII (UCS-2), astral characters (a surrogate pair in
# Java), lone surrogates, runs of spaces
key_text = st.text(st.characters(blacklist_characters="\x00"), max_size=16)
keys = st.one_of(st.none(), st.just(""), st.just(" "), key_text,
                 st.lists(st.sampled_from(["a", "", "ключ", "𝄞", "\ud800", "k 1", "  "]), max_size=5).map(" ".join))
topics = st.sampled_from(["T", "TopicTest", "Tópico", "主题", "𝄞topic", "t" * 127])


@st.composite
def requests(draw):
    out = []
    phy = draw(st.integers(0, 2**40))
    for i in range(draw(st.integers(0, 30))):
        size = draw(st.integers(1, 5000))
        out.append(DispatchRequest(
            draw(topics), 0, i, phy, size, 0, draw(st.integers(0, 2**45)), draw(keys),
            draw(st.one_of(st.none(), st.just(""), st.text("0123456789ABCDEF", min_size=32, max_size=32),
                           key_text)),
            draw(st.sampled_from([0, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE,
                                  TRANSACTION_ROLLBACK_TYPE]))))
        phy += size
    return out


@needs_c
@settings(max_examples=300, deadline=None)
@given(requests())
def test_c_items_equal_the_python_items(reqs):
    expected = IndexService(Path("unused"))._index_items(reqs)  # hashing needs no files
    assert _index.index_items(reqs, TRANSACTION_ROLLBACK_TYPE) == expected
    for r in reqs:  # and each hash is abs(String.hashCode("topic#key")) of the key it came from
        if r.tran_type == TRANSACTION_ROLLBACK_TYPE:
            continue
        want = [index_key_hash(f"{r.topic}#{k}") for k in ([r.uniq_key] if r.uniq_key else [])
                + [t for t in (r.keys or "").split(" ") if t]]
        assert [h for h, phy, _ts in expected if phy == r.phy_offset] == want


@needs_c
def test_c_items_leave_other_request_types_to_python():
    class Req:
        topic, keys, uniq_key, phy_offset, store_timestamp, tran_type = "T", "k", None, 0, 0, 0

    assert _index.index_items([Req()], TRANSACTION_ROLLBACK_TYPE) is None
    assert _index.index_items([], TRANSACTION_ROLLBACK_TYPE) == []
    with pytest.raises(TypeError, match="keys must be str"):
        _index.index_items([DispatchRequest("T", 0, 0, 0, 1, 0, 0, b"k", None, 0)], TRANSACTION_ROLLBACK_TYPE)


SLOTS, ENTRIES = 7, 40  # few slots: long chains; few entries: batches that fill the file


@st.composite
def item_batches(draw):
    ts0 = draw(st.integers(-5, 2**42))
    hashes = st.one_of(st.integers(0, 2**31 - 1), st.integers(-2**31, -1), st.sampled_from([0, 3, 7, 14]))
    items = [(draw(hashes), draw(st.integers(0, 2**62)), ts0 + draw(st.integers(-3000, 2**33 * 1000)))
             for _ in range(draw(st.integers(1, 60)))]
    cuts = sorted(draw(st.lists(st.integers(0, len(items)), max_size=4)))
    return items, cuts


def _write(path, items, cuts, put):
    f = IndexFile.create(path, SLOTS, ENTRIES)
    f._c_put = put
    try:
        start = 0
        for end in cuts + [len(items)]:  # several calls, each starting where the file stopped the last
            start = f.put_hashes(items[:end], start) if end > start else start
        return start, f.header(), f._mm[:]
    finally:
        f.close()


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(item_batches())
def test_c_entries_equal_the_python_entries(tmp_path, batch):
    items, cuts = batch
    d = tmp_path / os.urandom(6).hex()
    d.mkdir()
    py = _write(d / "py", items, cuts, None)
    c = _write(d / "c", items, cuts, _index.put_entries)
    assert c[0] == py[0] == min(len(items), ENTRIES - 1)  # entry 0 is never written
    assert c[1] == py[1]
    assert c[2] == py[2]


@needs_c
def test_c_entries_check_every_item_before_writing(tmp_path):
    f = IndexFile.create(tmp_path / "f", SLOTS, ENTRIES)
    try:
        before = f._mm[:]
        good = (5, 100, 1_700_000_000_000)
        args = (0, 1, ENTRIES, SLOTS, f._entries_at, 0, 0, 0)
        with pytest.raises(TypeError, match="tuples"):
            _index.put_entries(f._mm, [good, (5, 100)], *args)
        with pytest.raises(OverflowError, match="32-bit"):
            _index.put_entries(f._mm, [good, (2**31, 100, 0)], *args)
        with pytest.raises(OverflowError):
            _index.put_entries(f._mm, [good, (1, 2**64, 0)], *args)
        with pytest.raises(ValueError, match="do not fit"):
            _index.put_entries(bytearray(100), [good], 0, 1, ENTRIES, SLOTS, 40 + SLOTS * 4, 0, 0, 0)
        with pytest.raises(ValueError, match="slot"):
            _index.put_entries(f._mm, [good], 0, 1, ENTRIES, SLOTS, 12, 0, 0, 0)
        with pytest.raises(BufferError):
            _index.put_entries(b"read only", [good], *args)
        assert f._mm[:] == before  # nothing was written by any of them
        assert _index.put_entries(f._mm, [good], 1, 1, *args[2:]) == (1, 1, 0, 0, 0)  # nothing to do
        assert _index.put_entries(f._mm, [good], *args) == (1, 2, good[2], good[1], 1)
    finally:
        f.close()


def test_the_c_index_is_built_where_a_compiler_is():
    """setup.py marks the extension optional, so a broken build would otherwise go unnoticed."""
    if not shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]):
        pytest.skip("no C compiler on this machine")
    if os.environ.get(native.PURE_PYTHON_ENV):
        pytest.skip(f"{native.PURE_PYTHON_ENV} is set")
    assert _index is not None
    assert index_file._c_put_entries is _index.put_entries
    assert index_service._c_index_items is _index.index_items
