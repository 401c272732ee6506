"""The message queries of ``MQAdmin`` (mqadmin's queryMsgByKey / queryMsgById / queryMsgByOffset, queryCq's
look-ups, the DLQ tools): QUERY_MESSAGE, VIEW_MESSAGE_BY_ID and tool pulls, decoded leniently.

A stored record that cannot be decoded is stepped over and handed to the admin's ``on_undecodable`` reporter
(``mq.common.record_scan``): a key query returns the other records it found, a pull narrows a broken record down
to itself and returns the records around it. ``view_message`` asks for one record by its commit-log offset, so
there it is an error (RecordContentError, carrying the record as stored, when only its body or topic is bad).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from mq.common.record import decode_record
from mq.common.record_scan import ask_alone, scan_records, settle
from mq.errors import BrokerError, RecordContentError, RemoteProtocolError
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from mq.client.undecodable import UndecodableReporter
    from mq.protocol.command import RemotingCommand

#: The answers a tool pull accepts (anything else raises BrokerError).
_PULL_OK = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED)


class MessageQueries:
    """Mixed into ``MQAdmin``: needs its ``_broker``, ``topic_master_addrs`` and ``on_undecodable``."""

    on_undecodable: "UndecodableReporter"

    if TYPE_CHECKING:  # what MQAdmin provides
        async def _broker(self, addr: str, code: int, header: object | None = None, body: bytes | None = None,
                          *, ok: Sequence[int] = (ResponseCode.SUCCESS,), timeout: float | None = None
                          ) -> "RemotingCommand": ...

        async def topic_master_addrs(self, topic: str) -> dict[str, str]: ...

    async def query_message(self, addr: str, topic: str, key: str, max_num: int = 64, begin: int = 0,
                            end: int = 2**63 - 1, unique: bool = False) -> list:
        """QUERY_MESSAGE (12) on one broker: decoded messages (nothing found -> [])."""
        hd = h.QueryMessageRequestHeader(topic=topic, key=key, max_num=max_num, begin_timestamp=begin,
                                         end_timestamp=end, unique_key_query=unique)
        resp = await self._broker(addr, RequestCode.QUERY_MESSAGE, hd,
                                  ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            return []
        scan = scan_records(resp.body, decompress=True)
        for s in scan.skipped:
            self.on_undecodable(s.located(source=addr))
        return scan.messages

    async def query_message_by_key(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                                   end: int = 2**63 - 1, unique: bool = False) -> list:
        """Messages of ``topic`` whose KEYS (or, ``unique``, UNIQ_KEY) hold ``key`` on every broker of the
        route, newest first, at most ``max_num``; ``broker_name`` is set on each."""
        from mq.common import properties as P

        found = []
        for name, addr in (await self.topic_master_addrs(topic)).items():
            for m in await self.query_message(addr, topic, key, max_num, begin, end, unique):
                if m.topic != topic:
                    continue
                if unique:
                    if m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != key:
                        continue
                elif key not in P.split_keys(m.properties.get(P.KEYS)):
                    continue
                m.broker_name = name
                found.append(m)
        found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)
        return found[:max_num]

    async def view_message(self, addr: str, offset: int):
        """VIEW_MESSAGE_BY_ID (33): the record at a commit-log offset on ``addr``. A record that cannot be
        decoded raises RecordContentError (its framing holds: ``stored`` is the record as stored) or
        RemoteProtocolError, naming the offset, the broker and why."""
        resp = await self._broker(addr, RequestCode.VIEW_MESSAGE_BY_ID, h.ViewMessageRequestHeader(offset=offset))
        if not resp.body:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"no message at offset {offset}", addr)
        where = f"the record at commit-log offset {offset} on {addr} cannot be decoded"
        try:
            return decode_record(resp.body, decompress=True)
        except RecordContentError as exc:
            raise RecordContentError(f"{where}: {exc}", size=exc.size, stored=exc.stored) from None
        except RemoteProtocolError as exc:
            raise RemoteProtocolError(f"{where}: {exc}") from None

    async def view_message_by_offset_msg_id(self, msg_id: str):
        """Decode an offsetMsgId to (store address, offset) and VIEW_MESSAGE_BY_ID there."""
        from mq.common.msg_id import decode_offset_msg_id

        (ip, port), offset = decode_offset_msg_id(msg_id)
        host = f"[{ip}]" if ":" in ip else ip
        return await self.view_message(f"{host}:{port}", offset)

    async def pull_messages(self, addr: str, topic: str, queue_id: int, offset: int, max_nums: int = 32,
                            group: str = "TOOLS_CONSUMER") -> tuple[int, list, int, int, int]:
        """PULL_MESSAGE of up to ``max_nums`` messages from ``offset`` (no suspend, no commit, subscription
        ``*``). Returns (response code, messages, next begin offset, min offset, max offset); records that
        cannot be decoded are stepped over and reported, the next begin offset moved so that none other is."""
        code, body, nxt, lo, hi = await self._tool_pull(addr, topic, queue_id, offset, max_nums, group)
        if not body:
            return code, [], nxt, lo, hi
        scan = scan_records(body, decompress=True)
        if ask_alone(scan, max_nums):
            code, body, nxt, lo, hi = await self._tool_pull(addr, topic, queue_id, offset, 1, group)
            scan = scan_records(body or b"", decompress=True)
        nxt, skipped = settle(scan, offset, nxt)
        for s in skipped:
            self.on_undecodable(s.located(topic=topic, queue_id=queue_id, source=addr))
        return code, scan.messages, nxt, lo, hi

    async def pull_message_at(self, addr: str, topic: str, queue_id: int, offset: int,
                              group: str = "TOOLS_CONSUMER") -> tuple[int, list, int, int, int]:
        """``pull_messages`` of one message at ``offset``."""
        return await self.pull_messages(addr, topic, queue_id, offset, 1, group)

    async def _tool_pull(self, addr: str, topic: str, queue_id: int, offset: int, max_nums: int,
                         group: str) -> tuple[int, bytes | None, int, int, int]:
        hd = h.PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                                        max_msg_nums=max_nums, sys_flag=0x4, commit_offset=0,
                                        suspend_timeout_millis=0, sub_version=0, subscription="*",
                                        expression_type="TAG")
        resp = await self._broker(addr, RequestCode.PULL_MESSAGE, hd, ok=_PULL_OK)
        rh = h.PullMessageResponseHeader.from_ext(resp.ext_fields)
        body = resp.body if resp.code == ResponseCode.SUCCESS else None
        return resp.code, body, rh.next_begin_offset, rh.min_offset, rh.max_offset
