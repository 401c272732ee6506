"""The official C++ client's delay levels (``set_delay_time_level``) and an ali-ons style __STARTDELIVERTIME
property against our broker; the client runs in a fresh subprocess under a timeout."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rocketmq.client")

pytestmark = pytest.mark.interop
DRIVER = str(Path(__file__).with_name("cpp_delivery_driver.py"))


def drive(*args: object, timeout: float = 60.0) -> dict:
    proc = subprocess.run([sys.executable, DRIVER, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads([ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")][-1])


def _delivered(broker, topic: str) -> list:
    from mq.common.record import decode_record

    out = []
    for q in range(8):
        r = broker.store.get_message("t", topic, q, 0, 32)
        out += [decode_record(b) for b in r.buffers]
    return out


def _wait(pred, timeout: float):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("not delivered in time")


def test_cpp_set_delay_time_level(daemons):
    ns = daemons.namesrv.address
    r = drive("delay", ns, "CppDelay", "1,2")  # 1 s and 5 s with the default levels
    assert [x["status"] for x in r["results"]] == [0, 0]
    b = daemons.broker
    got = _wait(lambda: (lambda d: d if len(d) == 2 else None)(_delivered(b, "CppDelay")), 15)
    sent = {x["msg_id"]: x for x in r["results"]}
    for m in got:
        x = sent[m.properties["UNIQ_KEY"]]
        want = {1: 1000, 2: 5000}[x["level"]]
        late = m.store_timestamp - x["sent_ms"] - want
        assert -1000 <= late <= 1000, (x["level"], late)
        # RocketMQ 4.9.7 delivers a delayed message with its DELAY=<level> kept (getDelayTimeLevel() returns it)
        assert m.properties["TAGS"] == f"L{x['level']}" and m.properties["DELAY"] == str(x["level"])


def test_cpp_start_deliver_time_property(daemons):
    ns = daemons.namesrv.address
    r = drive("timer", ns, "CppTimer", 3000)
    assert r["status"] == 0
    assert _delivered(daemons.broker, "CppTimer") == []
    got = _wait(lambda: _delivered(daemons.broker, "CppTimer"), 10)
    late = got[0].store_timestamp - r["deliver_ms"]
    assert 0 <= late <= 1000, late
