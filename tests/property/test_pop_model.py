"""Pop and ack state against a simple model (hypothesis, stateful): random sends, pops, acks, batch acks, changes of
invisible time, clock steps with revive ticks, and broker restarts, on a real broker and store with an injected
clock. The model says, for every message, whether it is visible, in flight under one live handle, or acked:

- a pop returns only visible messages, and as many as it asked for while there are that many;
- an ack or change of a live handle before its invisible time is OK; after it, EXPIRED; a replaced handle is
  INVALID (an acked one OK again) while the broker remembers it, and a change of it is refused;
- a message comes back (visible, attempt raised) exactly when its live handle's slot is revived, and an acked
  message never comes back, across restarts too.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner
from mq.config import BrokerConfig, StoreConfig
from mq.daemon.broker.controller import BrokerController
from mq.daemon.broker.pop.contract import AckStatus, PopRequest, PopStatus
from mq.protocol import extra_info as X
from mq.protocol.bodies import TopicConfig
from mq.remoting import new_event_loop

PREC, MARGIN = 100, 200
TOPIC, GROUP = "ModelT", "ModelG"


class Handle:
    def __init__(self, msg: str, text: str, generation: int) -> None:
        self.msg = msg
        self.text = text
        ei = X.parse(text)
        self.revive = ei.revive_time
        self.state = "live"  # live | acked | replaced
        self.generation = generation


def revived(revive_time: int, now: int) -> bool:
    """Whether the revive service has brought back a checkpoint due at ``revive_time`` by a tick at ``now``."""
    return (revive_time // PREC + 1) * PREC <= now - MARGIN


class PopModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = new_event_loop()
        self.dir = tempfile.mkdtemp(prefix="popmodel")
        self.clock = 1_800_000_000_000
        self.broker: BrokerController | None = None
        self.generation = 0
        self.next_id = 0
        #: message -> "visible" | "inflight" | "acked"
        self.state: dict[str, str] = {}
        self.live: dict[str, Handle] = {}  # in-flight message -> its live handle
        self.handles: list[Handle] = []
        self.attempts: dict[str, int] = {}

    # -- plumbing --------------------------------------------------------------------------------------------
    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

    def start(self) -> None:
        cfg = BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr="", pop_revive_precision_ms=PREC,
                           pop_revive_margin_ms=MARGIN, pop_from_retry_probability=50)
        scfg = StoreConfig(store_path_root_dir=self.dir, mapped_file_size_commit_log=1 << 20,
                           mapped_file_size_consume_queue=6000, max_hash_slot_num=1000, max_index_num=4000,
                           flush_interval_commit_log=60_000)
        b = BrokerController(cfg, store_config=scfg, clock=lambda: self.clock)
        b.pop_service.auto_revive = False
        self.run(b.start())
        if b.topic_config.get(TOPIC) is None:
            b.topic_config.put(TopicConfig(TOPIC, 2, 2))
        self.broker = b
        self.generation += 1

    def teardown(self) -> None:
        try:
            if self.broker is not None:
                self.run(self.broker.stop())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def svc(self):
        return self.broker.pop_service

    def tick(self) -> None:
        async def go():
            while await self.svc.revive.tick(self.clock):
                pass
        self.run(go())
        for m, h in list(self.live.items()):
            if revived(h.revive, self.clock):
                del self.live[m]
                self.state[m] = "visible"

    def visible(self) -> set[str]:
        return {m for m, s in self.state.items() if s == "visible"}

    # -- rules -----------------------------------------------------------------------------------------------
    @initialize(n=st.integers(1, 6))
    def boot(self, n: int) -> None:
        self.start()
        self.send(n)

    @rule(n=st.integers(1, 3))
    def send(self, n: int) -> None:
        for _ in range(n):
            mid = f"m{self.next_id}"
            self.next_id += 1
            props = {P.TAGS: "t", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: mid}
            r = self.broker.store.put_message(MessageExtBrokerInner(
                topic=TOPIC, body=mid.encode(), queue_id=self.next_id % 2, properties=props,
                properties_string=P.encode_properties(props), born_host=("127.0.0.1", 9), born_timestamp=1))
            assert r.status.name == "PUT_OK"
            self.state[mid] = "visible"
            self.attempts[mid] = 0

    @rule(n=st.integers(1, 8), invisible=st.sampled_from([0, 150, 400, 1000, 3000]))
    def pop(self, n: int, invisible: int) -> None:
        before = self.visible()
        res = self.run(self.svc.pop(PopRequest(GROUP, TOPIC, max_messages=n, invisible_time_ms=invisible)))
        got = [m.message.body.decode() for m in res.messages]
        assert len(set(got)) == len(got), got
        assert set(got) <= before, (got, before, self.state)
        assert len(got) == min(n, len(before)), (got, before)
        assert res.status is (PopStatus.FOUND if got else PopStatus.NO_NEW_MSG)
        for pm, mid in zip(res.messages, got):
            assert pm.reconsume_times == self.attempts[mid], (mid, pm.reconsume_times, self.attempts[mid])
            self.attempts[mid] += 1
            h = Handle(mid, pm.extra_info, self.generation)
            self.handles.append(h)
            self.live[mid] = h
            self.state[mid] = "inflight"

    def _expect_ack(self, h: Handle) -> set[AckStatus]:
        if self.clock >= h.revive:
            return {AckStatus.EXPIRED}
        if h.state == "live":
            return {AckStatus.OK}
        if h.state == "acked":
            return {AckStatus.OK}
        # replaced: refused while remembered; after a restart the broker has forgotten and changes nothing
        return {AckStatus.INVALID} if h.generation == self.generation else {AckStatus.INVALID, AckStatus.OK}

    def _acked(self, h: Handle, status: AckStatus) -> None:
        if status is AckStatus.OK and h.state == "live":
            h.state = "acked"
            self.live.pop(h.msg, None)
            self.state[h.msg] = "acked"

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def ack(self, data) -> None:
        h = data.draw(st.sampled_from(self.handles))
        r = self.run(self.svc.ack(GROUP, TOPIC, h.text))
        assert r.status in self._expect_ack(h), (r, h.state, self.clock - h.revive)
        self._acked(h, r.status)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def batch_ack(self, data) -> None:
        hs = data.draw(st.lists(st.sampled_from(self.handles), min_size=1, max_size=5, unique_by=id))
        rs = self.run(self.svc.batch_ack(GROUP, TOPIC, [h.text for h in hs]))
        for h, r in zip(hs, rs):
            assert r.status in self._expect_ack(h), (r, h.state)
        for h, r in zip(hs, rs):
            self._acked(h, r.status)

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), invisible=st.sampled_from([0, 150, 500, 2000]))
    def change(self, data, invisible: int) -> None:
        h = data.draw(st.sampled_from(self.handles))
        if h.state != "live" and h.generation != self.generation and self.clock < h.revive:
            return  # a finished handle from before a restart: the broker no longer knows it is finished
        r = self.run(self.svc.change_invisible_time(GROUP, TOPIC, h.text, invisible))
        if self.clock >= h.revive:
            assert r.status is AckStatus.EXPIRED, r
            return
        if h.state != "live":
            assert r.status is AckStatus.INVALID, r
            return
        assert r.status is AckStatus.OK, r
        assert r.invisible_time == invisible and r.pop_time > X.parse(h.text).pop_time - 1
        h.state = "replaced"
        new = Handle(h.msg, r.extra_info, self.generation)
        assert new.revive == r.pop_time + invisible
        self.handles.append(new)
        self.live[h.msg] = new

    @rule(dt=st.sampled_from([10, 100, 250, 700, 1500, 4000]))
    def advance(self, dt: int) -> None:
        self.clock += dt
        self.tick()

    @rule()
    def restart(self) -> None:
        self.run(self.broker.stop())
        self.broker = None
        self.start()
        self.tick()

    @invariant()
    def nothing_acked_is_visible(self) -> None:
        acked = {m for m, s in self.state.items() if s == "acked"}
        assert not acked & self.visible()

    def check_final(self) -> None:
        """Everything not acked comes back once the clock has passed every handle; nothing acked does."""
        self.clock += 10_000
        self.tick()
        expect = {m for m, s in self.state.items() if s != "acked"}
        got: list[str] = []
        while True:
            res = self.run(self.svc.pop(PopRequest(GROUP, TOPIC, max_messages=32, invisible_time_ms=600_000)))
            if not res.messages:
                break
            got += [m.message.body.decode() for m in res.messages]
        assert sorted(got) == sorted(expect)


class FinalCheck(PopModel):
    def teardown(self) -> None:
        try:
            if self.broker is not None:
                self.check_final()
        finally:
            super().teardown()


FinalCheck.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestPopModel = FinalCheck.TestCase
