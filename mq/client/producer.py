"""The producer (RocketMQ ``DefaultMQProducer``): sync with retries, async, oneway, batch, ordered sends.

Send path (``DefaultMQProducerImpl.sendDefaultImpl`` / ``sendKernelImpl``):

1. validate (topic rule, non-empty body, size <= ``max_message_size``), set UNIQ_KEY if absent;
2. find the topic's publish info (route from the name server, cached by the ``MQClientInstance``);
3. up to ``1 + retry_times_when_send_failed`` attempts for SYNC (1 for ASYNC/ONEWAY) within
   ``send_msg_timeout`` overall, each on a queue chosen by ``MQFaultStrategy`` (round robin avoiding the last
   broker; latency-aware when ``send_latency_fault_enable``); remoting errors and response codes
   ``RETRY_CODES`` move on to the next attempt; any other code is raised at once;
4. bodies >= ``compress_msg_body_over_howmuch`` (not batches) are zlib-compressed (level 5), sysFlag ``0x301``;
5. SEND_MESSAGE_V2 (310) with ``SendMessageRequestHeaderV2``; batches are SEND_BATCH_MESSAGE (320), ``m=true``,
   body = ``encode_batch`` of the members (each with its own UNIQ_KEY); replies (``MSG_TYPE=reply``, built by
   ``request_reply.create_reply_message``) are SEND_REPLY_MESSAGE_V2 (325).

``request(msg, timeout)`` is request-reply (``mq/client/request_reply.py``).

Response codes 0, 10, 11, 12 mean "stored" (``SendStatus``); a result is returned only for those.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from typing import Any, Callable, Sequence

from mq.client.fault_strategy import MQFaultStrategy
from mq.client.hooks import (CommunicationMode, SendContext, SendHook, SendResult, SendStatus, attach_trace,
                             run_hooks)
from mq.client.instance import MQClientInstance
from mq.client.request_reply import is_reply, new_correlation_id
from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.message import Message, MessageExt, MessageQueue
from mq.common.msg_id import UniqKeyGenerator
from mq.common.record import encode_batch
from mq.common.topic import is_retry_topic, validate_group, validate_topic
from mq.config import ClientConfig, ProducerConfig
from mq.errors import (BrokerError, ConnectError, MessageTooLargeError, MQError, RemotingError, RemotingTimeoutError,
                       RequestTimeoutError)
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

log = logging.getLogger(__name__)

#: Java ``retryResponseCodes`` {TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, NO_PERMISSION, NO_BUYER_ID,
#: NOT_IN_CURRENT_UNIT} plus SYSTEM_BUSY, which we also retry on another broker.
RETRY_CODES = frozenset({17, 14, 1, 16, 204, 205, ResponseCode.SYSTEM_BUSY})
STORED = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
ZLIB_SYSFLAG = SF.COMPRESSED | SF.COMPRESSION_ZLIB

#: ``selector(queues, message, arg) -> MessageQueue`` (Java ``MessageQueueSelector``)
QueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """``SelectMessageQueueByHash``: ``abs(hash(arg)) % n`` (Java hashCode for str/int arguments)."""
    from mq.common.tags import java_hash_code

    code = java_hash_code(arg) if isinstance(arg, str) else int(arg)
    return queues[abs(code) % len(queues)]


class Producer:
    def __init__(self, config: ProducerConfig | None = None, client_config: ClientConfig | None = None, *,
                 instance: MQClientInstance | None = None, hooks: Sequence[SendHook] = (),
                 clock: Callable[[], int] | None = None, enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        self.config = config or ProducerConfig()
        self.group = validate_group(self.config.group)
        self.client_config = client_config or ClientConfig()
        self.instance = instance
        self._own_instance = instance is None
        self.hooks: list[SendHook] = list(hooks)
        self.fault = MQFaultStrategy(self.config.send_latency_fault_enable,
                                     **({"clock": clock} if clock else {}))
        self._uniq: UniqKeyGenerator | None = None
        self._started = False
        #: topics whose brokers have had our heartbeat before a request (``request``)
        self._request_topics: set[str] = set()
        self.trace_dispatcher: Any = None
        if enable_trace:
            attach_trace(self, trace_topic)

    # -- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> "Producer":
        if self._started:
            return self
        if self.instance is None:
            self.instance = await MQClientInstance.acquire(self.client_config)
        else:
            await self.instance.start()
        self.instance.register_producer(self)
        self._uniq = UniqKeyGenerator(self.instance.client_ip if ":" not in self.instance.client_ip else "127.0.0.1")
        self._started = True
        return self

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        assert self.instance is not None
        await self.instance.unregister(producer_group=self.group)
        if self._own_instance:
            await self.instance.release()

    def stats(self) -> dict[str, Any]:
        """Client statistics; with tracing on, the trace dispatcher's counts (sent, dropped by reason, ...)."""
        return {"group": self.group, "started": self._started,
                "trace": self.trace_dispatcher.stats() if self.trace_dispatcher is not None else None}

    async def __aenter__(self) -> "Producer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def register_hook(self, hook: SendHook) -> None:
        self.hooks.append(hook)

    # -- public API -------------------------------------------------------------------------------------
    async def send(self, msg: Message, *, queue: MessageQueue | None = None, selector: QueueSelector | None = None,
                   arg: Any = None, timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer; with ``queue`` or ``selector`` exactly one attempt."""
        result = await self._send(msg, CommunicationMode.SYNC, queue, selector, arg, timeout)
        assert result is not None
        return result

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None] | None
                   = None, *, queue: MessageQueue | None = None, timeout: float | None = None
                   ) -> "asyncio.Future[SendResult]":
        """Start a send and return its future (``callback(result, exc)`` when done); retried on another broker up
        to ``retry_times_when_send_async_failed`` times."""
        task = asyncio.get_running_loop().create_task(
            self._send(msg, CommunicationMode.ASYNC, queue, None, None, timeout))
        if callback is not None:
            def done(t: asyncio.Task) -> None:
                if t.cancelled():
                    callback(None, asyncio.CancelledError())
                else:
                    callback(t.result() if t.exception() is None else None, t.exception())
            task.add_done_callback(done)
        return task  # type: ignore[return-value]

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for an answer (one attempt; nothing tells whether it was stored)."""
        await self._send(msg, CommunicationMode.ONEWAY, queue, None, None, None)

    async def send_batch(self, msgs: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout: float | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE: same topic, no delay level, no retry topic (as Java requires)."""
        if not msgs:
            raise MQError("a batch needs at least one message")
        topic = msgs[0].topic
        for m in msgs:
            if m.topic != topic:
                raise MQError("every message of a batch must have the same topic")
            if m.delay_time_level > 0:
                raise MQError("TimeDelayLevel is not supported for batching")
            if is_retry_topic(m.topic):
                raise MQError("Retry Group is not supported for batching")
            self._check(m)
            self._ensure_uniq(m)
        wrapper = Message(topic=topic, body=encode_batch(msgs))
        if len(wrapper.body) > self.config.max_message_size:
            raise MessageTooLargeError(f"the batch body size {len(wrapper.body)} is over the limit "
                                       f"{self.config.max_message_size} (maxMessageSize)")
        ids = ",".join(m.uniq_key or "" for m in msgs)
        result = await self._send(wrapper, CommunicationMode.SYNC, queue, None, None, timeout, batch_ids=ids)
        assert result is not None
        return result

    async def request(self, msg: Message, timeout: float) -> MessageExt:
        """Send ``msg`` and wait up to ``timeout`` seconds (send included) for the reply a responder sends with
        ``create_reply_message`` (Java ``DefaultMQProducer.request``). Sets CORRELATION_ID, REPLY_TO_CLIENT and
        TTL (ms) on ``msg``. Raises ``RequestTimeoutError`` when no reply comes in time, the send's own error
        when the request could not be sent."""
        self._require_started()
        assert self.instance is not None
        begin = time.monotonic()
        cid = new_correlation_id()
        msg.properties[P.CORRELATION_ID] = cid
        msg.properties[P.MESSAGE_REPLY_TO_CLIENT] = self.instance.client_id
        msg.properties[P.MESSAGE_TTL] = str(int(timeout * 1000))
        if msg.topic not in self._request_topics:
            # Java prepareSendRequest: fetch the route and heartbeat first, so the brokers of the topic know our
            # channel (REPLY_TO_CLIENT) before the reply comes back; once per topic (Java: when it has no route)
            await self.instance.publish_info(msg.topic, self.config.create_topic_key,
                                             self.config.default_topic_queue_nums)
            await self.instance.heartbeat_all()
            self._request_topics.add(msg.topic)
        table = self.instance.request_futures
        fut = table.put(cid, timeout)
        try:
            await self._send(msg, CommunicationMode.SYNC, None, None, None, timeout - (time.monotonic() - begin))
        except BaseException:
            table.remove(cid)
            raise
        try:
            return await table.wait(cid, fut, timeout - (time.monotonic() - begin), msg.topic)
        except RequestTimeoutError:
            raise RequestTimeoutError(f"send request message to <{msg.topic}> OK, but wait reply message timeout, "
                                      f"{timeout * 1000:.0f} ms.") from None

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        self._require_started()
        assert self.instance is not None
        return list((await self.instance.publish_info(validate_topic(topic), self.config.create_topic_key,
                                                      self.config.default_topic_queue_nums)).queues)

    # -- internals --------------------------------------------------------------------------------------
    def _require_started(self) -> None:
        if not self._started:
            raise MQError("the producer is not started (call start() first)")

    def _check(self, msg: Message) -> None:
        validate_topic(msg.topic)
        if not msg.body:
            raise MQError("the message body is empty")
        if len(msg.body) > self.config.max_message_size:
            raise MessageTooLargeError(f"the message body size {len(msg.body)} is over the limit "
                                       f"{self.config.max_message_size} (maxMessageSize)")

    def _ensure_uniq(self, msg: Message) -> None:
        if P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in msg.properties:
            assert self._uniq is not None
            msg.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._uniq.next()

    async def _send(self, msg: Message, mode: CommunicationMode, queue: MessageQueue | None,
                    selector: QueueSelector | None, arg: Any, timeout: float | None, *,
                    batch_ids: str | None = None) -> SendResult | None:
        self._require_started()
        batch = batch_ids is not None
        assert self.instance is not None
        if not batch:
            self._check(msg)
            self._ensure_uniq(msg)
        timeout = self.config.send_msg_timeout if timeout is None else timeout
        begin = time.monotonic()
        deadline = begin + timeout
        info = await self.instance.publish_info(msg.topic, self.config.create_topic_key,
                                                self.config.default_topic_queue_nums)
        if not info.ok:
            raise MQError(f"no writable queue for topic {msg.topic!r} (route has no master with WRITE permission)")
        if queue is not None or selector is not None:
            if selector is not None:
                queue = selector(list(info.queues), msg, arg)
            return await self._attempt(msg, queue, mode, deadline - time.monotonic(), batch_ids)
        if mode is CommunicationMode.SYNC:
            times = 1 + self.config.retry_times_when_send_failed
        elif mode is CommunicationMode.ASYNC:
            times = 1 + self.config.retry_times_when_send_async_failed
        else:
            times = 1
        last_broker: str | None = None
        last_exc: BaseException | None = None
        for attempt in range(times):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            mq = self.fault.select_queue(info, last_broker)
            last_broker = mq.broker_name
            started = time.monotonic()
            try:
                result = await self._attempt(msg, mq, mode, remaining, batch_ids)
            except RemotingError as exc:
                self.fault.update_fault_item(mq.broker_name, _ms_since(started), True)
                last_exc = exc
                log.debug("send to %s failed (attempt %d): %s", mq, attempt + 1, exc)
                await self._refresh_after_failure(msg.topic)
                info = self.instance.publish.get(msg.topic, info)
                continue
            except BrokerError as exc:
                self.fault.update_fault_item(mq.broker_name, _ms_since(started), True)
                if exc.code not in RETRY_CODES:
                    raise
                last_exc = exc
                log.debug("send to %s refused (attempt %d): %s", mq, attempt + 1, exc)
                continue
            self.fault.update_fault_item(mq.broker_name, _ms_since(started), False)
            if (result is not None and result.status is not SendStatus.SEND_OK
                    and self.config.retry_another_broker_when_not_store_ok and attempt + 1 < times):
                continue
            return result
        if last_exc is None:
            raise RemotingTimeoutError(f"send to topic {msg.topic!r} timed out after {timeout * 1000:.0f} ms")
        if isinstance(last_exc, MQError) and times > 1:
            last_exc.args = (f"{last_exc} (after {times} attempts)",)
        raise last_exc

    async def _refresh_after_failure(self, topic: str) -> None:
        assert self.instance is not None
        try:
            await self.instance.update_route(topic)
        except MQError as exc:
            log.debug("route refresh of %s after a failed send: %s", topic, exc)

    async def _attempt(self, msg: Message, mq: MessageQueue, mode: CommunicationMode, timeout: float,
                       batch_ids: str | None) -> SendResult | None:
        assert self.instance is not None
        batch = batch_ids is not None
        addr = await self.instance.find_broker_addr(mq)
        body = msg.body
        sys_flag = 0
        if not batch and len(body) >= self.config.compress_msg_body_over_howmuch:
            body = zlib.compress(body, self.config.compress_level)
            sys_flag |= ZLIB_SYSFLAG
        if msg.properties.get(P.TRANSACTION_PREPARED) == "true":
            sys_flag |= SF.TRANSACTION_PREPARED_TYPE
        props = msg.properties
        reconsume_times = 0
        max_reconsume: int | None = None
        if is_retry_topic(msg.topic):
            props = dict(props)
            rt = props.pop(P.RECONSUME_TIME, None)
            mx = props.pop(P.MAX_RECONSUME_TIMES, None)
            reconsume_times = int(rt) if rt else 0
            max_reconsume = int(mx) if mx else None
        ctx: SendContext | None = None
        if self.hooks:
            ctx = SendContext(self.group, msg, mq, addr, mode, born_host=self.instance.client_ip)
            run_hooks(self.hooks, "send_before", ctx)
        header = h.SendMessageRequestHeaderV2(
            producer_group=self.group, topic=msg.topic, default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums, queue_id=mq.queue_id,
            sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), flag=msg.flag,
            properties=P.encode_properties(props), reconsume_times=reconsume_times, unit_mode=False, batch=batch,
            max_reconsume_times=max_reconsume)
        if batch:
            code = RequestCode.SEND_BATCH_MESSAGE
        elif is_reply(msg):  # a reply built by create_reply_message: the broker pushes it to the requester
            code = RequestCode.SEND_REPLY_MESSAGE_V2
        else:
            code = RequestCode.SEND_MESSAGE_V2
        cmd = RemotingCommand.request(code, header.to_ext(), body, oneway=mode is CommunicationMode.ONEWAY)
        try:
            if mode is CommunicationMode.ONEWAY:
                await self.instance.remoting.invoke_oneway(addr, cmd)
                result = None
            else:
                resp = await self.instance.remoting.invoke(addr, cmd, timeout=timeout)
                result = self._result(resp, msg, mq, addr, batch_ids)
        except ConnectError as exc:
            reason = str(exc).split(": ", 1)[-1]
            err = ConnectError(f"cannot reach broker {mq.broker_name} at {addr}: {reason}", addr=addr)
            if ctx is not None:
                ctx.exception = err
                run_hooks(self.hooks, "send_after", ctx)
            raise err from None
        except BaseException as exc:
            if ctx is not None:
                ctx.exception = exc
                run_hooks(self.hooks, "send_after", ctx)
            raise
        if ctx is not None:
            ctx.result = result
            run_hooks(self.hooks, "send_after", ctx)
        return result

    @staticmethod
    def _result(resp: RemotingCommand, msg: Message, mq: MessageQueue, addr: str,
                batch_ids: str | None) -> SendResult:
        status = STORED.get(resp.code)
        if status is None:
            raise BrokerError.from_response(resp.code, resp.remark, addr)
        hdr = h.SendMessageResponseHeader.from_ext(resp.ext_fields)
        msg_id = batch_ids if batch_ids is not None else msg.uniq_key
        return SendResult(status=status, msg_id=msg_id or hdr.msg_id, offset_msg_id=hdr.msg_id,
                          queue=MessageQueue(mq.topic, mq.broker_name, hdr.queue_id), queue_offset=hdr.queue_offset,
                          region_id=hdr.msg_region or "DefaultRegion",
                          trace_on=hdr.trace_on is not False, transaction_id=hdr.transaction_id, broker_addr=addr)


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
