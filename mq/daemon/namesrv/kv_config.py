"""The name server's namespaced key/value configuration (RocketMQ's KVConfigManager).

Persisted as RocketMQ does, ``{"configTable":{namespace:{key:value}}}``, written atomically (temp file,
fsync, rename) after every change, and loaded at start. ``put`` and ``delete`` change the table; the caller writes
``snapshot()`` with ``write`` (the name server does it in a worker thread, off its event loop).

The table is bounded (RocketMQ's is not): at most ``max_entries`` keys and ``max_bytes`` of namespaces, keys and
values (UTF-8), so that no client can grow the name server's memory, its file, or the time one write or one
GET_KVLIST_BY_NAMESPACE answer takes without limit. A ``put`` past a bound raises ``KVConfigFullError`` and
changes nothing; a file loaded over the bounds is kept (with a warning) and only shrinks.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

from mq.errors import ConfigError, KVConfigFullError

log = logging.getLogger(__name__)


def _size(*texts: str) -> int:
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


class KVConfig:
    def __init__(self, path: Path | None, *, max_entries: int = 100_000, max_bytes: int = 16 * 1024 * 1024) -> None:
        self._path = path
        self._table: dict[str, dict[str, str]] = {}
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        #: keys held, and UTF-8 bytes of their namespaces, keys and values
        self.entries = 0
        self.bytes = 0

    def load(self) -> None:
        if self._path is None or not self._path.exists():
            return
        try:
            data = orjson.loads(self._path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read KV config {self._path}: {exc}") from None
        table = data.get("configTable") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise ConfigError(f"KV config {self._path} has no configTable object")
        self._table = {str(ns): {str(k): str(v) for k, v in (kv or {}).items()} for ns, kv in table.items()}
        self.entries = sum(len(kv) for kv in self._table.values())
        self.bytes = sum(_size(ns, k, v) for ns, kv in self._table.items() for k, v in kv.items())
        log.info("loaded %d KV namespaces from %s", len(self._table), self._path)
        if self.entries > self.max_entries or self.bytes > self.max_bytes:
            log.warning("KV config %s holds %d keys, %d bytes: over the bounds (kvConfigMaxEntries %d, "
                        "kvConfigMaxBytes %d); new keys are refused until it shrinks", self._path, self.entries,
                        self.bytes, self.max_entries, self.max_bytes)

    def snapshot(self) -> bytes:
        """The file's content for the table as it is now."""
        return orjson.dumps({"configTable": self._table}, option=orjson.OPT_SORT_KEYS)

    def write(self, data: bytes) -> None:
        """Write ``data`` (a ``snapshot``) to the file atomically; blocking (fsync)."""
        if self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_name(self._path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set a key; KVConfigFullError, and nothing changed, when the table would pass its bounds."""
        ns = self._table.get(namespace)
        old = ns.get(key) if ns is not None else None
        if old is None:
            entries, size = self.entries + 1, self.bytes + _size(namespace, key, value)
        else:
            entries, size = self.entries, self.bytes - _size(old) + _size(value)
        if (old is None and entries > self.max_entries) or (size > self.max_bytes and size > self.bytes):
            raise KVConfigFullError(
                f"the KV config is full: {self.entries} keys of {self.max_entries} (kvConfigMaxEntries), "
                f"{self.bytes} bytes of {self.max_bytes} (kvConfigMaxBytes); this key needs {size - self.bytes} "
                f"more bytes")
        if ns is None:
            ns = self._table[namespace] = {}
        ns[key] = value
        self.entries, self.bytes = entries, size

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove a key; True when there was one."""
        ns = self._table.get(namespace)
        old = ns.pop(key, None) if ns is not None else None
        if old is not None:
            self.entries -= 1
            self.bytes -= _size(namespace, key, old)
            if not ns:
                del self._table[namespace]
            return True
        return False

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self._table.get(namespace, {}))
