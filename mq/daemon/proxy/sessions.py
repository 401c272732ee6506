"""Client sessions of the gRPC endpoint, keyed by ``x-mq-client-id``.

A session holds what the client told the server in its Settings (client type, publishing topics or the
subscription group and its filters), the answer the server sent back, and the client's Telemetry stream.
Its ``GrpcChannel`` is the session's face towards the broker: registered in ``ProducerManager`` under each
publishing topic (the producer group of a 5.x message is its topic) and in ``ConsumerManager`` under the
subscription group, it is what ``consumerConnection``, ``consumerProgress`` and ``consumerStatus`` list (with
the client's language and version), and what the transaction check-back writes to:
CHECK_TRANSACTION_STATE sent "oneway" on it becomes a ``RecoverOrphanedTransactionCommand`` on the Telemetry
stream. GET_CONSUMER_RUNNING_INFO is answered from the session (subscriptions, consume type POP).

Expiry: a session whose client has not called for ``channelExpiredTimeout`` and has no open Telemetry stream
is dropped with its registrations; NotifyClientTermination drops it at once. The table is bounded
(``grpcMaxSessions``): a new client id past the bound is refused with TOO_MANY_REQUESTS.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from mq.common.fastjson import dumps
from mq.common.record import decode_record
from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.status import ProxyError
from mq.errors import ConnectionClosedError, MQError
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import CheckTransactionStateRequestHeader

log = logging.getLogger(__name__)

#: Telemetry commands waiting for a slow client before the oldest are dropped.
MAX_PENDING_COMMANDS = 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class GrpcChannel:
    """The broker-side "connection" of one gRPC client (RocketMQ 5's ``GrpcClientChannel``)."""

    def __init__(self, session: "ClientSession") -> None:
        self.session = session
        self.remote_addr = session.remote_addr
        self.attrs: dict[str, Any] = {}
        self.dropped = False

    @property
    def closed(self) -> bool:
        """True once the session is gone, or while no Telemetry stream can carry a command to the client."""
        return self.dropped or self.session.streams <= 0

    def __repr__(self) -> str:
        return f"GrpcChannel({self.session.client_id}@{self.remote_addr})"

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            self.session.recover_transaction(cmd)
        # NOTIFY_CONSUMER_IDS_CHANGED and the like: 5.x clients rebalance on the server's side, nothing to do

    async def invoke(self, cmd: RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return cmd.response(ResponseCode.SUCCESS, body=dumps(self.session.running_info()))
        raise MQError(f"request code {cmd.code} cannot be relayed to gRPC client {self.session.client_id} "
                      f"({self.session.language} {self.session.version})")

    def send_response(self, cmd: RemotingCommand) -> None:  # pragma: no cover - never handed a request
        raise ConnectionClosedError("a gRPC client channel takes no remoting response")


class ClientSession:
    def __init__(self, client_id: str, remote_addr: str, language: str, version: str,
                 to_wire: Callable[..., Any]) -> None:
        self.client_id = client_id
        self.remote_addr = remote_addr
        self.language = language
        self.version = version
        self.last_seen = _now_ms()
        self.settings: Any = None  # the client's Settings as last received
        self.client_type = pb.ClientType.CLIENT_TYPE_UNSPECIFIED
        self.topics: list[str] = []  # stored names of the publishing topics
        self.group: str | None = None  # stored name of the subscription group
        self.subscriptions: dict[str, tuple[str, str]] = {}  # topic -> (TAG|SQL92, expression)
        self.channel = GrpcChannel(self)
        self.streams = 0  # open Telemetry streams
        self.outbox: asyncio.Queue = asyncio.Queue(MAX_PENDING_COMMANDS)
        self.dropped_commands = 0
        self._to_wire = to_wire
        self.started_ms = self.last_seen

    def touch(self, remote_addr: str | None = None) -> None:
        self.last_seen = _now_ms()
        if remote_addr and remote_addr != self.remote_addr:
            self.remote_addr = self.channel.remote_addr = remote_addr
            self.channel.attrs.pop("born_host", None)

    def push(self, command: Any) -> bool:
        """Queue a TelemetryCommand for the client; False when no stream is open to carry it."""
        if self.streams <= 0:
            return False
        if self.outbox.full():
            self.outbox.get_nowait()
            self.dropped_commands += 1
        self.outbox.put_nowait(command)
        return True

    def recover_transaction(self, cmd: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE from the broker's check pass -> RecoverOrphanedTransactionCommand."""
        try:
            hdr = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
            msg = decode_record(cmd.body or b"")
        except Exception as exc:
            log.warning("transaction check for gRPC client %s not sent: %s", self.client_id, exc)
            return
        handle = f"{hdr.tran_state_table_offset} {hdr.commit_log_offset}"
        wire = self._to_wire(msg, topic=msg.topic)
        tx_id = hdr.transaction_id or hdr.msg_id or ""
        command = pb.TelemetryCommand(recover_orphaned_transaction_command=pb.RecoverOrphanedTransactionCommand(
            message=wire, transaction_id=encode_transaction_id(tx_id, handle)))
        if not self.push(command):
            log.info("transaction %s: gRPC producer %s has no Telemetry stream to ask", tx_id, self.client_id)

    def running_info(self) -> dict[str, Any]:
        props = {"PROP_CONSUME_TYPE": "CONSUME_POP", "PROP_CLIENT_VERSION": self.version,
                 "PROP_CONSUMER_START_TIMESTAMP": str(self.started_ms), "messageModel": "CLUSTERING",
                 "PROP_CONSUMEORDERLY": "true" if self.fifo else "false", "clientType": pb.ClientType.name(
                     self.client_type), "language": self.language, "remoteAddr": self.remote_addr}
        subs = [{"topic": t, "subString": e, "expressionType": k, "tagsSet": [], "codeSet": [], "subVersion": 0,
                 "classFilterMode": False} for t, (k, e) in sorted(self.subscriptions.items())]
        return {"properties": props, "subscriptionSet": subs, "mqTable": {}, "statusTable": {}}

    @property
    def fifo(self) -> bool:
        s = self.settings
        return bool(s is not None and s.HasField("subscription") and s.subscription.fifo)


def encode_transaction_id(tx_id: str, handle: str) -> str:
    """The transaction id the client echoes in EndTransaction: the message's id and where its half message is
    (``<id> <half queue offset> <half commit-log offset>``), so any broker process can end it without a table."""
    return f"{tx_id} {handle}"


def decode_transaction_id(text: str) -> tuple[str, int, int]:
    """(message id, half queue offset, half commit-log offset); raises INVALID_TRANSACTION_ID."""
    parts = text.split(" ")
    try:
        if len(parts) == 3:
            return parts[0], int(parts[1]), int(parts[2])
    except ValueError:
        pass
    raise ProxyError(pb.Code.INVALID_TRANSACTION_ID, f"invalid transaction id {text[:80]!r}")


class SessionTable:
    def __init__(self, max_sessions: int, to_wire: Callable[..., Any]) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[str, ClientSession] = {}
        self._to_wire = to_wire

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, client_id: str) -> ClientSession | None:
        return self._sessions.get(client_id)

    def values(self) -> list[ClientSession]:
        return list(self._sessions.values())

    def session(self, ctx: Any) -> ClientSession:
        """The caller's session, created on its first call."""
        s = self._sessions.get(ctx.client_id)
        if s is not None:
            s.touch(ctx.remote_addr)
            return s
        if len(self._sessions) >= self.max_sessions:
            raise ProxyError(pb.Code.TOO_MANY_REQUESTS, f"this broker serves {self.max_sessions} gRPC clients "
                             "already (grpcMaxSessions)")
        s = self._sessions[ctx.client_id] = ClientSession(ctx.client_id, ctx.remote_addr, ctx.language,
                                                          ctx.version, self._to_wire)
        return s

    def remove(self, client_id: str) -> ClientSession | None:
        s = self._sessions.pop(client_id, None)
        if s is not None:
            s.channel.dropped = True
        return s

    def expired(self, expire_ms: int, now_ms: int | None = None) -> list[ClientSession]:
        now = _now_ms() if now_ms is None else now_ms
        return [s for s in self._sessions.values() if s.streams <= 0 and now - s.last_seen > expire_ms]
