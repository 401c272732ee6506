"""A small in-memory broker and name server for client tests, built on ``mq.remoting.RemotingServer``.

It speaks the real wire protocol for what the client uses: routes (105), heartbeat (34), unregister (35),
send (310/320), pull (11, with long polling), offsets (14, 15, 29, 30, 31), consumer list (38), send-back (36).
Failure injection: ``fail_next_sends`` (response codes answered to the next sends), ``fail_send_back``,
``stop()`` to make the broker unreachable. Send-back copies are stored in ``%RETRY%<group>`` at once (no delay).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from mq.common import properties as P
from mq.common.hosts import parse_addr
from mq.common.message import MessageExt
from mq.common.msg_id import create_offset_msg_id
from mq.common.record import decode_record, encode_record, iter_batch
from mq.common.tags import parse_subscription, tags_code
from mq.protocol import headers as h
from mq.protocol.bodies import (
    BrokerData,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    QueueData,
    TopicRouteData,
)
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingServer


class FakeNamesrv:
    def __init__(self) -> None:
        self.brokers: list[FakeBroker] = []
        self.server = RemotingServer("127.0.0.1", 0, name="fake-ns")
        self.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route)
        self.route_calls = 0

    async def start(self) -> str:
        await self.server.start()
        return self.addr

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def stop(self) -> None:
        await self.server.stop(grace=0.1)

    def _route(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        self.route_calls += 1
        topic = h.GetRouteInfoRequestHeader.from_ext(cmd.ext_fields).topic
        route = TopicRouteData()
        for b in self.brokers:
            if topic in b.topics and b.registered:
                n = b.topics[topic]
                route.queue_datas.append(QueueData(broker_name=b.name, read_queue_nums=n, write_queue_nums=n,
                                                   perm=b.perm))
                route.broker_datas.append(BrokerData(cluster="DefaultCluster", broker_name=b.name,
                                                     broker_addrs={0: b.addr}))
        if not route.queue_datas:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: "
                                                               f"{topic}")
        return cmd.response(ResponseCode.SUCCESS, body=route.to_json())


class FakeBroker:
    def __init__(self, name: str, ns: FakeNamesrv, topics: dict[str, int] | None = None, *,
                 auto_create: bool = True) -> None:
        self.name = name
        self.ns = ns
        ns.brokers.append(self)
        self.topics: dict[str, int] = dict(topics or {})
        self.auto_create = auto_create
        self.perm = 6
        self.registered = True
        self.queues: dict[tuple[str, int], list[bytes]] = defaultdict(list)
        self.by_phy: dict[int, bytes] = {}
        self.phy = 0
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.clients: dict[str, dict[str, object]] = defaultdict(dict)  # group -> client id -> conn
        self.heartbeats: list[HeartbeatData] = []
        self.requests: list[RemotingCommand] = []
        self.fail_next_sends: list[int] = []
        self.fail_send_back = False
        self.send_delay = 0.0
        self.send_backs: list[h.ConsumerSendMsgBackRequestHeader] = []
        self._arrived: dict[tuple[str, int], asyncio.Event] = defaultdict(asyncio.Event)
        self.server = RemotingServer("127.0.0.1", 0, name=f"fake-{name}")
        s = self.server
        s.register(RequestCode.HEART_BEAT, self._heartbeat)
        s.register(RequestCode.UNREGISTER_CLIENT, self._unregister)
        s.register(RequestCode.SEND_MESSAGE_V2, self._send)
        s.register(RequestCode.SEND_BATCH_MESSAGE, self._send)
        s.register(RequestCode.PULL_MESSAGE, self._pull)
        s.register(RequestCode.QUERY_CONSUMER_OFFSET, self._query_offset)
        s.register(RequestCode.UPDATE_CONSUMER_OFFSET, self._update_offset)
        s.register(RequestCode.GET_MAX_OFFSET, self._max_offset)
        s.register(RequestCode.GET_MIN_OFFSET, self._min_offset)
        s.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self._search_offset)
        s.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self._consumer_list)
        s.register(RequestCode.CONSUMER_SEND_MSG_BACK, self._send_back)
        self.port = 0

    async def start(self) -> str:
        _, self.port = await self.server.start()
        return self.addr

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        await self.server.stop(grace=0.1)

    # -- helpers ----------------------------------------------------------------------------------------
    def stored(self, topic: str, queue_id: int | None = None) -> list[MessageExt]:
        out = []
        for (t, q), recs in sorted(self.queues.items()):
            if t == topic and (queue_id is None or q == queue_id):
                out.extend(decode_record(r) for r in recs)
        return out

    def put(self, topic: str, queue_id: int, body: bytes, props: dict[str, str], *, flag: int = 0, sys_flag: int = 0,
            reconsume_times: int = 0, born: int | None = None) -> MessageExt:
        if topic not in self.topics:
            self.topics[topic] = max(queue_id + 1, 1)
        key = (topic, queue_id)
        now = int(time.time() * 1000)
        msg = MessageExt(topic=topic, body=body, flag=flag, properties=dict(props), queue_id=queue_id,
                         queue_offset=len(self.queues[key]), sys_flag=sys_flag, born_timestamp=born or now,
                         born_host=("127.0.0.1", 5555), store_timestamp=now, store_host=parse_addr(self.addr),
                         commit_log_offset=self.phy, reconsume_times=reconsume_times)
        rec = encode_record(msg)
        self.queues[key].append(rec)
        self.by_phy[self.phy] = rec
        msg.msg_id = create_offset_msg_id(msg.store_host, self.phy)
        self.phy += len(rec)
        self._arrived[key].set()
        self._arrived[key] = asyncio.Event()
        return msg

    def _notify(self, group: str) -> None:
        for conn in list(self.clients[group].values()):
            cmd = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                          h.NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext(),
                                          oneway=True)
            try:
                conn.invoke_oneway(cmd)
            except Exception:
                pass

    # -- handlers ---------------------------------------------------------------------------------------
    def _heartbeat(self, conn, cmd):
        hb = HeartbeatData.from_json(cmd.body)
        self.heartbeats.append(hb)
        for cd in hb.consumer_data_set:
            self.topics.setdefault("%RETRY%" + cd.group_name, 1)  # as a real broker does on heartbeat
            members = self.clients[cd.group_name]
            new = hb.client_id not in members
            members[hb.client_id] = conn
            if new:
                self._notify(cd.group_name)
        return cmd.response(ResponseCode.SUCCESS)

    def _unregister(self, conn, cmd):
        hdr = h.UnregisterClientRequestHeader.from_ext(cmd.ext_fields)
        if hdr.consumer_group and self.clients[hdr.consumer_group].pop(hdr.client_id, None) is not None:
            self._notify(hdr.consumer_group)
        return cmd.response(ResponseCode.SUCCESS)

    async def _send(self, conn, cmd):
        self.requests.append(cmd)
        if self.send_delay:
            await asyncio.sleep(self.send_delay)
        if self.fail_next_sends:
            code = self.fail_next_sends.pop(0)
            return cmd.response(code, f"injected {code}")
        hdr = h.SendMessageRequestHeaderV2.from_ext(cmd.ext_fields)
        if hdr.topic not in self.topics:
            if not self.auto_create:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{hdr.topic}] not exist")
            self.topics[hdr.topic] = hdr.default_topic_queue_nums
        body = bytes(cmd.body or b"")
        if hdr.batch:
            ids, first = [], None
            for flag, b, props in iter_batch(body):
                m = self.put(hdr.topic, hdr.queue_id, b, P.decode_properties(props), flag=flag)
                ids.append(m.msg_id)
                first = m.queue_offset if first is None else first
            rh = h.SendMessageResponseHeader(msg_id=",".join(ids), queue_id=hdr.queue_id, queue_offset=first or 0)
        else:
            m = self.put(hdr.topic, hdr.queue_id, body, P.decode_properties(hdr.properties), flag=hdr.flag,
                         sys_flag=hdr.sys_flag, reconsume_times=hdr.reconsume_times or 0,
                         born=hdr.born_timestamp)
            rh = h.SendMessageResponseHeader(msg_id=m.msg_id, queue_id=hdr.queue_id, queue_offset=m.queue_offset,
                                             msg_region="DefaultRegion", trace_on=True)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=rh.to_ext())

    async def _pull(self, conn, cmd):
        self.requests.append(cmd)
        hdr = h.PullMessageRequestHeader.from_ext(cmd.ext_fields)
        key = (hdr.topic, hdr.queue_id)
        if hdr.sys_flag & 1:
            self.offsets[(hdr.consumer_group, hdr.topic, hdr.queue_id)] = hdr.commit_offset
        sub = parse_subscription(hdr.topic, hdr.subscription)
        deadline = time.monotonic() + hdr.suspend_timeout_millis / 1000
        while True:
            recs = self.queues.get(key, [])
            max_off = len(recs)
            if hdr.queue_offset > max_off:
                return self._pull_resp(cmd, ResponseCode.PULL_OFFSET_MOVED, max_off, max_off)
            if hdr.queue_offset < max_off:
                out, nxt = [], hdr.queue_offset
                for rec in recs[hdr.queue_offset:]:
                    nxt += 1
                    m = decode_record(rec, read_body=False)
                    if sub.matches_code(tags_code(m.tags)):
                        out.append(rec)
                    if len(out) >= hdr.max_msg_nums:
                        break
                if out:
                    return self._pull_resp(cmd, ResponseCode.SUCCESS, nxt, max_off, b"".join(out))
                return self._pull_resp(cmd, ResponseCode.PULL_RETRY_IMMEDIATELY, nxt, max_off)
            remaining = deadline - time.monotonic()
            if not hdr.sys_flag & 2 or remaining <= 0:
                return self._pull_resp(cmd, ResponseCode.PULL_NOT_FOUND, hdr.queue_offset, max_off)
            try:
                await asyncio.wait_for(self._arrived[key].wait(), remaining)
            except asyncio.TimeoutError:
                pass

    @staticmethod
    def _pull_resp(cmd, code, nxt, max_off, body=None):
        rh = h.PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=nxt, min_offset=0,
                                         max_offset=max_off)
        return cmd.response(code, ext_fields=rh.to_ext(), body=body)

    def _query_offset(self, conn, cmd):
        hdr = h.QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        off = self.offsets.get((hdr.consumer_group, hdr.topic, hdr.queue_id))
        if off is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group "
                                                              "consumer boot first")
        return cmd.response(ResponseCode.SUCCESS, ext_fields=h.QueryConsumerOffsetResponseHeader(offset=off).to_ext())

    def _update_offset(self, conn, cmd):
        hdr = h.UpdateConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        self.offsets[(hdr.consumer_group, hdr.topic, hdr.queue_id)] = hdr.commit_offset
        return None if cmd.is_oneway else cmd.response(ResponseCode.SUCCESS)

    def _max_offset(self, conn, cmd):
        hdr = h.GetMaxOffsetRequestHeader.from_ext(cmd.ext_fields)
        n = len(self.queues.get((hdr.topic, hdr.queue_id), []))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(n)})

    def _min_offset(self, conn, cmd):
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": "0"})

    def _search_offset(self, conn, cmd):
        hdr = h.SearchOffsetRequestHeader.from_ext(cmd.ext_fields)
        recs = self.queues.get((hdr.topic, hdr.queue_id), [])
        off = 0
        for i, rec in enumerate(recs):
            if decode_record(rec, read_body=False).store_timestamp >= hdr.timestamp:
                off = i
                break
        else:
            off = max(len(recs) - 1, 0)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(off)})

    def _consumer_list(self, conn, cmd):
        group = h.GetConsumerListByGroupRequestHeader.from_ext(cmd.ext_fields).consumer_group
        ids = sorted(self.clients.get(group, {}))
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return cmd.response(ResponseCode.SUCCESS,
                            body=GetConsumerListByGroupResponseBody(consumer_id_list=ids).to_json())

    def _send_back(self, conn, cmd):
        hdr = h.ConsumerSendMsgBackRequestHeader.from_ext(cmd.ext_fields)
        self.send_backs.append(hdr)
        if self.fail_send_back:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "injected send-back failure")
        rec = self.by_phy.get(hdr.offset)
        if rec is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {hdr.offset}")
        orig = decode_record(rec)
        props = dict(orig.properties)
        props.setdefault(P.RETRY_TOPIC, orig.topic)
        props.setdefault(P.ORIGIN_MESSAGE_ID, hdr.origin_msg_id or orig.msg_id)
        self.put("%RETRY%" + hdr.group, 0, orig.body, props, flag=orig.flag, sys_flag=orig.sys_flag,
                 reconsume_times=orig.reconsume_times + 1)
        return cmd.response(ResponseCode.SUCCESS)


async def start_cluster(*names: str, topics: dict[str, int] | None = None) -> tuple[FakeNamesrv, list[FakeBroker]]:
    ns = FakeNamesrv()
    await ns.start()
    brokers = [FakeBroker(n, ns, topics) for n in names]
    for b in brokers:
        await b.start()
    return ns, brokers


async def stop_cluster(ns: FakeNamesrv, brokers: list[FakeBroker]) -> None:
    for b in brokers:
        await b.stop()
    await ns.stop()
