"""Plain ACL calls of ``MQAdmin`` (what mqadmin's updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
getAclConfig and clusterAclConfigVersion send) and mqadmin's offset reset of a group with no consumer online
(``resetOffsetByTimestampOld``: what resetOffsetByTime and skipAccumulatedMessage fall back to when a broker
answers CONSUMER_NOT_ONLINE)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from mq.protocol.bodies import ConsumeStats, TopicStatsTable
    from mq.protocol.command import RemotingCommand


class AclAndOfflineResets:
    """Mixed into ``MQAdmin``: needs its ``_broker``, ``examine_consume_stats`` and ``examine_topic_stats``."""

    if TYPE_CHECKING:  # what MQAdmin provides
        async def _broker(self, addr: str, code: int, header: object | None = None, body: bytes | None = None,
                          *, ok: Sequence[int] = (ResponseCode.SUCCESS,), timeout: float | None = None
                          ) -> "RemotingCommand": ...

        async def examine_consume_stats(self, addr: str, group: str, topic: str | None = None
                                        ) -> "ConsumeStats": ...

        async def examine_topic_stats(self, addr: str, topic: str) -> "TopicStatsTable": ...

    # -- offsets of a group with no consumer online ----------------------------------------------------------
    async def reset_offset_by_time_old(self, addr: str, topic: str, group: str, timestamp: int,
                                       force: bool = True) -> dict:
        """mqadmin's fallback when a broker answers CONSUMER_NOT_ONLINE to 222 (an offline group): MessageQueue ->
        the offset the queue now has (``rollback_stats``)."""
        from mq.protocol.bodies import MessageQueue

        return {MessageQueue(topic, r["brokerName"], r["queueId"]): r["rollbackOffset"]
                for r in await self.rollback_stats(addr, topic, group, timestamp, force)}

    async def rollback_stats(self, addr: str, topic: str, group: str, timestamp: int,
                             force: bool = True) -> list[dict]:
        """mqadmin's ``resetOffsetByTimestampOld`` on one broker: for each queue of ``topic`` in the group's
        ConsumeStats (else each queue of the topic, its min offset taken as the group's), the offset at
        ``timestamp`` (-1: the max offset) is committed with UPDATE_CONSUMER_OFFSET when ``force`` or when it is
        not ahead of the group's. One RollbackStats row per queue: brokerName, queueId, brokerOffset,
        consumerOffset, timestampOffset, rollbackOffset (the offset the queue now has)."""
        stats = await self.examine_consume_stats(addr, group, topic)
        queues = {mq: (ow.broker_offset, ow.consumer_offset) for mq, ow in stats.offset_table.items()
                  if mq.topic == topic}
        if not queues:  # the group never consumed it here: the topic's own offsets
            topic_stats = await self.examine_topic_stats(addr, topic)
            queues = {mq: (to.max_offset, to.min_offset) for mq, to in topic_stats.offset_table.items()}
        rows = []
        for mq, (broker_offset, consumer_offset) in sorted(queues.items()):
            if timestamp == -1:
                resp = await self._broker(addr, RequestCode.GET_MAX_OFFSET,
                                          h.GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id))
                target = h.GetMaxOffsetResponseHeader.from_ext(resp.ext_fields).offset
            else:
                resp = await self._broker(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, h.SearchOffsetRequestHeader(
                    topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp))
                target = h.SearchOffsetResponseHeader.from_ext(resp.ext_fields).offset
            rollback = consumer_offset
            if force or target <= consumer_offset:
                await self._broker(addr, RequestCode.UPDATE_CONSUMER_OFFSET, h.UpdateConsumerOffsetRequestHeader(
                    consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=target))
                rollback = target
            rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "brokerOffset": broker_offset,
                         "consumerOffset": consumer_offset, "timestampOffset": target, "rollbackOffset": rollback})
        return rows

    # -- plain ACL (what mqadmin's updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr, getAclConfig and
    # clusterAclConfigVersion send) ----------------------------------------------------------------------
    async def update_acl_account(self, addr: str, header: "h.CreateAccessConfigRequestHeader") -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG (50)."""
        await self._broker(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header)

    async def delete_acl_account(self, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG (51)."""
        await self._broker(addr, RequestCode.DELETE_ACL_CONFIG, h.DeleteAccessConfigRequestHeader(access_key))

    async def update_global_white_addrs(self, addr: str, patterns: str, acl_file: str | None = None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``patterns`` comma-separated."""
        await self._broker(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                           h.UpdateGlobalWhiteAddrsConfigRequestHeader(patterns, acl_file))

    async def acl_config(self, addr: str) -> dict:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54): ``{"globalWhiteAddrs": [...], "plainAccessConfigs": [...]}``, every
        account of the broker's ACL files (mqadmin getAclConfig)."""
        from mq.common.fastjson import loads

        resp = await self._broker(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        body = loads(resp.body or b"{}")
        return {"globalWhiteAddrs": list(body.get("globalWhiteAddrs") or []),
                "plainAccessConfigs": list(body.get("plainAccessConfigs") or [])}

    async def acl_config_version(self, addr: str) -> "h.GetBrokerAclConfigResponseHeader":
        """GET_BROKER_CLUSTER_ACL_INFO (52)."""
        resp = await self._broker(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        return h.GetBrokerAclConfigResponseHeader.from_ext(resp.ext_fields)
