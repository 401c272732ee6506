"""The disk-usage remark of a refused send (RocketMQ ``diskUtil()``) is measured at most once a second per store."""

from __future__ import annotations

from mq.config import StoreConfig
from mq.daemon.broker.processors import put_status as send


def test_disk_util_measures_once_per_ttl_per_store(tmp_path, monkeypatch):
    calls: list[str] = []

    def ratio(path):
        calls.append(str(path))
        return 0.5

    monkeypatch.setattr(send, "disk_used_ratio", ratio)
    monkeypatch.setattr(send, "_DISK_UTIL", {})
    now = [100.0]
    monkeypatch.setattr(send.time, "monotonic", lambda: now[0])
    a = StoreConfig(store_path_root_dir=str(tmp_path / "a"))
    b = StoreConfig(store_path_root_dir=str(tmp_path / "b"))

    text = send.disk_util(a)
    assert text == "CL:  0.50 CQ:  0.50 INDEX:  0.50" and len(calls) == 3
    assert send.disk_util(a) == text and len(calls) == 3  # within the second: the measured text again
    send.disk_util(b)
    assert len(calls) == 6  # another store is measured on its own
    now[0] += send.DISK_UTIL_TTL_S
    send.disk_util(a)
    assert len(calls) == 9  # a second later: measured again
