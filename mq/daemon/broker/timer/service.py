"""TimerMessageService: arbitrary-delay delivery (second precision, up to ``timer_max_delay_sec`` ahead).

A message with one of these properties and a deliver time in the future is *parked* by the send path:

    __STARTDELIVERTIME  epoch ms (ali-ons ``setStartDeliverTime``)
    TIMER_DELIVER_MS    epoch ms (RocketMQ 5)
    TIMER_DELAY_SEC     seconds from now (RocketMQ 5)

``intercept`` rewrites it in place: REAL_TOPIC / REAL_QID / TIMER_OUT_MS (the deliver time) are added, DELAY is
dropped, the topic becomes ``rmq_sys_wheel_timer`` queue 0 and the consume-queue tags code is the deliver time.
The commit log stays the one copy of the message; the consume queue of the timer topic is the durable,
ordered list of parked messages.

One task then loops every ``timer_precision_ms``:

1. *enqueue*: new units of the timer topic's consume queue become ``TimerStore`` entries; the fire time is the
   deliver time, or for one beyond the roll window R (``timer_roll_window_sec``) ``deliver - n*R`` with n the
   least that brings it within (now, now + R]: rolls are spread like the deliver times, never bunched;
2. *load*: buckets entering the near window are read into memory;
3. *deliver*: each due slot's messages are read back; a message whose deliver time is still ahead (it was parked
   beyond the roll window) is *rolled*: re-put to the timer topic, which renews it in the commit log so the
   72-hour clean-up never removes a parked message; the others are put to their real topic and queue;
4. every ``timer_flush_interval_ms``: fsync the touched bucket files (worker thread) and write the checkpoint.

Restart resumes from the checkpoint (see ``buckets.py``); a slot being delivered when the broker stopped is
delivered again (at least once, like RocketMQ). Masters only.

Clients cannot send to the timer topic (``mq.common.topic.NOT_ALLOWED_SEND_TOPICS``): REAL_TOPIC and REAL_QID
are what ``intercept`` wrote. A message that still cannot be delivered (no REAL_TOPIC, an invalid or internal
one, a queue id that is none, a message the store refuses: ``requeue.real_target``, ``requeue.REFUSED``) is
*set aside*: counted in ``set_aside``, logged (``LogThrottle``, ``deliveryErrorLogIntervalMs``) and passed over,
so it never holds back the messages behind it, before or after a restart. A put that fails for want of room
(a full disk) is retried, since every later message would fail the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mq.common import properties as P
from mq.common import topic as T
from mq.common.log_throttle import LogThrottle
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import decode_properties, encode_properties
from mq.daemon.broker.requeue import REFUSED, STORED, load, put_async, real_target, rebuild
from mq.daemon.broker.schedule import is_master
from mq.daemon.broker.timer.buckets import TimerStore
from mq.daemon.broker.timer.recall import TIMER_DEL_UNIQKEY, RecallTable, build_marker
from mq.daemon.broker.topic_config import TopicConfigNotSaved
from mq.store.consume_queue import CQ_UNIT, FILLER_SIZE

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

TIMER_TOPIC = T.TIMER_TOPIC
START_DELIVER_TIME = P.START_DELIVER_TIME  # "__STARTDELIVERTIME"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_KEYS = (START_DELIVER_TIME, TIMER_DELIVER_MS, TIMER_DELAY_SEC)
#: Consume-queue units enqueued per loop turn (keeps one turn short).
ENQUEUE_BATCH = 20_000


def deliver_time(props: dict[str, str], now_ms: int) -> int | None | str:
    """The requested deliver time (epoch ms), None when none is asked, or an error text."""
    for key in TIMER_KEYS:
        v = props.get(key)
        if v is None or v == "":
            continue
        try:
            n = int(v)
        except ValueError:
            return f"the {key} property is not an integer: {v[:40]!r}"
        return now_ms + n * 1000 if key == TIMER_DELAY_SEC else n
    return None


class TimerMessageService:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        cfg = controller.config
        self.precision = max(1, cfg.timer_precision_ms)
        self.max_delay_ms = cfg.timer_max_delay_sec * 1000
        self.roll_ms = max(self.precision, cfg.timer_roll_window_sec * 1000)
        self.store = TimerStore(Path(controller.store_config.store_path_root_dir) / "timer",
                                precision_ms=self.precision, bucket_span_ms=cfg.timer_bucket_span_sec * 1000)
        self.delivered = 0
        self.rolled = 0
        #: messages that could not be delivered and were passed over (see the module docstring)
        self.set_aside = 0
        self._throttle = LogThrottle(log, cfg.delivery_error_log_interval_ms / 1000.0)
        self.recalled = 0
        self.recalls = RecallTable()
        self._task: asyncio.Task | None = None
        self._running = False

    # -- the send-path hook ----------------------------------------------------------------------------------
    @staticmethod
    def wants(props: dict[str, str]) -> bool:
        return START_DELIVER_TIME in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props

    def intercept(self, msg: MessageExtBrokerInner) -> str | None:
        """Park ``msg`` in the timer topic when it asks for a future deliver time (rewritten in place).
        Returns an error text for a bad or too distant deliver time, else None."""
        props = msg.properties
        if not self._running or not self.wants(props):
            return None
        now = int(time.time() * 1000)
        at = deliver_time(props, now)
        if at is None:
            return None
        if isinstance(at, str):
            return at
        if at - now > self.max_delay_ms:
            return (f"the deliver time {at} is more than {self.max_delay_ms // 1000} s ahead "
                    f"(timerMaxDelaySec)")
        if at <= now + self.precision:
            return None  # due now: deliver as a normal message
        extra = {P.REAL_TOPIC: msg.topic, P.REAL_QUEUE_ID: str(msg.queue_id), TIMER_OUT_MS: str(at)}
        s = msg.properties_string
        if s is None or P.DELAY_TIME_LEVEL in props or P.REAL_TOPIC in props or TIMER_OUT_MS in props:
            d = decode_properties(s) if s is not None else dict(props)
            d.pop(P.DELAY_TIME_LEVEL, None)
            d.update(extra)
            s = encode_properties(d)
        else:
            if s and not s.endswith(P.PROPERTY_SEPARATOR):
                s += P.PROPERTY_SEPARATOR
            s += P.PROPERTY_SEPARATOR.join(k + P.NAME_VALUE_SEPARATOR + v for k, v in extra.items())
        props = dict(props)
        props.pop(P.DELAY_TIME_LEVEL, None)
        props.update(extra)
        msg.properties = props
        msg.properties_string = s
        msg.topic = TIMER_TOPIC
        msg.queue_id = 0
        msg.tags_code = at
        return None

    async def recall(self, topic: str, uniq: str, deliver_ms: int) -> str | None:
        """Recall the message ``uniq`` of ``topic`` parked until ``deliver_ms`` (``timer/recall.py``); an
        error text when it cannot be."""
        if not self._running:
            return "the timer is not running on this broker"
        if deliver_ms - int(time.time() * 1000) <= 2 * self.precision:
            return "the message is being delivered or was delivered already: too late to recall it"
        marker = build_marker(topic, uniq, deliver_ms, self.precision, TIMER_TOPIC,
                              (self.c.config.advertised_host, self.c.port), TIMER_OUT_MS)
        res = await put_async(self.c.store, marker)
        return None if res.status in STORED else f"the recall could not be stored: {res.status.name}"

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        if not is_master(self.c) or not self.c.config.timer_enable:
            return
        try:
            self.c.topic_config.create_system(TIMER_TOPIC, 1, 6)
        except TopicConfigNotSaved as exc:  # parked messages need only its consume queue; made again next start
            log.warning("timer topic config not saved: %s", exc)
        self.store.open(int(time.time() * 1000))
        cq = self.c.store.cq_table.find(TIMER_TOPIC, 0, create=False)
        if cq is not None and self.store.enqueue_offset < cq.min_offset:
            self.store.enqueue_offset = cq.min_offset
        self._running = True
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="timer")
        log.info("timer service started: watermark %d, enqueue offset %d, %d buckets pending",
                 self.store.watermark, self.store.enqueue_offset, len(self.store.buckets))

    async def stop(self) -> None:
        self._running = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            try:
                self.store.checkpoint()
            except OSError:
                log.exception("timer checkpoint at shutdown failed")

    async def _loop(self) -> None:
        flush_every = max(0.05, self.c.config.timer_flush_interval_ms / 1000.0)
        next_flush = time.monotonic() + flush_every
        loop = asyncio.get_running_loop()
        while True:
            try:
                more = self._enqueue()
                now = int(time.time() * 1000)
                self.store.load_ahead(now)
                await self._deliver_due(now)
                if time.monotonic() >= next_flush:
                    next_flush = time.monotonic() + flush_every
                    files = self.store.dirty_files()
                    if files:
                        await loop.run_in_executor(None, self.store.sync_files, files)
                    self.store.write_checkpoint(self.store.watermark, self.store.checkpoint_offset())
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # a full disk, say: one line now and then, not a line a second
                self._throttle.error("loop-os", "timer loop: %s; retrying in 1 s", exc)
                await asyncio.sleep(1.0)
                continue
            except Exception:
                self._throttle.error("loop", "timer loop failed; retrying in 1 s", exc_info=True)
                await asyncio.sleep(1.0)
                continue
            if more:
                await asyncio.sleep(0)
                continue
            now = time.time() * 1000
            await asyncio.sleep(max(0.001, (self.precision - now % self.precision) / 1000.0))

    def _enqueue(self) -> bool:
        """Move new timer-topic units into the store; True when more are waiting."""
        cq = self.c.store.cq_table.find(TIMER_TOPIC, 0, create=False)
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
        now = int(time.time() * 1000)
        roll = self.roll_ms
        entries = []
        i = start
        for phy, size, at in CQ_UNIT.iter_unpack(units):
            if not (size == FILLER_SIZE and phy == 0):
                if at - now > roll:  # fire at the last point within the roll window congruent to `at` mod roll
                    at -= ((at - now - 1) // roll) * roll
                entries.append((at, phy, size, i))
            i += 1
        st.add(entries, i)
        return i < cq.max_offset

    async def _deliver_due(self, now: int) -> None:
        st = self.store
        while True:
            due = st.next_due(now)
            if due is None:
                break
            slot, entries = due
            for _fire, phy, size, _cq in entries:
                if not await self._deliver_one(phy, size):
                    return  # retried on the next turn (the slot stays)
            st.finish(slot)
        st.advance(now)

    async def _deliver_one(self, phy: int, size: int) -> bool:
        """Deliver (or roll) the parked message at ``phy``; True when its entry is done: delivered, rolled, gone
        or set aside. False when the put failed for a cause that may pass (it is retried next turn)."""
        store = self.c.store
        msg = load(store, phy, size)
        if msg is None:
            self._throttle.warning("gone", "timer: no message at offset %d; skipped", phy)
            return True
        try:
            at = int(msg.properties.get(TIMER_OUT_MS) or 0)
        except ValueError:
            at = 0
        now = int(time.time() * 1000)
        if TIMER_DEL_UNIQKEY in msg.properties:  # a recall marker (timer/recall.py): remember, deliver nothing
            self.recalls.on_marker(msg.properties)
            return True
        if at > now + self.precision:  # parked beyond the roll window: renew it in the commit log
            props = dict(msg.properties)
            props[TIMER_ROLL_TIMES] = str(int(props.get(TIMER_ROLL_TIMES) or 0) + 1)
            res = await put_async(store, rebuild(msg, TIMER_TOPIC, 0, props, tags_code=at))
            if res.status in STORED:
                self.rolled += 1
                return True
            if res.status in REFUSED:
                return self._set_aside(msg, phy, f"the store refuses its roll: {res.remark or res.status.name}")
            self._throttle.warning("roll-failed", "timer: roll of %s failed (%s); retrying", msg.msg_id,
                                   res.remark or res.status.name)
            return False
        if self.recalls.recalled(msg.properties, now):
            self.recalled += 1
            log.info("timer: message %s of %s recalled; not delivered", msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                     msg.properties.get(P.REAL_TOPIC))
            return True
        real = real_target(msg)
        if real.__class__ is str:
            return self._set_aside(msg, phy, real)  # type: ignore[arg-type]
        topic, queue_id, props = real  # type: ignore[misc]
        props[P.WAIT_STORE_MSG_OK] = "false"
        res = await put_async(store, rebuild(msg, topic, queue_id, props))
        if res.status in STORED:
            self.delivered += 1
            return True
        if res.status in REFUSED:
            return self._set_aside(msg, phy, f"the store refuses it: {res.remark or res.status.name}")
        self._throttle.warning("deliver-failed", "timer: delivery of %s to %s failed (%s); retrying", msg.msg_id,
                               topic, res.remark or res.status.name)
        return False

    def _set_aside(self, msg, phy: int, why: str) -> bool:
        """Pass over a message that cannot be delivered (it stays in the commit log at ``phy``)."""
        self.set_aside += 1
        self._throttle.warning("set-aside", "timer: message %s (commit log offset %d) cannot be delivered: %s; set "
                               "aside (%d so far)", msg.msg_id, phy, why, self.set_aside)
        return True
