"""The requests a remoting connection sends, and the responses that complete them.

``Connection`` (``connection.py``) inherits this; the state lives there (``_opaque``, ``_pending``,
``_drain_waiters``). Each two-way request gets the connection's next opaque (signed int32, wrapping from 2**31-1
to -2**31, skipping one still pending) and a future in ``_pending`` with a timer: the response completes it, the
timer fails it with ``RemotingTimeoutError``, a lost connection fails it with ``ConnectionClosedError``. A request
to a peer that has not read what a server connection already sent it is refused (``ConnectionBusyError``); a
oneway one is dropped with a throttled warning.
"""

from __future__ import annotations

import asyncio
import logging

from mq.errors import ConnectionBusyError, ConnectionClosedError, RemotingTimeoutError
from mq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE
from mq.protocol.command import RemotingCommand

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
_INT32_MIN = -(2**31)


class Invoker:
    """Sending requests and matching their responses (a mixin of ``Connection``)."""

    def next_opaque(self) -> int:
        opaque = self._opaque + 1
        if opaque > _INT32_MAX:
            opaque = _INT32_MIN
        self._opaque = opaque
        return opaque

    def invoke_future(self, cmd: RemotingCommand, timeout: float) -> asyncio.Future[RemotingCommand]:
        """Send ``cmd`` as a two-way request; return the future of its response.

        The future fails with ``RemotingTimeoutError`` after ``timeout`` seconds and with
        ``ConnectionClosedError`` if the connection drops first.
        """
        if self.closed or self.transport is None:
            raise ConnectionClosedError(f"connection to {self.remote_addr} is closed", addr=self.remote_addr)
        if self.output_full:
            raise ConnectionBusyError(f"{self.remote_addr} has not read {self.pending_output} bytes already sent "
                                      f"to it; request code {cmd.code} not sent", addr=self.remote_addr)
        loop = self._loop
        assert loop is not None
        opaque = self.next_opaque()
        while opaque in self._pending:  # only after 2**32 requests with one still pending
            opaque = self.next_opaque()
        cmd.opaque = opaque
        cmd.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        self._write_cmd(cmd)  # raises LocalProtocolError before anything is registered
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = (fut, loop.call_later(timeout, self._expire, opaque, cmd.code, timeout))
        return fut

    async def invoke(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a two-way request and wait for its response."""
        if self._write_blocked and not self.closed:
            await self.drain()
        fut = self.invoke_future(cmd, timeout)
        try:
            return await fut
        finally:
            self.abandon(fut, cmd.opaque)

    def abandon(self, fut: asyncio.Future, opaque: int) -> None:
        """After awaiting ``fut`` (``invoke_future``) ended: when the caller was cancelled rather than answered,
        stop waiting for the response to ``opaque`` and cancel ``fut``."""
        if fut.cancelled() or not fut.done():
            self.forget(opaque)
            fut.cancel()

    def forget(self, opaque: int) -> None:
        """Stop waiting for the response to ``opaque`` (a late response is then dropped)."""
        entry = self._pending.pop(opaque, None)
        if entry is not None:
            entry[1].cancel()

    def invoke_oneway(self, cmd: RemotingCommand) -> bool:
        """Send ``cmd`` with the oneway flag; nothing is awaited. False when it was dropped because the peer has
        not read what a server connection already sent it (see ``output_full``)."""
        if self.closed or self.transport is None:
            raise ConnectionClosedError(f"connection to {self.remote_addr} is closed", addr=self.remote_addr)
        if self.output_full:
            self._throttle.warning(("oneway-dropped", self.name), "%s: oneway request code %s to %s dropped: "
                                   "%d bytes sent to it are still unread", self.name, cmd.code,
                                   self.remote_addr, self.pending_output)
            return False
        cmd.opaque = self.next_opaque()
        cmd.flag = (cmd.flag | FLAG_ONEWAY) & ~FLAG_RESPONSE
        self._write_cmd(cmd)
        return True

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its low-water mark (or the connection closed)."""
        if not self._write_blocked or self.closed:
            return
        assert self._loop is not None
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _expire(self, opaque: int, code: int, timeout: float) -> None:
        entry = self._pending.pop(opaque, None)
        if entry is not None and not entry[0].done():
            entry[0].set_exception(RemotingTimeoutError(
                f"no response from {self.remote_addr} within {timeout * 1000:.0f} ms "
                f"(request code {code}, opaque {opaque})", addr=self.remote_addr))

    def _complete(self, pending: dict, cmd: RemotingCommand) -> None:
        entry = pending.pop(cmd.opaque, None)
        if entry is None:
            log.debug("%s: response with unknown opaque %s from %s dropped (code %s)",
                      self.name, cmd.opaque, self.remote_addr, cmd.code)
        else:
            entry[1].cancel()
            if not entry[0].done():
                entry[0].set_result(cmd)
