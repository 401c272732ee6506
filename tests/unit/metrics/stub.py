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


class StoreStub:
    def __init__(self) -> None:
        self.max: dict[tuple[str, int], int] = {}
        self.times: dict[tuple[str, int, int], int] = {}

    def send(self, topic: str, queue_id: int, store_ms: int, n: int = 1) -> None:
        top = self.max.get((topic, queue_id), 0)
        for i in range(n):
            self.times[(topic, queue_id, top + i)] = store_ms
        self.max[(topic, queue_id)] = top + n

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self.max.get((topic, queue_id), 0)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        return self.times.get((topic, queue_id, offset), -1)


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
