"""Pulling and offset queries (RocketMQ ``PullAPIWrapper`` + ``MQAdminImpl`` offset calls) and the simple
``PullConsumer`` (``DefaultMQPullConsumer``: the caller chooses queue and offset).

PULL_MESSAGE (11) request ``sysFlag`` bits::

    +-----+---------------+---------------------------------------------------------+
    | bit | name          | set by us                                               |
    +-----+---------------+---------------------------------------------------------+
    | 0x1 | COMMIT_OFFSET | push consumer, clustering, when it has an offset > 0    |
    | 0x2 | SUSPEND       | push consumer (long polling, 15 s) / ``pull(block=..)`` |
    | 0x4 | SUBSCRIPTION  | always (the expression travels with the request)        |
    +-----+---------------+---------------------------------------------------------+

Response codes map to ``PullStatus``: 0 FOUND, 19 NO_NEW_MSG, 20 NO_MATCHED_MSG, 21 OFFSET_ILLEGAL. Messages are
filtered again by tag on the client (the broker filters by hash code only) and get ``MIN_OFFSET``/``MAX_OFFSET``
properties; a consumed message's ``msg_id`` is its UNIQ_KEY when it has one, else its offsetMsgId (Java rule).

A record that cannot be decoded is stepped over and reported (``mq.client.undecodable``; it is in
``PullResult.skipped``), and the records around it are delivered (``mq.common.record_scan``). When a record's
framing is broken, ``pull`` delivers what came before it and ends the answer there (``next_begin_offset`` is
that record's offset); a pull that starts at such a record asks for it alone, and steps over it when it
still does not decode. Java's client instead drops the bad record and the rest of the answer without a word.

SQL92 subscriptions (``build_subscription(topic, expr, "SQL92")``) carry the selector as ``subscription`` with
``expressionType=SQL92``; only the broker evaluates them (the client-side re-filter passes every message).
``check_client_config`` sends CHECK_CLIENT_CONFIG (46), the check a Java consumer makes before it starts: body
``{"clientId", "group", "subscriptionData"}``; a refusal raises ``BrokerError`` (SYSTEM_ERROR when the broker
has no property filter, SUBSCRIPTION_PARSE_FAILED when the selector does not compile).
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field

from mq.client.instance import MQClientInstance
from mq.client.undecodable import LogReporter, UndecodableReporter
from mq.common import properties as P
from mq.common.fastjson import dumps as fastjson_dumps
from mq.common.message import MessageExt, MessageQueue
from mq.common.record import MAX_INFLATED_BODY
from mq.common.record_scan import RecordScan, SkippedRecord, ask_alone, scan_records, settle
from mq.common.tags import SubscriptionData, parse_subscription
from mq.common.topic import validate_group, validate_topic
from mq.config import ClientConfig
from mq.errors import BrokerError, ConfigError, MQError
from mq.protocol import bodies
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
EXPRESSION_TYPES = ("TAG", "SQL92")


def build_subscription(topic: str, expression: str | None, expression_type: str = "TAG") -> SubscriptionData:
    """Java ``FilterAPI.build``: a TAG expression is parsed into tags; a SQL92 selector is kept as it is (the
    broker compiles it) and must not be empty."""
    etype = (expression_type or "TAG").upper()
    if etype == "TAG":
        return parse_subscription(topic, expression)
    if etype not in EXPRESSION_TYPES:
        raise ConfigError(f"unknown expression type {expression_type!r}: TAG or SQL92")
    if not expression or not expression.strip():
        raise ConfigError(f"a {etype} subscription of {topic} needs an expression")
    return SubscriptionData(topic, expression, expression_type=etype)


async def check_client_config(instance: MQClientInstance, addr: str, group: str, sub: SubscriptionData,
                              sub_version: int = 0) -> None:
    """CHECK_CLIENT_CONFIG (46) for one subscription at ``addr``; raises BrokerError when the broker refuses."""
    sd = bodies.SubscriptionData(topic=sub.topic, sub_string=sub.sub_string, tags_set=set(sub.tags_set),
                                 code_set=set(sub.code_set), sub_version=sub_version,
                                 expression_type=sub.expression_type)
    body = fastjson_dumps({"clientId": instance.client_id, "group": group, "subscriptionData": sd.to_json_value()})
    cmd = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body=body)
    await instance.call(addr, cmd)


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    #: messages the broker returned before the client-side tag filter
    raw_count: int = 0
    #: records of the answer that could not be decoded and were stepped over (each one was reported)
    skipped: list[SkippedRecord] = field(default_factory=list)


def decode_pull_body(body: bytes | memoryview, mq: MessageQueue, sub: SubscriptionData, min_offset: int,
                     max_offset: int, *, max_inflated: int = MAX_INFLATED_BODY
                     ) -> tuple[list[MessageExt], int, RecordScan]:
    """(messages that match ``sub``, records decoded, the scan: every decoded record and every skipped one)."""
    scan = scan_records(body, decompress=True, max_inflated=max_inflated)
    out: list[MessageExt] = []
    lo, hi = str(min_offset), str(max_offset)
    for m in scan.messages:
        if not sub.matches_tags(m.properties.get(P.TAGS)):
            continue
        m.broker_name = mq.broker_name
        uniq = m.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            m.msg_id = uniq
        m.properties[P.MIN_OFFSET] = lo
        m.properties[P.MAX_OFFSET] = hi
        out.append(m)
    return out, len(scan.messages), scan


class PullAPI:
    """Broker calls a consumer needs, bound to one ``MQClientInstance``. ``on_undecodable`` takes each record
    a pull steps over (default: a throttled WARNING)."""

    def __init__(self, instance: MQClientInstance, on_undecodable: UndecodableReporter | None = None,
                 log_prefix: str = "") -> None:
        self.instance = instance
        self.on_undecodable: UndecodableReporter = on_undecodable or LogReporter(log, log_prefix)
        #: the brokerId each queue's next pull goes to: the broker's last ``suggestWhichBrokerId``
        #: (Java ``PullAPIWrapper.pullFromWhichNodeTable``)
        self.pull_from: dict[MessageQueue, int] = {}

    async def _pull_addr(self, mq: MessageQueue) -> tuple[str, bool]:
        """(address, is a slave) for the next pull of ``mq``: the suggested broker when the route has it, else
        the master, else any broker of that name (a master that is down: read from its slave)."""
        inst = self.instance
        bid = self.pull_from.get(mq, 0)
        addrs = inst.broker_addrs.get(mq.broker_name)
        if not addrs:
            await inst.update_route(mq.topic)
            addrs = inst.broker_addrs.get(mq.broker_name)
        if addrs:
            addr = addrs.get(bid)
            if addr is not None:
                return addr, bid != 0
            if 0 in addrs:
                return addrs[0], False
        addr = await inst.find_broker_addr(mq, master=False)
        return addr, addr != inst.master_addr(mq.broker_name)

    async def pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, sub: SubscriptionData, *,
                   sys_flag: int = FLAG_SUBSCRIPTION, commit_offset: int = 0, suspend: float = 0.0,
                   timeout: float = 10.0, sub_version: int = 0) -> PullResult:
        """One PULL_MESSAGE (two when the answer starts with a record whose framing is broken: that record is
        then asked for alone, to step over it and no other)."""
        result, scan = await self._pull(group, mq, offset, max_nums, sub, sys_flag=sys_flag,
                                        commit_offset=commit_offset, suspend=suspend, timeout=timeout,
                                        sub_version=sub_version)
        if scan is not None and ask_alone(scan, max_nums):
            result, scan = await self._pull(group, mq, offset, 1, sub,
                                            sys_flag=sys_flag & ~(FLAG_COMMIT_OFFSET | FLAG_SUSPEND),
                                            timeout=timeout, sub_version=sub_version)
        if scan is None or not scan.skipped:
            return result
        result.next_begin_offset, skipped = settle(scan, offset, result.next_begin_offset)
        result.skipped = [s.located(topic=mq.topic, queue_id=mq.queue_id, source=mq.broker_name) for s in skipped]
        for s in result.skipped:
            self.on_undecodable(s)
        return result

    async def _pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, sub: SubscriptionData, *,
                    sys_flag: int, commit_offset: int = 0, suspend: float = 0.0, timeout: float = 10.0,
                    sub_version: int = 0) -> tuple[PullResult, RecordScan | None]:
        addr, slave = await self._pull_addr(mq)
        if slave:  # a slave never stores the pull's commit offset (Java clears the flag)
            sys_flag &= ~FLAG_COMMIT_OFFSET
        if suspend > 0:
            sys_flag |= FLAG_SUSPEND
        hdr = h.PullMessageRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset, max_msg_nums=max_nums,
            sys_flag=sys_flag, commit_offset=commit_offset, suspend_timeout_millis=int(suspend * 1000),
            sub_version=sub_version or int(time.time() * 1000), subscription=sub.sub_string,
            expression_type=sub.expression_type)
        resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE,
                                                                                 hdr.to_ext()), timeout=timeout)
        status = _STATUS.get(resp.code)
        if status is None:
            raise BrokerError.from_response(resp.code, resp.remark, addr)
        rh = h.PullMessageResponseHeader.from_ext(resp.ext_fields)
        self.pull_from[mq] = rh.suggest_which_broker_id
        result = PullResult(status, rh.next_begin_offset, rh.min_offset, rh.max_offset)
        scan = None
        if status is PullStatus.FOUND and resp.body:
            result.messages, result.raw_count, scan = decode_pull_body(
                resp.body, mq, sub, rh.min_offset, rh.max_offset,
                max_inflated=self.instance.config.max_inflated_body_size)
            if not result.messages:
                result.status = PullStatus.NO_MATCHED_MSG
        return result, scan

    async def _offset_call(self, mq: MessageQueue, code: int, ext: dict[str, str], *,
                           ok: tuple[int, ...] = (ResponseCode.SUCCESS,), master: bool = True) -> RemotingCommand:
        """Queue offsets ask the master only (Java's findBrokerAddressInPublish); consumer offsets
        (``master=False``) go to the master or, when it is gone, to a slave (findBrokerAddressInAdmin)."""
        addr = await self.instance.find_broker_addr(mq, master=master)
        return await self.instance.call(addr, RemotingCommand.request(code, ext), ok=ok)

    async def max_offset(self, mq: MessageQueue) -> int:
        resp = await self._offset_call(mq, RequestCode.GET_MAX_OFFSET,
                                       h.GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext())
        return int(resp.ext_fields.get("offset", "0"))

    async def min_offset(self, mq: MessageQueue) -> int:
        resp = await self._offset_call(mq, RequestCode.GET_MIN_OFFSET,
                                       h.GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext())
        return int(resp.ext_fields.get("offset", "0"))

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        resp = await self._offset_call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, h.SearchOffsetRequestHeader(
            topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms).to_ext())
        return int(resp.ext_fields.get("offset", "0"))

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
        resp = await self._offset_call(mq, RequestCode.QUERY_CONSUMER_OFFSET, h.QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id).to_ext(),
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND), master=False)
        if resp.code != ResponseCode.SUCCESS:
            return -1
        return int(resp.ext_fields.get("offset", "-1"))

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int, *, oneway: bool = False
                                     ) -> None:
        ext = h.UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                                                  commit_offset=offset).to_ext()
        if oneway:
            addr = await self.instance.find_broker_addr(mq, master=False)
            await self.instance.remoting.invoke_oneway(
                addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext, oneway=True))
        else:
            await self._offset_call(mq, RequestCode.UPDATE_CONSUMER_OFFSET, ext, master=False)


class PullConsumer:
    """Pull from a queue at an offset of your choosing (``DefaultMQPullConsumer``). ``on_undecodable`` takes
    each record a pull steps over because it cannot be decoded (default: a throttled WARNING log)."""

    def __init__(self, group: str = "DEFAULT_PULL_CONSUMER", client_config: ClientConfig | None = None, *,
                 instance: MQClientInstance | None = None,
                 on_undecodable: UndecodableReporter | None = None) -> None:
        self.group = validate_group(group)
        self.client_config = client_config or ClientConfig()
        self.instance = instance
        self._own_instance = instance is None
        self.on_undecodable = on_undecodable
        self.api: PullAPI | None = None

    async def start(self) -> "PullConsumer":
        if self.api is None:
            if self.instance is None:
                self.instance = await MQClientInstance.acquire(self.client_config)
            self.api = PullAPI(self.instance, self.on_undecodable, log_prefix=f"{self.group}: ")
        return self

    async def shutdown(self) -> None:
        if self.api is not None and self._own_instance and self.instance is not None:
            await self.instance.release()
        self.api = None

    async def __aenter__(self) -> "PullConsumer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _api(self) -> PullAPI:
        if self.api is None:
            raise MQError("the pull consumer is not started (call start() first)")
        return self.api

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        api = self._api()
        return await api.instance.subscribe_queues(validate_topic(topic), refresh=True)

    async def pull(self, queue: MessageQueue, offset: int, max_nums: int = 32, expression: str | None = "*", *,
                   block: float = 0.0, timeout: float = 10.0, expression_type: str = "TAG") -> PullResult:
        """One PULL_MESSAGE; ``block`` > 0 lets the broker hold the request that many seconds (long polling).
        ``expression_type="SQL92"``: ``expression`` is a SQL92 selector evaluated by the broker."""
        sub = build_subscription(queue.topic, expression, expression_type)
        return await self._api().pull(self.group, queue, offset, max_nums, sub, suspend=block,
                                      timeout=max(timeout, block + 5.0))

    async def max_offset(self, queue: MessageQueue) -> int:
        return await self._api().max_offset(queue)

    async def min_offset(self, queue: MessageQueue) -> int:
        return await self._api().min_offset(queue)

    async def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        return await self._api().search_offset(queue, timestamp_ms)

    async def fetch_consume_offset(self, queue: MessageQueue) -> int:
        return await self._api().query_consumer_offset(self.group, queue)

    async def update_consume_offset(self, queue: MessageQueue, offset: int) -> None:
        await self._api().update_consumer_offset(self.group, queue, offset)
