"""END_TRANSACTION (37): a producer commits or rolls back a half message (FEATURES.md §4.3, PROTOCOL.md §4.1.9,
RocketMQ ``EndTransactionProcessor``).

Header (``EndTransactionRequestHeader``): producerGroup, tranStateTableOffset (the half queue offset),
commitLogOffset (the half phy offset), commitOrRollback (0 UNKNOWN / 8 COMMIT / 12 ROLLBACK),
fromTransactionCheck, msgId, transactionId. Usually sent oneway; a response is written when one is expected.

- on a slave -> SLAVE_NOT_AVAILABLE; UNKNOWN (0) or any other type -> no response, only logged;
- the half message is loaded by commitLogOffset (missing -> SYSTEM_ERROR "Find prepared transaction message
  failed") and must match: PGROUP == producerGroup, queue offset == tranStateTableOffset, phy offset ==
  commitLogOffset (each -> SYSTEM_ERROR);
- COMMIT: the real message (REAL_TOPIC / REAL_QID; TRAN_MSG, REAL_TOPIC, REAL_QID removed; sysflag type COMMIT;
  preparedTransactionOffset = the half phy offset) is put; stored -> the op record is written; the response
  code follows the put status. A commit carrying an arbitrary-delay property goes through the timer;
- ROLLBACK: only the op record, then SUCCESS.

A transaction this broker resolved lately (remembered by UNIQ_KEY: each check re-appends a copy of the half
message, with new offsets) is answered SUCCESS with only an op record for this copy: a late answer to an
earlier check must not commit the message twice.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common import topic as T
from mq.daemon.broker.processors.put_status import put_status_response
from mq.daemon.broker.requeue import STORED, load, put_async, rebuild, restore_real
from mq.daemon.broker.schedule import is_master
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import EndTransactionRequestHeader
from mq.store.status import PutMessageStatus

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

RC = ResponseCode
_CODES = {PutMessageStatus.PUT_OK: RC.SUCCESS, PutMessageStatus.FLUSH_DISK_TIMEOUT: RC.FLUSH_DISK_TIMEOUT,
          PutMessageStatus.FLUSH_SLAVE_TIMEOUT: RC.FLUSH_SLAVE_TIMEOUT,
          PutMessageStatus.SLAVE_NOT_AVAILABLE: RC.SLAVE_NOT_AVAILABLE}
_DROP = (P.TRANSACTION_PREPARED, P.REAL_TOPIC, P.REAL_QUEUE_ID)


class EndTransactionProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.committed = 0
        self.rolled_back = 0

    def register(self, server: Any) -> None:
        server.register(RequestCode.END_TRANSACTION, self.handle)

    async def handle(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        resp = await self._process(conn, cmd)
        return None if resp is None or cmd.flag & 2 else resp

    async def _process(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        c = self.c
        if not is_master(c):
            return cmd.response(RC.SLAVE_NOT_AVAILABLE, "Can't process transaction message on a slave broker")
        h = EndTransactionRequestHeader.from_ext(cmd.ext_fields)
        kind = h.commit_or_rollback
        if kind not in (SF.TRANSACTION_COMMIT_TYPE, SF.TRANSACTION_ROLLBACK_TYPE):
            log.info("END_TRANSACTION %s for %s from %s (check: %s): nothing to do", kind, h.msg_id,
                     getattr(conn, "remote_addr", conn), h.from_transaction_check)
            return None
        half = load(c.store, h.commit_log_offset)
        if half is None or half.topic != T.TRANS_HALF_TOPIC:
            return cmd.response(RC.SYSTEM_ERROR, "Find prepared transaction message failed")
        if half.properties.get(P.PRODUCER_GROUP) != h.producer_group:
            return cmd.response(RC.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != h.tran_state_table_offset:
            return cmd.response(RC.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commit_log_offset != h.commit_log_offset:
            return cmd.response(RC.SYSTEM_ERROR, "The commit log offset wrong")
        svc = c.transaction_service
        if svc.already_resolved(half):
            await svc.write_op(half)  # this copy is settled too: no more checks of it
            return cmd.response(RC.SUCCESS)
        if kind == SF.TRANSACTION_ROLLBACK_TYPE:
            if not await svc.write_op(half):
                return cmd.response(RC.SYSTEM_ERROR, "could not record the rollback")
            self.rolled_back += 1
            return cmd.response(RC.SUCCESS)
        real = restore_real(half, drop=_DROP)
        if real is None:
            return cmd.response(RC.SYSTEM_ERROR, "the half message has no REAL_TOPIC")
        topic, queue_id, props = real
        inner = rebuild(half, topic, queue_id, props,
                        sys_flag=SF.reset_transaction_type(half.sys_flag, SF.TRANSACTION_COMMIT_TYPE),
                        prepared_transaction_offset=half.commit_log_offset)
        timer = c.timer_service
        if timer is not None:
            redirected = timer.intercept(inner)
            if isinstance(redirected, str):
                return cmd.response(RC.MESSAGE_ILLEGAL, redirected)
        res = await put_async(c.store, inner)
        if res.status not in STORED:
            return put_status_response(cmd, res, c.store.config)
        c.stats.on_put(1)
        await svc.write_op(half)
        self.committed += 1
        return cmd.response(_CODES[res.status])
