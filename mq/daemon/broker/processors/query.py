"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33): PROTOCOL.md §4.1.4.

QUERY_MESSAGE runs in the ``query`` worker group and calls the store in a thread (the index lookup may wait
for the index pass, which runs on the event loop); VIEW_MESSAGE_BY_ID reads one record inline.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from mq.daemon.broker.flow_control import QUERY_GROUP
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)
RC = ResponseCode


class QueryProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    def register(self, server: Any) -> None:
        server.register(RequestCode.QUERY_MESSAGE, self.query_message, group=QUERY_GROUP)
        server.register(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message)

    async def query_message(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.QueryMessageRequestHeader.from_ext(cmd.ext_fields)
        store = self.c.store
        max_num = h.max_num
        if h.unique_key_query:
            max_num = store.config.default_query_max_num
        loop = asyncio.get_running_loop()
        res = await loop.run_in_executor(None, store.query_message, h.topic, h.key, max_num, h.begin_timestamp,
                                         h.end_timestamp)
        ext = H.QueryMessageResponseHeader(res.index_last_update_timestamp, res.index_last_update_phyoffset).to_ext()
        if not res.buffers:
            return cmd.response(RC.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                ext_fields=ext)
        return cmd.response(RC.SUCCESS, ext_fields=ext, body=res.body)

    def view_message(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = H.ViewMessageRequestHeader.from_ext(cmd.ext_fields)
        raw = None
        if h.offset >= 0:
            try:
                raw = self.c.store.select_one_message_by_offset(h.offset)
            except (ValueError, IndexError, OSError) as exc:
                log.debug("VIEW_MESSAGE_BY_ID %d: %s", h.offset, exc)
        if raw is None:
            return cmd.response(RC.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return cmd.response(RC.SUCCESS, body=raw)
