"""Drives the official C++ client (PyPI rocketmq==0.4.4) in a FRESH process for delivery features; prints one
JSON line.

    python cpp_delivery_driver.py delay NAMESRV TOPIC LEVELS        (LEVELS: comma-separated delay levels)
    python cpp_delivery_driver.py timer NAMESRV TOPIC DELAY_MS      (__STARTDELIVERTIME via set_property)
"""

from __future__ import annotations

import json
import sys
import time


def _producer(namesrv: str, group: str):
    from rocketmq.client import Producer

    p = Producer(group)
    p.set_namesrv_addr(namesrv)
    p.start()
    return p


def delay(namesrv: str, topic: str, levels: str) -> None:
    from rocketmq.client import Message

    p = _producer(namesrv, "PID_INTEROP_DELAY")
    out = []
    try:
        for lv in (int(x) for x in levels.split(",")):
            m = Message(topic)
            m.set_tags(f"L{lv}")
            m.set_keys(f"delay-{lv}")
            m.set_body(f"level-{lv}")
            m.set_delay_time_level(lv)
            sent_ms = int(time.time() * 1000)
            r = p.send_sync(m)
            out.append({"level": lv, "status": int(r.status), "msg_id": r.msg_id, "sent_ms": sent_ms})
    finally:
        p.shutdown()
    print(json.dumps({"results": out}), flush=True)


def timer(namesrv: str, topic: str, delay_ms: int) -> None:
    from rocketmq.client import Message

    p = _producer(namesrv, "PID_INTEROP_TIMER")
    try:
        m = Message(topic)
        m.set_body("timer")
        at = int(time.time() * 1000) + delay_ms
        m.set_property("__STARTDELIVERTIME", str(at))
        r = p.send_sync(m)
    finally:
        p.shutdown()
    print(json.dumps({"status": int(r.status), "msg_id": r.msg_id, "deliver_ms": at}), flush=True)


if __name__ == "__main__":
    cmd, *a = sys.argv[1:]
    if cmd == "delay":
        delay(a[0], a[1], a[2])
    elif cmd == "timer":
        timer(a[0], a[1], int(a[2]))
    else:
        raise SystemExit(f"unknown command {cmd}")
