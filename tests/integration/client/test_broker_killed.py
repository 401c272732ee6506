"""Two brokers, one of them killed with SIGKILL while a producer sends (issue 4's two-broker acceptance).

A clean stop unregisters the broker, so the name server's route drops it at once; a killed broker stays in the
route (until the name server expires it 120 s later), and only the producer's latency fault tolerance keeps sends
away from it. Both brokers run as their own processes; the topic lives on both.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter

from mq.client.hooks import SendStatus
from mq.client.producer import Producer
from mq.client.pull_api import PullConsumer
from mq.common.message import Message
from mq.config import ProducerConfig

from ..broker_process import BrokerProcess

TOPIC = "KillTopic"


def test_a_killed_broker_is_avoided_and_no_acknowledged_send_is_lost(namesrv, run, client_config, tmp_path):
    a = BrokerProcess(tmp_path / "a", {"brokerName": "broker-a", "namesrvAddr": namesrv.address})
    b = BrokerProcess(tmp_path / "b", {"brokerName": "broker-b", "namesrvAddr": namesrv.address})
    try:
        a.start()
        b.start()
        run(_mq("-n", namesrv.address, "updateTopic", "-t", TOPIC, "-c", "DefaultCluster", "-r", "4", "-w", "4"),
            timeout=60)
        results = run(_send_through_the_kill(client_config, b), timeout=120)
        assert not b.alive()
        b.start()  # crash recovery from the same store (the abort file is still there)
        run(_every_ok_is_stored(client_config, results), timeout=60)
    finally:
        stopped = [a.stop(), b.stop()]
    assert stopped == [True, True], a.log() + b.log()


async def _mq(*args: str) -> None:
    """The mq CLI as a child process, awaited (the name server runs on this test's event loop)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mq.cli.main", *args,
                                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, (out + err).decode()


async def _send_through_the_kill(client_config, b: BrokerProcess) -> list:
    p = await Producer(ProducerConfig(group="KillP", send_latency_fault_enable=True, send_msg_timeout=3.0),
                       client_config()).start()
    try:
        async def send(body: bytes):
            return body, await p.send(Message(TOPIC, body))

        before = [await send(b"before-%d" % i) for i in range(24)]
        assert Counter(r.queue.broker_name for _, r in before) == {"broker-a": 12, "broker-b": 12}

        # 8 senders keep sends in flight while broker-b dies: the ones it had not answered fail there and are
        # retried on broker-a (a sync send tries 3 times, avoiding the broker that failed)
        during: list = []
        stop = False

        async def sender(w: int) -> None:
            i = 0
            while not stop:
                during.append(await send(b"during-%d-%d" % (w, i)))
                i += 1

        senders = [asyncio.ensure_future(sender(w)) for w in range(8)]
        await asyncio.sleep(0.3)
        on_b_before_kill = sum(r.queue.broker_name == "broker-b" for _, r in during)
        at_kill = len(during)
        b.kill()
        deadline = time.monotonic() + 30
        while len(during) < at_kill + 200 and time.monotonic() < deadline:  # the senders go on without it
            await asyncio.sleep(0.05)
        stop = True
        await asyncio.gather(*senders)
        on_b = sum(r.queue.broker_name == "broker-b" for _, r in during)
        print(f"sends while broker-b died: {len(during)}, {on_b} of them on broker-b "
              f"({on_b_before_kill} answered before the kill)")
        assert on_b_before_kill > 0 and len(during) >= at_kill + 200

        after, slowest = [], 0.0
        for i in range(40):
            t0 = time.monotonic()
            after.append(await send(b"after-%d" % i))
            slowest = max(slowest, time.monotonic() - t0)
        assert {r.queue.broker_name for _, r in after} == {"broker-a"}
        assert not p.fault.tolerance.is_available("broker-b")
        assert slowest < 1.0, f"a send after the kill took {slowest:.2f} s: the dead broker was tried again"
        results = before + during + after
        assert all(r.status is SendStatus.SEND_OK for _, r in results)
        return results
    finally:
        await p.shutdown()


async def _every_ok_is_stored(client_config, results: list) -> None:
    """Every SEND_OK is at the queue offset it reported, on the broker it named, with its msgId and body
    (broker-b's after its crash recovery)."""
    async with PullConsumer("KillCheck", client_config()) as pc:
        deadline = time.monotonic() + 20
        for body, r in results:
            while True:
                try:
                    res = await pc.pull(r.queue, r.queue_offset, 1)
                    break
                except Exception:  # broker-b's route may still be on its way back to the name server
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            assert res.messages, f"{r.msg_id} acknowledged at {r.queue} offset {r.queue_offset} is not stored"
            assert (res.messages[0].msg_id, res.messages[0].body) == (r.msg_id, body)
