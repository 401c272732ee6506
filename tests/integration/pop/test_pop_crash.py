"""Pop under kill -9: a broker process is killed while consumers pop, ack and change invisible times, over at least
ten rounds; then every message is drained. No message whose ack was answered SUCCESS is ever received again, and
every message never acked (no ack even attempted) comes back."""

from __future__ import annotations

import asyncio
import random
import time

from mq.errors import MQError
from mq.protocol import headers as H
from mq.protocol import extra_info as X
from mq.protocol.codes import RequestCode, ResponseCode as RC
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient

from ..broker.wire import records, send_cmd
from ..broker_process import BrokerProcess
from .test_pop_remoting import ack_cmd, change_cmd, handles, pop_cmd

TOPIC = "CrashPop"
ROUNDS = 10
PER_ROUND = 60
INVISIBLE = 2000


class Ledger:
    def __init__(self) -> None:
        self.sent: set[bytes] = set()
        self.acked: set[bytes] = set()  # ack answered SUCCESS
        self.maybe_acked: set[bytes] = set()  # ack sent, no answer (the broker died)
        self.violations: list[str] = []
        self.received = 0

    def got(self, body: bytes, where: str) -> None:
        self.received += 1
        if body in self.acked:
            self.violations.append(f"{body!r} came back after its ack ({where})")


async def create_topic(client: RemotingClient, addr: str) -> None:
    h = H.CreateTopicRequestHeader(topic=TOPIC, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4,
                                   perm=6, topic_filter_type="SINGLE_TAG")
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext()))
    assert r.code == RC.SUCCESS, r.remark


async def send_some(client: RemotingClient, addr: str, ledger: Ledger, start: int, n: int) -> None:
    for i in range(start, start + n):
        body = b"msg-%06d" % i
        r = await client.invoke(addr, send_cmd(TOPIC, body, queue_id=i % 4))
        assert r.code == RC.SUCCESS, r.remark
        ledger.sent.add(body)


async def consumer(client: RemotingClient, addr: str, broker_name: str, ledger: Ledger, rnd: random.Random,
                   stop: asyncio.Event) -> None:
    """Pop and ack (mostly), change invisible times (sometimes), until the broker dies or ``stop``."""
    while not stop.is_set():
        try:
            r = await client.invoke(addr, pop_cmd(TOPIC, n=8, invisible=INVISIBLE, poll=300), timeout=3)
        except MQError:
            return
        if r.code != RC.SUCCESS:
            continue
        for m, ck in handles(r, broker_name):
            ledger.got(m.body, "load")
            roll = rnd.random()
            try:
                if roll < 0.15:
                    continue  # left un-acked: comes back after the invisible time
                if roll < 0.25:
                    c = await client.invoke(addr, change_cmd(TOPIC, ck, 1500), timeout=3)
                    if c.code != RC.SUCCESS:
                        continue
                    ch = H.ChangeInvisibleTimeResponseHeader.from_ext(c.ext_fields)
                    ei = X.parse(ck)
                    ck = X.build(ei.queue_offset, ch.pop_time, ch.invisible_time, ch.revive_qid, ei.retry,
                                 ei.broker_name, ei.queue_id, ei.queue_offset)
                ledger.maybe_acked.add(m.body)
                a = await client.invoke(addr, ack_cmd(TOPIC, ck), timeout=3)
                if a.code == RC.SUCCESS:
                    ledger.acked.add(m.body)
            except MQError:
                return


def test_kill_9_under_pop_load(tmp_path, loop):
    rnd = random.Random(20260527)
    broker = BrokerProcess(tmp_path / "b", {"brokerName": "crash-b", "popRevivePrecisionMs": 50,
                                            "popReviveMarginMs": 100, "popReviveFlushIntervalMs": 200})
    ledger = Ledger()

    async def rounds() -> None:
        client = RemotingClient(name="crash-test")
        try:
            broker.start()
            await create_topic(client, broker.address)
            sent = 0
            for rno in range(ROUNDS):
                if rno:
                    broker.start()
                await send_some(client, broker.address, ledger, sent, PER_ROUND)
                sent += PER_ROUND
                stop = asyncio.Event()
                tasks = [asyncio.ensure_future(consumer(client, broker.address, "crash-b", ledger, rnd, stop))
                         for _ in range(4)]
                await asyncio.sleep(rnd.uniform(0.3, 1.5))
                broker.kill()  # mid-load: pops, acks and changes in flight
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
                await client.close()
                client = RemotingClient(name=f"crash-test-{rno}")
            broker.start()
            # drain: everything not acked comes back (un-acked ones after their invisible time)
            never_acked = ledger.sent - ledger.maybe_acked
            drained: set[bytes] = set()
            end = time.monotonic() + 40
            while not never_acked <= drained and time.monotonic() < end:
                r = await client.invoke(broker.address, pop_cmd(TOPIC, n=32, invisible=120_000, poll=1000),
                                        timeout=5)
                if r.code != RC.SUCCESS:
                    continue
                for m, ck in handles(r, "crash-b"):
                    ledger.got(m.body, "drain")
                    drained.add(m.body)
                    a = await client.invoke(broker.address, ack_cmd(TOPIC, ck))
                    assert a.code == RC.SUCCESS, a.remark
                    ledger.acked.add(m.body)
            lost = never_acked - drained
            assert not lost, f"{len(lost)} never-acked message(s) did not come back: {sorted(lost)[:5]}"
            # nothing else is left, and nothing acked comes back
            r = await client.invoke(broker.address, pop_cmd(TOPIC, n=32, invisible=1000, poll=500), timeout=5)
            if r.code == RC.SUCCESS:
                for m in records(r):
                    ledger.got(m.body, "after drain")
        finally:
            await client.close()
            broker.stop()

    loop.run_until_complete(asyncio.wait_for(rounds(), 300))
    assert not ledger.violations, ledger.violations[:5]
    assert len(ledger.sent) == ROUNDS * PER_ROUND
    assert len(ledger.maybe_acked) >= len(ledger.sent) // 2  # the rounds did real work before each kill
    assert ledger.received > len(ledger.sent)  # and un-acked messages came back
