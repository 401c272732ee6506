"""Topic and consume-queue administration on a running store (DELETE_TOPIC_IN_BROKER, CLEAN_EXPIRED_CONSUMEQUEUE,
CLEAN_UNUSED_TOPIC, QUERY_CONSUME_QUEUE): RocketMQ ``DefaultMessageStore.deleteTopics``,
``cleanExpiredConsumerQueue`` and ``cleanUnusedTopic``.

A consume queue is destroyed under the store's put lock and the dispatcher's lock, so no append or dispatch
sees it half gone, and never while records appended to it are still waiting to be dispatched (a group commit
in progress, or a dispatch held back by a full disk): deleting it then would lose their units. Records stay in
the commit log until retention removes them; the next record to a destroyed queue starts it again at offset 0.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Iterable

from mq.common.topic import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC

if TYPE_CHECKING:
    from mq.store.consume_queue import ConsumeQueue
    from mq.store.message_store import MessageStore

log = logging.getLogger(__name__)

#: never destroyed by ``clean_unused_topics`` (as in RocketMQ), whatever the topic table says
ALWAYS_USED = frozenset({SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC})
LMQ_PREFIX = "%LMQ%"


def _in_flight(store: "MessageStore", topic: str, queue_id: int, cq: "ConsumeQueue") -> bool:
    """(Put lock held.) Records appended to this queue that its consume queue does not hold yet."""
    return store.commit_log.topic_queue_table.get((topic, queue_id), 0) > cq.max_offset


def _drop_queue_offsets(store: "MessageStore", topic: str, queue_id: int | None = None) -> None:
    """(Put lock held.) Forget the next queue offset(s), so new records start a fresh queue at 0."""
    table = store.commit_log.topic_queue_table
    for key in [k for k in table if k[0] == topic and (queue_id is None or k[1] == queue_id)]:
        del table[key]


def delete_topics(store: "MessageStore", topics: Iterable[str]) -> int:
    """Destroy the consume queues of ``topics``; returns how many topics had some."""
    n = 0
    for topic in topics:
        with store.put_lock, store.dispatcher.lock:
            if store.cq_table.delete_topic(topic):
                n += 1
            _drop_queue_offsets(store, topic)
    return n


def clean_expired_consume_queues(store: "MessageStore") -> list[tuple[str, int]]:
    """Destroy every consume queue whose last record lies wholly below the commit log's min offset; the delay
    topic is kept, as are empty queues ("created just now") and queues with records in flight. Returns the
    (topic, queueId) destroyed."""
    phy_min = store.commit_log.min_offset
    removed: list[tuple[str, int]] = []
    with store.put_lock, store.dispatcher.lock:
        for cq in list(store.cq_table):
            if cq.topic == SCHEDULE_TOPIC:
                continue
            last = cq.last_unit_end()
            if last == -1:
                log.debug("clean expired consume queues: %s-%d holds no unit yet", cq.topic, cq.queue_id)
                continue
            if last > phy_min or _in_flight(store, cq.topic, cq.queue_id, cq):
                continue
            store.cq_table.delete_queue(cq.topic, cq.queue_id)
            _drop_queue_offsets(store, cq.topic, cq.queue_id)
            removed.append((cq.topic, cq.queue_id))
            log.info("clean expired consume queues: %s-%d destroyed (last record ends at %d, commit log min "
                     "offset %d)", cq.topic, cq.queue_id, last, phy_min)
    return removed


def clean_unused_topics(store: "MessageStore", is_used: Callable[[str], bool]) -> list[str]:
    """Destroy the consume queues of every topic for which ``is_used(topic)`` is false (the delay and
    transaction-op topics and LMQ topics are always kept, and a topic with records in flight is skipped).
    ``is_used`` is called under the store's put and dispatch locks. Returns the topics destroyed."""
    removed: list[str] = []
    with store.put_lock, store.dispatcher.lock:
        for topic in sorted(store.cq_table.queues):
            if topic in ALWAYS_USED or topic.startswith(LMQ_PREFIX) or is_used(topic):
                continue
            per = store.cq_table.queues.get(topic) or {}
            if any(_in_flight(store, topic, qid, cq) for qid, cq in per.items()):
                log.info("clean unused topics: %s has records in flight; kept", topic)
                continue
            store.cq_table.delete_topic(topic)
            _drop_queue_offsets(store, topic)
            removed.append(topic)
            log.info("clean unused topics: %s destroyed", topic)
    return removed


def query_consume_queue(store: "MessageStore", topic: str, queue_id: int, index: int, count: int
                        ) -> tuple[int, int, list[tuple[int, int, int]] | None] | None:
    """(min offset, max offset, units from ``index``) of one consume queue, None when it does not exist; the
    units are None when ``index`` is not readable (``ConsumeQueue.units_at``)."""
    cq = store.cq_table.find(topic, queue_id, create=False)
    if cq is None:
        return None
    return cq.min_offset, cq.max_offset, cq.units_at(index, count)
