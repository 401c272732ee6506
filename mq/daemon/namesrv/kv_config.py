"""The name server's namespaced key/value configuration (RocketMQ's KVConfigManager).

Persisted as RocketMQ does, ``{"configTable":{namespace:{key:value}}}``, written atomically (temp file,
fsync, rename) after every change, and loaded at start. ``put`` and ``delete`` change the table; the caller writes
``snapshot()`` with ``write`` (the name server does it in a worker thread, off its event loop).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

from mq.errors import ConfigError

log = logging.getLogger(__name__)


class KVConfig:
    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._table: dict[str, dict[str, str]] = {}

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
        log.info("loaded %d KV namespaces from %s", len(self._table), self._path)

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
        self._table.setdefault(namespace, {})[key] = value

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove a key; True when there was one."""
        ns = self._table.get(namespace)
        if ns is not None and ns.pop(key, None) is not None:
            if not ns:
                del self._table[namespace]
            return True
        return False

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self._table.get(namespace, {}))
