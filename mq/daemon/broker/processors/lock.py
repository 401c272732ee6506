"""LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42) and the lock table (RocketMQ ``RebalanceLockManager``), §5.5.

The table is group -> MessageQueue -> (clientId, last update ms). A lock is granted if the queue is free,
already held by the same client (renewed) or expired (``rebalanceLockMaxLiveTime``, 60 s).

A body over the server's offload threshold (a client may send a 14 MB set) is decoded and its answer encoded in
the server's worker thread, and its queues are locked in slices of ``LOCK_SLICE`` with the event loop free in
between, so other clients keep being served; a small one is handled on the spot.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from mq.protocol.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import DEFER
from mq.remoting.gc_pause import gc_pause

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

#: Queues locked or unlocked per step of a large batch before the event loop serves others.
LOCK_SLICE = 2048


def _now_ms() -> int:
    return int(time.time() * 1000)


class RebalanceLockManager:
    def __init__(self, max_live_ms: int = 60_000, clock: Callable[[], int] = _now_ms) -> None:
        self.max_live_ms = max_live_ms
        self.clock = clock
        self._table: dict[str, dict[MessageQueue, list]] = {}

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        now = self.clock()
        per = self._table.setdefault(group, {})
        granted = set()
        for mq in mqs:
            entry = per.get(mq)
            if entry is None or entry[0] == client_id or now - entry[1] > self.max_live_ms:
                if entry is not None and entry[0] != client_id:
                    log.warning("lock of %s in group %s moved from expired %s to %s", mq, group, entry[0],
                                client_id)
                per[mq] = [client_id, now]
                granted.add(mq)
        return granted

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        per = self._table.get(group)
        if not per:
            return
        for mq in mqs:
            entry = per.get(mq)
            if entry is not None and entry[0] == client_id:
                del per[mq]
        if not per:
            del self._table[group]

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self.clock() - entry[1] > self.max_live_ms:
            return None
        return entry[0]


class LockProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.locks = RebalanceLockManager(controller.config.rebalance_lock_max_live_time)

    def register(self, server: Any) -> None:
        server.register_offloaded(RequestCode.LOCK_BATCH_MQ, self.lock_heavy, self.lock)
        server.register_offloaded(RequestCode.UNLOCK_BATCH_MQ, self.unlock_heavy, self.unlock)

    def lock(self, conn: Any, cmd: RemotingCommand) -> Any:
        if self.c.server.is_heavy(cmd):
            return DEFER
        req = LockBatchRequestBody.from_json(cmd.body)
        granted = self.locks.try_lock_batch(req.consumer_group, req.mq_set, req.client_id)
        return cmd.response(ResponseCode.SUCCESS, body=LockBatchResponseBody(lock_ok_mq_set=granted).to_json())

    async def lock_heavy(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        server = self.c.server
        with gc_pause:
            req = await server.offload(LockBatchRequestBody.from_json, cmd.body)
            granted: set[MessageQueue] = set()
            for part in _slices(req.mq_set):
                granted |= self.locks.try_lock_batch(req.consumer_group, part, req.client_id)
                await asyncio.sleep(0)
            body = await server.offload(_lock_answer, granted)
            del req, granted
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def unlock(self, conn: Any, cmd: RemotingCommand) -> Any:
        if self.c.server.is_heavy(cmd):
            return DEFER
        req = UnlockBatchRequestBody.from_json(cmd.body)
        self.locks.unlock_batch(req.consumer_group, req.mq_set, req.client_id)
        return cmd.response(ResponseCode.SUCCESS)

    async def unlock_heavy(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        with gc_pause:
            req = await self.c.server.offload(UnlockBatchRequestBody.from_json, cmd.body)
            for part in _slices(req.mq_set):
                self.locks.unlock_batch(req.consumer_group, part, req.client_id)
                await asyncio.sleep(0)
            del req
        return cmd.response(ResponseCode.SUCCESS)


def _slices(mqs: Iterable[MessageQueue]) -> Iterable[list[MessageQueue]]:
    it = iter(mqs)
    while part := list(itertools.islice(it, LOCK_SLICE)):
        yield part


def _lock_answer(granted: set[MessageQueue]) -> bytes:
    return LockBatchResponseBody(lock_ok_mq_set=granted).to_json()
