"""The client side of broker queue locks for orderly consumption (RocketMQ ``RebalanceImpl.lock / lockAll /
unlock / unlockAll``), FEATURES.md §5.5.

LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) carry no header, only a JSON body, and go to the master of the
queue's broker::

    LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body      {"consumerGroup":..,"clientId":..,"mqSet":[{"brokerName":..,
                                                "queueId":..,"topic":..}, ...]}
    LOCK_BATCH_MQ response body               {"lockOKMQSet":[<the queues granted>]}

``QueueLocker`` marks the consumer's process queues as it learns the answers: a granted queue becomes
``locked`` with a fresh ``last_lock_time``; in ``lock_all`` a queue the broker refused becomes unlocked (another
client holds it), so its pulls and consumption stop until a later lock succeeds.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable, Mapping

from mq.common.message import MessageQueue
from mq.errors import MQError
from mq.protocol import bodies
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from mq.client.instance import MQClientInstance
    from mq.client.process_queue import ProcessQueue

log = logging.getLogger(__name__)

#: Java's timeout of lockBatchMQ / unlockBatchMQ (1000 ms).
LOCK_CALL_TIMEOUT = 1.0


def by_broker(mqs: Iterable[MessageQueue]) -> dict[str, set[MessageQueue]]:
    out: dict[str, set[MessageQueue]] = {}
    for mq in mqs:
        out.setdefault(mq.broker_name, set()).add(mq)
    return out


class QueueLocker:
    def __init__(self, instance: "MQClientInstance", group: str) -> None:
        self.instance = instance
        self.group = group

    async def lock_batch(self, broker_name: str, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ ``mqs`` (all of ``broker_name``) at the broker's master; return the queues granted."""
        wanted = set(mqs)
        addr = self.instance.master_addr(broker_name)
        if addr is None:
            await self.instance.update_route(next(iter(wanted)).topic)
            addr = self.instance.master_addr(broker_name)
        if addr is None:
            raise MQError(f"no master address for broker {broker_name!r}")
        body = bodies.LockBatchRequestBody(consumer_group=self.group, client_id=self.instance.client_id,
                                           mq_set=wanted).to_json()
        resp = await self.instance.call(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body),
                                        timeout=LOCK_CALL_TIMEOUT)
        return set(bodies.LockBatchResponseBody.from_json(resp.body or b"{}").lock_ok_mq_set)

    async def unlock_batch(self, broker_name: str, mqs: Iterable[MessageQueue]) -> None:
        addr = self.instance.master_addr(broker_name)
        if addr is None:
            raise MQError(f"no master address for broker {broker_name!r}")
        body = bodies.UnlockBatchRequestBody(consumer_group=self.group, client_id=self.instance.client_id,
                                             mq_set=set(mqs)).to_json()
        await self.instance.call(addr, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body),
                                 timeout=LOCK_CALL_TIMEOUT)

    async def lock(self, mq: MessageQueue, pqs: Mapping[MessageQueue, "ProcessQueue"]) -> bool:
        """Lock one queue (``RebalanceImpl.lock``); every granted queue that has a process queue is marked."""
        try:
            granted = await self.lock_batch(mq.broker_name, [mq])
        except MQError as exc:
            log.warning("%s: locking %s failed: %s", self.group, mq, exc)
            return False
        for g in granted:
            pq = pqs.get(g)
            if pq is not None:
                pq.mark_locked()
        ok = mq in granted
        log.info("%s: lock of %s %s", self.group, mq, "OK" if ok else "refused")
        return ok

    async def lock_all(self, pqs: Mapping[MessageQueue, "ProcessQueue"]) -> None:
        """Renew (or take) the lock of every queue in ``pqs``, broker by broker (``RebalanceImpl.lockAll``)."""
        for broker_name, mqs in sorted(by_broker(list(pqs)).items()):
            try:
                granted = await self.lock_batch(broker_name, mqs)
            except MQError as exc:
                log.warning("%s: lockAll at %s failed: %s", self.group, broker_name, exc)
                continue
            for mq in mqs:
                pq = pqs.get(mq)
                if pq is None:
                    continue
                if mq in granted:
                    if not pq.locked:
                        log.info("%s: %s locked", self.group, mq)
                    pq.mark_locked()
                elif pq.locked:
                    pq.locked, pq.lock_lost = False, True
                    log.warning("%s: lock of %s lost (held by another client)", self.group, mq)

    async def unlock(self, mq: MessageQueue) -> None:
        try:
            await self.unlock_batch(mq.broker_name, [mq])
            log.info("%s: unlocked %s", self.group, mq)
        except MQError as exc:
            log.warning("%s: unlocking %s failed: %s", self.group, mq, exc)

    async def unlock_all(self, pqs: Mapping[MessageQueue, "ProcessQueue"]) -> None:
        for broker_name, mqs in sorted(by_broker(list(pqs)).items()):
            try:
                await self.unlock_batch(broker_name, mqs)
            except MQError as exc:
                log.warning("%s: unlockAll at %s failed: %s", self.group, broker_name, exc)
                continue
            for mq in mqs:
                pq = pqs.get(mq)
                if pq is not None:
                    pq.locked = False
