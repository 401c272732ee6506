"""Drives the official RocketMQ 5.x Python client (PyPI rocketmq-python-client 5.1.x) in a FRESH process.

The client's generated protobuf modules and mq's own gRPC descriptors must never share one interpreter's
default pool, and the client's threads and event loop stay out of the test process: every run is its own
process that prints JSON lines.

    python py5_driver.py send ENDPOINT TOPIC COUNT [--kind normal|fifo|delay] [--tag T] [--group G]
                              [--delay-s S] [--prop k=v ...] [--prefix P] [--recall]
    python py5_driver.py transaction ENDPOINT TOPIC commit|rollback|unknown [--check commit|rollback]
                              [--stay S]
    python py5_driver.py receive ENDPOINT TOPIC GROUP EXPECTED SECONDS [--tag-expr E | --sql E]
                              [--no-ack] [--invisible S] [--change S] [--batch N]
    python py5_driver.py push ENDPOINT TOPIC GROUP EXPECTED SECONDS [--fail-first] [--tag-expr E]

Imports go to the client's submodules (``rocketmq.v5...``): the package's ``rocketmq/__init__.py`` is shared
with the C++ 4.x wheel (PyPI ``rocketmq``), and whichever was installed last owns it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time


def out(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def config(endpoint: str):
    from rocketmq.v5.client import ClientConfiguration, Credentials

    ak, sk = os.environ.get("MQ_ACCESS_KEY"), os.environ.get("MQ_SECRET_KEY")
    creds = Credentials(ak, sk) if ak and sk else Credentials()
    return ClientConfiguration(endpoint, creds, request_timeout=10)


def view(m) -> dict:
    body = m.body.decode("utf-8", "replace") if m.body else ""
    return {"id": m.message_id, "topic": m.topic, "tag": m.tag, "keys": sorted(m.keys or []),
            "props": dict(m.properties or {}), "body": body, "attempt": m.delivery_attempt,
            "group": m.message_group, "delivery_ts": m.delivery_timestamp, "corrupted": m.corrupted,
            "at": int(time.time() * 1000)}


def send(a) -> None:
    from rocketmq.v5.model import Message
    from rocketmq.v5.producer import Producer

    p = Producer(config(a.endpoint), (a.topic,))
    p.startup()
    try:
        for i in range(a.count):
            m = Message()
            m.topic = a.topic
            m.body = f"{a.prefix}-{i}".encode()
            if a.tag:
                m.tag = a.tag
            m.keys = f"{a.prefix}key-{i}"
            for kv in a.prop or ():
                k, _, v = kv.partition("=")
                m.add_property(k, v.replace("{i}", str(i)))
            if a.kind == "fifo":
                m.message_group = a.group
            elif a.kind == "delay":
                m.delivery_timestamp = int(time.time()) + a.delay_s
            r = p.send(m)
            out({"i": i, "id": r.message_id, "at": int(time.time() * 1000),
                 "recall": getattr(r, "recall_handle", None)})
            if a.recall:
                out({"recalled": p.recall_message(a.topic, r.recall_handle)})
    finally:
        p.shutdown()


def transaction(a) -> None:
    from rocketmq.v5.model import Message
    from rocketmq.v5.producer import Producer, TransactionChecker
    from rocketmq.grpc_protocol import TransactionResolution

    checked = []

    class Checker(TransactionChecker):
        def check(self, message):
            checked.append(message.message_id)
            out({"checked": message.message_id})
            return TransactionResolution.COMMIT if a.check == "commit" else TransactionResolution.ROLLBACK

    p = Producer(config(a.endpoint), (a.topic,), checker=Checker())
    p.startup()
    try:
        tx = p.begin_transaction()
        m = Message()
        m.topic = a.topic
        m.body = f"tx-{a.action}".encode()
        m.tag = "tx"
        r = p.send(m, tx)
        out({"sent": r.message_id})
        if a.action == "commit":
            tx.commit()
        elif a.action == "rollback":
            tx.rollback()
        out({"ended": a.action})
        deadline = time.time() + a.stay
        while time.time() < deadline and not (a.action == "unknown" and checked):
            time.sleep(0.2)
        time.sleep(1.0 if checked else 0)
    finally:
        p.shutdown()
    out({"done": True, "checked": checked})


def _filter(a):
    from rocketmq.grpc_protocol import FilterType
    from rocketmq.v5.model import FilterExpression

    if a.sql:
        return FilterExpression(a.sql, FilterType.SQL)
    return FilterExpression(a.tag_expr or "*")


def receive(a) -> None:
    from rocketmq.v5.consumer import SimpleConsumer

    c = SimpleConsumer(config(a.endpoint), a.group, {a.topic: _filter(a)}, await_duration=a.await_s)
    c.startup()
    got = []
    try:
        out({"started": True})
        deadline = time.time() + a.seconds
        while time.time() < deadline and len(got) < a.expected:
            msgs = c.receive(a.batch, a.invisible) or []
            for m in msgs:
                v = view(m)
                if a.change:
                    c.change_invisible_duration(m, a.change)
                    v["changed"] = True
                if not a.no_ack:
                    c.ack(m)
                    v["acked"] = True
                got.append(v)
                out({"message": v})
    finally:
        c.shutdown()
    out({"received": got})


def push(a) -> None:
    from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer

    got = []
    failed = set()
    lock = threading.Lock()

    class Listener(MessageListener):
        def consume(self, m):
            v = view(m)
            with lock:
                if a.fail_first and m.message_id not in failed:
                    failed.add(m.message_id)
                    v["result"] = "FAILURE"
                    out({"message": v})
                    return ConsumeResult.FAILURE
                v["result"] = "SUCCESS"
                got.append(v)
                out({"message": v})
            return ConsumeResult.SUCCESS

    c = PushConsumer(config(a.endpoint), a.group, Listener(), {a.topic: _filter(a)})
    c.startup()
    try:
        out({"started": True})
        deadline = time.time() + a.seconds
        while time.time() < deadline:
            with lock:
                if len(got) >= a.expected:
                    break
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        c.shutdown()
    out({"received": got})


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("endpoint"), s.add_argument("topic"), s.add_argument("count", type=int)
    s.add_argument("--kind", default="normal"), s.add_argument("--tag"), s.add_argument("--group", default="g1")
    s.add_argument("--delay-s", type=int, default=3), s.add_argument("--prop", action="append")
    s.add_argument("--prefix", default="py5"), s.add_argument("--recall", action="store_true")
    t = sub.add_parser("transaction")
    t.add_argument("endpoint"), t.add_argument("topic"), t.add_argument("action")
    t.add_argument("--check", default="commit"), t.add_argument("--stay", type=float, default=5.0)
    for name in ("receive", "push"):
        r = sub.add_parser(name)
        r.add_argument("endpoint"), r.add_argument("topic"), r.add_argument("group")
        r.add_argument("expected", type=int), r.add_argument("seconds", type=float)
        r.add_argument("--tag-expr"), r.add_argument("--sql")
        if name == "receive":
            r.add_argument("--no-ack", action="store_true"), r.add_argument("--invisible", type=int, default=15)
            r.add_argument("--change", type=int, default=0), r.add_argument("--batch", type=int, default=16)
            r.add_argument("--await-s", type=int, default=5)
        else:
            r.add_argument("--fail-first", action="store_true")
    a = ap.parse_args(argv)
    {"send": send, "transaction": transaction, "receive": receive, "push": push}[a.mode](a)
    sys.stdout.flush()
    os._exit(0)  # the client leaves non-daemon threads behind


if __name__ == "__main__":
    main(sys.argv[1:])
