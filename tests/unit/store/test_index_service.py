"""IndexService: build, query (verified), roll-over, reload, unclean-exit load, expiry, truncation."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from mq.store.index_file import IndexFile, is_index_file_name
from mq.store.index_hash import index_key_hash
from mq.store.index_service import IndexService

T0 = 1_700_000_000_000
ALL = (0, 2**62)


def open_service(root: Path, *, slots: int = 64, num: int = 64, last_exit_ok: bool = True,
                 checkpoint_index_ts: int | None = None) -> IndexService:
    svc = IndexService(root, max_hash_slot_num=slots, max_index_num=num)
    svc.load(last_exit_ok, checkpoint_index_ts)
    return svc


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[IndexService]:
    s = open_service(tmp_path)
    yield s
    s.close()


class Log:
    """A stand-in commit log: offset -> (topic, keys incl. uniq key), fed to build_index like dispatch."""

    def __init__(self, svc: IndexService) -> None:
        self.svc = svc
        self.records: dict[int, tuple[str, list[str]]] = {}
        self.next_offset = 0

    def put(self, topic: str, keys: str | None, uniq: str | None = None, ts: int = T0, size: int = 100) -> int:
        phy = self.next_offset
        self.next_offset += size
        self.records[phy] = (topic, ([uniq] if uniq else []) + [k for k in (keys or "").split(" ") if k])
        self.svc.build_index(topic, keys, uniq, phy, ts)
        return phy

    def read_keys(self, phy: int) -> tuple[str, list[str]] | None:
        return self.records.get(phy)


def test_put_and_query_every_key_and_the_uniq_key(svc: IndexService) -> None:
    log = Log(svc)
    a = log.put("T", "order-1 user-7", uniq="UNIQ-A")
    b = log.put("T", "order-2  user-7 ", uniq="UNIQ-B")  # double and trailing spaces: empty tokens skipped
    c = log.put("T", None, uniq="UNIQ-C")
    d = log.put("T", "only-key", uniq=None)
    assert svc.query("T", "order-1", 10, *ALL) == [a]
    assert svc.query("T", "user-7", 10, *ALL) == [b, a]
    assert svc.query("T", "UNIQ-B", 10, *ALL) == [b]
    assert svc.query("T", "UNIQ-C", 10, *ALL) == [c]
    assert svc.query("T", "only-key", 10, *ALL) == [d]
    assert svc.query("Other", "order-1", 10, *ALL) == []
    assert svc.query("T", "", 10, *ALL) == []
    assert svc.query("T", "user-7", 1, *ALL) == [b]
    assert svc.query("T", "user-7", 0, *ALL) == []
    assert svc.max_phy_offset == d


def test_message_without_keys_writes_nothing(svc: IndexService) -> None:
    assert svc.build_index("T", None, None, 0, T0) == 0
    assert svc.build_index("T", "   ", None, 0, T0) == 0
    assert svc.files == []
    assert svc.build_index("T", "a b", "u", 0, T0) == 3


def test_replay_of_already_indexed_messages_is_skipped(svc: IndexService) -> None:
    assert svc.build_index("T", "k", None, 0, T0) == 1
    assert svc.build_index("T", "k", None, 100, T0) == 1
    assert svc.build_index("T", "k", None, 100, T0) == 0  # the newest message again (Java would re-index it)
    assert svc.build_index("T", "k", None, 0, T0) == 0
    assert svc.build_index("T", "k", None, 200, T0) == 1
    assert svc.query("T", "k", 10, *ALL) == [200, 100, 0]


def test_many_keys_in_one_slot(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=1, num=1000)
    log = Log(svc)
    offsets: dict[str, list[int]] = {}
    for i in range(300):
        key = f"key-{i % 17}"
        offsets.setdefault(key, []).append(log.put("T", key, ts=T0 + i))
    f = svc.files[0]
    assert f.hash_slot_count == 1 and f.entry_count == 300
    for key, phys in offsets.items():
        assert svc.query("T", key, 1000, *ALL) == phys[::-1]
    svc.close()


def test_topic_hash_collisions_are_filtered_by_query_verified(svc: IndexService) -> None:
    # "Aa" and "BB" have the same Java hashCode, so "Aa#k" and "BB#k" do too.
    assert index_key_hash("Aa#k") == index_key_hash("BB#k")
    log = Log(svc)
    in_aa = log.put("Aa", "k")
    in_bb = log.put("BB", "k")
    key_aa = log.put("T", "Aa")
    key_bb = log.put("T", "BB")
    assert svc.query("Aa", "k", 10, *ALL) == [in_bb, in_aa]  # the raw index cannot tell them apart
    assert svc.query_verified("Aa", "k", 10, *ALL, read_keys=log.read_keys) == [in_aa]
    assert svc.query_verified("BB", "k", 10, *ALL, read_keys=log.read_keys) == [in_bb]
    assert svc.query_verified("T", "BB", 10, *ALL, read_keys=log.read_keys) == [key_bb]
    assert svc.query_verified("T", "Aa", 10, *ALL, read_keys=log.read_keys) == [key_aa]


def test_collisions_do_not_use_up_max_num_and_vanished_records_are_dropped(svc: IndexService) -> None:
    log = Log(svc)
    real = [log.put("Aa", "k") for _ in range(3)]
    for _ in range(5):
        log.put("BB", "k")
    assert svc.query_verified("Aa", "k", 2, *ALL, read_keys=log.read_keys) == real[::-1][:2]
    del log.records[real[2]]
    assert svc.query_verified("Aa", "k", 10, *ALL, read_keys=log.read_keys) == real[1::-1]


def test_time_range_filtering(svc: IndexService) -> None:
    log = Log(svc)
    phys = [log.put("T", "k", ts=T0 + 1000 * i) for i in range(10)]
    assert svc.query("T", "k", 100, T0 + 3000, T0 + 6000) == phys[6:2:-1]
    assert svc.query("T", "k", 100, T0 + 3001, T0 + 3999) == []
    assert svc.query("T", "k", 100, T0 - 10**6, T0 - 1) == []
    assert svc.query("T", "k", 100, T0 + 9000, T0 + 10**6) == [phys[9]]
    assert svc.query("T", "k", 100, T0 + 6000, T0 + 3000) == []  # begin after end


def test_roll_over_when_full_and_query_across_files(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=4, num=4)  # 3 entries per file
    log = Log(svc)
    phys = [log.put("T", "k", ts=T0 + 1000 * i) for i in range(8)]
    files = svc.files
    assert [f.entry_count for f in files] == [3, 3, 2]
    names = [f.name for f in files]
    assert names == sorted(names) and all(is_index_file_name(n) for n in names)
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == names
    # A new file starts where the previous one ended.
    assert files[1].begin_phy_offset == phys[3] and files[0].end_phy_offset == phys[2]
    assert svc.query("T", "k", 100, *ALL) == phys[::-1]
    assert svc.query("T", "k", 4, *ALL) == phys[:3:-1]
    assert svc.query("T", "k", 100, T0 + 2000, T0 + 4000) == phys[4:1:-1]
    svc.close()


def test_one_message_whose_keys_span_a_roll(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=4, num=3)  # 2 entries per file
    assert svc.build_index("T", "a b c d e", None, 0, T0) == 5
    assert [f.entry_count for f in svc.files] == [2, 2, 1]
    for k in "abcde":
        assert svc.query("T", k, 10, *ALL) == [0]
    assert svc.build_index("T", "a", None, 0, T0) == 0
    svc.close()


def test_reload_after_close_keeps_entries_and_appends_to_the_last_file(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=8, num=5)
    log = Log(svc)
    first = [log.put("T", f"k{i % 3}", ts=T0 + i) for i in range(6)]
    svc.close()
    again = open_service(tmp_path, slots=8, num=5)
    log.svc = again
    assert [f.entry_count for f in again.files] == [4, 2]
    assert again.query("T", "k0", 10, *ALL) == [first[3], first[0]]
    assert again.build_index("T", "k0", None, first[-1], T0) == 0  # replay guard survives the restart
    newer = log.put("T", "k0", ts=T0 + 100)
    assert [f.entry_count for f in again.files] == [4, 3]
    assert again.query("T", "k0", 10, *ALL) == [newer, first[3], first[0]]
    again.close()


def test_unclean_exit_drops_files_newer_than_the_checkpoint(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=8, num=3)  # 2 entries per file
    log = Log(svc)
    phys = [log.put("T", "k", ts=T0 + 1000 * i) for i in range(5)]
    assert svc.index_msg_timestamp == 0
    svc.flush()
    # Only full files count, and only once flushed: the files ending at T0+1000 and T0+3000.
    assert svc.index_msg_timestamp == T0 + 3000
    names = [f.name for f in svc.files]
    svc.close()
    again = open_service(tmp_path, slots=8, num=3, last_exit_ok=False, checkpoint_index_ts=T0 + 1000)
    assert [f.name for f in again.files] == names[:1]
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == names[:1]
    assert again.query("T", "k", 10, *ALL) == phys[1::-1]
    assert again.index_msg_timestamp == T0 + 1000
    again.close()


def test_unclean_exit_load_reports_where_dropped_entries_began(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=8, num=3)
    log = Log(svc)
    phys = [log.put("T", "k", ts=T0 + 1000 * i) for i in range(5)]
    svc.close()
    again = IndexService(tmp_path, max_hash_slot_num=8, max_index_num=3)
    assert again.load(False, T0 + 1000) == phys[2]
    again.close()
    clean = IndexService(tmp_path, max_hash_slot_num=8, max_index_num=3)
    assert clean.load(True, None) is None
    assert len(clean.files) == 1
    clean.close()


def test_load_skips_strangers_and_removes_empty_leftovers(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    (index_dir / "README").write_text("not an index")
    (index_dir / "20240101000000000").write_bytes(b"")
    svc = open_service(tmp_path)
    assert svc.files == []
    assert not (index_dir / "20240101000000000").exists()
    assert (index_dir / "README").exists()
    svc.close()


def test_delete_expired_keeps_the_last_file(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=4, num=3)  # 2 entries per file
    log = Log(svc)
    phys = [log.put("T", "k", ts=T0 + i) for i in range(7)]  # files end at phys 1, 3, 5, 6
    assert svc.delete_expired(phys[0]) == 0
    assert svc.delete_expired(phys[3]) == 1  # only the file ending at phys[1] is entirely below
    assert [f.end_phy_offset for f in svc.files] == [phys[3], phys[5], phys[6]]
    assert svc.delete_expired(10**12) == 2
    assert len(svc.files) == 1 and len(list((tmp_path / "index").iterdir())) == 1
    assert svc.query("T", "k", 10, *ALL) == [phys[6]]
    svc.close()


def test_truncate_from_removes_entries_at_and_beyond_the_cut(tmp_path: Path) -> None:
    svc = open_service(tmp_path, slots=4, num=4)  # 3 entries per file
    log = Log(svc)
    phys = [log.put("T", f"k{i % 2}", ts=T0 + 1000 * i) for i in range(8)]
    assert svc.truncate_from(phys[4]) == phys[4]
    assert [f.entry_count for f in svc.files] == [3, 1]
    assert svc.max_phy_offset == phys[3]
    assert svc.query("T", "k0", 10, *ALL) == [phys[2], phys[0]]
    assert svc.query("T", "k1", 10, *ALL) == [phys[3], phys[1]]
    # Re-dispatch from the returned offset rebuilds what was cut, and nothing twice.
    log.next_offset = phys[4]
    redo = [log.put("T", f"k{i % 2}", ts=T0 + 1000 * i) for i in range(4, 8)]
    assert redo == phys[4:]
    assert svc.query("T", "k0", 10, *ALL) == [phys[6], phys[4], phys[2], phys[0]]
    assert svc.truncate_from(0) == 0
    assert svc.files == [] and list((tmp_path / "index").iterdir()) == []
    assert log.put("T", "again") == phys[-1] + 100
    assert svc.query("T", "again", 10, *ALL) == [phys[-1] + 100]
    svc.close()


def test_a_file_written_in_javas_way_is_read(tmp_path: Path) -> None:
    """Entry 1 with Java's inherited-timestamp timeDiff, written through the raw file API."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    f = IndexFile.create(index_dir / "20240101000000000", 16, 16, end_phy_offset=500, end_timestamp=T0)
    f.put_key("T#k", 600, T0 + 4000)
    f._mm[40 + 64 + 20 + 12:40 + 64 + 20 + 16] = (4).to_bytes(4, "big")  # Java: (T0+4000 - T0) / 1000
    f.flush()
    f.close()
    svc = open_service(tmp_path, slots=16, num=16)
    assert svc.query("T", "k", 10, *ALL) == [600]
    # Java's quirk puts entry 1 at begin + 4 s = T0 + 8000; we read it where Java does.
    assert svc.query("T", "k", 10, T0 + 4000, T0 + 8000) == [600]
    assert svc.query("T", "k", 10, T0 + 4000, T0 + 7999) == []
    svc.close()


def test_use_before_load_and_after_close_is_an_error(tmp_path: Path) -> None:
    svc = IndexService(tmp_path, max_hash_slot_num=4, max_index_num=4)
    with pytest.raises(RuntimeError):
        svc.query("T", "k", 1, *ALL)
    svc.load(True)
    with pytest.raises(RuntimeError):
        svc.load(True)
    svc.close()
    with pytest.raises(RuntimeError):
        svc.build_index("T", "k", None, 0, T0)


def test_queries_run_safely_while_another_thread_builds_and_rolls(tmp_path: Path) -> None:
    import threading

    svc = open_service(tmp_path, slots=64, num=400)
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(4000):
                svc.build_index("T", f"k{i % 50}", None, i * 10, T0 + i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set():
        got = svc.query("T", "k7", 10_000, *ALL)
        assert got == sorted(got, reverse=True) and all(o % 500 == 70 for o in got)
    thread.join()
    assert not errors
    assert svc.query("T", "k7", 10_000, *ALL) == [i * 10 for i in range(3957, -1, -50)]
    assert len(svc.files) == 11  # 399 entries per file
    svc.close()
