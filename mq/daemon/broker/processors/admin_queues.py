"""Queue-administration request processors (AdminBrokerProcessor in RocketMQ 4.9).

``register(controller)`` puts these handlers on ``controller.server`` (worker group ``admin``):

    +------+----------------------------+-------------------------------+------------------------------------+
    | code | request                    | header / body                 | answer                             |
    +------+----------------------------+-------------------------------+------------------------------------+
    |  314 | CLONE_GROUP_OFFSET         | CloneGroupOffsetRequestHeader | SUCCESS, no body                   |
    |  321 | QUERY_CONSUME_QUEUE        | QueryConsumeQueueRequestHeader| QueryConsumeQueueResponseBody      |
    |  306 | CLEAN_EXPIRED_CONSUMEQUEUE | none                          | SUCCESS, no body                   |
    |  316 | CLEAN_UNUSED_TOPIC         | none                          | SUCCESS, no body                   |
    |  329 | DELETE_EXPIRED_COMMITLOG   | none                          | SUCCESS, no body                   |
    +------+----------------------------+-------------------------------+------------------------------------+

Answers are those of a Java 4.9 broker (remark null on success); what was cleaned is logged, not answered.

- CLONE_GROUP_OFFSET: for ``topic`` (blank: every topic the source group has offsets of), skipping topics
  the broker does not configure and, unless ``offline``, topics an online source group does not subscribe
  to, the destination group gets the source's committed offset of every queue. (Java 4.9 passes the
  header's topic, null when blank, to ``cloneOffset`` inside that loop, so a blank topic clones nothing; we
  clone each topic of the loop, which is what the loop is for.)
- QUERY_CONSUME_QUEUE: ``queueId@topic`` unknown -> SYSTEM_ERROR ``"%d@%s is not exist!"``. The units are
  read from ``index`` to at most ``count`` or the end of the segment holding ``index`` (Java
  ``getIndexBuffer``); an index below the min offset or past the written units -> SUCCESS with the remark
  ``"Index %d of %d@%s is not exist!"`` and no body, as Java answers. With ``consumerGroup``: the group's
  subscription of the topic (or filterData ``"G@T is not online!"``), filterData ``"null"`` (the JSON of
  Java's ConsumerFilterData, which only SQL92 subscriptions have) and, our addition, ``eval`` = whether the
  unit's tags code matches the TAG subscription (Java evaluates only units with a consume-queue extension,
  which this store does not write, and leaves ``eval`` false otherwise).
- CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC, DELETE_EXPIRED_COMMITLOG: ``MessageStore``
  ``clean_expired_consume_queues``, ``clean_unused_topics`` (used = configured in the topic table) and
  ``delete_expired_files_manually``, run in a worker thread (they delete files under the store's locks).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

from mq.common.tags import parse_subscription
from mq.daemon.broker.offsets import SEPARATOR
from mq.daemon.broker.processors.admin import GROUP
from mq.protocol import headers as h
from mq.protocol.bodies import ConsumeQueueData, QueryConsumeQueueResponseBody, SubscriptionData
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:  # pragma: no cover
    from mq.daemon.broker.controller import BrokerController
    from mq.remoting import Connection as RemotingConnection

log = logging.getLogger(__name__)

SUCCESS = ResponseCode.SUCCESS
SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR


def consume_queue_body(found: tuple[int, int, list[tuple[int, int, int]] | None],
                       subscription: SubscriptionData | None, filter_data: str | None,
                       matches: Callable[[int], bool] | None) -> QueryConsumeQueueResponseBody | None:
    """The response body for ``MessageStore.query_consume_queue``'s answer; None when the index is unreadable."""
    lo, hi, units = found
    if units is None:
        return None
    data = [ConsumeQueueData(physic_offset=phy, physic_size=size, tags_code=tags,
                             eval=bool(matches(tags)) if matches is not None else False)
            for phy, size, tags in units]
    return QueryConsumeQueueResponseBody(subscription_data=subscription, filter_data=filter_data, queue_data=data,
                                         max_queue_index=hi, min_queue_index=lo)


class QueueAdminProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    @property
    def store(self) -> Any:
        return self.c.store

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    # -- offsets -------------------------------------------------------------------------------------------
    def clone_group_offset(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.CloneGroupOffsetRequestHeader.from_ext(cmd.ext_fields)
        offsets = self.c.offsets
        if hd.topic and hd.topic.strip():
            topics = {hd.topic.strip()}
        else:
            topics = offsets.topics_of_group(hd.src_group)
        table = offsets.table()
        info = self.c.consumers.get(hd.src_group)
        for topic in sorted(topics):
            if self.c.topic_config.get(topic) is None:
                log.warning("[cloneGroupOffset] topic config not exist, %s", topic)
                continue
            if not hd.offline and info is not None and info.subscriptions and topic not in info.subscriptions:
                log.warning("[cloneGroupOffset] the consumer group[%s], topic[%s] not exist", hd.src_group, topic)
                continue
            src = table.get(topic + SEPARATOR + hd.src_group)
            if not src:
                continue
            for qid, off in sorted(src.items()):
                offsets.commit(conn.remote_addr, hd.dest_group, topic, qid, off)
            log.info("cloned offsets of %s on %s to %s (%d queues) for %s", hd.src_group, topic, hd.dest_group,
                     len(src), conn.remote_addr)
        return cmd.response(SUCCESS)

    # -- consume queues ------------------------------------------------------------------------------------
    async def query_consume_queue(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.QueryConsumeQueueRequestHeader.from_ext(cmd.ext_fields)
        topic = hd.topic or ""
        subscription = None
        filter_data = None
        matches = None
        if hd.consumer_group is not None:
            info = self.c.consumers.get(hd.consumer_group)
            subscription = info.subscriptions.get(topic) if info is not None else None
            if subscription is None:
                filter_data = f"{hd.consumer_group}@{topic} is not online!"
            else:
                filter_data = "null"
                if (subscription.expression_type or "TAG").upper() == "TAG":
                    matches = parse_subscription(topic, subscription.sub_string).matches_code

        def build() -> RemotingCommand:
            found = self.store.query_consume_queue(topic, hd.queue_id, hd.index, hd.count)
            if found is None:
                return cmd.response(SYSTEM_ERROR, f"{hd.queue_id}@{topic} is not exist!")
            body = consume_queue_body(found, subscription, filter_data, matches)
            if body is None:
                return cmd.response(SUCCESS, f"Index {hd.index} of {hd.queue_id}@{topic} is not exist!")
            return cmd.response(SUCCESS, body=body.to_json())

        return await self._in_thread(build)

    async def clean_expired_consume_queue(self, conn: "RemotingConnection", cmd: RemotingCommand
                                          ) -> RemotingCommand:
        log.warning("invoke cleanExpiredConsumeQueue start (from %s)", conn.remote_addr)
        removed = await self._in_thread(self.store.clean_expired_consume_queues)
        log.warning("invoke cleanExpiredConsumeQueue end: %d queue(s) destroyed: %s", len(removed),
                    ", ".join(f"{t}-{q}" for t, q in removed) or "none")
        return cmd.response(SUCCESS)

    async def clean_unused_topic(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        log.warning("invoke cleanUnusedTopic start (from %s)", conn.remote_addr)
        topics = self.c.topic_config
        removed = await self._in_thread(self.store.clean_unused_topics, lambda t: topics.get(t) is not None)
        log.warning("invoke cleanUnusedTopic end: %d topic(s) destroyed: %s", len(removed),
                    ", ".join(removed) or "none")
        return cmd.response(SUCCESS)

    async def delete_expired_commit_log(self, conn: "RemotingConnection", cmd: RemotingCommand
                                        ) -> RemotingCommand:
        log.warning("invoke deleteExpiredCommitLog start (from %s)", conn.remote_addr)
        deleted = await self._in_thread(self.store.delete_expired_files_manually)
        log.warning("invoke deleteExpiredCommitLog end: %d segment(s) deleted now, commit log min offset %d",
                    deleted, self.store.get_min_phy_offset())
        return cmd.response(SUCCESS)


def register(controller: "BrokerController") -> None:
    """Register the queue-administration handlers on ``controller.server``."""
    p = QueueAdminProcessor(controller)
    table = {
        RequestCode.CLONE_GROUP_OFFSET: p.clone_group_offset,
        RequestCode.QUERY_CONSUME_QUEUE: p.query_consume_queue,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: p.clean_expired_consume_queue,
        RequestCode.CLEAN_UNUSED_TOPIC: p.clean_unused_topic,
        RequestCode.DELETE_EXPIRED_COMMITLOG: p.delete_expired_commit_log,
    }
    for code, handler in table.items():
        controller.server.register(code, handler, group=GROUP)


__all__ = ["QueueAdminProcessor", "consume_queue_body", "register"]
