"""The name server's route registry (RocketMQ's RouteInfoManager). Pure: no I/O, no clock of its own.

Tables, as in RocketMQ 4.9:

- ``topic_queue_table``: topic -> {broker name -> QueueData}
- ``broker_addr_table``: broker name -> BrokerData (cluster, name, {broker id -> "ip:port"})
- ``cluster_addr_table``: cluster -> {broker names}
- ``broker_live_table``: broker address -> BrokerLiveInfo (last update, data version, channel, HA address,
  gRPC endpoint: a broker's REGISTER_BROKER may carry ``grpcServerPort``, and routes then carry
  ``grpcAddrs`` {broker address -> gRPC endpoint} in each BrokerData, for the 5.x clients' QueryRoute)
- ``filter_server_table``: broker address -> [filter server addresses]

Every mutation bumps ``version`` so callers can cache encoded routes. The asyncio name server runs every
request on one event loop, so each method is atomic with respect to the others: concurrent registrations
cannot interleave half-way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable

from mq.protocol.bodies import (BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfig,
                                TopicConfigSerializeWrapper, TopicRouteData)

MASTER_ID = 0
PERM_WRITE = 0x2
PERM_READ = 0x4
TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    channel: Hashable | None
    ha_server_addr: str
    #: ``host:port`` of the broker's gRPC endpoint, "" when it has none (carried in routes as ``grpcAddrs``)
    grpc_addr: str = ""


@dataclass(slots=True)
class RegisterResult:
    ha_server_addr: str = ""
    master_addr: str = ""


@dataclass(slots=True)
class RouteTable:
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    version: int = 0

    # ---------------------------------------------------------------------------------------------
    # brokers
    # ---------------------------------------------------------------------------------------------
    def register_broker(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, wrapper: TopicConfigSerializeWrapper | None,
                        filter_servers: list[str] | None, channel: Hashable | None, now_ms: int,
                        grpc_port: int | None = None) -> RegisterResult:
        self.version += 1
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)

        register_first = False
        bd = self.broker_addr_table.get(broker_name)
        if bd is None:
            register_first = True
            bd = BrokerData(cluster=cluster, broker_name=broker_name, broker_addrs={})
            self.broker_addr_table[broker_name] = bd
        bd.cluster = cluster
        # A slave promoted to master (or the reverse) keeps its address under a new id: drop the old id.
        for bid in [bid for bid, addr in bd.broker_addrs.items() if addr == broker_addr and bid != broker_id]:
            del bd.broker_addrs[bid]
        old = bd.broker_addrs.get(broker_id)
        bd.broker_addrs[broker_id] = broker_addr
        register_first = register_first or old is None

        data_version = wrapper.data_version if wrapper is not None else DataVersion()
        if wrapper is not None and broker_id == MASTER_ID:
            if register_first or self.is_topic_config_changed(broker_addr, data_version):
                for tc in wrapper.topic_config_table.values():
                    self._create_or_update_queue_data(broker_name, tc)

        grpc_addr = f"{broker_addr.rpartition(':')[0]}:{grpc_port}" if grpc_port and 0 < grpc_port < 65536 else ""
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now_ms, data_version, channel, ha_server_addr,
                                                             grpc_addr)
        if filter_servers:
            self.filter_server_table[broker_addr] = list(filter_servers)
        else:
            self.filter_server_table.pop(broker_addr, None)

        result = RegisterResult()
        if broker_id != MASTER_ID:
            master = bd.broker_addrs.get(MASTER_ID)
            if master:
                live = self.broker_live_table.get(master)
                if live is not None:
                    result.ha_server_addr = live.ha_server_addr
                    result.master_addr = master
        return result

    def _create_or_update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        qd = QueueData(broker_name=broker_name, read_queue_nums=tc.read_queue_nums,
                       write_queue_nums=tc.write_queue_nums, perm=tc.perm, topic_sys_flag=tc.topic_sys_flag)
        self.topic_queue_table.setdefault(tc.topic_name, {})[broker_name] = qd

    def is_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def query_data_version(self, broker_addr: str, data_version: DataVersion, now_ms: int
                           ) -> tuple[bool, DataVersion | None]:
        """QUERY_DATA_VERSION: (changed, our version); an unchanged broker counts as heard from."""
        changed = self.is_topic_config_changed(broker_addr, data_version)
        live = self.broker_live_table.get(broker_addr)
        if not changed and live is not None:
            live.last_update_ms = now_ms
        return changed, (live.data_version if live is not None else None)

    def unregister_broker(self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.version += 1
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        removed_name = False
        bd = self.broker_addr_table.get(broker_name)
        if bd is not None:
            bd.broker_addrs.pop(broker_id, None)
            if not bd.broker_addrs:
                del self.broker_addr_table[broker_name]
                removed_name = True
        if removed_name:
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
            self._remove_topics_of_broker(broker_name)

    def _remove_topics_of_broker(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            qds = self.topic_queue_table[topic]
            if qds.pop(broker_name, None) is not None and not qds:
                del self.topic_queue_table[topic]

    def remove_broker_addr(self, broker_addr: str) -> bool:
        """Forget one broker address (expired or its connection closed). True if it was known."""
        found = False
        for name, bd in list(self.broker_addr_table.items()):
            for bid, addr in list(bd.broker_addrs.items()):
                if addr == broker_addr:
                    self.unregister_broker(cluster=bd.cluster, broker_addr=addr, broker_name=name, broker_id=bid)
                    found = True
        if broker_addr in self.broker_live_table:
            self.version += 1
            self.broker_live_table.pop(broker_addr, None)
            self.filter_server_table.pop(broker_addr, None)
            found = True
        return found

    def on_channel_closed(self, channel: Hashable) -> list[str]:
        """A broker's connection closed: drop every broker address registered through it."""
        addrs = [addr for addr, live in self.broker_live_table.items() if live.channel is channel]
        for addr in addrs:
            self.remove_broker_addr(addr)
        return addrs

    def expire(self, now_ms: int, expired_after_ms: int) -> list[str]:
        """Drop brokers not heard from for ``expired_after_ms``; returns their addresses."""
        dead = [addr for addr, live in self.broker_live_table.items()
                if live.last_update_ms + expired_after_ms < now_ms]
        for addr in dead:
            self.remove_broker_addr(addr)
        return dead

    def live_channel(self, broker_addr: str) -> Any:
        live = self.broker_live_table.get(broker_addr)
        return live.channel if live else None

    # ---------------------------------------------------------------------------------------------
    # routes and topics
    # ---------------------------------------------------------------------------------------------
    def pickup_route(self, topic: str) -> TopicRouteData | None:
        qds = self.topic_queue_table.get(topic)
        if not qds:
            return None
        broker_datas = []
        filter_table: dict[str, list[str]] = {}
        for name in sorted(qds):
            bd = self.broker_addr_table.get(name)
            if bd is None:
                continue
            grpc = {}
            for addr in bd.broker_addrs.values():
                live = self.broker_live_table.get(addr)
                if live is not None and live.grpc_addr:
                    grpc[addr] = live.grpc_addr
            broker_datas.append(BrokerData(cluster=bd.cluster, broker_name=bd.broker_name,
                                           broker_addrs=dict(bd.broker_addrs), grpc_addrs=grpc or None))
            for addr in bd.broker_addrs.values():
                fs = self.filter_server_table.get(addr)
                if fs:
                    filter_table[addr] = list(fs)
        if not broker_datas:
            return None
        queue_datas = [QueueData(broker_name=q.broker_name, read_queue_nums=q.read_queue_nums,
                                 write_queue_nums=q.write_queue_nums, perm=q.perm,
                                 topic_sys_flag=q.topic_sys_flag) for _, q in sorted(qds.items())]
        return TopicRouteData(order_topic_conf=None, queue_datas=queue_datas, broker_datas=broker_datas,
                              filter_server_table=filter_table)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={name: BrokerData(cluster=bd.cluster, broker_name=bd.broker_name,
                                                broker_addrs=dict(bd.broker_addrs))
                               for name, bd in self.broker_addr_table.items()},
            cluster_addr_table={c: set(names) for c, names in self.cluster_addr_table.items()})

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, qds in self.topic_queue_table.items() if any(n in names for n in qds))

    def system_topics(self) -> tuple[list[str], str | None]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names, and one broker address."""
        topics: list[str] = []
        addr = None
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            for name in sorted(names):
                topics.append(name)
                bd = self.broker_addr_table.get(name)
                if addr is None and bd is not None and bd.broker_addrs:
                    addr = bd.broker_addrs[min(bd.broker_addrs)]
        return topics, addr

    def unit_topics(self, *, unit: bool, unit_sub: bool, not_unit: bool = False) -> list[str]:
        out = []
        for topic, qds in self.topic_queue_table.items():
            if not qds:
                continue
            flag = next(iter(qds.values())).topic_sys_flag
            if unit and flag & TOPIC_SYS_FLAG_UNIT:
                out.append(topic)
            elif unit_sub and not not_unit and flag & TOPIC_SYS_FLAG_UNIT_SUB:
                out.append(topic)
            elif not_unit and not flag & TOPIC_SYS_FLAG_UNIT and flag & TOPIC_SYS_FLAG_UNIT_SUB:
                out.append(topic)
        return sorted(out)

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        qds = self.topic_queue_table.get(topic)
        if qds is None:
            return False
        self.version += 1
        if not cluster:
            del self.topic_queue_table[topic]
            return True
        for name in self.cluster_addr_table.get(cluster, set()):
            qds.pop(name, None)
        if not qds:
            del self.topic_queue_table[topic]
        return True

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """WIPE_/ADD_WRITE_PERM_OF_BROKER: returns how many topics changed. As in RocketMQ, wiping clears the
        write bit and adding sets the perm to read+write (6), whatever it was."""
        self.version += 1
        count = 0
        for qds in self.topic_queue_table.values():
            qd = qds.get(broker_name)
            if qd is None:
                continue
            qd.perm = (PERM_READ | PERM_WRITE) if writable else (qd.perm & ~PERM_WRITE)
            count += 1
        return count
