"""The gRPC endpoint inside the broker process (RocketMQ 5's proxy in "local" mode).

``GrpcEndpoint`` runs a ``grpc.aio`` server on ``grpcServerPort`` on the broker's event loop (uvloop where
installed) and serves ``apache.rocketmq.v2.MessagingService``. Handlers call the broker's services
in-process: the send processor's checks and the store for SendMessage, the pop service for receive / ack /
change-invisible, the end-transaction processor, the timer. Nothing is encoded as a RemotingCommand and
sent anywhere: a handler builds the typed header a processor reads and calls it.

Messages are parsed by protobuf's upb backend from descriptors in a private pool (``proto/messages.py``);
the service is registered as generic handlers (no generated ``_pb2_grpc`` code). Every unary handler runs
inside ``_unary``: it reads the call's metadata (``context.py``), and turns a ``ProxyError`` into the
response's ``Status`` and any other exception into INTERNAL_SERVER_ERROR with one throttled log line.

Modules: ``route.py`` (QueryRoute, QueryAssignment), ``producer.py`` (SendMessage, EndTransaction,
RecallMessage), ``telemetry.py`` (Telemetry, Heartbeat, NotifyClientTermination; sessions and Settings),
``consumer.py`` (ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and
the auto-renew of push consumers' messages).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from mq.common import topic as T
from mq.common.log_throttle import LogThrottle
from mq.daemon.proxy.context import AclChecker, call_context
from mq.daemon.proxy.convert import to_wire, wrap_namespace
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.sessions import SessionTable
from mq.daemon.proxy.status import ProxyError, status
from mq.daemon.runtime import DaemonError
from mq.errors import InvalidTopicError

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

Code = pb.Code
DEFAULT_GRPC_PORT = 8081
#: Concurrent streams (calls) on one client connection; push consumers hold one receive per broker.
MAX_CONCURRENT_STREAMS = 1000


class GrpcEndpoint:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        cfg = controller.config
        self.configured_port = cfg.grpc_server_port
        self.bind_host = cfg.grpc_bind_address or cfg.host
        self.port = 0
        self.server: Any = None
        self.sessions = SessionTable(cfg.grpc_max_sessions, to_wire)
        self.acl: AclChecker | None = None
        self._throttle = LogThrottle(log, 60.0)
        from mq.daemon.proxy.consumer import ConsumerService
        from mq.daemon.proxy.producer import ProducerService
        from mq.daemon.proxy.route import RouteService
        from mq.daemon.proxy.telemetry import TelemetryService

        self.routes = RouteService(self)
        self.producer = ProducerService(self)
        self.telemetry = TelemetryService(self)
        self.consumer = ConsumerService(self)

    @property
    def advertised_address(self) -> str:
        return f"{self.c.config.advertised_host}:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def start(self) -> None:
        import grpc

        if self.c.acl is not None:
            self.acl = AclChecker(self.c.acl)
        max_msg = self.c.store_config.max_message_size + (1 << 20)
        options = [("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", max_msg),
                   ("grpc.max_send_message_length", -1), ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
                   ("grpc.keepalive_permit_without_calls", 1),
                   ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
                   ("grpc.http2.max_ping_strikes", 0)]
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(pb.SERVICE, self._handlers(grpc)),))
        port = self.configured_port if self.configured_port > 0 else 0
        if self.c.config.listen_port == 0 and port == DEFAULT_GRPC_PORT:
            port = 0  # a broker on an ephemeral port (tests) gets an ephemeral gRPC port too, unless one is set
        host = self.bind_host
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self.port = server.add_insecure_port(target)
        except RuntimeError:
            self.port = 0
        if not self.port:
            raise DaemonError(f"cannot serve gRPC on {target}: the address is in use or not available here "
                              "(grpcServerPort / --grpc-port: choose another port, or -1 to switch the gRPC "
                              "endpoint off)")
        await server.start()
        self.server = server
        self.consumer.start()
        log.info("gRPC endpoint for RocketMQ 5 clients on %s:%d (advertised %s)", host, self.port,
                 self.advertised_address)

    async def stop(self, grace: float = 1.0) -> None:
        self.consumer.stop()
        if self.server is not None:
            await self.server.stop(grace)
            self.server = None
        await self.routes.close()
        for s in self.sessions.values():
            self.telemetry.drop(s)

    def tick(self) -> None:
        """Periodic upkeep (the broker's client scan): expire silent sessions."""
        self.telemetry.expire()

    # -- handler table ---------------------------------------------------------------------------------------
    def _handlers(self, grpc: Any) -> dict[str, Any]:
        def unary(fn: Callable, req: Any, resp: Any) -> Any:
            return grpc.unary_unary_rpc_method_handler(self._unary(fn, resp), request_deserializer=req.FromString,
                                                       response_serializer=resp.SerializeToString)

        t, p, r, co = self.telemetry, self.producer, self.routes, self.consumer
        handlers = {
            "QueryRoute": unary(r.query_route, pb.QueryRouteRequest, pb.QueryRouteResponse),
            "Heartbeat": unary(t.heartbeat, pb.HeartbeatRequest, pb.HeartbeatResponse),
            "SendMessage": unary(p.send_message, pb.SendMessageRequest, pb.SendMessageResponse),
            "QueryAssignment": unary(r.query_assignment, pb.QueryAssignmentRequest, pb.QueryAssignmentResponse),
            "AckMessage": unary(co.ack_message, pb.AckMessageRequest, pb.AckMessageResponse),
            "ForwardMessageToDeadLetterQueue": unary(co.forward_to_dlq, pb.ForwardMessageToDeadLetterQueueRequest,
                                                     pb.ForwardMessageToDeadLetterQueueResponse),
            "EndTransaction": unary(p.end_transaction, pb.EndTransactionRequest, pb.EndTransactionResponse),
            "NotifyClientTermination": unary(t.notify_termination, pb.NotifyClientTerminationRequest,
                                             pb.NotifyClientTerminationResponse),
            "ChangeInvisibleDuration": unary(co.change_invisible, pb.ChangeInvisibleDurationRequest,
                                             pb.ChangeInvisibleDurationResponse),
            "RecallMessage": unary(p.recall_message, pb.RecallMessageRequest, pb.RecallMessageResponse),
            "UpdateOffset": unary(self._unsupported, pb.UpdateOffsetRequest, pb.UpdateOffsetResponse),
            "GetOffset": unary(self._unsupported, pb.GetOffsetRequest, pb.GetOffsetResponse),
            "QueryOffset": unary(self._unsupported, pb.QueryOffsetRequest, pb.QueryOffsetResponse),
            "SyncLiteSubscription": unary(self._unsupported, pb.SyncLiteSubscriptionRequest,
                                          pb.SyncLiteSubscriptionResponse),
            "ReceiveMessage": grpc.unary_stream_rpc_method_handler(
                co.receive_message, request_deserializer=pb.ReceiveMessageRequest.FromString,
                response_serializer=pb.ReceiveMessageResponse.SerializeToString),
            "Telemetry": grpc.stream_stream_rpc_method_handler(
                t.telemetry, request_deserializer=pb.TelemetryCommand.FromString,
                response_serializer=pb.TelemetryCommand.SerializeToString),
        }
        return handlers

    def _unary(self, fn: Callable, resp_cls: Any) -> Callable:
        name = getattr(fn, "__name__", "call")

        async def handler(request: Any, context: Any) -> Any:
            try:
                return await fn(request, call_context(context))
            except ProxyError as exc:
                return resp_cls(status=exc.status())
            except Exception as exc:
                self._throttle.error(f"{name}:{type(exc).__name__}", "gRPC %s failed: %s: %s", name,
                                     type(exc).__name__, exc, exc_info=True)
                return resp_cls(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))

        return handler

    async def _unsupported(self, request: Any, ctx: Any) -> Any:
        raise ProxyError(Code.NOT_IMPLEMENTED, "this broker's gRPC endpoint serves pop consumption only "
                         "(PullMessage / offsets / lite topics are not implemented, as in RocketMQ's proxy)")

    # -- shared helpers --------------------------------------------------------------------------------------
    def authorize(self, ctx: Any, need: dict[str, str]) -> None:
        """With aclEnable: check the call's signature and its permissions on ``need`` {resource: PUB|SUB|ANY}
        (a group is named by its ``%RETRY%`` topic); raises UNAUTHORIZED / FORBIDDEN."""
        if self.acl is None:
            return
        from mq.daemon.broker.acl import Perm

        perms = {"PUB": Perm.PUB, "SUB": Perm.SUB, "ANY": Perm.ANY}
        self.acl.check(ctx, {k: perms[v] for k, v in need.items() if v != "ANY"})

    def group_name(self, res: Any) -> str:
        name = res.name
        try:
            T.validate_group(name)
        except InvalidTopicError as exc:
            raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, str(exc)) from None
        return wrap_namespace(res.resource_namespace, name)

    def group_is_fifo(self, group: str) -> bool:
        sgc = self.c.subscription_groups.get(group)
        return bool(sgc is not None and sgc.orderly)
