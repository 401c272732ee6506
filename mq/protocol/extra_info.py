"""Pop receipt handles (RocketMQ 5 ``ExtraInfoUtil`` and ``ReceiptHandle``): sans-IO text formats.

A popped message's *extra info* (property ``POP_CK``; the 5.x gRPC receipt handle adds the commit-log offset)
is one line of space-separated fields::

    +---+--------------------+-----------------------------------------------------------------------+
    | # | field              | meaning                                                               |
    +---+--------------------+-----------------------------------------------------------------------+
    | 0 | ckQueueOffset      | the checkpoint's start offset (first queue offset the pop read)       |
    | 1 | popTime            | epoch ms of the pop                                                   |
    | 2 | invisibleTime      | ms; the message comes back at popTime + invisibleTime                 |
    | 3 | reviveQid          | revive queue (999: a FIFO pop, which has no checkpoint)               |
    | 4 | retry flag         | 0 the topic itself, 1 ``%RETRY%{group}_{topic}``, 2 ``%RETRY%{group}+{topic}`` |
    | 5 | brokerName         |                                                                       |
    | 6 | queueId            | queue of the real topic (the retry topic's for a retried message)     |
    | 7 | queueOffset        | the message's own queue offset                                        |
    | 8 | commitLogOffset    | gRPC receipt handles only (ignored here)                              |
    +---+--------------------+-----------------------------------------------------------------------+

The pop response header describes the messages per queue with three ``;``-separated lists (the client
builds each message's extra info from them)::

    startOffsetInfo  "{retryFlag} {queueId} {startOffset}"
    msgOffsetInfo    "{retryFlag} {queueId} {offset},{offset},..."
    orderCountInfo   "{retryFlag} qo{queueId}%{offset} {count}" per message, then "{retryFlag} {queueId} {min count}"
"""

from __future__ import annotations

from dataclasses import dataclass

from mq.errors import RemoteProtocolError

RETRY_PREFIX = "%RETRY%"
NORMAL_FLAG = "0"
RETRY_V1_FLAG = "1"
RETRY_V2_FLAG = "2"
#: reviveQid of a FIFO (orderly) pop: no checkpoint, the queue is blocked instead.
ORDER_REVIVE_QID = 999
SEPARATOR = " "


def pop_retry_topic_v1(topic: str, group: str) -> str:
    """``%RETRY%{group}_{topic}``: RocketMQ 5.3's pop retry topic (enableRetryTopicV2 off, the default)."""
    return f"{RETRY_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    """``%RETRY%{group}+{topic}`` (enableRetryTopicV2)."""
    return f"{RETRY_PREFIX}{group}+{topic}"


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    return pop_retry_topic_v2(topic, group) if v2 else pop_retry_topic_v1(topic, group)


def retry_flag(topic: str) -> str:
    """The extra info's retry flag of the topic a message was read from."""
    if topic.startswith(RETRY_PREFIX):
        return RETRY_V2_FLAG if "+" in topic else RETRY_V1_FLAG
    return NORMAL_FLAG


def real_topic(topic: str, group: str, flag: str) -> str:
    """The topic a handle's message lives in: ``topic`` itself, or the group's pop retry topic of it."""
    if flag == NORMAL_FLAG or topic.startswith(RETRY_PREFIX):
        return topic
    if flag == RETRY_V1_FLAG:
        return pop_retry_topic_v1(topic, group)
    if flag == RETRY_V2_FLAG:
        return pop_retry_topic_v2(topic, group)
    raise RemoteProtocolError(f"bad retry flag {flag[:8]!r} in a receipt handle")


def origin_topic(retry_topic: str, group: str) -> str:
    """The topic a pop retry topic of ``group`` was named after (``retry_topic`` when it is not one)."""
    for head in (f"{RETRY_PREFIX}{group}_", f"{RETRY_PREFIX}{group}+"):
        if retry_topic.startswith(head) and len(retry_topic) > len(head):
            return retry_topic[len(head):]
    return retry_topic


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int = -1  # absent in the 7-field form (then the request's offset is used)
    commit_log_offset: int = -1  # only in gRPC receipt handles

    @property
    def revive_time(self) -> int:
        """When the message becomes visible again (the handle expires)."""
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QID

    def encode(self) -> str:
        base = build(self.ck_queue_offset, self.pop_time, self.invisible_time, self.revive_qid, self.retry,
                     self.broker_name, self.queue_id)
        if self.queue_offset >= 0:
            base += SEPARATOR + str(self.queue_offset)
        if self.commit_log_offset >= 0:
            base += SEPARATOR + str(self.commit_log_offset)
        return base


def build(ck_queue_offset: int, pop_time: int, invisible_time: int, revive_qid: int, retry: str,
          broker_name: str, queue_id: int, queue_offset: int | None = None) -> str:
    """``ExtraInfoUtil.buildExtraInfo`` (``retry`` is the flag, not the topic)."""
    s = f"{ck_queue_offset} {pop_time} {invisible_time} {revive_qid} {retry} {broker_name} {queue_id}"
    return s if queue_offset is None else f"{s} {queue_offset}"


#: Longest extra info / receipt handle accepted (a broker name is at most a few hundred characters).
MAX_LENGTH = 1024


def parse(text: str | None) -> ExtraInfo:
    """Read an extra info (7 or 8 fields) or a gRPC receipt handle (9); RemoteProtocolError when malformed."""
    if not text or len(text) > MAX_LENGTH:
        raise RemoteProtocolError("the extra info (receipt handle) is empty or too long")
    parts = text.split(SEPARATOR)
    if len(parts) < 7:
        raise RemoteProtocolError(f"the extra info {text[:80]!r} has {len(parts)} fields; 7 or more expected")
    try:
        ck, pt, it, rq = int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])
        qid = int(parts[6])
        qo = int(parts[7]) if len(parts) > 7 else -1
        clo = int(parts[8]) if len(parts) > 8 else -1
    except ValueError:
        raise RemoteProtocolError(f"the extra info {text[:80]!r} has a field that is not a number") from None
    if parts[4] not in (NORMAL_FLAG, RETRY_V1_FLAG, RETRY_V2_FLAG):
        raise RemoteProtocolError(f"the extra info {text[:80]!r} has a bad retry flag")
    if min(ck, pt, it, rq, qid) < 0 or (len(parts) > 7 and qo < 0):
        raise RemoteProtocolError(f"the extra info {text[:80]!r} has a negative field")
    return ExtraInfo(ck, pt, it, rq, parts[4], parts[5], qid, qo, clo)


# -- the pop response header's per-queue lists ------------------------------------------------------------------
def start_offset_entry(topic: str, queue_id: int, start_offset: int) -> str:
    return f"{retry_flag(topic)} {queue_id} {start_offset}"


def msg_offset_entry(topic: str, queue_id: int, offsets: list[int]) -> str:
    return f"{retry_flag(topic)} {queue_id} {','.join(map(str, offsets))}"


def order_count_entries(topic: str, queue_id: int, counts: dict[int, int], min_count: int) -> list[str]:
    flag = retry_flag(topic)
    out = [f"{flag} qo{queue_id}%{off} {n}" for off, n in counts.items()]
    out.append(f"{flag} {queue_id} {min_count}")
    return out


def _split_info(text: str | None) -> list[list[str]]:
    if not text:
        return []
    out = []
    for one in text.split(";"):
        f = one.split(SEPARATOR)
        if len(f) != 3:
            raise RemoteProtocolError(f"bad offset info entry {one[:80]!r}")
        out.append(f)
    return out


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    """``"{flag}@{queueId}" -> start offset``."""
    try:
        return {f"{a}@{b}": int(c) for a, b, c in _split_info(text)}
    except ValueError:
        raise RemoteProtocolError(f"bad startOffsetInfo {str(text)[:80]!r}") from None


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    """``"{flag}@{queueId}" -> [queue offsets]``."""
    try:
        return {f"{a}@{b}": [int(x) for x in c.split(",")] for a, b, c in _split_info(text)}
    except ValueError:
        raise RemoteProtocolError(f"bad msgOffsetInfo {str(text)[:80]!r}") from None


def parse_order_count_info(text: str | None) -> dict[str, int]:
    """``"{flag}@qo{queueId}%{offset}"`` or ``"{flag}@{queueId}"`` -> count."""
    try:
        return {f"{a}@{b}": int(c) for a, b, c in _split_info(text)}
    except ValueError:
        raise RemoteProtocolError(f"bad orderCountInfo {str(text)[:80]!r}") from None
