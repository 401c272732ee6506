"""PopReviveService: brings un-acked popped messages back after their invisible time ("fire at T unless acked").

It is the timer's design (``mq.daemon.broker.timer``) applied to the revive log (``records.py``):

1. *the log*: checkpoints and acks are messages of ``rmq_sys_REVIVE_LOG_{cluster}`` queue 0, written by the pop
   service before it answers; their consume-queue tags code holds (fire time, kind);
2. *buckets*: this service follows that consume queue and files every checkpoint and ack unit as a 28-byte entry
   in the time-bucket file of its fire time (``TimerStore`` of ``<store>/pop/revive``). A checkpoint and its
   acks have the same fire time (the checkpoint's pop time + invisible time), so they land in the same slot;
3. *the near window*: slots whose fire time has passed (plus ``popReviveMarginMs``, and never while an ack to
   that slot is still being written) are read, their checkpoints paired with their acks by (topic, queue,
   start offset, pop time, group), and every un-acked message is re-put: to the group's pop retry topic
   ``%RETRY%{group}_{topic}`` with reconsumeTimes + 1 (and ``1ST_POP_TIME``), or, once that would exceed the
   group's retryMaxTimes, to ``%DLQ%{group}``.

Every ``popReviveFlushIntervalMs`` the touched bucket files are fsynced, the consumer offsets and FIFO order
info are written, and ``checkpoint.json`` records (watermark, enqueue offset); ``revived.py`` keeps a slot re-run
after a crash from reviving a message a second time. After a restart or a crash the
bucket files are cut back to the checkpoint and re-filed from the log, and the FIFO and offset records after the
checkpoint are replayed into the pop service's state (``replay``). Deleting ``<store>/pop`` loses nothing that
is still in the log. A slot being revived when the broker died runs again, and skips what it revived before.
Memory holds only the near window's entries, whatever the backlog of in-flight messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from mq.common import properties as P
from mq.common import topic as T
from mq.common.record import decode_record
from mq.daemon.broker.pop import records as R
from mq.daemon.broker.pop.revived import REVIVE_KEY, read_scan_from, revive_key, scan, write_scan_from
from mq.daemon.broker.requeue import STORED, load, put_async, rebuild
from mq.daemon.broker.timer.buckets import TimerStore
from mq.errors import RemoteProtocolError
from mq.protocol.extra_info import origin_topic, pop_retry_topic
from mq.store.consume_queue import CQ_UNIT, FILLER_SIZE

if TYPE_CHECKING:
    from mq.daemon.broker.pop.service import PopService

log = logging.getLogger(__name__)

#: Revive-log units filed per loop turn (keeps one turn short).
ENQUEUE_BATCH = 20_000
#: Pop retry topics have one queue (RocketMQ PopAckConstants.retryQueueNum).
RETRY_QUEUE_NUMS = 1


class PopReviveService:
    def __init__(self, pop: "PopService") -> None:
        self.pop = pop
        c = pop.c
        cfg = c.config
        self.precision = max(1, cfg.pop_revive_precision_ms)
        self.margin = max(0, cfg.pop_revive_margin_ms)
        self.store = TimerStore(Path(c.store_config.store_path_root_dir) / "pop" / "revive",
                                precision_ms=self.precision, bucket_span_ms=cfg.pop_revive_bucket_span_sec * 1000)
        self.revived = 0
        self.dead = 0
        #: revive keys found after the last checkpoint on open (-> revive time): not revived again
        self._revived_before: dict[str, int] = {}
        self._revived_until = 0
        self._slot_done: set[tuple[R.CkKey, int]] = set()
        self._task: asyncio.Task | None = None
        self._stopping = False
        self.running = False

    @property
    def topic(self) -> str:
        return self.pop.revive_topic

    def _cq(self):
        return self.pop.c.store.cq_table.find(self.topic, R.REVIVE_QUEUE, create=False)

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def open(self, now: int) -> None:
        """Open the buckets at the checkpoint and replay the log after it into the pop service's state."""
        self.store.open(now)
        cq = self._cq()
        if cq is not None and self.store.enqueue_offset < cq.min_offset:
            self.store.enqueue_offset = cq.min_offset
        scan_from = read_scan_from(self.store.dir)
        if scan_from is not None:
            self._revived_before = scan(self.pop.c.store, scan_from)
            self._revived_until = max(self._revived_before.values(), default=0)
            if self._revived_before:
                log.info("pop revive: %d revival(s) after the last checkpoint will not be repeated",
                         len(self._revived_before))
        replayed = self.replay(now)
        self.running = True
        log.info("pop revive: watermark %d, enqueue offset %d, %d buckets pending, %d records replayed",
                 self.store.watermark, self.store.enqueue_offset, len(self.store.buckets), replayed)

    def start_loop(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="pop-revive")

    async def stop(self, grace: float = 5.0) -> None:
        """Let the slot being revived finish (up to ``grace`` seconds), then write a checkpoint."""
        self._stopping = True
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            except asyncio.TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            except Exception:  # the loop logs its own failures
                pass
            self._task = None
        if self.running:
            try:
                self.checkpoint()
            except OSError:
                log.exception("pop revive checkpoint at shutdown failed")
        self.running = False

    # -- replay ------------------------------------------------------------------------------------------------
    def replay(self, now: int) -> int:
        """Apply the log's records from the checkpoint on: group offsets moved by checkpoints, FIFO state."""
        cq = self._cq()
        if cq is None:
            return 0
        store = self.pop.c.store
        i = max(self.store.enqueue_offset, cq.min_offset)
        end = cq.max_offset
        n = 0
        while i < end:
            units = cq.read_units(i, min(ENQUEUE_BATCH, end - i))
            if not units:
                break
            for phy, size, code in CQ_UNIT.iter_unpack(units):
                i += 1
                if size == FILLER_SIZE and phy == 0:
                    continue
                kind = code & R.KIND_MASK
                if kind not in (R.CK, R.ORDER_POP, R.ORDER_ACK, R.ORDER_CHANGE):
                    continue
                rec = self._read(store, phy, size, kind)
                if rec is not None:
                    self.pop.replay(kind, rec, now)
                    n += 1
        return n

    @staticmethod
    def _read(store, phy: int, size: int, kind: int) -> R.Record | None:
        raw = store.select_one_message_by_offset(phy, size)
        if raw is None:
            return None
        try:
            return R.parse(kind, decode_record(raw).body)
        except RemoteProtocolError as exc:
            log.warning("pop revive: unreadable record at offset %d skipped: %s", phy, exc)
            return None

    # -- the loop ----------------------------------------------------------------------------------------------
    async def _loop(self) -> None:
        flush_every = max(50, self.pop.c.config.pop_revive_flush_interval_ms)
        loop = asyncio.get_running_loop()
        next_flush = self.pop.now() + flush_every
        while not self._stopping:
            try:
                more = await self.tick(self.pop.now())
                if self.pop.now() >= next_flush:
                    next_flush = self.pop.now() + flush_every
                    await self.checkpoint_async(loop)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                log.error("pop revive loop: %s; retrying in 1 s", exc)
                await asyncio.sleep(1.0)
                continue
            except Exception:
                log.exception("pop revive loop failed; retrying in 1 s")
                await asyncio.sleep(1.0)
                continue
            if more:
                await asyncio.sleep(0)
                continue
            now = self.pop.now()
            await asyncio.sleep(min(0.05, max(0.001, (self.precision - now % self.precision) / 1000.0)))

    async def tick(self, now: int) -> bool:
        """One turn: file new units, load the near window, revive what is due. True when more units wait."""
        more = self.enqueue()
        self.store.load_ahead(now)
        if more:  # an ack to a due checkpoint may be among the units not filed yet: revive once caught up
            return True
        await self._revive_due(self.safe_time(now))
        return False

    def safe_time(self, now: int) -> int:
        """Slots ending at or before this may be revived: ``margin`` ago, and before any ack still being
        written (its slot must see it)."""
        safe = now - self.margin
        pending = self.pop.pending_revive_min()
        if pending is not None:
            safe = min(safe, pending - pending % self.precision)
        return safe

    def enqueue(self) -> bool:
        cq = self._cq()
        if cq is None:
            return False
        st = self.store
        start = max(st.enqueue_offset, cq.min_offset)
        hi = min(cq.max_offset, start + ENQUEUE_BATCH)
        if start >= hi:
            return False
        units = cq.read_units(start, hi - start)
        if not units:
            return False
        entries = []
        i = start
        for phy, size, code in CQ_UNIT.iter_unpack(units):
            if not (size == FILLER_SIZE and phy == 0) and code & R.KIND_MASK in R.FILED_KINDS:
                entries.append((code >> R.KIND_BITS, phy, size, i))
            i += 1
        st.add(entries, i)
        return i < cq.max_offset

    # -- checkpoints -------------------------------------------------------------------------------------------
    def _checkpoint_offset(self) -> int:
        """Where a restart re-files and replays from: every record below it is filed and its state change made
        (a record whose put still waits for its flush may be in the consume queue before its state change is)."""
        offset = self.store.checkpoint_offset()
        floor = self.pop.unsettled_floor()
        return offset if floor is None else min(offset, floor)

    def checkpoint(self) -> None:
        st = self.store
        offset = self._checkpoint_offset()
        scan_from = self.pop.c.store.get_max_phy_offset()  # every later revival is of a slot after the watermark
        self.pop.persist_state()
        st.sync_files(st.dirty_files())
        st.write_checkpoint(st.watermark, offset)
        write_scan_from(st.dir, scan_from, st.fsync)

    async def checkpoint_async(self, loop: asyncio.AbstractEventLoop) -> None:
        st = self.store
        offset = self._checkpoint_offset()  # before the state: what it holds covers every record below offset
        scan_from = self.pop.c.store.get_max_phy_offset()
        self.pop.persist_state()
        files = st.dirty_files()
        if files:
            await loop.run_in_executor(None, st.sync_files, files)
        st.write_checkpoint(st.watermark, offset)
        write_scan_from(st.dir, scan_from, st.fsync)

    # -- revival -----------------------------------------------------------------------------------------------
    async def _revive_due(self, safe_now: int) -> None:
        st = self.store
        while not self._stopping:
            due = st.next_due(safe_now)
            if due is None:
                st.advance(safe_now)
                return
            slot, entries = due
            if not await self._revive_slot(entries):
                return  # a put failed: the slot stays and is retried on the next turn
            self._slot_done.clear()
            st.finish(slot)
            if self._revived_before and st.watermark > self._revived_until:
                self._revived_before.clear()

    async def _revive_slot(self, entries: list[tuple[int, int, int, int]]) -> bool:
        store = self.pop.c.store
        cks: dict[R.CkKey, R.CheckPoint] = {}
        acked: dict[R.CkKey, set[int]] = {}
        for _fire, phy, size, _cq in entries:
            raw = store.select_one_message_by_offset(phy, size)
            if raw is None:
                log.warning("pop revive: the record at offset %d is gone (retention?); skipped", phy)
                continue
            try:
                msg = decode_record(raw)
                kind = R.BATCH_ACK if msg.properties.get(P.TAGS) == R.TAGS[R.BATCH_ACK] else \
                    R.ACK if msg.properties.get(P.TAGS) == R.TAGS[R.ACK] else R.CK
                rec = R.parse(kind, msg.body)
            except RemoteProtocolError as exc:
                log.warning("pop revive: unreadable record at offset %d skipped: %s", phy, exc)
                continue
            if isinstance(rec, R.CheckPoint):
                cks.setdefault(rec.key, rec)
            elif isinstance(rec, R.Ack):
                acked.setdefault(rec.key, set()).update(rec.offsets)
        for key, ck in cks.items():
            done = acked.get(key, ())
            left = [o for o in ck.offsets() if o not in done]
            for off in left:
                if (key, off) in self._slot_done:
                    continue
                if not await self._revive_one(ck, off):
                    return False
                self._slot_done.add((key, off))
            self.pop.on_revived(ck, len(left))
        return True

    async def _revive_one(self, ck: R.CheckPoint, offset: int) -> bool:
        c = self.pop.c
        store = c.store
        cq = store.cq_table.find(ck.topic, ck.queue_id, create=False)
        unit = cq.get_unit(offset) if cq is not None and cq.min_offset <= offset < cq.max_offset else None
        msg = load(store, unit[0], unit[1]) if unit is not None else None
        if msg is None:
            log.warning("pop revive: %s queue %d offset %d of group %s is gone; not revived", ck.topic,
                        ck.queue_id, offset, ck.group)
            return True
        key = revive_key(ck.revive_time, ck.topic, ck.queue_id, ck.start_offset, ck.pop_time, ck.group, offset)
        if key in self._revived_before:
            return True  # revived before the crash, after the last checkpoint
        origin = origin_topic(ck.topic, ck.group)
        reconsume = msg.reconsume_times + 1
        props = dict(msg.properties)
        props[REVIVE_KEY] = key
        if msg.reconsume_times == 0 or P.FIRST_POP_TIME not in props:
            props[P.FIRST_POP_TIME] = str(ck.pop_time)
        props.pop(P.POP_CK, None)
        sgc = c.subscription_groups.get(ck.group)
        max_times = sgc.retry_max_times if sgc is not None else 16
        if reconsume > max_times:
            topic = T.dlq_topic(ck.group)
            c.topic_config.create_system(topic, 1, c.config.dlq_topic_perm)
            props.setdefault(P.RETRY_TOPIC, origin)
            props[P.DLQ_ORIGIN_TOPIC] = origin
            props[P.DLQ_ORIGIN_MESSAGE_ID] = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
            props.setdefault(P.ORIGIN_MESSAGE_ID, msg.msg_id)
        elif T.is_retry_topic(ck.topic):
            topic = ck.topic
        else:
            topic = pop_retry_topic(ck.topic, ck.group, c.config.enable_retry_topic_v2)
        if not T.is_dlq_topic(topic):
            self.pop.ensure_retry_topic(topic, ck.group)
        res = await put_async(store, rebuild(msg, topic, 0, props, reconsume_times=reconsume))
        if res.status not in STORED:
            log.warning("pop revive: re-put of %s to %s failed (%s); retried", msg.msg_id, topic, res.status.name)
            return False
        if T.is_dlq_topic(topic):
            self.dead += 1
            log.info("pop: message %s of group %s was delivered %d times: moved to %s", msg.msg_id, ck.group,
                     reconsume, topic)
        else:
            self.revived += 1
        return True
