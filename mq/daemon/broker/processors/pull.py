"""PULL_MESSAGE (11): PROTOCOL.md §4.1.3 and §7, FEATURES.md §5.1.

Runs inline on the event loop (a pull only reads mapped memory). The filter comes from the request's
``subscription`` when the SUBSCRIPTION flag is set, else from the group's heartbeat subscription; either way
the tag hash codes are computed here (never trusted from the client). Store statuses map as::

    FOUND                                      -> SUCCESS (body = the stored records, as they are)
    NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING   -> PULL_RETRY_IMMEDIATELY
    NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE-> PULL_OFFSET_MOVED if offset != 0 else PULL_NOT_FOUND
    OFFSET_FOUND_NULL, OFFSET_OVERFLOW_ONE     -> PULL_NOT_FOUND (held first when SUSPEND is set: for the
                                                  request's suspendTimeoutMillis, or shortPollingTimeMills
                                                  without longPollingEnable, as RocketMQ does; no cap)
    OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL    -> PULL_OFFSET_MOVED

A SUSPEND pull that would find fewer than ``pullCoalesceMessages`` messages (or fewer than it asks for) is
first parked for up to ``pullCoalesceMicros`` (``mq.daemon.broker.pull_coalescer``) and then runs as above, with
what was stored meanwhile; a parked pull whose run fails is answered SYSTEM_ERROR.

Every answer carries ``suggestWhichBrokerId``, ``nextBeginOffset``, ``minOffset`` and ``maxOffset`` as strings.
``suggestWhichBrokerId`` (STORE.md §13.7): with ``slaveReadEnable`` the group's ``whichBrokerWhenConsumeSlowly``
when the store found the consumer lagging beyond the memory ratio, else the group's ``brokerId``; without it
always 0 (the master). A SLAVE without ``slaveReadEnable`` still serves what it has, suggesting 0: RocketMQ
4.9's PullMessageProcessor sets PULL_RETRY_IMMEDIATELY there, but its status switch right after overwrites the
code, so Java slaves serve pulls (consumers fall back to a slave while the master is down, and would spin on
PULL_RETRY_IMMEDIATELY otherwise). A slave never stores the COMMIT_OFFSET piggyback (the master's offsets are
copied to it by SlaveSynchronize).
A PULL_OFFSET_MOVED answer from a master also stores an ``OffsetMovedEvent`` in the ``OFFSET_MOVED_EVENT`` topic
(queue 0, TAGS and KEYS = the group, body ``{"consumerGroup", "messageQueue", "offsetNew", "offsetRequest"}``),
as RocketMQ's ``generateOffsetMovedEvent`` does, so operators can see which groups had their offsets corrected.
A slave (``brokerRole: SLAVE`` without ``offsetCheckInSlave``) answers PULL_RETRY_IMMEDIATELY instead.
The COMMIT_OFFSET piggyback is stored on the first pass only, never when a held pull is re-executed.

SQL92 subscriptions (FEATURES.md §9): a selector in the request that does not compile answers
SUBSCRIPTION_PARSE_FAILED; a heartbeat selector that did not compile answers FILTER_DATA_NOT_EXIST (RocketMQ never
registers its filter data); with ``enablePropertyFilter`` off either answers SYSTEM_ERROR "The broker does not
support consumer to filter message by SQL92". Otherwise the store evaluates the selector on each record's
properties (``message_filter``) and skips non-matching records as tag mismatches. A held SQL92 pull wakes on any
new message of its queue. With ``filterSupportRetry``, ``%RETRY%<group>`` pulls are filtered by the group's
selector of each message's original topic.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from mq.common import properties as P
from mq.common import topic as T
from mq.common.fastjson import dumps as fastjson_dumps
from mq.common.message import MessageExtBrokerInner, MessageQueue
from mq.common.properties import encode_properties
from mq.common.sql_filter import Sql92Filter, Sql92SyntaxError
from mq.common.tags import parse_subscription, tags_code
from mq.daemon.broker.long_polling import HeldPull
from mq.daemon.broker.pull_coalescer import PullCoalescer
from mq.daemon.broker.property_filter import SQL92, commit_log_filter, retry_filter
from mq.daemon.broker.topic_config import PERM_READ
from mq.protocol.bodies import MessageModel, TopicConfig
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from mq.protocol import remarks as R
from mq.store.status import GetMessageStatus, PutMessageStatus

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

log = logging.getLogger(__name__)

RC = ResponseCode
_G = GetMessageStatus
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

_NO_FILTER = "The broker does not support consumer to filter message by "

_CODES = {
    _G.FOUND: RC.SUCCESS,
    _G.NO_MATCHED_MESSAGE: RC.PULL_RETRY_IMMEDIATELY,
    _G.MESSAGE_WAS_REMOVING: RC.PULL_RETRY_IMMEDIATELY,
    _G.OFFSET_FOUND_NULL: RC.PULL_NOT_FOUND,
    _G.OFFSET_OVERFLOW_ONE: RC.PULL_NOT_FOUND,
    _G.OFFSET_OVERFLOW_BADLY: RC.PULL_OFFSET_MOVED,
    _G.OFFSET_TOO_SMALL: RC.PULL_OFFSET_MOVED,
}


class PullProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.slave = controller.store_config.broker_role.upper() == "SLAVE"
        self.coalescer = PullCoalescer(self._run_parked, controller.config.max_held_pull_requests)

    def register(self, server: Any) -> None:
        server.register(RequestCode.PULL_MESSAGE, self.handle)

    def handle(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        h = PullMessageRequestHeader.from_ext(cmd.ext_fields)
        if h.sys_flag & FLAG_SUSPEND:
            cfg = self.c.config
            wait_us = cfg.pull_coalesce_micros
            if wait_us > 0:
                found = self.c.store.get_max_offset(h.topic, h.queue_id) - h.queue_offset
                if 0 <= found < min(cfg.pull_coalesce_messages, h.max_msg_nums) and \
                        self.coalescer.park(conn, cmd, h, wait_us):
                    return None
        return self.process(conn, cmd, h, True)

    def reexecute(self, req: HeldPull) -> None:
        self._answer_later(req.conn, req.cmd, req.header, False)

    def _run_parked(self, conn: Any, cmd: RemotingCommand, h: PullMessageRequestHeader) -> None:
        """A pull's first pass, run when its coalescing window ends (``pull_coalescer``)."""
        try:
            self._answer_later(conn, cmd, h, True)
        except Exception as exc:
            log.exception("pull of %s queue %d from %s failed", h.topic, h.queue_id, conn.remote_addr)
            conn.send_response(cmd.response(RC.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"))

    def _answer_later(self, conn: Any, cmd: RemotingCommand, h: PullMessageRequestHeader,
                      first_pass: bool) -> None:
        if getattr(conn, "output_full", False):  # its client has not read what it was sent: no new answer with messages now
            resp = self._retry_later(cmd, h)
        else:
            resp = self.process(conn, cmd, h, first_pass)
        if resp is not None:
            conn.send_response(resp)

    def close(self) -> None:
        """The broker is stopping: parked pulls are dropped with their connections."""
        self.coalescer.close()

    def _retry_later(self, cmd: RemotingCommand, h: PullMessageRequestHeader) -> RemotingCommand:
        """PULL_RETRY_IMMEDIATELY at the requested offset: the client pulls again, and its new request waits
        until it has read its earlier answers (the connection's output bound)."""
        store = self.c.store
        ext = PullMessageResponseHeader(0, h.queue_offset, store.get_min_offset(h.topic, h.queue_id),
                                        store.get_max_offset(h.topic, h.queue_id)).to_ext()
        return RemotingCommand(RC.PULL_RETRY_IMMEDIATELY, opaque=cmd.opaque, flag=1,
                               remark="the client has not read its earlier answers", ext_fields=ext,
                               serialize_type=cmd.serialize_type)

    def process(self, conn: Any, cmd: RemotingCommand, h: PullMessageRequestHeader,
                allow_suspend: bool) -> RemotingCommand | None:
        c = self.c
        cfg = c.config
        group, topic, qid = h.consumer_group, h.topic, h.queue_id
        if not cfg.broker_permission & PERM_READ:
            return cmd.response(RC.NO_PERMISSION, f"the broker[{cfg.advertised_host}] pulling message is forbidden")
        sgc = c.subscription_groups.find_or_create(group)
        if sgc is None:
            return cmd.response(RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group [{group}] does not exist, {R.suggest_todo()}")
        if not sgc.consume_enable:
            return cmd.response(RC.NO_PERMISSION, f"subscription group no permission, {group}")
        flag = h.sys_flag
        tc = c.topic_config.get(topic)
        if tc is None and c.is_slave:
            tc = self._replicated_topic(topic)
        if tc is None:
            return cmd.response(RC.TOPIC_NOT_EXIST, R.topic_not_exist(topic, pulling=True))
        if not tc.perm & PERM_READ:
            return cmd.response(RC.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if qid < 0 or qid >= tc.read_queue_nums:
            return cmd.response(RC.SYSTEM_ERROR, f"queueId[{qid}] is illegal, topic:[{topic}] "
                                f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{conn.remote_addr}]")
        sql = None
        if flag & FLAG_SUBSCRIPTION:
            etype = (h.expression_type or "TAG").upper()
            if etype == SQL92:
                try:
                    sql = c.consumers.filter_cache.compile(topic, h.subscription or "")
                except Sql92SyntaxError as exc:
                    log.warning("Parse the consumer's subscription[%s] failed, group: %s: %s", h.subscription,
                                group, exc)
                    return cmd.response(RC.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
            elif etype != "TAG":
                return cmd.response(RC.SYSTEM_ERROR, _NO_FILTER + etype)
            sub = None if sql is not None else parse_subscription(topic, h.subscription)
        else:
            info = c.consumers.get(group)
            if info is None:
                return cmd.response(RC.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{R.suggest_todo()}")
            if not sgc.consume_broadcast_enable and info.message_model == MessageModel.BROADCASTING:
                return cmd.response(RC.NO_PERMISSION, f"the consumer group[{group}] can not consume by broadcast "
                                    "way")
            sd = info.subscriptions.get(topic)
            if sd is None:
                return cmd.response(RC.SUBSCRIPTION_NOT_EXIST,
                                    f"the consumer's subscription not exist{R.suggest_todo()}")
            if sd.sub_version < h.sub_version:
                return cmd.response(RC.SUBSCRIPTION_NOT_LATEST, f"the consumer's subscription not latest, {topic}")
            etype = sd.expression_type
            if etype == SQL92:
                sql = info.sql_filters.get(topic)
                if sql is None:
                    return cmd.response(RC.FILTER_DATA_NOT_EXIST, "The broker's consumer filter data is not exist!"
                                        "Your expression may be wrong!")
            elif etype != "TAG":
                return cmd.response(RC.SYSTEM_ERROR, _NO_FILTER + etype)
            sub = None if sql is not None else info.filters.get(topic) or parse_subscription(topic, sd.sub_string)
        if sql is not None and not cfg.enable_property_filter:
            return cmd.response(RC.SYSTEM_ERROR, _NO_FILTER + SQL92)
        codes = None if sub is None or sub.is_all else sub.code_set
        message_filter = None if sql is None else commit_log_filter(sql)
        if cfg.filter_support_retry and T.is_retry_topic(topic):
            message_filter = self._retry_filter(group)
        store = c.store
        r = store.get_message(group, topic, qid, h.queue_offset, h.max_msg_nums, codes, runs=True,
                              message_filter=message_filter)
        st = r.status
        code = _CODES.get(st)
        if code is None:  # NO_MATCHED_LOGIC_QUEUE / NO_MESSAGE_IN_QUEUE
            code = RC.PULL_OFFSET_MOVED if h.queue_offset != 0 else RC.PULL_NOT_FOUND
        body = None
        if code == RC.SUCCESS:
            body = r.buffers[0] if len(r.buffers) == 1 else b"".join(r.buffers)
            c.stats.on_group_get(topic, group, r.message_count, len(body), qid, r.next_begin_offset)
        elif code == RC.PULL_NOT_FOUND and allow_suspend and flag & FLAG_SUSPEND:
            # RocketMQ holds it for the client's suspendTimeoutMillis, uncapped (15 s from a push consumer, 20 s
            # from the pull and lite pull consumers); a held pull is bounded by maxHeldPullRequests and dropped
            # with its connection.
            ms = h.suspend_timeout_millis if cfg.long_polling_enable else cfg.short_polling_time_mills
            matches = None if codes is None else sub.matches_code  # SQL92: any new message wakes it
            if ms > 0 and c.hold_service.hold(conn, cmd, h, matches, ms / 1000.0):
                if flag & FLAG_COMMIT_OFFSET and not self.slave:
                    c.offsets.commit(conn.remote_addr, group, topic, qid, h.commit_offset)
                return None
        if allow_suspend and flag & FLAG_COMMIT_OFFSET and not self.slave:
            c.offsets.commit(conn.remote_addr, group, topic, qid, h.commit_offset)
        if code == RC.PULL_OFFSET_MOVED:
            if not self.slave or c.store_config.offset_check_in_slave:
                self._offset_moved(group, topic, qid, h.queue_offset, r.next_begin_offset)
            else:
                code = RC.PULL_RETRY_IMMEDIATELY
        if c.store_config.slave_read_enable:  # changeable at run time
            suggest = sgc.which_broker_when_consume_slowly if r.suggest_pulling_from_slave else sgc.broker_id
        else:
            suggest = 0
        ext = PullMessageResponseHeader(suggest, r.next_begin_offset, r.min_offset, r.max_offset).to_ext()
        return RemotingCommand(code, opaque=cmd.opaque, flag=1, remark=st.name, ext_fields=ext, body=body,
                               serialize_type=cmd.serialize_type)

    def _replicated_topic(self, topic: str) -> TopicConfig | None:
        """A slave holds a topic's messages before its config arrives from the master (every
        slaveSyncInterval), and with the master gone it never does. Rather than answer TOPIC_NOT_EXIST for
        messages it has (RocketMQ's slave does), it takes the topic as its replicated consume queues show it."""
        ids = self.c.store.queue_ids(topic)
        if not ids:
            return None
        tc = TopicConfig(topic_name=topic, read_queue_nums=ids[-1] + 1, write_queue_nums=ids[-1] + 1)
        self.c.topic_config.put(tc)
        log.warning("slave: topic %s has not come from the master yet; serving its %d replicated queue(s)", topic,
                    ids[-1] + 1)
        return tc

    def _retry_filter(self, group: str) -> Callable[[bytes], bool]:
        """filterSupportRetry: a retry message is matched against the group's selector of its original topic."""
        consumers = self.c.consumers

        def lookup(real_topic: str) -> Sql92Filter | None:
            info = consumers.get(group)
            return None if info is None else info.sql_filters.get(real_topic)
        return retry_filter(lookup)

    def _offset_moved(self, group: str, topic: str, queue_id: int, requested: int, new: int) -> None:
        """Store an ``OffsetMovedEvent`` (RocketMQ ``generateOffsetMovedEvent``); a failure is only logged."""
        c = self.c
        log.warning("PULL_OFFSET_MOVED: offset corrected. topic=%s group=%s requestOffset=%d newOffset=%d",
                    topic, group, requested, new)
        mq = MessageQueue(topic, c.config.broker_name, queue_id)
        body = fastjson_dumps({"consumerGroup": group, "messageQueue": mq.to_json_value(), "offsetNew": new,
                               "offsetRequest": requested})
        # Java's HashMap iteration order for these three names: KEYS, DELAY, TAGS.
        props = {P.KEYS: group, P.DELAY_TIME_LEVEL: "0", P.TAGS: group}
        msg = MessageExtBrokerInner(
            topic=T.OFFSET_MOVED_EVENT, body=body, flag=0, properties=props, queue_id=0, sys_flag=0,
            born_timestamp=int(time.time() * 1000), born_host=(c.config.advertised_host, c.port),
            properties_string=encode_properties(props), tags_code=tags_code(group))
        try:
            res = c.store.put_messages_nowait((msg,), _ignore_put)
        except Exception:  # never fail the pull answer over the event
            log.exception("cannot store the OffsetMovedEvent of group %s", group)
            return
        if res is not None and res.status is not PutMessageStatus.PUT_OK:
            log.warning("OffsetMovedEvent of group %s not stored: %s", group, res.status.name)


def _ignore_put(_res: Any) -> None:
    """Completion of an event put under SYNC_FLUSH: nobody waits for it."""
