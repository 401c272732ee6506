"""What a client sends, or what an old or damaged store holds, cannot reach past the broker's checks into the
store (issue 28, defects 1 and 2): raw sockets against a broker process that is killed with SIGKILL and
restarted, and ``mq store verify`` (``tools.verify_store``) after each step."""

from __future__ import annotations

import re
import struct
import time
from pathlib import Path

import pytest

from mq.common import properties as P
from mq.common import topic as T
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties
from mq.common.record import Message
from mq.config import StoreConfig
from mq.protocol.codec import encode
from mq.protocol.codes import ResponseCode as RC
from mq.store import tools
from mq.store.message_store import MessageStore

from ..broker_process import BrokerProcess
from .test_bad_input import Raw
from .wire import batch_cmd, props, pull_cmd, records, send_cmd

SEGMENT = 4 * 1024 * 1024  # BrokerProcess's commit-log segment size
TIMER_TOPIC = "rmq_sys_wheel_timer"
VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")


def _pull_all(raw: Raw, topic: str, q: int = 0) -> list[bytes]:
    out, offset = [], 0
    while True:
        raw.send(encode(pull_cmd(topic, q, offset, max_nums=32)))
        r = raw.response()
        if r.code != RC.SUCCESS:
            return out
        out += [m.body for m in records(r)]  # strict: a record that does not decode fails the test
        offset = int(r.ext_fields["nextBeginOffset"])


def _send(raw: Raw, topic: str, body: bytes, **header: object):
    raw.send(encode(send_cmd(topic, body, **header)))
    return raw.response()


def _verify(root: Path) -> None:
    rep = tools.verify_store(root)
    assert rep.ok, (rep.bad_records, rep.problems)


def test_a_client_sys_flag_cannot_break_the_commit_log(tmp_path):
    """Defect 2: a send or batch whose sysFlag has a layout bit (the IPv6 store-host bit 0x20 among them) was
    acknowledged and written with that bit on an IPv4 record: the record did not decode, ``store verify`` failed
    from there on, consumers skipped the rest of the batch, and after kill -9 recovery cut the log there, losing
    every later acknowledged message of every topic."""
    broker = BrokerProcess(tmp_path / "b", {"brokerName": "broker-flags"})
    raw = None
    acked: dict[str, list[bytes]] = {}

    def send(topic: str, body: bytes, **header: object) -> None:
        r = _send(raw, topic, body, **header)  # type: ignore[arg-type]
        assert r.code == RC.SUCCESS, (topic, header, r.code, r.remark)
        acked.setdefault(topic, []).append(body)

    try:
        broker.start()
        raw = Raw(broker.address)
        send("Flags", b"before")
        for flag in (0x10, 0x20, 0x30, 0x40, 0x80, 0xF0, 0x7FFFFFFF, -1, 0x4, 0xC):
            send("Flags", f"flag {flag}".encode(), sys_flag=flag)
        raw.send(encode(batch_cmd("FlagBatch", [Message("FlagBatch", b"b%d" % i) for i in range(3)])))
        assert raw.response().code == RC.SUCCESS
        cmd = batch_cmd("FlagBatch", [Message("FlagBatch", b"c%d" % i) for i in range(3)])
        cmd.ext_fields["f"] = str(0x20)  # the batch again, its header's sysFlag claiming an IPv6 store host
        raw.send(encode(cmd))
        assert raw.response().code == RC.SUCCESS
        acked["FlagBatch"] = [b"b0", b"b1", b"b2", b"c0", b"c1", b"c2"]
        for i in range(5):
            send("After", b"after-%d" % i)
        for topic, bodies in acked.items():
            assert _pull_all(raw, topic) == bodies
        _verify(broker.workdir / "store")
        broker.kill()
        broker.start()
        raw = Raw(broker.address)
        for topic, bodies in acked.items():
            assert _pull_all(raw, topic) == bodies, f"{topic}: acknowledged messages lost after kill -9"
    finally:
        if raw is not None:
            raw.close()
        assert broker.stop(), broker.log()
    _verify(broker.workdir / "store")


def test_recovery_keeps_the_records_after_a_bad_one(tmp_path):
    """Defect 2, recovery: a record that fails its checks in the middle of the log (here one whose sysFlag says
    an IPv6 store host, as an older broker wrote at a client's request, and one whose body no longer matches its
    CRC) must not end the log: the misflagged record is repaired, the corrupt one set aside, and every record
    after them is kept."""
    broker = BrokerProcess(tmp_path / "b", {"brokerName": "broker-resync"})
    raw = None
    try:
        broker.start()
        raw = Raw(broker.address)
        offsets = []
        for i in range(12):
            r = _send(raw, "Resync", b"message-%02d" % i)
            assert r.code == RC.SUCCESS
            offsets.append(int(r.ext_fields["queueOffset"]))
        assert offsets == list(range(12))
        raw.close()
        raw = None
        broker.kill()
        seg = broker.workdir / "store" / "commitlog" / "00000000000000000000"
        with open(seg, "r+b") as f:
            data = f.read(SEGMENT)
            pos, found = 0, []
            while len(found) < 12:
                found.append(pos)
                pos += struct.unpack_from(">i", data, pos)[0]
            # record 3: an IPv6 store-host bit on an IPv4 record
            (flag,) = struct.unpack_from(">i", data, found[3] + 36)
            f.seek(found[3] + 36)
            f.write(struct.pack(">i", flag | 0x20))
            # record 6: one byte of its body changed (the body CRC no longer matches)
            body_at = found[6] + data[found[6]:found[7]].index(b"message-06")
            f.seek(body_at)
            f.write(b"X")
        broker.start()
        raw = Raw(broker.address)
        got = _pull_all(raw, "Resync")
        assert got == [b"message-%02d" % i for i in range(12) if i != 6]
        r = _send(raw, "Resync", b"next")
        assert r.code == RC.SUCCESS and int(r.ext_fields["queueOffset"]) == 12
        assert "set aside" in broker.log() and "corrected" in broker.log()
    finally:
        if raw is not None:
            raw.close()
        assert broker.stop(), broker.log()
    # the corrupt record is still in the log, and verify says so; nothing else is wrong (its consume-queue unit
    # is a filler now, the repaired record reads as what it is)
    rep = tools.verify_store(broker.workdir / "store")
    assert rep.bad_records == 1 and rep.records == 12 and rep.cq_units == 12, rep
    assert rep.problems == [f"commit log offset {found[6]}: invalid record (magic, size or CRC); valid records "
                            f"follow at {found[7]}"]


@pytest.mark.parametrize("topic", [TIMER_TOPIC, T.SCHEDULE_TOPIC, T.TRANS_HALF_TOPIC, T.TRANS_OP_HALF_TOPIC,
                                   T.TRANS_CHECK_MAX_TIME_TOPIC, "rmq_sys_REVIVE_LOG_DefaultCluster"])
def test_clients_cannot_send_to_system_topics(tmp_path, topic):
    """Defect 1: any client could send to the timer topic with REAL_TOPIC, REAL_QID and TIMER_OUT_MS of its
    choosing, and the timer then delivered into that topic with no check: ``../../../x`` made a consume-queue
    file outside the store directory. RocketMQ refuses direct sends to its internal topics; so does this
    broker, the timer topic and every other ``rmq_sys_`` one included."""
    broker = BrokerProcess(tmp_path / "b", {"brokerName": "broker-sys"})
    raw = None
    try:
        broker.start()
        raw = Raw(broker.address)
        due = int(time.time() * 1000) - 1000
        evil = props(**{P.REAL_TOPIC: "../../../x", P.REAL_QUEUE_ID: "0", "TIMER_OUT_MS": str(due),
                        P.DELAY_TIME_LEVEL: "1"})
        r = _send(raw, topic, b"evil", properties=evil)
        assert r.code == RC.NO_PERMISSION and "forbidden" in (r.remark or ""), (r.code, r.remark)
        # what RocketMQ allows stays allowed: the trace topics, and a retry topic through its request code
        for ok_topic in (T.TRACE_TOPIC, "rmq_sys_TRACE_DATA_cn-hangzhou", "%RETRY%SomeGroup", "Plain"):
            r = _send(raw, ok_topic, b"fine")
            assert r.code == RC.SUCCESS, (ok_topic, r.code, r.remark)
        time.sleep(1.5)  # what the timer or schedule service would have delivered by now
        assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
        assert not (broker.workdir / "x").exists()
    finally:
        if raw is not None:
            raw.close()
        assert broker.stop(), broker.log()
    _verify(broker.workdir / "store")


def _inner(topic: str, body: bytes, queue_id: int = 0, tags_code: int | None = None, **props: str):
    return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=dict(props),
                                 properties_string=encode_properties(props), born_host=("10.0.0.1", 1000),
                                 born_timestamp=int(time.time() * 1000), tags_code=tags_code)


POISON_REAL_TOPICS = ["../../../x", "x/../Victim", T.SCHEDULE_TOPIC, TIMER_TOPIC, None]


def _park_poison(root: Path) -> None:
    """A store such as an older broker left it, the back door open: parked timer and schedule messages whose
    real topic is not one a client may send to (or is missing), in front of good ones."""
    s = MessageStore(StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
                                 mapped_file_size_consume_queue=60_000, max_hash_slot_num=5_000,
                                 max_index_num=20_000))
    s.start()
    try:
        for i in range(3):
            assert s.put_message(_inner("Victim", b"victim-%d" % i)).status.name == "PUT_OK"
        due = int(time.time() * 1000) - 1000
        for i, real in enumerate(POISON_REAL_TOPICS):
            extra = {P.REAL_TOPIC: real} if real else {}
            s.put_message(_inner(TIMER_TOPIC, b"poison-%d" % i, tags_code=due, **extra, REAL_QID="0",
                                 TIMER_OUT_MS=str(due)))
        s.put_message(_inner(TIMER_TOPIC, b"timed-bad-qid", tags_code=due, REAL_TOPIC="Good", REAL_QID="-1",
                             TIMER_OUT_MS=str(due)))
        s.put_message(_inner(TIMER_TOPIC, b"timed-good", tags_code=due, REAL_TOPIC="Good", REAL_QID="0",
                             TIMER_OUT_MS=str(due)))
        for i, real in enumerate(POISON_REAL_TOPICS):
            extra = {P.REAL_TOPIC: real} if real else {}
            s.put_message(_inner(T.SCHEDULE_TOPIC, b"poison-s%d" % i, **extra, REAL_QID="0"))  # level 1, due
        assert s.put_message(_inner("Good", b"delayed-good", DELAY="1")).status.name == "PUT_OK"
    finally:
        s.shutdown()


def test_an_undeliverable_timer_or_schedule_message_is_set_aside(tmp_path):
    """Defect 1: one undeliverable REAL_TOPIC was retried for ever, logged about ten warnings a second and
    blocked every later timed message, across restarts too; ``x/../Victim`` overwrote Victim's consume queue.
    Now such a message is set aside (counted, logged once per interval) and the messages behind it are
    delivered; no file appears outside the store and Victim keeps its messages."""
    work = tmp_path / "b"
    _park_poison(work / "store")
    broker = BrokerProcess(work, {"brokerName": "broker-poison", "timerPrecisionMs": 100})
    raw = None
    try:
        broker.start()
        raw = Raw(broker.address)
        for topic in ("Good", "Victim"):  # their topic configs (the store was filled without a broker)
            assert _send(raw, topic, b"plain").code == RC.SUCCESS
        deadline = time.monotonic() + 20
        while sorted(_pull_all(raw, "Good")) != [b"delayed-good", b"plain", b"timed-good"]:
            assert time.monotonic() < deadline, f"good messages blocked: {_pull_all(raw, 'Good')}\n{broker.log()}"
            time.sleep(0.2)
        time.sleep(1.0)  # a second more of a poison message retried ten times a second
        raw.close()
        raw = None
        broker.kill()
        broker.start()  # the set-aside messages must not block anything after a restart either
        raw = Raw(broker.address)
        r = _send(raw, "Good", b"timed-after-restart", properties=props(TIMER_DELAY_SEC="1"))
        assert r.code == RC.SUCCESS
        deadline = time.monotonic() + 20
        while b"timed-after-restart" not in _pull_all(raw, "Good"):
            assert time.monotonic() < deadline, broker.log()
            time.sleep(0.2)
        assert _pull_all(raw, "Victim") == [b"victim-%d" % i for i in range(3)] + [b"plain"]
        log = broker.log()
        assert "set aside" in log
        # one line per kind and interval (deliveryErrorLogIntervalMs, 10 s), not ten a second
        assert log.count("cannot be delivered") <= 8, log
    finally:
        if raw is not None:
            raw.close()
        assert broker.stop(), broker.log()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"], "a file was made outside the store"
    assert sorted(p.name for p in work.iterdir() if p.name != "store") == ["broker.log", "broker.yaml", "home"]
    _verify(work / "store")
    for rec in tools.iter_records(work / "store"):
        assert rec.ok and rec.message is not None
        assert VALID_TOPIC.fullmatch(rec.message.topic), rec.message.topic
