"""The broker's JSON config files under ``<root>/config`` (STORE.md §14), read and written as RocketMQ does.

==========================  ========================================================================
file                        top-level shape
==========================  ========================================================================
topics.json                 {"dataVersion":{"counter":N,"timestamp":ms},"topicConfigTable":{"T":{..}}}
consumerOffset.json         {"offsetTable":{"<topic>@<group>":{<queueId>:<offset>,...}}}
delayOffset.json            {"offsetTable":{<delayLevel>:<offset>,...}}
subscriptionGroup.json      {"dataVersion":{..},"subscriptionGroupTable":{"G":{..}}}
==========================  ========================================================================

Reading is tolerant: Java's fastjson writes integer map keys unquoted (``{0:12}``), which
``mq.common.fastjson.loads`` accepts; keys come back as ``int`` or ``str`` and the offset readers below turn
them into ints. topics.json and subscriptionGroup.json hold the broker's own models: its managers
(``mq.daemon.broker.topic_config``, ``subscription_group``) read and write them through ``JsonConfigFile``. If the file is missing, empty or unreadable, its ``.bak`` is read instead (as Java's
``ConfigManager.load`` does).

Writing is standard, indented JSON (``pretty_json``; quoted keys, which fastjson reads into its Integer/Long
maps) and atomic:

    1. write ``<file>.tmp`` and fsync it;
    2. if ``<file>`` is readable, hard-link it to ``<file>.bak`` (through ``.bak.tmp`` and a rename) so the
       previous version is kept, and a corrupt current file never overwrites a good backup;
    3. rename ``.tmp`` over ``<file>`` and fsync the directory.

A crash at any point leaves either the old or the new file in place, and ``.bak`` readable.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Mapping

import orjson

from mq.errors import MQError

log = logging.getLogger(__name__)

CONFIG_DIR_NAME = "config"
TOPICS_FILE = "topics.json"
CONSUMER_OFFSET_FILE = "consumerOffset.json"
DELAY_OFFSET_FILE = "delayOffset.json"
SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
TOPIC_GROUP_SEPARATOR = "@"


def _loads(data: bytes) -> Any:
    # Imported lazily so a store without mq.common.fastjson still reads strict JSON (and quoted keys).
    try:
        from mq.common.fastjson import loads
    except ImportError:  # pragma: no cover - fastjson is part of mq.common
        return json.loads(data)
    return loads(data)


_PRETTY = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def pretty_json(obj: Any) -> bytes:
    """``obj`` as indented UTF-8 JSON, by orjson: two spaces per level where fastjson's pretty format writes a
    tab (whitespace every reader, fastjson among them, ignores), non-ASCII text as is, integer keys quoted.
    The standard library's encoder turns pure Python when asked to indent: 30 times slower on a 5,000-topic
    table, which the broker rewrites on every topic change. Values orjson does not take (integers beyond
    64 bits) are encoded by the standard library."""
    try:
        return orjson.dumps(obj, option=_PRETTY)
    except TypeError:
        return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def config_path(root: Path, name: str) -> Path:
    """``<root>/config/<name>``."""
    return Path(root) / CONFIG_DIR_NAME / name


# ---------------------------------------------------------------------------------------------------------
# the generic file
# ---------------------------------------------------------------------------------------------------------
class JsonConfigFile:
    """One JSON document on disk with a ``.bak`` companion."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.bak_path = self.path.with_name(self.path.name + ".bak")
        self.tmp_path = self.path.with_name(self.path.name + ".tmp")
        #: (inode, size, mtime) of the main file when it was last known readable (loaded, or written by us):
        #: while it is unchanged it may become the .bak without being parsed again on every save
        self._known_good: tuple[int, int, int] | None = None

    def _read(self, path: Path) -> dict | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if not data.strip():
            return None
        try:
            value = _loads(data)
        except (MQError, ValueError) as exc:
            log.warning("config file %s is unreadable: %s", path, exc)
            return None
        if not isinstance(value, dict):
            log.warning("config file %s does not hold a JSON object", path)
            return None
        return value

    def load(self) -> dict | None:
        """The document, from the main file or else the ``.bak``; None if neither is usable."""
        value = self._read(self.path)
        if value is not None:
            self._known_good = self._identity()
            return value
        value = self._read(self.bak_path)
        if value is not None:
            log.warning("config file %s missing or unreadable; loaded %s", self.path, self.bak_path)
        return value

    def save(self, obj: Mapping[str, Any]) -> None:
        """Write ``obj`` atomically, keeping the previous readable version as ``.bak``."""
        data = pretty_json(obj)
        good = self._known_good
        keep_bak = (good is not None and good == self._identity()) or self._read(self.path) is not None
        write_atomically(self.path, data, keep_bak=keep_bak)
        self._known_good = self._identity()

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns


def write_atomically(path: Path, data: bytes, *, keep_bak: bool = True) -> None:
    """Replace ``path`` by ``data`` so that a crash leaves the old or the new content, never a mix: write
    ``<path>.tmp``, fsync, hard-link the current file to ``<path>.bak`` (when ``keep_bak`` and it exists),
    rename, fsync the directory. A failed write (a full disk) leaves the file as it was and no temp file."""
    path = Path(path)
    tmp_path = path.with_name(path.name + ".tmp")
    bak_path = path.with_name(path.name + ".bak")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp_path.unlink(missing_ok=True)
        raise
    os.close(fd)
    if keep_bak and path.exists():
        bak_tmp = bak_path.with_name(bak_path.name + ".tmp")
        bak_tmp.unlink(missing_ok=True)
        os.link(path, bak_tmp)
        os.replace(bak_tmp, bak_path)
    os.replace(tmp_path, path)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _int_keys(table: Any, what: str) -> dict[int, int]:
    out: dict[int, int] = {}
    if not isinstance(table, dict):
        return out
    for k, v in table.items():
        try:
            out[int(k)] = int(v)
        except (TypeError, ValueError):
            log.warning("skipping bad %s entry %r: %r", what, k, v)
    return out


# ---------------------------------------------------------------------------------------------------------
# consumerOffset.json
# ---------------------------------------------------------------------------------------------------------
def offset_key(topic: str, group: str) -> str:
    """The ``topic@group`` key of ``offsetTable``."""
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_offset_key(key: str) -> tuple[str, str]:
    """``topic@group`` -> (topic, group). Topics cannot contain '@', so the first '@' separates them."""
    topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
    if not sep:
        raise ValueError(f"offset table key {key!r} is not topic@group")
    return topic, group


class ConsumerOffsetFile:
    """``<root>/config/consumerOffset.json``: ``topic@group`` -> {queueId: next offset to consume}."""

    def __init__(self, root: Path) -> None:
        self.file = JsonConfigFile(config_path(root, CONSUMER_OFFSET_FILE))

    @property
    def path(self) -> Path:
        return self.file.path

    def load(self) -> dict[str, dict[int, int]]:
        obj = self.file.load()
        table = obj.get("offsetTable") if obj else None
        if not isinstance(table, dict):
            return {}
        return {str(k): _int_keys(v, f"offset of {k}") for k, v in table.items()}

    def save(self, table: Mapping[str, Mapping[int, int]]) -> None:
        """Write the table as it is (integer queue ids become quoted keys): a broker with 50,000 topic@group
        pairs persists it every 5 s, and copying it into sorted, string-keyed dicts first took 7 times as
        long as encoding it."""
        self.file.save({"offsetTable": table})


# ---------------------------------------------------------------------------------------------------------
# delayOffset.json
# ---------------------------------------------------------------------------------------------------------
class DelayOffsetFile:
    """``<root>/config/delayOffset.json``: delay level (1-based) -> next offset in its schedule queue."""

    def __init__(self, root: Path) -> None:
        self.file = JsonConfigFile(config_path(root, DELAY_OFFSET_FILE))

    @property
    def path(self) -> Path:
        return self.file.path

    def load(self) -> dict[int, int]:
        obj = self.file.load()
        return _int_keys(obj.get("offsetTable") if obj else None, "delay offset")

    def save(self, table: Mapping[int, int]) -> None:
        self.file.save({"offsetTable": {str(level): int(o) for level, o in sorted(table.items())}})
