"""Broker statistics of ``MQAdmin``: GET_BROKER_CONSUME_STATS, GET_ALL_PRODUCER_INFO, VIEW_BROKER_STATS_DATA,
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (what mqadmin's brokerConsumeStats, producer, statsAll and
getConsumerStatus send)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from mq.protocol.command import RemotingCommand


class StatsQueries:
    """Mixed into ``MQAdmin``: needs its ``_broker``."""

    if TYPE_CHECKING:  # what MQAdmin provides
        timeout: float

        async def _broker(self, addr: str, code: int, header: object | None = None, body: bytes | None = None,
                          *, ok: Sequence[int] = (ResponseCode.SUCCESS,), timeout: float | None = None
                          ) -> "RemotingCommand": ...

    async def fetch_consume_stats_in_broker(self, addr: str, is_order: bool = False, timeout: float | None = None):
        """GET_BROKER_CONSUME_STATS (317): every subscription group's ConsumeStats on one broker."""
        from mq.protocol.bodies import ConsumeStatsList

        resp = await self._broker(addr, RequestCode.GET_BROKER_CONSUME_STATS,
                                  h.GetConsumeStatsInBrokerHeader(is_order=is_order), timeout=timeout)
        return ConsumeStatsList.from_json(resp.body or b"{}")

    async def get_all_producer_info(self, addr: str):
        """GET_ALL_PRODUCER_INFO (328): producer group -> [ProducerInfo] on one broker."""
        from mq.protocol.bodies import ProducerTableInfo

        resp = await self._broker(addr, RequestCode.GET_ALL_PRODUCER_INFO)
        return ProducerTableInfo.from_json(resp.body or b"{}")

    async def view_broker_stats_data(self, addr: str, stats_name: str, stats_key: str):
        """VIEW_BROKER_STATS_DATA (315): minute / hour / day figures of one stats item (missing -> BrokerError)."""
        from mq.protocol.bodies import BrokerStatsData

        resp = await self._broker(addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                  h.ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key))
        return BrokerStatsData.from_json(resp.body or b"{}")

    async def get_consume_status(self, addr: str, topic: str, group: str, client_id: str | None = None) -> dict:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): client id -> {MessageQueue: offset} as the clients hold it."""
        from mq.protocol.bodies import GetConsumerStatusBody

        resp = await self._broker(addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                  h.GetConsumerStatusRequestHeader(topic=topic, group=group,
                                                                   client_addr=client_id or None), timeout=15.0)
        return dict(GetConsumerStatusBody.from_json(resp.body).consumer_table) if resp.body else {}
