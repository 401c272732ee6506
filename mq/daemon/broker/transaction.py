"""TransactionalMessageService: op records and the check pass (FEATURES.md §4, RocketMQ
``TransactionalMessageServiceImpl`` / ``TransactionalMessageCheckService``).

Half messages live in RMQ_SYS_TRANS_HALF_TOPIC queue 0 (the send processor puts them there). A resolved half
message (END_TRANSACTION commit or rollback) gets an *op record* in RMQ_SYS_TRANS_OP_HALF_TOPIC, same queue id::

    +-----------+------------------------------------------------------------+
    | field     | value                                                      |
    +-----------+------------------------------------------------------------+
    | TAGS      | "d" (REMOVETAG)                                            |
    | body      | the half message's queue offset, decimal UTF-8 ("1234")    |
    | sysflag   | 0; born and store host = this broker; a new UNIQ_KEY        |
    +-----------+------------------------------------------------------------+

The check pass runs every ``transaction_check_interval`` ms (masters only). Progress is the committed offsets of
the internal group CID_RMQ_SYS_TRANS on both topics (consumerOffset.json). A pass:

1. reads every op record from the op offset: an op for a half offset below the half offset is *done*, the
   others go in ``remove`` (half offset -> op offset);
2. walks the half queue from the half offset: a half offset in ``remove`` is resolved (its op becomes done);
   otherwise the half message is examined and the walk stops at one stored after the pass began or younger
   than its immunity (``transaction_time_out``, or CHECK_IMMUNITY_TIME_IN_SECONDS x 1000);
   ``TRANSACTION_CHECK_TIMES >= transaction_check_max`` or an age beyond ``file_reserved_time`` hours ->
   discarded into TRANS_CHECK_MAX_TIME_TOPIC (logged); otherwise it is re-appended to the half queue with
   the count + 1 (new queue offset and commit-log offset) and CHECK_TRANSACTION_STATE is sent oneway to a live
   connection of its producer group (PGROUP), chosen round robin, so any surviving producer of the group answers;
3. commits the new half offset, and the op offset advanced over the contiguous prefix of done op offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from mq.common import properties as P
from mq.common import topic as T
from mq.common.log_throttle import LogThrottle
from mq.common.message import MessageExt, MessageExtBrokerInner
from mq.common.msg_id import UniqKeyGenerator, create_offset_msg_id
from mq.common.properties import encode_properties
from mq.common.record import encode_record
from mq.daemon.broker.requeue import STORED, load, put_async, rebuild
from mq.daemon.broker.schedule import is_master
from mq.daemon.broker.topic_config import TopicConfigNotSaved
from mq.daemon.runtime import cancel_tasks
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import CheckTransactionStateRequestHeader
from mq.store.consume_queue import CQ_UNIT, FILLER_SIZE

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

OP_TAG = "d"
SYS_TRANS_GROUP = "CID_RMQ_SYS_TRANS"
HALF_QUEUE = 0
#: A check pass stops walking after this long (RocketMQ: 60 s).
MAX_PASS_SECONDS = 60.0
#: Most op records read per pass.
MAX_OPS_PER_PASS = 200_000
#: Transactions remembered as resolved: a late END_TRANSACTION for another copy of the half message (each check
#: re-appends one) must not commit it a second time.
RESOLVED_MEMORY = 100_000


@dataclasses.dataclass(slots=True)
class CheckPassResult:
    checked: int = 0
    discarded: int = 0
    resolved: int = 0
    half_offset: int = 0
    op_offset: int = 0


class TransactionalMessageService:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self._uniq = UniqKeyGenerator(controller.config.advertised_host)
        self._rr = itertools.count()
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        #: UNIQ_KEY (else phy offset) of recently resolved half messages -> op queue offset
        self.resolved: OrderedDict[str, int] = OrderedDict()
        self.passes = 0
        self._throttle = LogThrottle(log, controller.config.delivery_error_log_interval_ms / 1000.0)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        if not is_master(self.c):
            return
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="transaction-check")

    async def stop(self) -> None:
        await cancel_tasks(self._task)
        self._task = None

    def check_soon(self) -> None:
        """Run a check pass now (admin/test hook)."""
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.c.config.transaction_check_interval / 1000.0)
            self._wake.clear()
            try:
                res = await self.check_once()
                self.passes += 1
                if res.checked or res.discarded:
                    log.info("transaction check pass: %d checked, %d discarded, %d resolved; half offset %d, "
                             "op offset %d", res.checked, res.discarded, res.resolved, res.half_offset,
                             res.op_offset)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._throttle.error("pass", "transaction check pass failed", exc_info=True)

    # -- op records --------------------------------------------------------------------------------------
    @staticmethod
    def _key(half: MessageExt) -> str:
        return half.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or f"@{half.commit_log_offset}"

    def already_resolved(self, half: MessageExt) -> bool:
        """True when this transaction (any copy of its half message) was committed or rolled back lately."""
        return self._key(half) in self.resolved

    async def write_op(self, half: MessageExt) -> bool:
        """Record that ``half`` is resolved (commit or rollback)."""
        c = self.c
        try:
            c.topic_config.create_system(T.TRANS_OP_HALF_TOPIC, 1, 6)
        except TopicConfigNotSaved as exc:
            self._throttle.warning("op-topic", "op record for half offset %d not stored: %s", half.queue_offset, exc)
            return False
        props = {P.TAGS: OP_TAG, P.WAIT_STORE_MSG_OK: "false", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: self._uniq.next()}
        op = MessageExtBrokerInner(
            topic=T.TRANS_OP_HALF_TOPIC, body=str(half.queue_offset).encode(), flag=0, properties=props,
            queue_id=half.queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000),
            born_host=(c.config.advertised_host, c.port), properties_string=encode_properties(props))
        res = await put_async(c.store, op)
        if res.status not in STORED:
            self._throttle.warning("op", "op record for half offset %d not stored: %s", half.queue_offset,
                                   res.remark or res.status.name)
            return False
        self.resolved[self._key(half)] = res.queue_offset
        while len(self.resolved) > RESOLVED_MEMORY:
            self.resolved.popitem(last=False)
        return True

    # -- check pass --------------------------------------------------------------------------------------
    def _committed(self, topic: str, cq: Any) -> int:
        off = self.c.offsets.query(SYS_TRANS_GROUP, topic, HALF_QUEUE)
        return cq.min_offset if off < 0 else max(off, cq.min_offset)

    def _read_ops(self, op_cq: Any, op_off: int, half_off: int) -> tuple[dict[int, int], list[int]]:
        remove: dict[int, int] = {}
        done: list[int] = []
        store = self.c.store
        hi = min(op_cq.max_offset, op_off + MAX_OPS_PER_PASS)
        i = op_off
        while i < hi:
            units = op_cq.read_units(i, min(256, hi - i))
            if not units:
                break
            for phy, size, _tc in CQ_UNIT.iter_unpack(units):
                qoff = i
                i += 1
                if size == FILLER_SIZE and phy == 0:
                    done.append(qoff)
                    continue
                op = load(store, phy, size)
                if op is None or op.properties.get(P.TAGS) != OP_TAG:
                    done.append(qoff)
                    continue
                try:
                    h = int(op.body.decode())
                except (UnicodeDecodeError, ValueError):
                    done.append(qoff)
                    continue
                if h < half_off:
                    done.append(qoff)
                else:
                    remove[h] = qoff
        return remove, done

    async def check_once(self) -> CheckPassResult:
        c = self.c
        store = c.store
        cfg = c.config
        res = CheckPassResult()
        half_cq = store.cq_table.find(T.TRANS_HALF_TOPIC, HALF_QUEUE, create=False)
        if half_cq is None:
            return res
        op_cq = store.cq_table.find(T.TRANS_OP_HALF_TOPIC, HALF_QUEUE, create=False)
        half_off = self._committed(T.TRANS_HALF_TOPIC, half_cq)
        op_off = self._committed(T.TRANS_OP_HALF_TOPIC, op_cq) if op_cq is not None else 0
        remove, done = self._read_ops(op_cq, op_off, half_off) if op_cq is not None else ({}, [])
        start_ms = int(time.time() * 1000)
        deadline = time.monotonic() + MAX_PASS_SECONDS
        reserved_ms = c.store_config.file_reserved_time * 3_600_000
        i = half_off
        hmax = half_cq.max_offset
        while i < hmax and time.monotonic() < deadline:
            if i in remove:
                done.append(remove.pop(i))
                res.resolved += 1
                i += 1
                continue
            unit = half_cq.get_unit(i)
            if unit is None or (unit[1] == FILLER_SIZE and unit[0] == 0):
                i += 1
                continue
            msg = load(store, unit[0], unit[1])
            if msg is None:
                i += 1
                continue
            now = int(time.time() * 1000)
            times = _int(msg.properties.get(P.TRANSACTION_CHECK_TIMES), 0)
            if times >= cfg.transaction_check_max or now - msg.born_timestamp > reserved_ms:
                await self._discard(msg, times)
                res.discarded += 1
                i += 1
                continue
            if msg.store_timestamp >= start_ms:
                break
            immunity = cfg.transaction_time_out
            imm_s = _int(msg.properties.get(P.CHECK_IMMUNITY_TIME_IN_SECONDS), -1)
            if imm_s >= 0:
                immunity = max(immunity, imm_s * 1000)
            age = now - msg.born_timestamp
            if 0 <= age < immunity:
                break
            if not await self._check(msg, times + 1):
                break  # could not re-append: look at this one again next pass
            res.checked += 1
            i += 1
        c.offsets.commit("broker", SYS_TRANS_GROUP, T.TRANS_HALF_TOPIC, HALF_QUEUE, i)
        new_op = op_off
        for d in sorted(set(done)):
            if d == new_op:
                new_op += 1
            elif d > new_op:
                break
        if op_cq is not None:
            c.offsets.commit("broker", SYS_TRANS_GROUP, T.TRANS_OP_HALF_TOPIC, HALF_QUEUE, new_op)
        res.half_offset, res.op_offset = i, new_op
        return res

    async def _discard(self, msg: MessageExt, times: int) -> None:
        c = self.c
        c.topic_config.create_system(T.TRANS_CHECK_MAX_TIME_TOPIC, 1, 6)  # TopicConfigNotSaved: next pass
        out = await put_async(c.store, rebuild(msg, T.TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(msg.properties)))
        log.warning("half message %s (producer group %s, real topic %s) discarded after %d checks, born %d: %s",
                    msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), msg.properties.get(P.PRODUCER_GROUP),
                    msg.properties.get(P.REAL_TOPIC), times, msg.born_timestamp, out.status.name)

    async def _check(self, msg: MessageExt, times: int) -> bool:
        """Re-append ``msg`` with the check count ``times`` and ask a producer of its group about it."""
        c = self.c
        props = dict(msg.properties)
        props[P.TRANSACTION_CHECK_TIMES] = str(times)
        out = await put_async(c.store, rebuild(msg, T.TRANS_HALF_TOPIC, HALF_QUEUE, props))
        if out.status not in STORED:
            self._throttle.warning("recheck", "half message %s not re-appended for its check: %s", msg.msg_id,
                                   out.remark or out.status.name)
            return False
        phy = out.phy_offsets[0] if out.phy_offsets else out.wrote_offset
        group = props.get(P.PRODUCER_GROUP) or ""
        live = [conn for conn in c.producers.channels(group) if not getattr(conn, "closed", True)]
        if not live:
            self._throttle.warning(("no-producer", group), "no live producer of group %s to check transaction %s",
                                   group, props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
            return True
        conn = live[next(self._rr) % len(live)]
        uniq = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        offset_id = create_offset_msg_id(msg.store_host, phy)
        hdr = CheckTransactionStateRequestHeader(tran_state_table_offset=out.queue_offset, commit_log_offset=phy,
                                                 msg_id=uniq, transaction_id=uniq, offset_msg_id=offset_id)
        body_msg = dataclasses.replace(
            msg, topic=props.get(P.REAL_TOPIC, msg.topic), queue_id=_int(props.get(P.REAL_QUEUE_ID), 0),
            properties=props, queue_offset=out.queue_offset, commit_log_offset=phy, msg_id=offset_id)
        cmd = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, hdr.to_ext(), encode_record(body_msg))
        c.notify_client_oneway(conn, cmd)
        return True


def _int(v: str | None, default: int) -> int:
    try:
        return int(v) if v else default
    except ValueError:
        return default
