"""The name server's metrics: request latencies (``rpc.py``) and its route table, read when scraped.

Labels: node_type ``nameserver``, node_id ``host:port`` (the address it serves), then metricsLabel's pairs.

    rocketmq_rpc_latency_milliseconds (histogram)    protocol_type, request_code, response_code,
                                                     is_long_polling, result
    mq_namesrv_brokers                               cluster: live broker addresses registered
    mq_namesrv_topics                                topics with a route
    mq_namesrv_broker_heartbeat_age_seconds          cluster, broker_name, broker_id, broker_addr
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from mq.daemon.metrics import names as N
from mq.daemon.metrics.families import Families
from mq.daemon.metrics.rpc import RpcMetrics

if TYPE_CHECKING:
    from mq.daemon.namesrv.server import NamesrvServer


def namesrv_labels(server: "NamesrvServer") -> list[tuple[str, str]]:
    extra = N.parse_metrics_label(server.config.metrics_label)
    return [(N.NODE_TYPE, N.NODE_TYPE_NAMESRV), (N.NODE_ID, server.address), *extra]


class NamesrvCollector:
    def __init__(self, server: "NamesrvServer", rpc: RpcMetrics) -> None:
        self.server = server
        self.rpc = rpc
        self._families: Families | None = None
        self._lock = threading.Lock()

    def collect(self) -> list[Any]:
        with self._lock:
            if self._families is None:  # node_id needs the bound port
                self._families = Families(namesrv_labels(self.server))
            f = self._families
            out = list(self.rpc.collect(f))
            table = self.server.table
            now_ms = int(time.time() * 1000)
            live = dict(table.broker_live_table)
            where: dict[str, tuple[str, str, int]] = {}  # broker address -> (cluster, broker name, id)
            clusters = {name: cluster for cluster, names in dict(table.cluster_addr_table).items()
                        for name in list(names)}
            for name, data in dict(table.broker_addr_table).items():
                for bid, addr in dict(data.broker_addrs).items():
                    where[addr] = (clusters.get(name, data.cluster), name, int(bid))
            per_cluster: Counter[str] = Counter()
            age = f.family(N.NAMESRV_BROKER_AGE, (N.CLUSTER, "broker_name", "broker_id", "broker_addr"))
            for addr, info in sorted(live.items()):
                cluster, name, bid = where.get(addr, ("", "", -1))
                per_cluster[cluster] += 1
                age.add((cluster, name, str(bid), addr), max(0.0, (now_ms - info.last_update_ms) / 1000.0))
            brokers = f.family(N.NAMESRV_BROKERS, (N.CLUSTER,))
            for cluster in sorted(set(clusters.values()) | set(per_cluster)):
                brokers.add((cluster,), per_cluster.get(cluster, 0))
            topics = f.family(N.NAMESRV_TOPICS)
            topics.add((), len(table.topic_queue_table))
            out += [brokers, topics, age]
            return out
