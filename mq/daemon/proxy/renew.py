"""Auto-renew of the messages push consumers hold (Apache's ``ReceiptHandleProcessor``).

A 5.x push consumer receives with ``auto_renew`` and no invisible time: the server gives the message
``grpcDefaultInvisibleTimeMs`` and, while the client holds it, extends it ``grpcRenewAheadMs`` before that
time ends (a ChangeInvisibleDuration of its own, which gives a new handle). The client keeps the handle it
received; when it acks or nacks (ChangeInvisibleDuration) the message, ``take`` hands the newest handle to
the call and stops the renewal. Renewal stops too after ``grpcRenewMaxHoldMs``, when the client's session
goes away, or when a renewal fails (the message then comes back to the group after its invisible time).

One task checks the table every 500 ms; entries are keyed by (client id, group, topic, message id). The table
is bounded: past ``MAX_ENTRIES`` new messages are not renewed (they come back after their invisible time, as
without auto-renew).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mq.daemon.runtime import cancel_tasks

if TYPE_CHECKING:
    from mq.daemon.proxy.consumer import ConsumerService

log = logging.getLogger(__name__)

MAX_ENTRIES = 200_000
SCAN_INTERVAL_S = 0.5


@dataclass(slots=True)
class Held:
    handle: str
    expires_ms: int
    first_ms: int
    invisible_ms: int
    #: set while a renewal is on its way: an ack waits for it and uses the handle it gives
    pending: asyncio.Future | None = None


class RenewTable:
    def __init__(self, consumer: "ConsumerService") -> None:
        self.consumer = consumer
        self._held: dict[tuple[str, str, str, str], Held] = {}
        self._task: asyncio.Task | None = None
        self.renewed = 0
        self.failed = 0

    def __len__(self) -> int:
        return len(self._held)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="grpc-renew")

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    async def aclose(self) -> None:
        await cancel_tasks(self._task)

    def add(self, client_id: str, group: str, topic: str, message_id: str, handle: str, invisible_ms: int) -> None:
        if len(self._held) >= MAX_ENTRIES:
            return
        now = int(time.time() * 1000)
        self._held[(client_id, group, topic, message_id)] = Held(handle, now + invisible_ms, now, invisible_ms)

    async def take(self, client_id: str, group: str, topic: str, message_id: str) -> str | None:
        """The newest handle of a held message, which stops being renewed; None if not held."""
        held = self._held.pop((client_id, group, topic, message_id), None)
        if held is None:
            return None
        if held.pending is not None:
            await asyncio.shield(held.pending)
        return held.handle

    def forget_client(self, client_id: str) -> None:
        for key in [k for k in self._held if k[0] == client_id]:
            del self._held[key]

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(SCAN_INTERVAL_S)
            try:
                await self.scan()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("receipt handle renewal failed")

    async def scan(self, now_ms: int | None = None) -> int:
        cfg = self.consumer.c.config
        now = int(time.time() * 1000) if now_ms is None else now_ms
        due = [(k, h) for k, h in self._held.items()
               if h.pending is None and h.expires_ms - now <= cfg.grpc_renew_ahead_ms]
        done = 0
        loop = asyncio.get_running_loop()
        for key, held in due:
            if now - held.first_ms >= cfg.grpc_renew_max_hold_ms:
                self._held.pop(key, None)
                continue
            held.pending = loop.create_future()
            new = None
            try:
                new = await self.consumer.renew_one(key[1], key[2], held.handle, held.invisible_ms)
            except Exception as exc:
                log.warning("renewal of a message of group %s failed: %s", key[1], exc)
            finally:
                if new is not None:
                    held.handle = new  # also for an ack waiting on ``pending``
                    held.expires_ms = int(time.time() * 1000) + held.invisible_ms
                held.pending.set_result(None)
                held.pending = None
            if new is None:
                self.failed += 1
                self._held.pop(key, None)
                continue
            self.renewed += 1
            done += 1
        return done
