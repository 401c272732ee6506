"""Broker statistics admin requests (RocketMQ 4.9 ``AdminBrokerProcessor``), answered as a Java broker does.

    +------+--------------------------------------+-------------------------------+------------------------------+
    | code | request                              | header (ext fields)           | answer body                  |
    +------+--------------------------------------+-------------------------------+------------------------------+
    |  223 | INVOKE_BROKER_TO_GET_CONSUMER_STATUS | topic, group, clientAddr?     | GetConsumerStatusBody        |
    |  315 | VIEW_BROKER_STATS_DATA               | statsName, statsKey           | BrokerStatsData              |
    |  317 | GET_BROKER_CONSUME_STATS             | isOrder                       | ConsumeStatsList             |
    |  328 | GET_ALL_PRODUCER_INFO                | (none)                        | ProducerTableInfo            |
    +------+--------------------------------------+-------------------------------+------------------------------+

- 315: the item's minute / hour / day figures (``mq.daemon.broker.stats``); an item never counted answers
  SYSTEM_ERROR ``The stats <NAME> <KEY> not exist`` (mqadmin statsAll reads that as zero).
- 317: every subscription group (sorted), each with one ConsumeStats per topic it has offsets in: topics
  without a config are skipped, non-order ones too when ``isOrder``, and topics an online group no longer
  subscribes to; queues ``0..writeQueueNums-1``; ``consumeTps`` is GROUP_GET_NUMS over the last minute;
  ``totalDiff`` sums broker - consumer offset over everything listed.
- 328: every producer group's channels; ``remoteIP`` is written as Java prints a socket address
  (``/127.0.0.1:53422``).
- 223: GET_CONSUMER_STATUS_FROM_CLIENT (221, header topic + group) is sent to each online client of the group,
  or only to the one whose client id is ``clientAddr``; a client's ``messageQueueTable`` goes into
  ``consumerTable`` under its client id. A client that fails, times out (5 s) or answers non-SUCCESS is left
  out (Java logs and goes on); no online client, or one older than V3_0_7_SNAPSHOT, is SYSTEM_ERROR. Our
  choice: the clients are asked concurrently (Java asks them one after the other).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from mq.daemon.broker.processors.admin import GROUP
from mq.protocol import headers as h
from mq.protocol.bodies import (BrokerStatsData, BrokerStatsItem, ConsumeStats, ConsumeStatsList,
                                GetConsumerStatusBody, MessageQueue, OffsetWrapper, ProducerInfo,
                                ProducerTableInfo)
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:  # pragma: no cover
    from mq.daemon.broker.controller import BrokerController
    from mq.remoting import Connection as RemotingConnection

log = logging.getLogger(__name__)

#: ``MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()``: older clients cannot answer 221.
V3_0_7_SNAPSHOT = 28
CLIENT_TIMEOUT = 5.0
SUCCESS = ResponseCode.SUCCESS
SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR


class StatsAdminProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    # -- 315 ---------------------------------------------------------------------------------------------
    def view_broker_stats_data(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.ViewBrokerStatsDataRequestHeader.from_ext(cmd.ext_fields)
        stats = self.c.stats
        stats.tick()
        view = stats.view(hd.stats_name, hd.stats_key)
        if view is None:
            return cmd.response(SYSTEM_ERROR, f"The stats <{hd.stats_name}> <{hd.stats_key}> not exist")
        body = BrokerStatsData(*(BrokerStatsItem(s.sum, s.tps, s.avgpt)
                                 for s in (view["minute"], view["hour"], view["day"])))
        return cmd.response(SUCCESS, body=body.to_json())

    # -- 317 ---------------------------------------------------------------------------------------------
    def consume_stats_list(self, is_order: bool) -> ConsumeStatsList:
        c = self.c
        store = c.store
        c.stats.tick()
        out = ConsumeStatsList(broker_addr=c.address)
        for group in sorted(c.subscription_groups.all()):
            info = c.consumers.get(group)
            per_topic = []
            for topic in sorted(c.offsets.topics_of_group(group)):
                tc = c.topic_config.get(topic)
                if tc is None or (is_order and not tc.order):
                    continue
                if info is not None and info.subscriptions and topic not in info.subscriptions:
                    continue  # online and no longer subscribed (Java: findSubscriptionDataCount > 0)
                table = {}
                for qid in range(tc.write_queue_nums):
                    broker_off = max(store.get_max_offset(topic, qid), 0)
                    consumer_off = max(c.offsets.query(group, topic, qid), 0)
                    last = store.get_message_store_timestamp(topic, qid, consumer_off - 1) if consumer_off else 0
                    table[MessageQueue(topic, c.broker_name, qid)] = OffsetWrapper(broker_off, consumer_off,
                                                                                   max(last, 0))
                    out.total_diff += broker_off - consumer_off
                per_topic.append(ConsumeStats(table, c.stats.consume_tps(group, topic)))
            out.consume_stats_list.append({group: per_topic})
        return out

    def get_broker_consume_stats(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetConsumeStatsInBrokerHeader.from_ext(cmd.ext_fields)
        return cmd.response(SUCCESS, body=self.consume_stats_list(hd.is_order).to_json())

    # -- 328 ---------------------------------------------------------------------------------------------
    def producer_table(self) -> ProducerTableInfo:
        producers = self.c.producers
        data = {}
        for group in producers.groups():
            chans = sorted(producers.channels(group).values(), key=lambda ch: (ch.client_id, ch.addr))
            if chans:
                data[group] = [ProducerInfo(ch.client_id, f"/{ch.addr}", ch.language, ch.version, ch.last_update)
                               for ch in chans]
        return ProducerTableInfo(data)

    def get_all_producer_info(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(SUCCESS, body=self.producer_table().to_json())

    # -- 223 ---------------------------------------------------------------------------------------------
    async def get_consumer_status(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.GetConsumerStatusRequestHeader.from_ext(cmd.ext_fields)
        log.info("[get-consumer-status] by %s: topic=%s group=%s client=%s", conn.remote_addr, hd.topic, hd.group,
                 hd.client_addr)
        info = self.c.consumers.get(hd.group)
        if info is None or not info.channels:
            return cmd.response(SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{hd.group}]")
        targets = []
        for ch in list(info.channels.values()):
            if ch.version < V3_0_7_SNAPSHOT:
                return cmd.response(SYSTEM_ERROR, f"the client does not support this feature. version={ch.version}")
            if not hd.client_addr or hd.client_addr == ch.client_id:
                targets.append(ch)
                if hd.client_addr:
                    break
        ext = h.GetConsumerStatusRequestHeader(topic=hd.topic, group=hd.group).to_ext()
        answers = await asyncio.gather(*(self._ask(ch, ext, hd.topic, hd.group) for ch in targets))
        table = {ch.client_id: mqs for ch, mqs in zip(targets, answers) if mqs is not None}
        return cmd.response(SUCCESS, body=GetConsumerStatusBody(consumer_table=table).to_json())

    async def _ask(self, ch, ext: dict[str, str], topic: str, group: str) -> dict[MessageQueue, int] | None:
        req = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, dict(ext))
        try:
            resp = await self.c.call_client(ch.conn, req, timeout=CLIENT_TIMEOUT)
            if resp.code != SUCCESS or not resp.body:
                log.info("[get-consumer-status] %s answered %s %s", ch.client_id, resp.code, resp.remark)
                return None
            return GetConsumerStatusBody.from_json(resp.body).message_queue_table
        except Exception as exc:  # one client's failure must not fail the others (Java logs and goes on)
            log.error("[get-consumer-status] topic=%s group=%s client=%s: %s", topic, group, ch.client_id, exc)
            return None


def register(controller: "BrokerController") -> None:
    """Register the statistics admin handlers on ``controller.server`` (worker group ``admin``)."""
    p = StatsAdminProcessor(controller)
    controller.server.register(RequestCode.VIEW_BROKER_STATS_DATA, p.view_broker_stats_data, group=GROUP)
    controller.server.register(RequestCode.GET_BROKER_CONSUME_STATS, p.get_broker_consume_stats, group=GROUP)
    controller.server.register(RequestCode.GET_ALL_PRODUCER_INFO, p.get_all_producer_info, group=GROUP)
    controller.server.register(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, p.get_consumer_status,
                               group=GROUP)


__all__ = ["StatsAdminProcessor", "register"]
