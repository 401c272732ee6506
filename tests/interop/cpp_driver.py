"""Drives the official C++ client (PyPI rocketmq==0.4.4) in a FRESH process; prints one JSON line.

    python cpp_driver.py produce NAMESRV TOPIC MODE COUNT TAGS   (MODE: sync | oneway | orderly)
    python cpp_driver.py push NAMESRV TOPIC GROUP EXPR EXPECTED SECONDS
    python cpp_driver.py pull NAMESRV TOPIC GROUP EXPR

With MQ_ACCESS_KEY and MQ_SECRET_KEY in the environment, clients sign their requests (ACL session credentials).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def credentials(client) -> None:
    ak, sk = os.environ.get("MQ_ACCESS_KEY"), os.environ.get("MQ_SECRET_KEY")
    if ak and sk:
        client.set_session_credentials(ak, sk, "ALIYUN")


def first_send(send, msg):
    """The library fails a producer's first send to a broker whose new TCP connection is not up yet: it retries
    within a millisecond and reports "No route info of this topic" without having sent anything (its log shows
    the connect completing just after). Give the connection that moment, up to three times; any other error,
    or the same one after that, is the result."""
    for attempt in range(4):
        try:
            return send(msg)
        except Exception as exc:
            if "No route info" not in str(exc) or attempt == 3:
                raise
            time.sleep(0.2)


def produce(namesrv: str, topic: str, mode: str, count: int, tags: str) -> None:
    from rocketmq.client import Message, Producer

    p = Producer("PID_INTEROP_" + mode)
    p.set_namesrv_addr(namesrv)
    credentials(p)
    p.start()
    out = []
    tag_list = tags.split(",")
    try:
        for i in range(count):
            m = Message(topic)
            tag = tag_list[i % len(tag_list)]
            m.set_tags(tag)
            m.set_keys(f"key-{mode}-{i}")
            m.set_body(f"{mode}-{i}-{tag}")
            if mode == "oneway":
                p.send_oneway(m)
                continue
            send = p.send_sync if mode == "sync" else (lambda msg: p.send_orderly(msg, 7))
            r = first_send(send, m) if i == 0 else send(m)
            out.append({"status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
    finally:
        if mode == "oneway":
            time.sleep(1.0)
        p.shutdown()
    print(json.dumps({"sent": count, "results": out}), flush=True)


def push(namesrv: str, topic: str, group: str, expr: str, expected: int, seconds: float) -> None:
    from rocketmq.client import PushConsumer

    got = []
    lock = threading.Lock()
    done = threading.Event()

    def on_message(msg):
        with lock:
            got.append({"tags": msg.tags.decode() if isinstance(msg.tags, bytes) else msg.tags,
                        "body": msg.body.decode(), "keys": msg.keys.decode() if isinstance(msg.keys, bytes)
                        else msg.keys, "id": msg.id})
            if len(got) >= expected:
                done.set()
        return None  # the wheel acknowledges when the callback returns without raising

    c = PushConsumer(group)
    c.set_namesrv_addr(namesrv)
    credentials(c)
    c.subscribe(topic, on_message, expr)
    c.start()
    print(json.dumps({"started": True}), flush=True)
    done.wait(seconds)
    time.sleep(1.5)  # catch anything unexpected that arrives after the expected count
    with lock:
        # before shutdown: the wheel has been seen to die in it, and the result is complete by now
        print(json.dumps({"received": list(got)}), flush=True)
    c.shutdown()


def pull(namesrv: str, topic: str, group: str, expr: str) -> None:
    from rocketmq.client import PullConsumer

    c = PullConsumer(group)
    c.set_namesrv_addr(namesrv)
    c.start()
    got = [{"tags": m.tags.decode() if isinstance(m.tags, bytes) else m.tags, "body": m.body.decode()}
           for m in c.pull(topic, expr)]
    c.shutdown()
    print(json.dumps({"received": got}), flush=True)


if __name__ == "__main__":
    cmd, *a = sys.argv[1:]
    if cmd == "produce":
        produce(a[0], a[1], a[2], int(a[3]), a[4])
    elif cmd == "push":
        push(a[0], a[1], a[2], a[3], int(a[4]), float(a[5]))
    elif cmd == "pull":
        pull(a[0], a[1], a[2], a[3])
    else:
        raise SystemExit(f"unknown command {cmd}")
