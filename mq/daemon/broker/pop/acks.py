"""Ack, batch ack, change of invisible time and forward to the DLQ of popped messages (RocketMQ 5
``AckMessageProcessor``, ``ChangeInvisibleTimeProcessor``, the proxy's ``forwardMessageToDeadLetterQueue``).

Each is checked, written to the revive log, and answered once stored:

- a handle is refused as INVALID when it does not parse, names another broker, or does not fit the topic,
  queue and offset; a non-FIFO handle whose invisible time has passed is EXPIRED (its message is being
  revived, so an ack now could not keep it from coming back);
- an ack is an ``ack`` record filed with its checkpoint; acks of one request to one checkpoint are one record
  (a batch ack); the revive service will not revive that checkpoint's slot while the ack is being written;
- changing the invisible time writes a new checkpoint for that one message (pop time = now, distinct from the
  old one's) and acks it under the old handle, in one batch: the old handle no longer acks anything (acking it
  again pairs with the old checkpoint, which is acked already), and the message comes back at the new time
  unless the new handle acks it;
- a handle acked or replaced is remembered until it expires (``handles.py``): acking it again answers OK, acking
  a replaced one INVALID, and changing the invisible time of either is refused (it would bring the message
  back);
- FIFO handles (reviveQid 999) change the queue's order info instead: an ack commits the group's offset up to
  the first un-acked message and wakes pops waiting on the queue; a handle from an earlier pop of the queue is
  EXPIRED (the message has been handed out again).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from mq.common import properties as P
from mq.common import topic as T
from mq.daemon.broker.pop import records as R
from mq.daemon.broker.pop.contract import AckResult, AckStatus, ChangeInvisibleResult
from mq.daemon.broker.pop.handles import ACKED, REPLACED
from mq.daemon.broker.requeue import STORED, load, put_async, rebuild
from mq.errors import RemoteProtocolError
from mq.protocol import extra_info as X

if TYPE_CHECKING:
    from mq.daemon.broker.pop.service import PopService

log = logging.getLogger(__name__)

Resolved = tuple[X.ExtraInfo, str, int]  # extra info, real topic, queue offset
_OK = AckResult(AckStatus.OK)


class AckHandler:
    def __init__(self, pop: "PopService") -> None:
        self.pop = pop
        self.c = pop.c

    def resolve(self, group: str, topic: str, handle: str, queue_offset: int | None,
                queue_id: int | None = None) -> Resolved | AckResult:
        """The handle read and checked against this broker's topics (and ``queue_id``, when the request names
        one), or the AckResult refusing it."""
        if not self.pop.started:
            return AckResult(AckStatus.UNAVAILABLE, f"the broker[{self.c.address}] does not pop")
        try:
            ei = X.parse(handle)
            real = X.real_topic(topic, group, ei.retry)
        except RemoteProtocolError as exc:
            return AckResult(AckStatus.INVALID, str(exc))
        if ei.broker_name != self.c.broker_name:
            return AckResult(AckStatus.INVALID, f"the receipt handle is of broker {ei.broker_name[:64]!r}, "
                                                f"not {self.c.broker_name}")
        if queue_id is not None and queue_id != ei.queue_id:
            return AckResult(AckStatus.INVALID, f"queueId {queue_id} is not the receipt handle's ({ei.queue_id})")
        offset = ei.queue_offset if queue_offset is None else queue_offset
        tc = self.c.topic_config.get(real)
        if tc is None:
            return AckResult(AckStatus.TOPIC_NOT_EXIST, f"topic[{real}] not exist")
        if not 0 <= ei.queue_id < tc.read_queue_nums:
            return AckResult(AckStatus.INVALID, f"queueId[{ei.queue_id}] is illegal, topic:[{real}] "
                                                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        cq = self.c.store.cq_table.find(real, ei.queue_id, create=False)
        lo, hi = (cq.min_offset, cq.max_offset) if cq is not None else (-1, 0)
        if not (0 <= offset and lo <= offset < hi and offset >= ei.ck_queue_offset):
            return AckResult(AckStatus.INVALID, f"offset is illegal, key:{real}@{ei.queue_id}, commit:{offset}, "
                                                f"store:{lo}~{hi}")
        return ei, real, offset

    def _fifo_check(self, group: str, ei: X.ExtraInfo, real: str, offset: int) -> AckResult | None:
        info = self.pop.order.get(real, group, ei.queue_id)
        if info is None or info.pop_time != ei.pop_time:
            return AckResult(AckStatus.EXPIRED, "the receipt handle is from an earlier pop of the queue")
        if offset not in info.offsets:
            return AckResult(AckStatus.INVALID, f"offset {offset} was not popped with this receipt handle")
        return None

    # -- ack ---------------------------------------------------------------------------------------------------
    def ack_cb(self, group: str, topic: str, handles: list[str], queue_offsets: list[int | None] | None,
               done: Callable[[list[AckResult]], None], queue_ids: list[int] | None = None) -> None:
        """Ack ``handles`` (``queue_offsets``/``queue_ids``: what the request says of each, or None) and call
        ``done`` with one result per handle."""
        pop = self.pop
        finished = pop.finished
        now = pop.now()
        results: list[AckResult | None] = [None] * len(handles)
        merged: dict[R.CkKey, tuple[R.Ack, int, list[int], list[int]]] = {}
        fifo: list[tuple[int, X.ExtraInfo, str, int]] = []
        records = []
        for i, handle in enumerate(handles):
            qo = queue_offsets[i] if queue_offsets is not None else None
            r = self.resolve(group, topic, handle, qo, queue_ids[i] if queue_ids is not None else None)
            if r.__class__ is AckResult:
                results[i] = r  # type: ignore[assignment]
                continue
            ei, real, offset = r  # type: ignore[misc]
            if ei.is_order:
                bad = self._fifo_check(group, ei, real, offset)
                if bad is not None:
                    results[i] = bad
                    continue
                fifo.append((i, ei, real, offset))
                records.append(R.build(R.OrderRecord(R.ORDER_ACK, real, ei.queue_id, ei.pop_time, group, [offset]),
                                       R.ORDER_ACK, pop.revive_topic, pop.store_host, ei.pop_time))
                continue
            if now >= ei.revive_time:
                results[i] = AckResult(AckStatus.EXPIRED, f"the receipt handle expired at {ei.revive_time}")
                continue
            fkey = finished.key(real, ei.queue_id, ei.ck_queue_offset, ei.pop_time, group, offset)
            done_as = finished.reason(fkey, now)
            if done_as == REPLACED:
                results[i] = AckResult(AckStatus.INVALID, "the receipt handle was replaced by a change of invisible "
                                                          "time: ack with the new one")
                continue
            if done_as == ACKED:
                results[i] = _OK  # acked before: nothing more to write
                continue
            key = (real, ei.queue_id, ei.ck_queue_offset, ei.pop_time, group)
            entry = merged.get(key)
            if entry is None:
                merged[key] = (R.Ack(real, ei.queue_id, ei.ck_queue_offset, ei.pop_time, group, [offset],
                                     ei.broker_name), ei.revive_time, [i], [fkey])
            else:
                if offset not in entry[0].offsets:
                    entry[0].offsets.append(offset)
                    entry[3].append(fkey)
                entry[2].append(i)
        for ack, revive_time, _, _ in merged.values():
            kind = R.ACK if len(ack.offsets) == 1 else R.BATCH_ACK
            records.append(R.build(ack, kind, pop.revive_topic, pop.store_host, revive_time))
        if not records:
            done(results)  # type: ignore[arg-type]
            return
        deferred = False

        def stored(res) -> None:
            if deferred:
                for _ack, revive_time, _, _ in merged.values():
                    pop.pending_done(revive_time)
            ok = res.status in STORED
            outcome = _OK if ok else AckResult(AckStatus.UNAVAILABLE, f"the ack could not be stored: {res.status.name}")
            for ack, rt, idxs, fkeys in merged.values():
                for i in idxs:
                    results[i] = outcome
                if ok:
                    pop.add_inflight(ack.topic, group, ack.queue_id, -len(ack.offsets))
                    for fkey in fkeys:
                        finished.add(fkey, rt, ACKED, now)
            for i, ei, real, offset in fifo:
                if ok:
                    self._fifo_commit(group, ei, real, offset, now)
                results[i] = outcome
            done(results)  # type: ignore[arg-type]
        # while an ack is being written its checkpoint's slot must not be revived (PopReviveService.safe_time)
        deferred = pop.put_batch(records, stored)
        if deferred:
            for _ack, revive_time, _, _ in merged.values():
                pop.pending_add(revive_time)

    def _fkey(self, group: str, ei: X.ExtraInfo, real: str, offset: int) -> int:
        return self.pop.finished.key(real, ei.queue_id, ei.ck_queue_offset, ei.pop_time, group, offset)

    def _fifo_commit(self, group: str, ei: X.ExtraInfo, real: str, offset: int, now: int) -> None:
        pop = self.pop
        nxt = pop.order.commit_and_next(real, group, ei.queue_id, offset, ei.pop_time, now)
        pop.order_changed()
        if nxt >= 0:
            pop.commit_offset("ack", group, real, ei.queue_id, nxt)
            if not pop.order.blocked(None, real, group, ei.queue_id, now):
                pop.wake_fifo(real, group, ei.queue_id)

    # -- change invisible time -----------------------------------------------------------------------------------
    def change_cb(self, group: str, topic: str, handle: str, invisible_time_ms: int, queue_offset: int | None,
                  done: Callable[[ChangeInvisibleResult], None], queue_id: int | None = None) -> None:
        pop = self.pop
        cfg = self.c.config
        r = self.resolve(group, topic, handle, queue_offset, queue_id)
        if isinstance(r, AckResult):
            done(ChangeInvisibleResult(r.status, remark=r.remark))
            return
        if not 0 <= invisible_time_ms <= cfg.max_invisible_time_mills:
            done(ChangeInvisibleResult(AckStatus.INVALID, remark=f"invisibleTime {invisible_time_ms} ms is not in "
                                       f"0..{cfg.max_invisible_time_mills} (maxInvisibleTimeMills)"))
            return
        ei, real, offset = r
        now = pop.now()
        if ei.is_order:
            bad = self._fifo_check(group, ei, real, offset)
            if bad is None and offset in pop.order.acked(real, group, ei.queue_id):
                bad = AckResult(AckStatus.INVALID, "the message is acked")
            if bad is not None:
                done(ChangeInvisibleResult(bad.status, remark=bad.remark))
                return
            visible = max(now + invisible_time_ms, ei.pop_time)  # a FIFO pop time may be a little ahead of now
            rec = R.OrderRecord(R.ORDER_CHANGE, real, ei.queue_id, ei.pop_time, group, [offset], next_visible=visible)
            extra = X.build(ei.ck_queue_offset, ei.pop_time, visible - ei.pop_time, X.ORDER_REVIVE_QID, ei.retry,
                            ei.broker_name, ei.queue_id, offset)

            def stored_fifo(res) -> None:
                if res.status not in STORED:
                    done(ChangeInvisibleResult(AckStatus.UNAVAILABLE, remark=res.status.name))
                    return
                pop.order.change_visible(real, group, ei.queue_id, offset, ei.pop_time, visible, now)
                pop.order_changed()
                if not pop.order.blocked(None, real, group, ei.queue_id, now):
                    pop.wake_fifo(real, group, ei.queue_id)
                done(ChangeInvisibleResult(AckStatus.OK, extra, ei.pop_time, visible - ei.pop_time,
                                           X.ORDER_REVIVE_QID))
            pop.put(R.build(rec, R.ORDER_CHANGE, pop.revive_topic, pop.store_host, ei.pop_time), stored_fifo)
            return
        if now >= ei.revive_time:
            done(ChangeInvisibleResult(AckStatus.EXPIRED, remark=f"the receipt handle expired at {ei.revive_time}"))
            return
        fkey = self._fkey(group, ei, real, offset)
        done_as = pop.finished.reason(fkey, now)
        if done_as is not None:
            done(ChangeInvisibleResult(AckStatus.INVALID, remark="the message is acked" if done_as == ACKED else
                                       "the receipt handle was replaced by a change of invisible time"))
            return
        pop_time = max(now, ei.pop_time + 1)  # the new checkpoint never pairs with the old handle's acks
        ck = R.CheckPoint(real, ei.queue_id, offset, pop_time, invisible_time_ms, group, [0], ei.broker_name)
        old = R.Ack(real, ei.queue_id, ei.ck_queue_offset, ei.pop_time, group, [offset], ei.broker_name)
        batch = [R.build(ck, R.CK, pop.revive_topic, pop.store_host, ck.revive_time),
                 R.build(old, R.ACK, pop.revive_topic, pop.store_host, ei.revive_time)]
        extra = X.build(offset, pop_time, invisible_time_ms, 0, ei.retry, ei.broker_name, ei.queue_id, offset)
        deferred = False

        def stored(res) -> None:
            if deferred:
                pop.pending_done(ei.revive_time)
            if res.status not in STORED:
                done(ChangeInvisibleResult(AckStatus.UNAVAILABLE, remark=res.status.name))
                return
            pop.finished.add(fkey, ei.revive_time, REPLACED, now)
            done(ChangeInvisibleResult(AckStatus.OK, extra, pop_time, invisible_time_ms, 0))
        deferred = pop.put_batch(batch, stored)
        if deferred:
            pop.pending_add(ei.revive_time)

    # -- forward to the DLQ --------------------------------------------------------------------------------------
    async def forward_to_dead_letter(self, group: str, topic: str, handle: str) -> AckResult:
        r = self.resolve(group, topic, handle, None)
        if isinstance(r, AckResult):
            return r
        ei, real, offset = r
        if not ei.is_order and self.pop.now() >= ei.revive_time:
            return AckResult(AckStatus.EXPIRED, f"the receipt handle expired at {ei.revive_time}")
        if ei.is_order:
            bad = self._fifo_check(group, ei, real, offset)
            if bad is not None:
                return bad
        store = self.c.store
        cq = store.cq_table.find(real, ei.queue_id, create=False)
        unit = cq.get_unit(offset) if cq is not None else None
        msg = load(store, unit[0], unit[1]) if unit else None
        if msg is None:
            return AckResult(AckStatus.INVALID, f"no message at {real}@{ei.queue_id}:{offset}")
        origin = X.origin_topic(real, group)
        props = dict(msg.properties)
        props.setdefault(P.RETRY_TOPIC, origin)
        props[P.DLQ_ORIGIN_TOPIC] = origin
        props[P.DLQ_ORIGIN_MESSAGE_ID] = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        props.setdefault(P.ORIGIN_MESSAGE_ID, msg.msg_id)
        dlq = T.dlq_topic(group)
        self.c.topic_config.create_system(dlq, 1, self.c.config.dlq_topic_perm)
        res = await put_async(store, rebuild(msg, dlq, 0, props, reconsume_times=msg.reconsume_times + 1))
        if res.status not in STORED:
            return AckResult(AckStatus.UNAVAILABLE, f"the message could not be stored in {dlq}: {res.status.name}")
        log.info("pop: message %s of group %s forwarded to %s", msg.msg_id, group, dlq)
        return (await self.pop.batch_ack(group, topic, [handle], [offset]))[0]
