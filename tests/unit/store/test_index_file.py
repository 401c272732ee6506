"""IndexFile: Java hashing, the exact byte layout of STORE.md §6, chains, time filtering, truncation."""

from __future__ import annotations

import struct
from datetime import datetime
from pathlib import Path

import pytest

from mq.common.tags import java_hash_code
from mq.store.index_file import (
    IndexFile,
    IndexFileError,
    IndexHeader,
    file_name_for,
    index_file_size,
    is_index_file_name,
    next_file_name,
)
from mq.store.index_hash import _java_string_hash, index_key_hash

# String.hashCode values printed by OpenJDK 17 (java H.java) for these exact strings.
JAVA_HASHES = {
    "hello": 99162322,
    "h\u00e9llo\u20ac\U0001d11e": 403414152,  # a non-BMP char is two UTF-16 units (a surrogate pair)
    "TopicTest#ORDER_1": -1111208162,
    "\u4e2d\u6587\u952e": 20076404,
    "T#7F0000014E2418B4AAC2": 1804356762,
    "polygenelubricants": -2147483648,  # the well-known Integer.MIN_VALUE string
    "": 0,
}


@pytest.mark.parametrize("text,expected", sorted(JAVA_HASHES.items()))
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert _java_string_hash(text) == expected
    assert java_hash_code(text) == expected  # and agrees with mq.common's tag hash


def test_index_key_hash_is_abs_with_min_value_mapped_to_zero() -> None:
    assert index_key_hash("TopicTest#ORDER_1") == 1111208162
    assert index_key_hash("hello") == 99162322
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("Aa") == index_key_hash("BB")  # a classic Java collision


def test_lone_surrogates_hash_like_java_units() -> None:
    # Java: "\ud800x".hashCode() == 0xD800*31 + 'x'
    assert _java_string_hash("\ud800x") == 0xD800 * 31 + ord("x")


def test_file_names_are_local_time_with_millis() -> None:
    ms = 1_700_000_123_456
    expected = datetime.fromtimestamp(ms / 1000).strftime("%Y%m%d%H%M%S") + "456"
    assert file_name_for(ms) == expected
    assert is_index_file_name(expected)
    assert not is_index_file_name("2023111412345")
    assert not is_index_file_name(expected + ".tmp")


def test_next_file_name_sorts_after_the_previous_even_in_the_same_millisecond() -> None:
    ms = 1_700_000_000_999
    first = file_name_for(ms)
    assert next_file_name(None, ms) == first
    second = next_file_name(first, ms)
    assert second > first and is_index_file_name(second)
    assert next_file_name("20231231235959999", ms) == "20240101000000000"


def _golden_bytes(slots: int, num: int, header: tuple, slot_values: dict[int, int],
                  entries: dict[int, tuple[int, int, int, int]]) -> bytes:
    """The file built by hand from the STORE.md §6 tables: offsets and widths written out explicitly."""
    buf = bytearray(40 + slots * 4 + num * 20)
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = header
    struct.pack_into(">q", buf, 0, begin_ts)
    struct.pack_into(">q", buf, 8, end_ts)
    struct.pack_into(">q", buf, 16, begin_phy)
    struct.pack_into(">q", buf, 24, end_phy)
    struct.pack_into(">i", buf, 32, slot_count)
    struct.pack_into(">i", buf, 36, index_count)
    for s, v in slot_values.items():
        struct.pack_into(">i", buf, 40 + s * 4, v)
    for n, (key_hash, phy, diff, prev) in entries.items():
        at = 40 + slots * 4 + n * 20
        struct.pack_into(">i", buf, at, key_hash)
        struct.pack_into(">q", buf, at + 4, phy)
        struct.pack_into(">i", buf, at + 12, diff)
        struct.pack_into(">i", buf, at + 16, prev)
    return bytes(buf)


def test_golden_byte_layout(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000000"
    f = IndexFile.create(path, 4, 5)
    t0 = 1_700_000_000_000
    # Hashes (from JAVA_HASHES): 1111208162 % 4 == 2, 1804356762 % 4 == 2, 20076404 % 4 == 0.
    assert f.put_key("TopicTest#ORDER_1", 100, t0)
    assert f.put_key("T#7F0000014E2418B4AAC2", 250, t0 + 2_500)
    assert f.put_key("\u4e2d\u6587\u952e", 400, t0 + 61_000)
    assert f.put_key("TopicTest#ORDER_1", 400, t0 + 61_999)
    assert f.put_key("x", 500, t0) is False  # index_num=5 allows only 4 entries (entry 0 is unused)
    f.flush()
    f.close()
    data = path.read_bytes()
    assert len(data) == index_file_size(4, 5) == 40 + 16 + 100
    expected = _golden_bytes(
        4, 5,
        header=(t0, t0 + 61_999, 100, 400, 2, 5),
        slot_values={2: 4, 0: 3},
        entries={1: (1111208162, 100, 0, 0),
                 2: (1804356762, 250, 2, 1),
                 3: (20076404, 400, 61, 0),
                 4: (1111208162, 400, 61, 2)})
    assert data == expected


def test_full_file_refuses_and_holds_index_num_minus_one(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20240101000000000", 8, 4)
    assert [f.put_key(f"T#{i}", i, 1000) for i in range(4)] == [True, True, True, False]
    assert f.is_full and f.entry_count == 3 and f.index_count == 4
    f.close()


def test_new_file_inherits_predecessor_end_and_first_entry_defines_begin(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20240101000000000", 8, 8, end_phy_offset=5000, end_timestamp=9_000)
    assert f.header() == IndexHeader(9_000, 9_000, 5000, 5000, 0, 1)
    f.put_key("T#a", 6000, 20_500)
    h = f.header()
    assert (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset) == (20_500, 20_500, 6000, 6000)
    assert f.entry(1).time_diff == 0  # not (20_500 - 9_000) // 1000: Java's quirk is not copied
    f.close()


def test_chain_walk_filters_hash_and_time_in_whole_seconds(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20240101000000000", 1, 64)  # one slot: every key shares a chain
    t0 = 1_000_000
    f.put_key("T#a", 10, t0)
    f.put_key("T#b", 20, t0 + 1_500)   # recorded as t0 + 1000
    f.put_key("T#a", 30, t0 + 2_999)   # recorded as t0 + 2000
    f.put_key("T#a", 40, t0 + 5_000)
    assert f.select_phy_offsets("T#a", 10, 0, 2**62) == [40, 30, 10]
    assert f.select_phy_offsets("T#b", 10, 0, 2**62) == [20]
    assert f.select_phy_offsets("T#a", 2, 0, 2**62) == [40, 30]
    assert f.select_phy_offsets("T#a", 10, t0 + 2_000, t0 + 2_000) == [30]
    assert f.select_phy_offsets("T#a", 10, t0 + 2_001, t0 + 4_999) == []
    assert f.select_phy_offsets("T#a", 10, t0, t0 + 1_999) == [10]
    assert f.select_phy_offsets("T#zzz", 10, 0, 2**62) == []
    assert f.is_time_matched(t0 - 10, t0 + 10**6)
    assert f.is_time_matched(t0 + 4_000, t0 + 10**6)
    assert not f.is_time_matched(t0 + 5_001, t0 + 10**6)
    assert not f.is_time_matched(0, t0 - 1)
    f.close()


def test_reopen_reads_what_was_written_and_zero_index_count_reads_as_one(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000000"
    f = IndexFile.create(path, 16, 16)
    for i in range(5):
        f.put_key(f"T#k{i % 2}", 100 * i, 1000 + i)
    header = f.header()
    f.close()
    g = IndexFile.open(path, 16, 16)
    assert g.header() == header
    assert g.select_phy_offsets("T#k0", 10, 0, 2**62) == [400, 200, 0]
    g.close()
    empty = tmp_path / "20240101000000001"
    empty.write_bytes(bytes(index_file_size(16, 16)))
    e = IndexFile.open(empty, 16, 16)
    assert e.index_count == 1 and e.entry_count == 0
    assert e.select_phy_offsets("T#k0", 10, 0, 2**62) == []
    e.close()


def test_open_rejects_a_file_of_another_size(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000000"
    IndexFile.create(path, 16, 16).close()
    with pytest.raises(IndexFileError, match="expected"):
        IndexFile.open(path, 32, 16)


def test_damaged_chain_cannot_loop(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "20240101000000000", 1, 8)
    f.put_key("T#a", 1, 1000)
    f.put_key("T#a", 2, 1000)
    # Point entry 1's prevIndex at entry 2: Java only checks prev == current and would loop forever.
    f._mm[40 + 4 + 1 * 20 + 16:40 + 4 + 1 * 20 + 20] = struct.pack(">i", 2)
    assert f.select_phy_offsets("T#a", 100, 0, 2**62) == [2, 1]
    f.close()


def test_truncate_restores_exactly_the_shorter_file(tmp_path: Path) -> None:
    keys = ["T#a", "T#b", "T#a", "T#c", "T#a", "T#d", "T#b"]
    long_f = IndexFile.create(tmp_path / "20240101000000000", 3, 16)
    short_f = IndexFile.create(tmp_path / "20240101000000001", 3, 16)
    for i, k in enumerate(keys):
        long_f.put_key(k, 100 * i, 10_000 + 1000 * i)
        if i < 4:
            short_f.put_key(k, 100 * i, 10_000 + 1000 * i)
    assert long_f.truncate_from(400) == 3
    assert long_f.truncate_from(400) == 0
    long_f.flush()
    short_f.flush()
    assert long_f.header() == short_f.header()
    assert long_f.path.read_bytes() == short_f.path.read_bytes()
    assert long_f.truncate_from(0) == 4 and long_f.entry_count == 0 and long_f.hash_slot_count == 0
    long_f.close()
    short_f.close()
