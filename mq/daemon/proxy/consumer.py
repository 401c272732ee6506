"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: pop over gRPC.

Each call goes to the broker's pop service (``mq.daemon.broker.pop``) in-process with its typed contract
(``PopRequest`` -> ``PopResult``, ack and change-invisible results); this module maps gRPC onto it as Apache's
``ReceiveMessageActivity`` and friends do:

- ReceiveMessage pops every queue of this broker (queue id -1) for the group, with the client's filter, batch
  size (at most ``grpcMaxReceiveBatch``), invisible time (``grpcMinInvisibleTimeMs`` .. ``grpcMaxInvisibleTimeMs``;
  auto-renewed messages get ``grpcDefaultInvisibleTimeMs``), long polling clamped to ``grpcMinLongPollingMs`` ..
  ``grpcMaxLongPollingMs`` and to the call's deadline, FIFO from the client's Settings and the attempt id.
  The stream is one ``status``, the messages, then one ``delivery_timestamp``. A message whose delivery
  attempt would exceed the group's max attempts goes to ``%DLQ%{group}`` and is acked instead of delivered.
- The receipt handle is the pop extra info plus the commit-log offset (Apache's ``ReceiptHandle``).
- Push consumers ask for ``auto_renew``: their messages are renewed ``grpcRenewAheadMs`` before the invisible
  time ends, for up to ``grpcRenewMaxHoldMs``, until the client acks or nacks them (``renew.py``). The client
  keeps the first handle; ack and change-invisible of a renewed message use the newest one.
- ForwardMessageToDeadLetterQueue (FIFO push consumers out of local retries): the message is sent back with
  delay level -1 (``%DLQ%{group}``, as CONSUMER_SEND_MSG_BACK does) and acked.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from mq.common import topic as T
from mq.daemon.proxy.context import call_context
from mq.daemon.proxy.convert import to_wire, wrap_namespace
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.renew import RenewTable
from mq.daemon.proxy.status import OK_STATUS, ProxyError, status
from mq.errors import InvalidTopicError

if TYPE_CHECKING:
    from mq.daemon.proxy.server import GrpcEndpoint

log = logging.getLogger(__name__)

Code = pb.Code
#: ILLEGAL_POLLING_TIME exists for clients from 5.0.3 on; older ones get BAD_REQUEST (Apache's rule).
_POLLING_CODE_SINCE = (5, 0, 3)


def _ms(duration: Any) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def _version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(".")[:3])
    except ValueError:
        return (0,)


class ConsumerService:
    def __init__(self, endpoint: "GrpcEndpoint") -> None:
        self.e = endpoint
        self.c = endpoint.c
        self.renew = RenewTable(self)

    def start(self) -> None:
        self.renew.start()

    def stop(self) -> None:
        self.renew.stop()

    def forget_client(self, client_id: str) -> None:
        self.renew.forget_client(client_id)

    @property
    def pop(self) -> Any:
        svc = getattr(self.c, "pop_service", None)
        if svc is None:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, "this broker has no pop service")
        return svc

    def group_settings(self, group: str) -> Any:
        """The group's FIFO flag and retry policy (the pop service's ``GroupSettings``)."""
        return self.pop.group_settings(group)

    def _topic(self, res: Any) -> str:
        try:
            T.validate_topic(res.name)
        except InvalidTopicError as exc:
            raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from None
        return wrap_namespace(res.resource_namespace, res.name)

    # -- ReceiveMessage --------------------------------------------------------------------------------------
    async def receive_message(self, req: Any, context: Any) -> None:
        started = time.monotonic()
        try:
            ctx = call_context(context)
            responses = await self._receive(req, ctx, context, started)
        except ProxyError as exc:
            responses = [pb.ReceiveMessageResponse(status=exc.status())]
        except Exception as exc:
            log.exception("gRPC ReceiveMessage failed")
            responses = [pb.ReceiveMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR,
                                                                 f"{type(exc).__name__}: {exc}"))]
        now = int(time.time() * 1000)
        responses.append(pb.ReceiveMessageResponse(delivery_timestamp=pb.Timestamp(
            seconds=now // 1000, nanos=(now % 1000) * 1_000_000)))
        for r in responses:
            await context.write(r)

    async def _receive(self, req: Any, ctx: Any, context: Any, started: float) -> list[Any]:
        from mq.daemon.broker.pop.contract import PopRequest, PopStatus

        cfg = self.c.config
        session = self.e.sessions.session(ctx)
        group = self.e.group_name(req.group)
        topic = self._topic(req.message_queue.topic)
        if self.e.acl is not None:
            self.e.authorize(ctx, {topic: "SUB", T.retry_topic(group): "SUB"})
        remaining_ms = context.time_remaining()
        remaining_ms = 3_600_000 if remaining_ms is None else int(remaining_ms * 1000)
        settings = session.settings
        if req.HasField("long_polling_timeout"):
            polling = _ms(req.long_polling_timeout)
        else:
            timeout = _ms(settings.request_timeout) if settings is not None and settings.HasField(
                "request_timeout") else 3000
            polling = remaining_ms - timeout // 2
        polling = min(max(polling, cfg.grpc_min_long_polling_ms), cfg.grpc_max_long_polling_ms)
        if polling > remaining_ms:
            if remaining_ms >= cfg.grpc_min_long_polling_ms:
                polling = remaining_ms
            else:
                code = Code.ILLEGAL_POLLING_TIME if _version_tuple(ctx.version) >= _POLLING_CODE_SINCE \
                    else Code.BAD_REQUEST
                raise ProxyError(code, "The deadline time remaining is not enough for polling, please check "
                                 "network condition")
        polling = max(0, polling - 200)  # answer before the client's deadline
        if req.auto_renew:
            invisible = cfg.grpc_default_invisible_time_ms
        else:
            invisible = _ms(req.invisible_duration)
            self.check_invisible(invisible, cfg.grpc_min_invisible_time_ms)
        expr = req.filter_expression
        kind = "SQL92" if expr.type == pb.FilterType.SQL else "TAG"
        gs = self.group_settings(group)
        fifo = bool(settings.subscription.fifo) if settings is not None and settings.HasField("subscription") \
            else gs.fifo
        batch = req.batch_size if req.batch_size > 0 else cfg.grpc_max_receive_batch
        pop_req = PopRequest(group=group, topic=topic, queue_id=-1, max_messages=min(batch, cfg.grpc_max_receive_batch),
                             invisible_time_ms=invisible, poll_time_ms=polling, expression_type=kind,
                             expression=expr.expression or "*", order=fifo,
                             attempt_id=req.attempt_id if req.HasField("attempt_id") else None,
                             client_id=ctx.client_id, client_host=ctx.peer_host,
                             born_time_ms=int((time.time() - (time.monotonic() - started)) * 1000))
        result = await self.pop.pop(pop_req)
        st = result.status
        if st is not PopStatus.FOUND:
            raise self._pop_error(result)
        max_attempts = gs.max_attempts
        out = [pb.ReceiveMessageResponse(status=OK_STATUS)]
        delivered = 0
        for pm in result.messages:
            if not fifo and max_attempts > 0 and pm.delivery_attempt > max_attempts:
                await self._to_dlq(group, pm.topic, pm.extra_info)  # the broker's revive normally did this
                continue
            handle = pm.receipt_handle
            r = pb.ReceiveMessageResponse()
            msg = to_wire(pm.message, receipt_handle=handle, topic=pm.topic, into=r.message)
            out.append(r)
            delivered += 1
            if req.auto_renew:
                self.renew.add(ctx.client_id, group, pm.topic, msg.system_properties.message_id, handle,
                               invisible)
        if not delivered:
            return [pb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message"))]
        return out

    def _pop_error(self, result: Any) -> ProxyError:
        from mq.daemon.broker.pop.contract import PopStatus as S

        mapping = {S.NO_NEW_MSG: (Code.MESSAGE_NOT_FOUND, "no new message"),
                   S.POLLING_FULL: (Code.TOO_MANY_REQUESTS, "polling full"),
                   S.TOPIC_NOT_EXIST: (Code.TOPIC_NOT_FOUND, "topic not found"),
                   S.GROUP_NOT_EXIST: (Code.CONSUMER_GROUP_NOT_FOUND, "consumer group not found"),
                   S.NO_PERMISSION: (Code.FORBIDDEN, "no permission"),
                   S.INVALID_PARAMETER: (Code.BAD_REQUEST, "invalid parameter"),
                   S.FILTER_ERROR: (Code.ILLEGAL_FILTER_EXPRESSION, "illegal filter expression")}
        code, text = mapping.get(result.status, (Code.INTERNAL_SERVER_ERROR, "pop failed"))
        return ProxyError(code, result.remark or text)

    def check_invisible(self, ms: int, minimum: int) -> None:
        cfg = self.c.config
        if ms < minimum:
            raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
        if ms > cfg.grpc_max_invisible_time_ms:
            raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME,
                             f"the invisibleTime is too large. max is {cfg.grpc_max_invisible_time_ms}")

    # -- handles ---------------------------------------------------------------------------------------------
    @staticmethod
    def split_handle(handle: str) -> tuple[str, int]:
        """(extra info, commit-log offset) of a receipt handle; raises INVALID_RECEIPT_HANDLE."""
        extra, sep, phy = handle.rpartition(" ")
        if not sep or not phy.isdigit() or len(extra.split(" ")) < 8:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is invalid")
        return extra, int(phy)

    def _ack_status(self, result: Any) -> Any:
        from mq.daemon.broker.pop.contract import AckStatus as A

        if result.status is A.OK:
            return OK_STATUS
        if result.status in (A.EXPIRED, A.INVALID):
            return status(Code.INVALID_RECEIPT_HANDLE, result.remark or "receipt handle is expired or invalid")
        if result.status is A.TOPIC_NOT_EXIST:
            return status(Code.TOPIC_NOT_FOUND, result.remark or "topic not found")
        return status(Code.INTERNAL_SERVER_ERROR, result.remark or "ack failed")

    # -- AckMessage ------------------------------------------------------------------------------------------
    async def ack_message(self, req: Any, ctx: Any) -> Any:
        """All entries go to the pop service as one batch ack: entries of one checkpoint are one revive-log
        record, and the whole call is one store put."""
        group = self.e.group_name(req.group)
        topic = self._topic(req.topic)
        if self.e.acl is not None:
            self.e.authorize(ctx, {topic: "SUB", T.retry_topic(group): "SUB"})
        self.e.sessions.session(ctx)
        req_entries = req.entries
        if not req_entries:
            raise ProxyError(Code.BAD_REQUEST, "no entry to ack")
        renew = self.renew
        statuses: list[Any] = [None] * len(req_entries)
        extras: list[str] = []
        at: list[int] = []
        for i, entry in enumerate(req_entries):
            handle = entry.receipt_handle
            if renew:
                handle = await renew.take(ctx.client_id, group, topic, entry.message_id) or handle
            try:
                extras.append(self.split_handle(handle)[0])
            except ProxyError as exc:
                statuses[i] = exc.status()
                continue
            at.append(i)
        if extras:
            for i, result in zip(at, await self.pop.batch_ack(group, topic, extras)):
                statuses[i] = self._ack_status(result)
        entries = [pb.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                            status=st) for entry, st in zip(req_entries, statuses)]
        first = statuses[0]
        same = all(st is first or st.code == first.code for st in statuses)
        return pb.AckMessageResponse(status=first if same else status(Code.MULTIPLE_RESULTS), entries=entries)

    # -- ChangeInvisibleDuration -----------------------------------------------------------------------------
    async def change_invisible(self, req: Any, ctx: Any) -> Any:
        group = self.e.group_name(req.group)
        topic = self._topic(req.topic)
        self.e.authorize(ctx, {topic: "SUB", T.retry_topic(group): "SUB"})
        self.e.sessions.session(ctx)
        invisible = _ms(req.invisible_duration)
        self.check_invisible(invisible, 0)
        handle = await self.renew.take(ctx.client_id, group, topic, req.message_id) or req.receipt_handle
        extra, phy = self.split_handle(handle)
        result = await self.pop.change_invisible_time(group, topic, extra, invisible)
        st = self._ack_status(result)
        if st.code != Code.OK:
            return pb.ChangeInvisibleDurationResponse(status=st)
        return pb.ChangeInvisibleDurationResponse(status=OK_STATUS, receipt_handle=result.receipt_handle(phy))

    # -- ForwardMessageToDeadLetterQueue ---------------------------------------------------------------------
    async def forward_to_dlq(self, req: Any, ctx: Any) -> Any:
        group = self.e.group_name(req.group)
        topic = self._topic(req.topic)
        self.e.authorize(ctx, {topic: "SUB", T.retry_topic(group): "SUB"})
        self.e.sessions.session(ctx)
        handle = await self.renew.take(ctx.client_id, group, topic, req.message_id) or req.receipt_handle
        extra, _phy = self.split_handle(handle)
        await self._to_dlq(group, topic, extra)
        return pb.ForwardMessageToDeadLetterQueueResponse(status=OK_STATUS)

    async def _to_dlq(self, group: str, topic: str, extra: str) -> None:
        """Copy the handle's message to %DLQ%{group} and ack it (the pop service's forward_to_dead_letter)."""
        st = self._ack_status(await self.pop.forward_to_dead_letter(group, topic, extra))
        if st.code != Code.OK:
            raise ProxyError(st.code, st.message)

    # -- auto-renew ------------------------------------------------------------------------------------------
    async def renew_one(self, group: str, topic: str, handle: str, invisible: int) -> str | None:
        """Extend one held message's invisible time; its new handle, or None when it cannot be renewed."""
        from mq.daemon.broker.pop.contract import AckStatus

        try:
            extra, phy = self.split_handle(handle)
        except ProxyError:
            return None
        result = await self.pop.change_invisible_time(group, topic, extra, invisible)
        if result.status is not AckStatus.OK:
            return None
        return result.receipt_handle(phy)
