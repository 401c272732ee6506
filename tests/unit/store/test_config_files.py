"""Config JSON files: atomic save with .bak, fallback to .bak, fastjson's unquoted keys, offset tables."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.store.config_files import (
    ConsumerOffsetFile,
    DelayOffsetFile,
    JsonConfigFile,
    offset_key,
    pretty_json,
    split_offset_key,
)

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # no lone surrogates: not UTF-8
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=30)

# As a RocketMQ 4.9 broker writes it (fastjson, pretty, integer keys unquoted).
JAVA_CONSUMER_OFFSET = """{
\t"offsetTable":{
\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:251,2:249,3:250},
\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0}
\t}
}"""

JAVA_DELAY_OFFSET = '{\n\t"offsetTable":{3:17,1:4,18:0}\n}'



def test_save_then_load_and_no_temp_left(tmp_path: Path) -> None:
    f = JsonConfigFile(tmp_path / "config" / "x.json")
    assert f.load() is None
    f.save({"a": 1, "nested": {"b": [1, 2]}})
    assert f.load() == {"a": 1, "nested": {"b": [1, 2]}}
    assert json.loads(f.path.read_text()) == {"a": 1, "nested": {"b": [1, 2]}}  # strict JSON
    assert not f.tmp_path.exists()
    assert not f.bak_path.exists()  # nothing to back up on the first save


def test_save_keeps_the_previous_version_as_bak(tmp_path: Path) -> None:
    f = JsonConfigFile(tmp_path / "x.json")
    f.save({"v": 1})
    f.save({"v": 2})
    assert json.loads(f.bak_path.read_text()) == {"v": 1}
    f.save({"v": 3})
    assert json.loads(f.bak_path.read_text()) == {"v": 2}
    assert f.load() == {"v": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json", "x.json.bak"]


def test_a_save_that_finds_the_disk_full_leaves_the_file_and_no_partial_copy(tmp_path: Path, monkeypatch) -> None:
    f = JsonConfigFile(tmp_path / "x.json")
    f.save({"v": 1})
    real_write = os.write

    def write_half_then_enospc(fd, data):
        if getattr(write_half_then_enospc, "done", False):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_half_then_enospc.done = True
        return real_write(fd, bytes(data)[: len(data) // 2])

    monkeypatch.setattr(os, "write", write_half_then_enospc)
    with pytest.raises(OSError) as err:
        f.save({"v": 2, "pad": "x" * 1000})
    assert err.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert f.load() == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_corrupt_or_missing_main_file_falls_back_to_bak(tmp_path: Path) -> None:
    f = JsonConfigFile(tmp_path / "x.json")
    f.save({"v": 1})
    f.save({"v": 2})
    f.path.write_text('{"v": 3, "trunc')  # torn write by something else
    assert f.load() == {"v": 1}
    f.path.write_text("")
    assert f.load() == {"v": 1}
    f.path.write_text("[1, 2]")  # valid JSON, but not an object
    assert f.load() == {"v": 1}
    f.path.unlink()
    assert f.load() == {"v": 1}
    f.bak_path.write_text("garbage")
    assert f.load() is None


def test_a_corrupt_main_file_never_overwrites_a_good_bak(tmp_path: Path) -> None:
    f = JsonConfigFile(tmp_path / "x.json")
    f.save({"v": 1})
    f.save({"v": 2})
    f.path.write_text("{not json")
    f.save({"v": 3})
    assert f.load() == {"v": 3}
    assert json.loads(f.bak_path.read_text()) == {"v": 1}


def test_reads_fastjson_unquoted_integer_keys(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "consumerOffset.json").write_text(JAVA_CONSUMER_OFFSET)
    (tmp_path / "config" / "delayOffset.json").write_text(JAVA_DELAY_OFFSET)
    offsets = ConsumerOffsetFile(tmp_path).load()
    assert offsets == {
        "TopicTest@please_rename_unique_group_name_4": {0: 250, 1: 251, 2: 249, 3: 250},
        "%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4": {0: 0},
    }
    assert DelayOffsetFile(tmp_path).load() == {1: 4, 3: 17, 18: 0}


def test_consumer_offsets_round_trip_with_quoted_keys(tmp_path: Path) -> None:
    f = ConsumerOffsetFile(tmp_path)
    table = {offset_key("T", "G"): {0: 12, 1: 7}, offset_key("%RETRY%G", "G"): {0: 0}}
    f.save(table)
    assert f.path == tmp_path / "config" / "consumerOffset.json"
    assert json.loads(f.path.read_text()) == {"offsetTable": {"T@G": {"0": 12, "1": 7}, "%RETRY%G@G": {"0": 0}}}
    assert f.load() == table
    assert split_offset_key("%RETRY%G@G") == ("%RETRY%G", "G")


def test_delay_offsets_round_trip(tmp_path: Path) -> None:
    f = DelayOffsetFile(tmp_path)
    assert f.load() == {}
    f.save({2: 9, 1: 3})
    assert json.loads(f.path.read_text()) == {"offsetTable": {"1": 3, "2": 9}}
    assert f.load() == {1: 3, 2: 9}


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_pretty_json_is_what_the_standard_encoder_writes(obj) -> None:
    assert pretty_json(obj) == json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def test_pretty_json_quotes_integer_keys_and_takes_huge_integers() -> None:
    assert json.loads(pretty_json({"offsetTable": {0: 5, 12: 7}})) == {"offsetTable": {"0": 5, "12": 7}}
    assert json.loads(pretty_json({"big": 2**80})) == {"big": 2**80}  # beyond orjson: the stdlib writes it


def test_saving_again_does_not_parse_the_file_it_wrote(tmp_path: Path, monkeypatch) -> None:
    """A broker rewrites topics.json on every topic change: the previous version, which it wrote itself and
    nobody changed since, becomes the .bak without being read back and parsed each time."""
    f = JsonConfigFile(tmp_path / "x.json")
    f.save({"v": 1})
    reads: list[Path] = []
    real = JsonConfigFile._read
    monkeypatch.setattr(JsonConfigFile, "_read", lambda self, path: reads.append(path) or real(self, path))
    f.save({"v": 2})
    f.save({"v": 3})
    assert reads == []
    assert json.loads(f.bak_path.read_text()) == {"v": 2}
    f.path.write_text('{"v": 30, "changed by someone else": 1}')  # another writer: checked again
    f.save({"v": 4})
    assert reads == [f.path]
    assert json.loads(f.bak_path.read_text()) == {"v": 30, "changed by someone else": 1}
