"""Raw-wire helpers for broker tests: typed headers over a RemotingClient, no producer/consumer logic."""

from __future__ import annotations

import itertools
import time

from mq.common import properties as P
from mq.common.record import decode_records, encode_batch
from mq.common.message import Message
from mq.protocol import headers as H
from mq.protocol.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand

_seq = itertools.count(1)


def props(tags: str | None = None, keys: str | None = None, **extra: str) -> str:
    d: dict[str, str] = {}
    if tags is not None:
        d[P.TAGS] = tags
    if keys is not None:
        d[P.KEYS] = keys
    d[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = f"{next(_seq):032X}"
    d[P.WAIT_STORE_MSG_OK] = "true"
    d.update(extra)
    return P.encode_properties(d)


def send_cmd(topic: str, body: bytes, *, queue_id: int = 0, tags: str | None = None, keys: str | None = None,
             code: int = RequestCode.SEND_MESSAGE_V2, properties: str | None = None, group: str = "PG",
             **header: object) -> RemotingCommand:
    h = H.SendMessageRequestHeaderV2(producer_group=group, topic=topic, default_topic="TBW102",
                                     default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                     born_timestamp=int(time.time() * 1000), flag=0,
                                     properties=properties if properties is not None else props(tags, keys))
    for k, v in header.items():
        setattr(h, k, v)
    ext = h.to_v1().to_ext() if code == RequestCode.SEND_MESSAGE else h.to_ext()
    return RemotingCommand.request(code, ext, body)


def batch_cmd(topic: str, messages: list[Message], queue_id: int = 0) -> RemotingCommand:
    h = H.SendMessageRequestHeaderV2(producer_group="PG", topic=topic, default_topic="TBW102",
                                     default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                     born_timestamp=int(time.time() * 1000), flag=0, properties="", batch=True)
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, h.to_ext(), encode_batch(messages))


def pull_cmd(topic: str, queue_id: int, offset: int, *, group: str = "CG", max_nums: int = 32,
             sys_flag: int = 0x4, subscription: str | None = "*", suspend_ms: int = 0,
             commit_offset: int = 0) -> RemotingCommand:
    h = H.PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                                   max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=commit_offset,
                                   suspend_timeout_millis=suspend_ms, sub_version=0, subscription=subscription)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())


def heartbeat_cmd(client_id: str, *, consumer_group: str | None = None, topic: str | None = None,
                  expression: str = "*", producer_group: str | None = None) -> RemotingCommand:
    hb = HeartbeatData(client_id=client_id)
    if producer_group:
        hb.producer_data_set.append(ProducerData(group_name=producer_group))
    if consumer_group:
        subs = []
        if topic:
            subs.append(SubscriptionData(topic=topic, sub_string=expression, sub_version=int(time.time() * 1000)))
        hb.consumer_data_set.append(ConsumerData(group_name=consumer_group, subscription_data_set=subs))
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=hb.to_json())


def records(resp: RemotingCommand):
    return decode_records(resp.body or b"", strict=True)


def req(code: int, header: object | None = None, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand.request(code, header.to_ext() if header is not None else {}, body)
