"""A broker without sockets for collector tests: the real stats, offsets, topic and consumer tables over a store
stub that records what was "sent" (queue max offsets and store times)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from mq.config import BrokerConfig
from mq.daemon.broker.client_manager import ClientChannelInfo, ConsumerManager, ProducerManager
from mq.daemon.broker.offsets import ConsumerOffsetManager
from mq.daemon.broker.stats import BrokerStats
from mq.daemon.broker.subscription_group import SubscriptionGroupManager
from mq.daemon.broker.topic_config import TopicConfigManager
from mq.protocol.bodies import ConsumeType, MessageModel, SubscriptionData, TopicConfig
from mq.protocol.codes import LanguageCode


class QueueStub:
    """A consume queue: units point at fake physical offsets whose store times the store stub knows."""

    def __init__(self, store: "StoreStub", topic: str, queue_id: int) -> None:
        self.store, self.key = store, (topic, queue_id)
        self.min_offset = 0
        self.reads = 0

    @property
    def max_offset(self) -> int:
        return self.store.max.get(self.key, 0)

    def get_unit(self, offset: int) -> tuple[int, int, int] | None:
        self.reads += 1
        if not self.min_offset <= offset < self.max_offset:
            return None
        return (hash((self.key, offset)) & 0xFFFFFFFF, 100, 0)


class StoreStub:
    def __init__(self) -> None:
        self.max: dict[tuple[str, int], int] = {}
        self.times: dict[int, int] = {}
        self.queues: dict[tuple[str, int], QueueStub] = {}
        self.cq_table = SimpleNamespace(find=self.find)
        self.commit_log = SimpleNamespace(store_timestamp_of=lambda phy, size=0: self.times.get(phy))

    def send(self, topic: str, queue_id: int, store_ms: int, n: int = 1) -> None:
        cq = self.find(topic, queue_id)
        top = cq.max_offset
        self.max[(topic, queue_id)] = top + n
        for i in range(n):
            self.times[cq.get_unit(top + i)[0]] = store_ms

    def find(self, topic: str, queue_id: int, *, create: bool = True) -> QueueStub | None:
        cq = self.queues.get((topic, queue_id))
        if cq is None and create:
            cq = self.queues[(topic, queue_id)] = QueueStub(self, topic, queue_id)
        return cq


def make_broker(tmp_path: Path, **config) -> SimpleNamespace:
    cfg = BrokerConfig(**config)
    topics = TopicConfigManager(cfg, tmp_path)
    topics.load()
    groups = SubscriptionGroupManager(cfg, tmp_path)
    groups.load()
    b = SimpleNamespace(config=cfg, cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name,
                        store=StoreStub(), topic_config=topics, subscription_groups=groups,
                        offsets=ConsumerOffsetManager(tmp_path), consumers=ConsumerManager(),
                        producers=ProducerManager(), acl=None)
    b.stats = BrokerStats(b)
    return b


def add_topic(b, name: str, queues: int = 4, perm: int = 6, order: bool = False) -> None:
    b.topic_config._table[name] = TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues,
                                              perm=perm, order=order)


def channel(conn: object, client_id: str, language: LanguageCode = LanguageCode.JAVA,
            version: int = 401) -> ClientChannelInfo:
    return ClientChannelInfo(conn, client_id, language, version, 0, "127.0.0.1:1")


def subscribe(b, group: str, conn: object, *topics: str, consume_type=ConsumeType.CONSUME_PASSIVELY) -> None:
    b.consumers.register(group, channel(conn, f"client-{id(conn)}"), consume_type, MessageModel.CLUSTERING, None,
                         [SubscriptionData(topic=t, sub_string="*") for t in topics], notify=False)
