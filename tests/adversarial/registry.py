"""Which request codes the daemons answer, read from their own registries, and the header each code takes.

``broker_codes()`` starts a broker in-process on a scratch store, reads the request codes its ``RemotingServer``
registered (everything ``register_all`` and the admin modules wired) and stops it; ``namesrv_codes()`` reads the
name server's handler table. A code registered tomorrow is attacked tomorrow without a change here.

``header_class(code)`` is the typed header a code takes: ``mq.protocol.headers.REQUEST_HEADERS``, completed
with the codes whose header class that table does not list. ``base_ext`` fills a header with plausible values,
so that a hostile value in one field reaches the code behind the header parsing.
"""

from __future__ import annotations

import asyncio
import functools
import tempfile
import time

from mq.protocol import headers as H
from mq.protocol.codes import RequestCode

R = RequestCode
#: Header classes of codes that REQUEST_HEADERS does not list.
EXTRA_HEADERS: dict[int, type[H.Header]] = {
    R.SEND_REPLY_MESSAGE: H.SendMessageRequestHeader,
    R.SEND_REPLY_MESSAGE_V2: H.SendMessageRequestHeaderV2,
    R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: H.GetConsumerStatusRequestHeader,
    R.CLONE_GROUP_OFFSET: H.CloneGroupOffsetRequestHeader,
    R.QUERY_CONSUME_QUEUE: H.QueryConsumeQueueRequestHeader,
    R.GET_BROKER_CONSUME_STATS: H.GetConsumeStatsInBrokerHeader,
    R.VIEW_BROKER_STATS_DATA: H.ViewBrokerStatsDataRequestHeader,
    R.GET_ALL_PRODUCER_INFO: H.GetAllProducerInfoRequestHeader,
    R.UPDATE_AND_CREATE_ACL_CONFIG: H.CreateAccessConfigRequestHeader,
    R.DELETE_ACL_CONFIG: H.DeleteAccessConfigRequestHeader,
    R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: H.UpdateGlobalWhiteAddrsConfigRequestHeader,
}

TOPIC = "AdvTopic"
GROUP = "AdvGroup"
BROKER_NAME = "adv-broker"
CLUSTER = "AdvCluster"


def code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


@functools.lru_cache(maxsize=1)
def broker_codes() -> tuple[int, ...]:
    from mq.config import BrokerConfig, StoreConfig
    from mq.daemon.broker.controller import BrokerController

    async def read() -> tuple[int, ...]:
        with tempfile.TemporaryDirectory(prefix="adv-codes-") as root:
            ctrl = BrokerController(BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr=""),
                                    store_config=StoreConfig(store_path_root_dir=root,
                                                             mapped_file_size_commit_log=1 << 20,
                                                             mapped_file_size_consume_queue=6_000,
                                                             max_hash_slot_num=1_000, max_index_num=4_000))
            await ctrl.start()
            try:
                return tuple(sorted(ctrl.server.registry._table))  # the codes the broker answers
            finally:
                await ctrl.stop()

    return asyncio.run(read())


@functools.lru_cache(maxsize=1)
def namesrv_codes() -> tuple[int, ...]:
    from pathlib import Path

    from mq.config import NamesrvConfig
    from mq.daemon.namesrv.server import NamesrvServer

    with tempfile.TemporaryDirectory(prefix="adv-codes-") as root:
        server = NamesrvServer(NamesrvConfig(host="127.0.0.1", listen_port=0,
                                            kv_config_path=str(Path(root) / "kv.json")))
        return tuple(sorted(server.server.registry._table))


def header_class(code: int) -> type[H.Header] | None:
    return H.REQUEST_HEADERS.get(code) or EXTRA_HEADERS.get(code)


@functools.lru_cache(maxsize=1)
def all_wire_names() -> tuple[str, ...]:
    """Every wire name of every header class (hostile requests add some that do not belong)."""
    names = set()
    for obj in vars(H).values():
        if isinstance(obj, type) and issubclass(obj, H.Header) and obj is not H.Header:
            names.update(obj.wire_names())
    return tuple(sorted(names))


def plausible(field: H.HeaderField, broker_addr: str) -> str:
    """A value a well-behaved client would send in this field."""
    name = field.attr.lower()
    now = str(int(time.time() * 1000))
    if field.kind is bool:
        return "false"
    if name == "default_topic":
        return "TBW102"
    if "topic" in name and field.kind is str:
        return TOPIC
    if "group" in name and field.kind is str:
        return GROUP
    if name in ("broker_name",):
        return BROKER_NAME
    if name in ("cluster_name", "cluster"):
        return CLUSTER
    if "addr" in name and field.kind is str:
        return broker_addr
    if name in ("client_id", "client_addr"):
        return "127.0.0.1@adv"
    if "timestamp" in name or name in ("born_timestamp", "store_timestamp"):
        return now
    if name in ("max_msg_nums", "max_num", "count", "default_topic_queue_nums", "read_queue_nums",
                "write_queue_nums", "queue_nums"):
        return "4"
    if name == "perm":
        return "6"
    if name == "properties":
        return "UNIQ_KEY\x01ADV0000000000000000000000000001\x02WAIT\x01true\x02"
    if field.kind is int:
        return "0"
    if field.kind is float:
        return "0.0"
    return "adv"


def base_ext(code: int, broker_addr: str) -> dict[str, str]:
    cls = header_class(code)
    if cls is None:
        return {}
    return {f.wire: plausible(f, broker_addr) for f in cls.FIELDS}
