"""One pop: which queues it reads, from which offset, and what it hands out (RocketMQ 5 ``PopMessageProcessor``).

``PopReader.read`` is synchronous and changes nothing: it returns a ``PopPlan`` holding the result (messages with
their extra info, the header's offset lists), the revive-log records to write (a checkpoint per queue read, or
the FIFO records), and the state changes to make once those records are stored (``PopPlan.commit``: group
offsets, FIFO order info, in-flight counts). Until then the queues read stay *busy* in the pop service, so no
other pop reads them; a failed write drops the plan and nothing was handed out.

Queue order: with ``queueId`` -1 every readable queue from a random one on; the group's pop retry topic first
with ``popFromRetryProbability`` percent, else after the topic when the batch is not full (never for FIFO).
Offsets: the group's committed offset, or for a new group MIN -> the queue's min offset, MAX -> 0 when the
queue's first message is still in memory (``initPopOffsetByCheckMsgInMem``), else its last message; a retry
topic always starts at its min. An offset outside the queue is corrected to the store's next offset. Messages
read from a retry topic are re-encoded with the consumed topic and ``POP_CK``, as RocketMQ 5 answers them.
"""

from __future__ import annotations

import logging
import random
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common import topic as T
from mq.common.record import decode_record, encode_record
from mq.common.sql_filter import Sql92SyntaxError
from mq.common.tags import parse_subscription
from mq.daemon.broker.pop import records as R
from mq.daemon.broker.pop.contract import InitMode, PoppedMessage, PopRequest, PopResult, PopStatus
from mq.daemon.broker.pop.revived import REVIVE_KEY
from mq.daemon.broker.property_filter import SQL92, commit_log_filter
from mq.daemon.broker.requeue import rebuild
from mq.daemon.broker.topic_config import PERM_READ
from mq.errors import InvalidTopicError
from mq.protocol import extra_info as X
from mq.store.status import GetMessageStatus

if TYPE_CHECKING:
    from mq.daemon.broker.pop.service import PopService

log = logging.getLogger(__name__)
_G = GetMessageStatus
#: Messages one pop returns at most (RocketMQ's limit).
MAX_BATCH = 32
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_RECONSUME_OFFSET_V4 = 72
_CORRECT = frozenset({_G.OFFSET_TOO_SMALL, _G.OFFSET_OVERFLOW_BADLY, _G.OFFSET_FOUND_NULL})
_SKIPPED = frozenset({_G.NO_MATCHED_MESSAGE, _G.OFFSET_FOUND_NULL, _G.MESSAGE_WAS_REMOVING,
                      _G.NO_MATCHED_LOGIC_QUEUE})


def record_reconsume_times(rec: bytes) -> int:
    (sys_flag,) = _I32.unpack_from(rec, 36)
    p = _RECONSUME_OFFSET_V4 + (12 if sys_flag & SF.BORNHOST_V6 else 0) + (12 if sys_flag & SF.STOREHOST_V6 else 0)
    return _I32.unpack_from(rec, p)[0]


def record_commit_log_offset(rec: bytes) -> int:
    return _I64.unpack_from(rec, 28)[0]


@dataclass(slots=True)
class Filter:
    """A pop's filter: tag hash codes (None: all) and/or a record filter (SQL92)."""

    codes: frozenset[int] | None = None
    message_filter: Callable[[bytes], bool] | None = None


@dataclass(slots=True)
class PopPlan:
    result: PopResult
    #: revive-log records to store before answering (one batch)
    records: list[Any] = field(default_factory=list)
    #: FIFO messages past their max attempts, to move to the DLQ first: (record, topic read, group)
    dlq: list[Any] = field(default_factory=list)
    #: queues read (busy until ``commit`` or ``abort``)
    busy: list[tuple[str, str, int]] = field(default_factory=list)
    #: state changes to make once the records are stored
    commits: list[Callable[[], None]] = field(default_factory=list)

    def commit(self) -> None:
        for fn in self.commits:
            fn()


class PopReader:
    def __init__(self, pop: "PopService") -> None:
        self.pop = pop
        self.c = pop.c

    def read(self, req: PopRequest, flt: Filter, now: int) -> PopPlan:
        c = self.c
        cfg = c.config
        order = req.order
        wall = now  # what blocks a FIFO queue is measured against the clock, not the pop time below
        if order:  # every FIFO batch its own pop time: a handle of an earlier batch is told apart by it
            now = self.pop.fifo_pop_time(now)
        result = PopResult(PopStatus.NO_NEW_MSG, pop_time=now, invisible_time=req.invisible_time_ms,
                           revive_qid=X.ORDER_REVIVE_QID if order else 0)
        plan = PopPlan(result)
        info: dict[str, list[str]] = {"start": [], "msg": [], "order": []}
        tc = c.topic_config.get(req.topic)
        if tc is None:
            return plan
        if req.queue_id >= 0:
            main = [(req.topic, req.queue_id)]
        else:
            n = tc.read_queue_nums
            first = random.randrange(n) if n > 0 else 0
            main = [(req.topic, (first + i) % n) for i in range(n)]
        retry: list[tuple[str, int]] = []
        if not order:
            for rt in self.pop.retry_topics(req.topic, req.group):
                rtc = c.topic_config.get(rt)
                if rtc is not None:
                    retry += [(rt, q) for q in range(rtc.read_queue_nums)]
        retry_first = retry and random.randrange(100) < cfg.pop_from_retry_probability
        sequence = (retry + main) if retry_first else (main + retry)
        rest = 0
        for topic, qid in sequence:
            rest += self._read_queue(req, flt, topic, qid, now, plan, info, wall)
        result.rest_num = rest
        if result.messages:
            result.status = PopStatus.FOUND
        result.start_offset_info = ";".join(info["start"])
        result.msg_offset_info = ";".join(info["msg"])
        result.order_count_info = ";".join(info["order"])
        return plan

    # -- one queue --------------------------------------------------------------------------------------------
    def _read_queue(self, req: PopRequest, flt: Filter, topic: str, qid: int, now: int, plan: PopPlan,
                    info: dict[str, list[str]], wall: int) -> int:
        """Read what fits of one queue into ``plan``; returns the messages left behind in it."""
        pop = self.pop
        c = self.c
        store = c.store
        group = req.group
        key = (topic, group, qid)
        is_retry = topic != req.topic
        offset = self.offset(topic, group, qid, req.init_mode, is_retry)
        backlog = max(0, store.get_max_offset(topic, qid) - offset)
        want = req.max_messages - len(plan.result.messages)
        if want <= 0 or key in pop.busy:
            return backlog
        if req.order:
            if pop.order.blocked(req.attempt_id, topic, group, qid, wall):
                return 0
        elif pop.inflight_exceeded(topic, group, qid):
            return backlog
        # FIFO: offsets acked out of order (above the group's offset) are read and dropped: read as many more
        acked = pop.order.acked(topic, group, qid) if req.order else set()
        n = want + len(acked)
        r = store.get_message(group, topic, qid, offset, n, flt.codes, message_filter=flt.message_filter)
        if r.status in _CORRECT and r.next_begin_offset != offset:
            offset = r.next_begin_offset  # the stored offset is outside the queue: start where the store says
            c.offsets.commit(req.client_host, group, topic, qid, offset)
            r = store.get_message(group, topic, qid, offset, n, flt.codes, message_filter=flt.message_filter)
        left = max(0, r.max_offset - r.next_begin_offset)
        if not r.message_count:
            if r.status in _SKIPPED and r.next_begin_offset > offset:
                c.offsets.commit(req.client_host, group, topic, qid, r.next_begin_offset)  # all filtered out
            return left
        offsets = list(r.queue_offsets)
        bufs = list(r.buffers)
        if acked:  # never delivered again
            keep = [i for i, o in enumerate(offsets) if o not in acked][:want]
            offsets = [offsets[i] for i in keep]
            bufs = [bufs[i] for i in keep]
        result = plan.result
        flag = X.retry_flag(topic)
        broker = c.broker_name
        counts = pop.order.preview_counts(req.attempt_id, topic, group, qid, offsets) if req.order else {}
        dead: list[int] = []
        if req.order:
            max_attempts = pop.max_attempts(group)
            dead = [o for o in offsets if counts.get(o, 0) >= max_attempts]
        delivered = []
        for buf, qoff in zip(bufs, offsets):
            if qoff in dead:
                plan.dlq.append((buf, topic, group))
                continue
            extra = X.build(offset, now, req.invisible_time_ms, result.revive_qid, flag, broker, qid, qoff)
            if is_retry:
                m = decode_record(buf)
                m.properties[P.POP_CK] = extra
                m.properties.pop(REVIVE_KEY, None)
                m.topic = req.topic
                buf = encode_record(m)
            reconsume = counts.get(qoff, 0) if req.order else record_reconsume_times(buf)
            result.messages.append(PoppedMessage(req.topic, topic, qid, qoff, record_commit_log_offset(buf), extra,
                                                 reconsume, buf))
            delivered.append(qoff)
        if delivered:  # the client maps each returned message to its offset through this list: delivered only
            info["start"].append(X.start_offset_entry(topic, qid, offset))
            info["msg"].append(X.msg_offset_entry(topic, qid, delivered))
        plan.busy.append(key)
        host = req.client_host
        nxt = r.next_begin_offset
        if req.order:
            if delivered:
                info["order"] += X.order_count_entries(topic, qid, {o: counts[o] for o in delivered if counts[o]},
                                                       min(counts[o] for o in delivered))
            floor = offsets[0] if offsets else nxt  # the group's offset after this pop
            plan.records.append((R.OrderRecord(R.ORDER_POP, topic, qid, now, group, offsets, req.invisible_time_ms,
                                               req.attempt_id, floor), R.ORDER_POP, now))
            for o in dead:
                plan.records.append((R.OrderRecord(R.ORDER_ACK, topic, qid, now, group, [o]), R.ORDER_ACK, now))

            def commit_fifo() -> None:
                pop.order.update(req.attempt_id, topic, group, qid, now, req.invisible_time_ms, offsets, now, floor)
                nxt_fifo = floor
                for o in dead:
                    n = pop.order.commit_and_next(topic, group, qid, o, now, now)
                    if n >= 0:
                        nxt_fifo = max(nxt_fifo, n)
                pop.commit_offset(host, group, topic, qid, nxt_fifo)
                pop.order_changed()
            plan.commits.append(commit_fifo)
        else:
            ck = R.CheckPoint(topic, qid, offset, now, req.invisible_time_ms, group, [o - offset for o in offsets],
                              broker, nxt)
            plan.records.append((ck, R.CK, ck.revive_time))
            n = len(delivered)

            def commit_ck() -> None:
                pop.commit_offset(host, group, topic, qid, nxt)
                pop.add_inflight(topic, group, qid, n)
            plan.commits.append(commit_ck)
        return left

    def check(self, req: PopRequest) -> tuple[PopResult | None, Filter]:
        """The request checked (broker, batch size, invisible time, names, topic, queue, group, filter): (None,
        its filter), or (the refusing PopResult, an empty filter)."""
        c = self.c
        cfg = c.config

        def bad(status: PopStatus, remark: str) -> tuple[PopResult, Filter]:
            return PopResult(status, pop_time=self.pop.now(), invisible_time=req.invisible_time_ms,
                             revive_qid=X.ORDER_REVIVE_QID if req.order else 0, remark=remark), Filter()
        if not self.pop.started:
            return bad(PopStatus.UNAVAILABLE, f"the broker[{c.address}] does not pop: "
                       + ("it is a slave" if c.is_slave else "pop is not started"))
        if not cfg.broker_permission & PERM_READ:
            return bad(PopStatus.NO_PERMISSION, f"the broker[{c.address}] pop message is forbidden")
        if not 0 < req.max_messages <= MAX_BATCH:
            return bad(PopStatus.INVALID_PARAMETER, f"the broker[{c.address}] pop message's num must be in "
                       f"1..{MAX_BATCH}, not {req.max_messages}")
        if not 0 <= req.invisible_time_ms <= cfg.max_invisible_time_mills:
            return bad(PopStatus.INVALID_PARAMETER, f"invisibleTime {req.invisible_time_ms} ms is not in "
                       f"0..{cfg.max_invisible_time_mills} (maxInvisibleTimeMills)")
        try:
            T.validate_group(req.group)
            T.validate_topic(req.topic)
        except InvalidTopicError as exc:
            return bad(PopStatus.INVALID_PARAMETER, str(exc))
        tc = c.topic_config.get(req.topic)
        if tc is None:
            return bad(PopStatus.TOPIC_NOT_EXIST, f"topic[{req.topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return bad(PopStatus.NO_PERMISSION, f"the topic[{req.topic}] pop message is forbidden")
        if req.queue_id >= tc.read_queue_nums or req.queue_id < -1:
            return bad(PopStatus.INVALID_PARAMETER, f"queueId[{req.queue_id}] is illegal, topic:[{req.topic}] "
                       f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        sgc = c.subscription_groups.find_or_create(req.group)
        if sgc is None:
            return bad(PopStatus.GROUP_NOT_EXIST, f"subscription group [{req.group}] does not exist")
        if not sgc.consume_enable:
            return bad(PopStatus.NO_PERMISSION, f"subscription group no permission, {req.group}")
        etype = (req.expression_type or "TAG").upper()
        expr = req.expression or "*"
        if etype == "TAG":
            sub = parse_subscription(req.topic, expr)
            return None, Filter(None if sub.is_all else frozenset(sub.code_set))
        if etype != SQL92:
            return bad(PopStatus.FILTER_ERROR, f"unknown expression type {etype[:20]!r}: TAG or SQL92")
        if not cfg.enable_property_filter:
            return bad(PopStatus.FILTER_ERROR, "The broker does not support consumer to filter message by SQL92")
        try:
            sql = c.consumers.filter_cache.compile(req.topic, expr)
        except Sql92SyntaxError as exc:
            return bad(PopStatus.FILTER_ERROR, f"parse the consumer's subscription failed: {exc}")
        return None, Filter(None, commit_log_filter(sql))

    def dlq_input(self, buf: bytes, topic: str, group: str) -> Any:
        """The store input moving a FIFO message past its max attempts to ``%DLQ%{group}``."""
        m = decode_record(buf)
        origin = X.origin_topic(topic, group)
        props = dict(m.properties)
        props.setdefault(P.RETRY_TOPIC, origin)
        props[P.DLQ_ORIGIN_TOPIC] = origin
        props[P.DLQ_ORIGIN_MESSAGE_ID] = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or m.msg_id
        props.setdefault(P.ORIGIN_MESSAGE_ID, m.msg_id)
        dlq = T.dlq_topic(group)
        self.c.topic_config.create_system(dlq, 1, self.c.config.dlq_topic_perm)
        log.info("pop: FIFO message %s of group %s reached its max attempts: moved to %s", m.msg_id, group, dlq)
        return rebuild(m, dlq, 0, props, reconsume_times=m.reconsume_times + 1)

    # -- offsets ---------------------------------------------------------------------------------------------
    def offset(self, topic: str, group: str, queue_id: int, init_mode: InitMode, is_retry: bool) -> int:
        """The group's pop offset of a queue; a new group's is initialised (and committed) by ``init_mode``."""
        c = self.c
        off = c.offsets.query(group, topic, queue_id)
        if off >= 0:
            return off
        store = c.store
        lo = store.get_min_offset(topic, queue_id)
        if init_mode == InitMode.MIN or is_retry:
            off = max(lo, 0)
        elif c.config.init_pop_offset_by_check_msg_in_mem and lo <= 0 and self.pop.first_in_memory(topic, queue_id):
            off = 0
        else:
            off = max(store.get_max_offset(topic, queue_id) - 1, 0)
        c.offsets.commit("getPopOffset", group, topic, queue_id, off)
        return off
