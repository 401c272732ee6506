"""Transactional producer (RocketMQ ``TransactionMQProducer``; FEATURES.md §4, PROTOCOL.md §4.1.9).

``send_in_transaction(msg, arg)``:

1. DELAY is cleared (a heartbeat goes to the broker after the first send to it, so it can check back); ``TRAN_MSG=true`` and ``PGROUP=<group>`` are set (the producer then sets sysflag 0x4) and
   the half message is sent synchronously;
2. on SEND_OK the local-transaction ``executor(msg, arg)`` runs (sync or async; an exception counts as UNKNOW);
   on any other send status the state is ROLLBACK_MESSAGE and the executor does not run;
3. END_TRANSACTION (37) is sent oneway to the broker that stored the half message: commitOrRollback 8 / 12 / 0,
   tranStateTableOffset = the half queue offset, commitLogOffset from the offsetMsgId.

When the broker later sends CHECK_TRANSACTION_STATE (39), the client instance hands it to
``check_transaction_state``: the ``checker(msg)`` answers (sync or async) and END_TRANSACTION goes back oneway
on the connection the check came on, with ``fromTransactionCheck=true``. Any producer instance of the group can
answer: the broker asks a live connection of the group.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Union

from mq.client.hooks import EndTransactionContext, SendResult, SendStatus, run_hooks
from mq.client.producer import Producer
from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.message import Message, MessageExt
from mq.common.msg_id import decode_offset_msg_id
from mq.config import ClientConfig, ProducerConfig
from mq.errors import MQError
from mq.protocol.acl import sign_request
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # RocketMQ's spelling

    @property
    def wire(self) -> int:
        return {"COMMIT_MESSAGE": SF.TRANSACTION_COMMIT_TYPE, "ROLLBACK_MESSAGE": SF.TRANSACTION_ROLLBACK_TYPE,
                "UNKNOW": SF.TRANSACTION_NOT_TYPE}[self.value]


State = Union[LocalTransactionState, Awaitable[LocalTransactionState]]
Executor = Callable[[Message, Any], State]
Checker = Callable[[MessageExt], State]


@dataclass(slots=True)
class TransactionSendResult:
    send: SendResult
    state: LocalTransactionState

    @property
    def msg_id(self) -> str:
        return self.send.msg_id


async def _resolve(value: State) -> LocalTransactionState:
    if inspect.isawaitable(value):
        value = await value
    if not isinstance(value, LocalTransactionState):
        raise MQError(f"a transaction listener must return a LocalTransactionState, not {value!r}")
    return value


class TransactionProducer(Producer):
    def __init__(self, config: ProducerConfig | None = None, client_config: ClientConfig | None = None, *,
                 executor: Executor, checker: Checker, **kw: Any) -> None:
        self.end_hooks: list[Any] = []  # before Producer.__init__, which may attach tracing (enable_trace=True)
        super().__init__(config, client_config, **kw)
        self.executor = executor
        self.checker = checker
        self.checks_answered = 0
        self._announced: set[str] = set()

    def register_end_transaction_hook(self, hook: Any) -> None:
        """A hook with ``end_transaction(EndTransactionContext)``, called after each END_TRANSACTION (tracing)."""
        self.end_hooks.append(hook)

    def _run_end_hooks(self, msg: Message, broker_addr: str, msg_id: str, transaction_id: str | None,
                       state: LocalTransactionState, from_check: bool) -> None:
        if self.end_hooks:
            run_hooks(self.end_hooks, "end_transaction", EndTransactionContext(
                self.group, msg, broker_addr, msg_id, transaction_id, state, from_check))

    async def start(self) -> "TransactionProducer":
        """Start, then learn the brokers (the route of the auto-create key topic, as Java's producer does) and
        heartbeat them at once, so a broker can check back through this instance from the start."""
        await super().start()
        assert self.instance is not None
        try:
            await self.instance.update_route(self.config.create_topic_key)
        except MQError as exc:
            log.debug("%s: no route for %s yet: %s", self.group, self.config.create_topic_key, exc)
        await self.instance.heartbeat_all()
        return self

    async def send_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        msg.properties.pop(P.DELAY_TIME_LEVEL, None)
        msg.properties[P.TRANSACTION_PREPARED] = "true"
        msg.properties[P.PRODUCER_GROUP] = self.group
        result = await self.send(msg)
        if result.broker_addr not in self._announced:
            # the broker checks back through a connection of this group: make sure it knows this producer now,
            # not only at the next 30 s heartbeat (the instance heartbeats only brokers it already knew)
            self._announced.add(result.broker_addr)
            assert self.instance is not None
            await self.instance.heartbeat_all()
        if result.status is SendStatus.SEND_OK:
            msg.transaction_id = result.msg_id
            try:
                state = await _resolve(self.executor(msg, arg))
            except Exception:
                log.exception("%s: local transaction of %s failed; state UNKNOW", self.group, result.msg_id)
                state = LocalTransactionState.UNKNOW
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end(result, state)
        except MQError as exc:
            log.warning("%s: END_TRANSACTION for %s failed (the broker will check back): %s", self.group,
                        result.msg_id, exc)
        self._run_end_hooks(msg, result.broker_addr, result.msg_id, result.msg_id, state, False)
        return TransactionSendResult(result, state)

    async def _end(self, result: SendResult, state: LocalTransactionState) -> None:
        assert self.instance is not None
        _host, phy = decode_offset_msg_id(result.offset_msg_id)
        hdr = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=result.queue_offset, commit_log_offset=phy,
            commit_or_rollback=state.wire, msg_id=result.msg_id, from_transaction_check=False,
            transaction_id=result.msg_id)
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, hdr.to_ext(), oneway=True)
        await self.instance.remoting.invoke_oneway(result.broker_addr, cmd)

    async def check_transaction_state(self, conn: Any, hdr: CheckTransactionStateRequestHeader,
                                      msg: MessageExt | None) -> None:
        """Answer a broker's CHECK_TRANSACTION_STATE (called by the client instance)."""
        if msg is None:
            log.warning("%s: CHECK_TRANSACTION_STATE without a message body", self.group)
            return
        msg.transaction_id = hdr.transaction_id or msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        try:
            state = await _resolve(self.checker(msg))
        except Exception:
            log.exception("%s: transaction check of %s failed; answering UNKNOW", self.group, hdr.msg_id)
            state = LocalTransactionState.UNKNOW
        uniq = msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or hdr.msg_id or ""
        end = EndTransactionRequestHeader(
            producer_group=msg.properties.get(P.PRODUCER_GROUP) or self.group,
            tran_state_table_offset=hdr.tran_state_table_offset, commit_log_offset=hdr.commit_log_offset,
            commit_or_rollback=state.wire, msg_id=uniq, from_transaction_check=True,
            transaction_id=hdr.transaction_id)
        try:
            answer = RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext(), oneway=True)
            if self.instance.remoting.credentials is not None:  # on the broker's own connection: sign here
                sign_request(answer, self.instance.remoting.credentials)
            conn.invoke_oneway(answer)
            self.checks_answered += 1
        except MQError as exc:
            log.warning("%s: answer to the check of %s not sent: %s", self.group, uniq, exc)
        self._run_end_hooks(msg, getattr(conn, "remote_addr", ""), uniq, hdr.transaction_id, state, True)
        await asyncio.sleep(0)
