"""A slot revived after the last revive checkpoint runs again after a crash, and must not revive a message a second
time (one copy acked, the other delivered again): the broker finds what it revived in the commit log."""

from __future__ import annotations

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner
from mq.config import BrokerConfig, StoreConfig
from mq.daemon.broker.controller import BrokerController
from mq.daemon.broker.pop.contract import PopRequest
from mq.protocol.bodies import TopicConfig

CLOCK = [1_900_000_000_000]


def make(root: str) -> BrokerController:
    b = BrokerController(BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr=""),
                         store_config=StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=1 << 20,
                                                  mapped_file_size_consume_queue=6000, max_hash_slot_num=1000,
                                                  max_index_num=4000),
                         clock=lambda: CLOCK[0])
    b.pop_service.auto_revive = False
    return b


async def tick(b: BrokerController) -> None:
    while await b.pop_service.revive.tick(CLOCK[0]):
        pass


def test_a_slot_re_run_after_a_crash_does_not_revive_twice(tmp_path, run):
    root = str(tmp_path / "store")

    async def before_crash():
        b = make(root)
        await b.start()
        b.topic_config.put(TopicConfig("ReT", 1, 1))
        props = {P.TAGS: "t", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1"}
        b.store.put_message(MessageExtBrokerInner(topic="ReT", body=b"once", properties=props,
                                                  properties_string=P.encode_properties(props),
                                                  born_host=("127.0.0.1", 1), born_timestamp=1))
        res = await b.pop_service.pop(PopRequest("ReG", "ReT", invisible_time_ms=500))
        assert [m.message.body for m in res.messages] == [b"once"]
        await tick(b)
        b.pop_service.revive.checkpoint()  # the last checkpoint: before the revival
        CLOCK[0] += 2000
        await tick(b)  # revived into %RETRY%ReG_ReT ...
        assert b.store.get_max_offset("%RETRY%ReG_ReT", 0) == 1
        b.pop_service.revive.running = False  # ... and the broker dies before the next checkpoint
        await b.stop()

    async def after():
        b = make(root)
        await b.start()
        await tick(b)  # the slot runs again
        assert b.store.get_max_offset("%RETRY%ReG_ReT", 0) == 1, "the message was revived twice"
        res = await b.pop_service.pop(PopRequest("ReG", "ReT", invisible_time_ms=60_000))
        assert [(m.message.body, m.reconsume_times) for m in res.messages] == [(b"once", 1)]
        assert "POP_REVIVE_KEY" not in res.messages[0].message.properties  # internal: never handed out
        await b.stop()

    run(before_crash())
    run(after())
