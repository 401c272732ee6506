"""ScheduleMessageService: delivers delay-level messages when due (FEATURES.md §2, STORE.md §14).

The store parks a message with ``DELAY=<level>`` in SCHEDULE_TOPIC_XXXX queue ``level - 1``; its consume-queue
unit's tags code is the deliver time (store time + the level's delay). One asyncio task per level walks that
queue in order from ``offsetTable[level]``:

- no queue / nothing at the offset yet -> wait ``schedule_poll_interval_ms`` (100 ms); an offset outside the
  queue's [min, max] is reset to the nearer end;
- a unit whose deliver time is in the future -> sleep until then (at most the poll interval) and look again;
  a deliver time beyond now + the level's delay (clock skew) is treated as now;
- a due unit: the record is read, DELAY removed, topic/queue set back to REAL_TOPIC/REAL_QID (the REAL_*
  properties stay, as in RocketMQ), WAIT=false, tags code recomputed from TAGS, and put. A record that is gone
  is skipped. A message that cannot be delivered (no REAL_TOPIC, an invalid or internal one such as
  RMQ_SYS_TRANS_HALF_TOPIC, a REAL_QID that is no queue id: ``requeue.real_target``; or one the store refuses:
  ``requeue.REFUSED``) is set aside: counted in ``set_aside``, logged (``LogThrottle``,
  ``deliveryErrorLogIntervalMs``) and passed over, so it never blocks its level. A put that fails for want of
  room is retried at the same unit after the poll interval. Success -> ``offsetTable[level] = unit + 1``.

``offsetTable`` is persisted to ``<root>/config/delayOffset.json`` (``{"offsetTable": {"1": 12, ...}}``) every
``flush_delay_offset_interval`` (10 s) and at shutdown. Only a master runs the service.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mq.common import properties as P
from mq.common import topic as T
from mq.common.log_throttle import LogThrottle
from mq.daemon.broker.requeue import REFUSED, STORED, load, put_async, real_target, rebuild
from mq.daemon.runtime import cancel_tasks
from mq.store.config_files import DelayOffsetFile
from mq.store.consume_queue import CQ_UNIT, FILLER_SIZE

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

#: Units read from a schedule queue per look.
SLICE_UNITS = 64
#: Pause after an unexpected error in a level's loop (RocketMQ: 10 s).
ERROR_PAUSE = 10.0


def is_master(controller: "BrokerController") -> bool:
    return controller.broker_id == 0 and controller.store_config.broker_role.upper() != "SLAVE"


class ScheduleMessageService:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.levels_ms: list[int] = controller.store_config.delay_level_millis()
        self.file = DelayOffsetFile(Path(controller.store_config.store_path_root_dir))
        self.offsets: dict[int, int] = {}
        self.delivered = 0
        #: messages that could not be delivered and were passed over
        self.set_aside = 0
        self._throttle = LogThrottle(log, controller.config.delivery_error_log_interval_ms / 1000.0)
        self._poll = max(0.005, controller.config.schedule_poll_interval_ms / 1000.0)
        self._tasks: list[asyncio.Task] = []
        self._dirty = False

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    def load(self) -> None:
        self.offsets = {lv: off for lv, off in self.file.load().items() if 1 <= lv <= self.max_level}

    def start(self) -> None:
        if not is_master(self.c):
            log.info("schedule service not started: this broker is not a master")
            return
        self.load()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._level_loop(lv), name=f"schedule-level-{lv}")
                       for lv in range(1, self.max_level + 1)]
        self._tasks.append(loop.create_task(self._persist_loop(), name="schedule-persist"))
        log.info("schedule service started: %d levels, offsets %s", self.max_level, self.offsets)

    async def stop(self) -> None:
        await cancel_tasks(*self._tasks)
        if self._tasks:
            self.persist()
        self._tasks = []

    def persist(self) -> None:
        self.file.save(self.offsets)
        self._dirty = False

    async def _persist_loop(self) -> None:
        interval = max(0.05, self.c.config.flush_delay_offset_interval / 1000.0)
        while True:
            await asyncio.sleep(interval)
            if self._dirty:
                try:
                    self.persist()
                except OSError as exc:
                    self._throttle.error("persist", "cannot persist %s: %s", self.file.path, exc)

    # -- one level -----------------------------------------------------------------------------------------
    async def _level_loop(self, level: int) -> None:
        await asyncio.sleep(min(1.0, self._poll * 10))
        while True:
            try:
                pause = await self._deliver_some(level)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._throttle.error(("level", level), "schedule level %d failed; retrying in %.0f s", level,
                                     ERROR_PAUSE, exc_info=True)
                pause = ERROR_PAUSE
            await asyncio.sleep(pause)

    async def _deliver_some(self, level: int) -> float:
        """Deliver what is due in ``level``'s queue; returns how long to sleep before the next look."""
        store = self.c.store
        cq = store.cq_table.find(T.SCHEDULE_TOPIC, level - 1, create=False)
        if cq is None:
            return self._poll
        offset = self.offsets.get(level, 0)
        lo, hi = cq.min_offset, cq.max_offset
        if offset < lo or offset > hi:
            offset = lo if offset < lo else hi
            self._set(level, offset)
        if offset == hi:
            return self._poll
        units = cq.read_units(offset, SLICE_UNITS)
        if not units:
            return self._poll
        delay = self.levels_ms[level - 1]
        for phy, size, deliver_ts in CQ_UNIT.iter_unpack(units):
            if size == FILLER_SIZE and phy == 0:
                offset += 1
                self._set(level, offset)
                continue
            now = int(time.time() * 1000)
            if deliver_ts > now + delay:
                deliver_ts = now
            if deliver_ts > now:
                return min(self._poll, (deliver_ts - now) / 1000.0)
            if not await self._deliver_one(phy, size):
                return self._poll
            offset += 1
            self._set(level, offset)
        return 0.0

    async def _deliver_one(self, phy: int, size: int) -> bool:
        """Put the real message back; True when the unit is done (delivered, set aside or gone)."""
        store = self.c.store
        msg = load(store, phy, size)
        if msg is None:
            self._throttle.warning("gone", "schedule: no message at offset %d; skipped", phy)
            return True
        real = real_target(msg, drop=(P.DELAY_TIME_LEVEL,))
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
        self._throttle.warning("put-failed", "schedule: put of %s to %s failed (%s); retrying", msg.msg_id, topic,
                               res.remark or res.status.name)
        return False

    def _set_aside(self, msg, phy: int, why: str) -> bool:
        self.set_aside += 1
        self._throttle.warning("set-aside", "schedule: message %s (commit log offset %d) cannot be delivered: %s; "
                               "set aside (%d so far)", msg.msg_id, phy, why, self.set_aside)
        return True

    def _set(self, level: int, offset: int) -> None:
        self.offsets[level] = offset
        self._dirty = True
