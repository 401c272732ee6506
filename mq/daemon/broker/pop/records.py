"""The pop revive log: what pop, ack and change-invisible-time write, so pop state is derived from the commit log.

Every pop-state change is a message in the system topic ``rmq_sys_REVIVE_LOG_{cluster}`` (queue 0), as in
RocketMQ 5; its body is RocketMQ's short-key JSON (``PopCheckPoint``, ``AckMsg``, ``BatchAckMsg``) plus what this
broker needs to rebuild its state after a crash. The consume-queue unit's tags code is ``fire << 3 | kind``: the
revive service files a unit into its time bucket without reading the record (as the timer files by deliver
time)::

    +------+-------------+---------------------------------------------------------------+------------+
    | kind | tag         | body                                                          | filed at   |
    +------+-------------+---------------------------------------------------------------+------------+
    |    1 | ck          | {so, pt, it, bm, n, q, t, c, ro, d:[diff], bn, rp, nb}        | pt + it    |
    |    2 | ack         | {ao, so, c, t, q, pt, bn}                                     | its ck's   |
    |    3 | bAck        | {aol:[offset], so, c, t, q, pt, bn}                           | its ck's   |
    |    4 | oPop        | {c, t, q, pt, it, a, o:[offset], so}   (FIFO pop)             | not filed  |
    |    5 | oAck        | {c, t, q, pt, ao}                      (FIFO ack)             | not filed  |
    |    6 | oChg        | {c, t, q, pt, ao, nv}                  (FIFO change invisible)| not filed  |
    +------+-------------+---------------------------------------------------------------+------------+

``so`` start offset (of a FIFO pop: the group's offset after it), ``pt`` pop time, ``it`` invisible time, ``n`` messages, ``q`` queue, ``t`` real topic,
``c`` group, ``d`` each message's offset minus ``so``, ``bn`` broker name, ``nb`` the queue offset the pop
moved the group to (-1: none), ``ao``/``aol`` acked offsets, ``a`` FIFO attempt id, ``nv`` next visible time.
A checkpoint and its acks share ``(t, q, so, pt, c)`` (``key``) and their fire time, so they meet in one slot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import orjson

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner
from mq.errors import RemoteProtocolError

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_QUEUE = 0

CK, ACK, BATCH_ACK, ORDER_POP, ORDER_ACK, ORDER_CHANGE = 1, 2, 3, 4, 5, 6
FILED_KINDS = frozenset({CK, ACK, BATCH_ACK})
TAGS = {CK: "ck", ACK: "ack", BATCH_ACK: "bAck", ORDER_POP: "oPop", ORDER_ACK: "oAck", ORDER_CHANGE: "oChg"}
KIND_BITS = 3
KIND_MASK = (1 << KIND_BITS) - 1

#: (real topic, queue id, start offset, pop time, group): what pairs a checkpoint with its acks
CkKey = tuple[str, int, int, int, str]


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def tags_code(fire_ms: int, kind: int) -> int:
    return fire_ms << KIND_BITS | kind


def split_tags_code(code: int) -> tuple[int, int]:
    """(fire time, kind) of a revive-log unit."""
    return code >> KIND_BITS, code & KIND_MASK


@dataclass(slots=True)
class CheckPoint:
    topic: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    group: str
    diffs: list[int]
    broker_name: str
    next_offset: int = -1

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def key(self) -> CkKey:
        return (self.topic, self.queue_id, self.start_offset, self.pop_time, self.group)

    def offsets(self) -> list[int]:
        so = self.start_offset
        return [so + d for d in self.diffs]

    def to_json(self) -> bytes:
        return orjson.dumps({"so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time, "bm": 0,
                             "n": len(self.diffs), "q": self.queue_id, "t": self.topic, "c": self.group,
                             "ro": -1, "d": self.diffs, "bn": self.broker_name, "rp": 0, "nb": self.next_offset})


@dataclass(slots=True)
class Ack:
    """An ack (kind 2) or a batch ack (kind 3) of some offsets of one checkpoint."""

    topic: str
    queue_id: int
    start_offset: int
    pop_time: int
    group: str
    offsets: list[int]
    broker_name: str

    @property
    def key(self) -> CkKey:
        return (self.topic, self.queue_id, self.start_offset, self.pop_time, self.group)

    def to_json(self) -> bytes:
        d: dict = {"so": self.start_offset, "c": self.group, "t": self.topic, "q": self.queue_id,
                   "pt": self.pop_time, "bn": self.broker_name}
        if len(self.offsets) == 1:
            d["ao"] = self.offsets[0]
        else:
            d["aol"] = self.offsets
            d["ao"] = -1
        return orjson.dumps(d)


@dataclass(slots=True)
class OrderRecord:
    """A FIFO pop (kind 4: ``offsets``, ``invisible_time``, ``attempt_id``), ack (5: ``offsets[0]``) or change
    of invisible time (6: ``offsets[0]`` becomes visible at ``next_visible``)."""

    kind: int
    topic: str
    queue_id: int
    pop_time: int
    group: str
    offsets: list[int] = field(default_factory=list)
    invisible_time: int = 0
    attempt_id: str | None = None
    start_offset: int = -1
    next_visible: int = 0

    def to_json(self) -> bytes:
        d: dict = {"c": self.group, "t": self.topic, "q": self.queue_id, "pt": self.pop_time}
        if self.kind == ORDER_POP:
            d.update(it=self.invisible_time, a=self.attempt_id, o=self.offsets, so=self.start_offset)
        else:
            d["ao"] = self.offsets[0]
            if self.kind == ORDER_CHANGE:
                d["nv"] = self.next_visible
        return orjson.dumps(d)


Record = CheckPoint | Ack | OrderRecord


def fire_time(rec: Record, kind: int, revive_time: int = 0) -> int:
    """The time a record is filed at: a checkpoint's revive time; for an ack, ``revive_time`` (its handle's)."""
    if kind == CK:
        return rec.revive_time  # type: ignore[union-attr]
    if kind in (ACK, BATCH_ACK):
        return revive_time
    return rec.pop_time


def build(rec: Record, kind: int, topic: str, born_host: bytes, fire_ms: int) -> MessageExtBrokerInner:
    """The store input carrying ``rec`` in the revive log (queue 0, tags code = fire time and kind); ``born_host``
    packed (``mq.common.hosts.pack_host``)."""
    props = {P.TAGS: TAGS[kind]}
    return MessageExtBrokerInner(topic=topic, body=rec.to_json(), flag=0, properties=props, queue_id=REVIVE_QUEUE,
                                 sys_flag=0, born_timestamp=int(time.time() * 1000), born_host=born_host,
                                 properties_string=P.TAGS + P.NAME_VALUE_SEPARATOR + TAGS[kind],
                                 tags_code=tags_code(fire_ms, kind))


def _list(v: object, what: str) -> list[int]:
    if not isinstance(v, list) or not all(type(x) is int for x in v):
        raise RemoteProtocolError(f"revive record: {what} is not a list of integers")
    return v


def parse(kind: int, body: bytes) -> Record:
    """Decode a revive-log body of ``kind``; RemoteProtocolError when it is not one."""
    try:
        d = orjson.loads(body)
        if not isinstance(d, dict):
            raise RemoteProtocolError("revive record: not a JSON object")
        t, q, pt, c = str(d["t"]), int(d["q"]), int(d["pt"]), str(d["c"])
        if kind == CK:
            return CheckPoint(t, q, int(d["so"]), pt, int(d["it"]), c, _list(d.get("d", []), "d"),
                              str(d.get("bn") or ""), int(d.get("nb", -1)))
        if kind in (ACK, BATCH_ACK):
            offs = _list(d["aol"], "aol") if "aol" in d else [int(d["ao"])]
            return Ack(t, q, int(d["so"]), pt, c, offs, str(d.get("bn") or ""))
        if kind == ORDER_POP:
            a = d.get("a")
            return OrderRecord(kind, t, q, pt, c, _list(d["o"], "o"), int(d["it"]), None if a is None else str(a),
                               int(d.get("so", -1)))
        if kind in (ORDER_ACK, ORDER_CHANGE):
            return OrderRecord(kind, t, q, pt, c, [int(d["ao"])], next_visible=int(d.get("nv", 0)))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RemoteProtocolError(f"revive record of kind {kind} is malformed: {exc}") from None
    raise RemoteProtocolError(f"unknown revive record kind {kind}")
