"""Telemetry, Heartbeat and NotifyClientTermination: the 5.x clients' sessions.

Telemetry is one bidirectional stream per client and broker. The client writes its ``Settings`` when it
opens the stream (and every 5 minutes); the server answers with the settings it will apply (Apache's
``ClientSettingsManager``):

- producers: ``backoff_policy`` {3 attempts, exponential 10 ms .. 1 s x2}, ``publishing.max_body_size`` =
  the store's maxMessageSize, ``validate_message_type`` true;
- consumers: ``subscription.fifo`` from the group's consumeMessageOrderly, ``receive_batch_size`` 32,
  ``long_polling_timeout`` (grpcMaxLongPollingMs), ``backoff_policy`` = the group's retry policy with
  ``max_attempts`` = retryMaxTimes + 1;
- ``metric.on`` false (the endpoint collects no client metrics).

The session (``sessions.py``) is then registered in the broker's client tables: producers under each
publishing topic, consumers under their group with consume type POP (CLUSTERING, their subscriptions), so
``consumerConnection`` / ``consumerProgress`` / ``consumerStatus`` list them with language and version, and
the transaction check finds them. The same stream later carries the server's commands
(RecoverOrphanedTransactionCommand). A stream whose first command carries no settings, or settings without
publishing or subscription, ends with INVALID_ARGUMENT.

Heartbeat keeps the registrations fresh (UNRECOGNIZED_CLIENT_TYPE before any Settings);
NotifyClientTermination removes them at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from mq.common import topic as T
from mq.daemon.broker.client_manager import ClientChannelInfo
from mq.daemon.proxy.context import call_context, version_ordinal
from mq.daemon.proxy.convert import wrap_namespace
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.status import OK_STATUS, ProxyError
from mq.errors import InvalidTopicError
from mq.protocol.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData

if TYPE_CHECKING:
    from mq.daemon.proxy.server import GrpcEndpoint
    from mq.daemon.proxy.sessions import ClientSession

log = logging.getLogger(__name__)

Code = pb.Code
ClientType = pb.ClientType
CONSUME_POP = ConsumeType.CONSUME_POP
_CONSUMERS = frozenset({ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER, ClientType.PULL_CONSUMER,
                        ClientType.LITE_PUSH_CONSUMER, ClientType.LITE_SIMPLE_CONSUMER})
#: RocketMQ's default customized backoff (the delay levels after the first): 1s 5s 10s 30s 1m 2m ... 1h 2h
DEFAULT_BACKOFF_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
                      480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)


def _duration(ms: int) -> Any:
    return pb.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


class TelemetryService:
    def __init__(self, endpoint: "GrpcEndpoint") -> None:
        self.e = endpoint
        self.c = endpoint.c

    # -- Telemetry -------------------------------------------------------------------------------------------
    async def telemetry(self, request_iterator: Any, context: Any) -> None:
        import grpc

        try:
            ctx = call_context(context)
            session = self.e.sessions.session(ctx)
        except ProxyError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
            return
        session.streams += 1
        reader = asyncio.ensure_future(self._read(request_iterator, session, ctx))
        getter: asyncio.Future | None = None
        try:
            while True:
                getter = asyncio.ensure_future(session.outbox.get())
                done, _ = await asyncio.wait({reader, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    await context.write(getter.result())
                    getter = None
                if reader in done:
                    error = reader.result()
                    if error is not None:
                        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
                    return
        finally:
            session.streams -= 1
            for task in (reader, getter):
                if task is not None and not task.done():
                    task.cancel()
            session.touch()

    async def _read(self, request_iterator: Any, session: "ClientSession", ctx: Any) -> str | None:
        """Read the client's commands until the stream ends; returns an error text that ends the stream."""
        async for command in request_iterator:
            which = command.WhichOneof("command")
            if which == "settings":
                try:
                    reply = self.apply_settings(session, command.settings, ctx)
                except ProxyError as exc:
                    return exc.message
                session.push(pb.TelemetryCommand(status=OK_STATUS, settings=reply))
            elif which is None:
                return "a telemetry command without content"
            session.touch()
        return None

    # -- Settings --------------------------------------------------------------------------------------------
    def apply_settings(self, session: "ClientSession", settings: Any, ctx: Any) -> Any:
        which = settings.WhichOneof("pub_sub")
        if which is None:
            raise ProxyError(Code.BAD_REQUEST, "settings carry neither publishing nor subscription")
        if self.e.acl is not None:
            self.e.authorize(ctx, {})
        reply = pb.Settings()
        reply.CopyFrom(settings)
        reply.metric.Clear()
        reply.metric.on = False
        if which == "publishing":
            topics = []
            for res in settings.publishing.topics:
                try:
                    T.validate_topic(res.name)
                except InvalidTopicError as exc:
                    raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from None
                topics.append(wrap_namespace(res.resource_namespace, res.name))
            reply.publishing.max_body_size = self.c.store_config.max_message_size
            reply.publishing.validate_message_type = True
            policy = reply.backoff_policy
            policy.Clear()
            policy.max_attempts = 3
            exp = policy.exponential_backoff
            exp.initial.CopyFrom(_duration(10))
            exp.max.CopyFrom(_duration(1000))
            exp.multiplier = 2.0
            self._register_producer(session, topics)
        else:
            sub = settings.subscription
            group = self.e.group_name(sub.group)
            self.e.authorize(ctx, {T.retry_topic(group): "SUB"})
            subs: dict[str, tuple[str, str]] = {}
            for entry in sub.subscriptions:
                try:
                    T.validate_topic(entry.topic.name)
                except InvalidTopicError as exc:
                    raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from None
                kind = "SQL92" if entry.expression.type == pb.FilterType.SQL else "TAG"
                subs[wrap_namespace(entry.topic.resource_namespace, entry.topic.name)] = (
                    kind, entry.expression.expression or "*")
            gs = self.e.consumer.group_settings(group)
            reply.subscription.fifo = gs.fifo
            reply.subscription.receive_batch_size = self.c.config.grpc_max_receive_batch
            reply.subscription.long_polling_timeout.CopyFrom(_duration(self.c.config.grpc_max_long_polling_ms))
            self._backoff(reply.backoff_policy, gs)
            self._register_consumer(session, group, subs)
        session.settings = settings
        session.client_type = settings.client_type
        return reply

    @staticmethod
    def _backoff(policy: Any, gs: Any) -> None:
        policy.Clear()
        policy.max_attempts = gs.max_attempts
        if gs.retry_policy_type == "EXPONENTIAL":
            exp = policy.exponential_backoff
            exp.initial.CopyFrom(_duration(gs.exponential_initial_ms))
            exp.max.CopyFrom(_duration(gs.exponential_max_ms))
            exp.multiplier = float(gs.exponential_multiplier)
        else:
            policy.customized_backoff.next.extend(_duration(ms) for ms in (gs.customized_next_ms or DEFAULT_BACKOFF_MS))

    def _channel_info(self, session: "ClientSession") -> ClientChannelInfo:
        from mq.daemon.proxy.context import language_code

        return ClientChannelInfo(session.channel, session.client_id, language_code(session.language),
                                 version_ordinal(session.version), int(time.time() * 1000), session.remote_addr)

    def _register_producer(self, session: "ClientSession", topics: list[str]) -> None:
        producers = self.c.producers
        for old in set(session.topics) - set(topics):
            producers.unregister(old, session.channel)
        info = self._channel_info(session)
        for topic in topics:
            producers.register(topic, info)
        session.topics = topics

    def _register_consumer(self, session: "ClientSession", group: str, subs: dict[str, tuple[str, str]]) -> None:
        c = self.c
        if session.group and session.group != group:
            c.consumers.unregister(session.group, session.channel, notify=False)
        if c.subscription_groups.find_or_create(group) is None:
            raise ProxyError(Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group {group} does not exist "
                             "(autoCreateSubscriptionGroup is off)")
        data = [SubscriptionData(topic=t, sub_string=expr, expression_type=kind, sub_version=int(time.time() * 1000))
                for t, (kind, expr) in sorted(subs.items())]
        c.consumers.register(group, self._channel_info(session), CONSUME_POP, MessageModel.CLUSTERING,
                             ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, data, notify=False)
        session.group = group
        session.subscriptions = subs

    # -- Heartbeat / NotifyClientTermination ------------------------------------------------------------------
    async def heartbeat(self, req: Any, ctx: Any) -> Any:
        session = self.e.sessions.get(ctx.client_id)
        if session is None or session.settings is None:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, "no Settings seen from this client yet: open the "
                             "Telemetry stream first")
        session.touch(ctx.remote_addr)
        info = self._channel_info(session)
        for topic in session.topics:
            self.c.producers.register(topic, info)
        if session.group:
            self.c.consumers.touch(session.channel)
        return pb.HeartbeatResponse(status=OK_STATUS)

    async def notify_termination(self, req: Any, ctx: Any) -> Any:
        session = self.e.sessions.get(ctx.client_id)
        if session is not None:
            self.drop(session)
            self.e.sessions.remove(ctx.client_id)
            log.info("gRPC client %s (%s %s, %s) terminated", ctx.client_id, session.language, session.version,
                     session.remote_addr)
        return pb.NotifyClientTerminationResponse(status=OK_STATUS)

    def drop(self, session: "ClientSession") -> None:
        """Remove a session's registrations from the broker's client tables."""
        for topic in session.topics:
            self.c.producers.unregister(topic, session.channel)
        if session.group:
            self.c.consumers.unregister(session.group, session.channel, notify=False)
        self.e.consumer.forget_client(session.client_id)
        session.channel.dropped = True

    def expire(self) -> None:
        exp = self.c.config.channel_expired_timeout
        for session in self.e.sessions.expired(exp):
            log.info("gRPC client %s silent for %d ms: session dropped", session.client_id, exp)
            self.drop(session)
            self.e.sessions.remove(session.client_id)

    @staticmethod
    def is_consumer(session: "ClientSession") -> bool:
        return session.client_type in _CONSUMERS
