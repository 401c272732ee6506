"""Queue administration of ``MQAdmin``: CLONE_GROUP_OFFSET, QUERY_CONSUME_QUEUE, CLEAN_EXPIRED_CONSUMEQUEUE,
CLEAN_UNUSED_TOPIC, DELETE_EXPIRED_COMMITLOG (what mqadmin's cloneGroupOffset, queryCq, cleanExpiredCQ,
cleanUnusedTopic and deleteExpiredCommitLog send)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from mq.protocol.bodies import ClusterInfo
    from mq.protocol.command import RemotingCommand


class QueueAdministration:
    """Mixed into ``MQAdmin``: needs its ``_broker``, ``cluster_info`` and ``_cluster_broker_names``."""

    if TYPE_CHECKING:  # what MQAdmin provides
        timeout: float

        async def _broker(self, addr: str, code: int, header: object | None = None, body: bytes | None = None,
                          *, ok: Sequence[int] = (ResponseCode.SUCCESS,), timeout: float | None = None
                          ) -> "RemotingCommand": ...

        async def cluster_info(self) -> "ClusterInfo": ...

        @staticmethod
        def _cluster_broker_names(info: "ClusterInfo", cluster: str | None) -> set[str]: ...

    async def cluster_broker_addrs(self, cluster: str | None = None) -> list[tuple[str, int, str]]:
        """(broker name, broker id, address) of every broker, masters and slaves, of one cluster (unknown ->
        BrokerError) or of all clusters: where mqadmin's cleanExpiredCQ/cleanUnusedTopic/deleteExpiredCommitLog
        send their request (``ClusterInfo.retrieveAllAddrByCluster``)."""
        info = await self.cluster_info()
        out = []
        for name in sorted(self._cluster_broker_names(info, cluster)):
            bd = info.broker_addr_table.get(name)
            if bd is not None:
                out.extend((name, bid, addr) for bid, addr in sorted(bd.broker_addrs.items()))
        return out

    async def clone_group_offset(self, addr: str, src_group: str, dest_group: str, topic: str | None,
                                 offline: bool = False) -> None:
        """CLONE_GROUP_OFFSET (314) on one broker: ``dest_group`` gets ``src_group``'s offsets of ``topic``."""
        await self._broker(addr, RequestCode.CLONE_GROUP_OFFSET, h.CloneGroupOffsetRequestHeader(
            src_group=src_group, dest_group=dest_group, topic=topic, offline=offline), timeout=self.timeout * 3)

    async def query_consume_queue(self, addr: str, topic: str, queue_id: int, index: int, count: int,
                                  group: str | None = None):
        """QUERY_CONSUME_QUEUE (321): (QueryConsumeQueueResponseBody, remark), the body None when the broker
        answers that ``index`` is not readable (SUCCESS without a body, as Java does)."""
        from mq.protocol.bodies import QueryConsumeQueueResponseBody

        resp = await self._broker(addr, RequestCode.QUERY_CONSUME_QUEUE, h.QueryConsumeQueueRequestHeader(
            topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=group))
        body = QueryConsumeQueueResponseBody.from_json(resp.body) if resp.body else None
        return body, resp.remark or ""

    async def clean_expired_consume_queue(self, addr: str) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306) on one broker."""
        await self._broker(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, timeout=max(self.timeout, 30.0))

    async def clean_unused_topic(self, addr: str) -> None:
        """CLEAN_UNUSED_TOPIC (316) on one broker."""
        await self._broker(addr, RequestCode.CLEAN_UNUSED_TOPIC, timeout=max(self.timeout, 30.0))

    async def delete_expired_commit_log(self, addr: str) -> None:
        """DELETE_EXPIRED_COMMITLOG (329) on one broker."""
        await self._broker(addr, RequestCode.DELETE_EXPIRED_COMMITLOG, timeout=max(self.timeout, 30.0))
