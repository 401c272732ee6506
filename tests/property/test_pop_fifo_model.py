"""FIFO pop against a simple model (hypothesis, stateful): one queue, a FIFO group; random sends, pops (new or
repeated attempt ids), acks in any order, changes of invisible time, clock steps and restarts, with an injected
clock. The model:

- a pop is refused (nothing) while the current batch has an un-acked message still invisible, unless it carries
  the batch's attempt id;
- otherwise it returns, from the lowest un-acked offset on, the first ``n`` messages not acked yet (in queue
  order), each with its delivery count (one more than in the previous batch, or 0);
- an ack of a handle of the current batch is OK (again OK), of an earlier batch EXPIRED; a change of invisible
  time of an acked message INVALID;
- an acked message is never delivered again, across restarts too, and every other one is delivered in the end.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner
from mq.config import BrokerConfig, StoreConfig
from mq.daemon.broker.controller import BrokerController
from mq.daemon.broker.pop.contract import AckStatus, PopRequest
from mq.protocol import extra_info as X
from mq.protocol.bodies import TopicConfig
from mq.remoting import new_event_loop

TOPIC, GROUP = "FifoModelT", "FifoModelG"


class FifoModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = new_event_loop()
        self.dir = tempfile.mkdtemp(prefix="fifomodel")
        self.clock = 1_900_000_000_000
        self.broker: BrokerController | None = None
        self.size = 0  # messages in the queue (offsets 0..size-1)
        self.acked: set[int] = set()
        self.batch: dict | None = None  # pop_time, offsets, attempt, visible{}, acked set(), counts{}
        self.handles: list[tuple[int, int, str]] = []  # offset, pop time, text
        self.attempts = 0

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

    def start(self) -> None:
        cfg = BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr="")
        scfg = StoreConfig(store_path_root_dir=self.dir, mapped_file_size_commit_log=1 << 20,
                           mapped_file_size_consume_queue=6000, max_hash_slot_num=1000, max_index_num=4000)
        b = BrokerController(cfg, store_config=scfg, clock=lambda: self.clock)
        b.pop_service.auto_revive = False
        self.run(b.start())
        if b.topic_config.get(TOPIC) is None:
            b.topic_config.put(TopicConfig(TOPIC, 1, 1))
        self.broker = b

    def teardown(self) -> None:
        try:
            if self.broker is not None:
                self.check_final()
                self.run(self.broker.stop())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def svc(self):
        return self.broker.pop_service

    def lowest_unacked(self) -> int:
        return next((o for o in range(self.size) if o not in self.acked), self.size)

    @initialize(n=st.integers(1, 5))
    def boot(self, n: int) -> None:
        self.start()
        self.send(n)

    @rule(n=st.integers(1, 3))
    def send(self, n: int) -> None:
        for _ in range(n):
            props = {P.TAGS: "t", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"f{self.size}"}
            r = self.broker.store.put_message(MessageExtBrokerInner(
                topic=TOPIC, body=b"%d" % self.size, queue_id=0, properties=props,
                properties_string=P.encode_properties(props), born_host=("127.0.0.1", 9), born_timestamp=1))
            assert r.status.name == "PUT_OK"
            self.size += 1

    def blocked(self, attempt: str) -> bool:
        b = self.batch
        return b is not None and attempt != b["attempt"] and any(
            o not in b["acked"] and self.clock < b["visible"][o] for o in b["offsets"])

    @rule(n=st.integers(1, 4), invisible=st.sampled_from([0, 200, 1000, 5000]), same=st.booleans())
    def pop(self, n: int, invisible: int, same: bool) -> None:
        if same and self.batch is not None:
            attempt = self.batch["attempt"]
        else:
            self.attempts += 1
            attempt = f"a{self.attempts}"
        res = self.run(self.svc.pop(PopRequest(GROUP, TOPIC, max_messages=n, invisible_time_ms=invisible,
                                               order=True, attempt_id=attempt)))
        got = [m.queue_offset for m in res.messages]
        if self.blocked(attempt):
            assert got == [], (got, self.batch)
            return
        start = self.lowest_unacked()
        expect = [o for o in range(start, self.size) if o not in self.acked][:n]
        assert got == expect, (got, expect, self.acked, self.batch)
        if not expect:  # nothing left to read: the batch stays (all of it acked)
            return
        prev = self.batch
        if prev is not None and prev["attempt"] == attempt:
            counts = {o: prev["counts"].get(o, 0) for o in got}
        else:
            before = set(prev["offsets"]) if prev else set()
            counts = {o: prev["counts"].get(o, 0) + 1 if o in before else 0 for o in got}
        for m in res.messages:
            assert m.reconsume_times == counts[m.queue_offset], (m.queue_offset, m.reconsume_times, counts)
            self.handles.append((m.queue_offset, res.pop_time, m.extra_info))
        self.batch = {"pop_time": res.pop_time, "offsets": got, "attempt": attempt, "acked": set(), "counts": counts,
                      "visible": {o: res.pop_time + invisible for o in got}}

    def _current(self, pop_time: int, offset: int) -> bool:
        return self.batch is not None and pop_time == self.batch["pop_time"] and offset in self.batch["offsets"]

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def ack(self, data) -> None:
        offset, pop_time, text = data.draw(st.sampled_from(self.handles))
        r = self.run(self.svc.ack(GROUP, TOPIC, text))
        if not self._current(pop_time, offset):
            assert r.status is AckStatus.EXPIRED, r
            return
        assert r.status is AckStatus.OK, r
        self.batch["acked"].add(offset)
        self.acked.add(offset)

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), invisible=st.sampled_from([0, 300, 3000]))
    def change(self, data, invisible: int) -> None:
        offset, pop_time, text = data.draw(st.sampled_from(self.handles))
        r = self.run(self.svc.change_invisible_time(GROUP, TOPIC, text, invisible))
        if not self._current(pop_time, offset):
            assert r.status is AckStatus.EXPIRED, r
            return
        if offset in self.acked:
            assert r.status is AckStatus.INVALID, r
            return
        assert r.status is AckStatus.OK, r
        visible = max(self.clock + invisible, pop_time)  # FIFO pop times are unique: maybe a little ahead
        assert X.parse(r.extra_info).pop_time == pop_time and r.pop_time + r.invisible_time == visible
        self.batch["visible"][offset] = visible
        self.handles.append((offset, pop_time, r.extra_info))

    @rule(dt=st.sampled_from([50, 300, 1200, 6000]))
    def advance(self, dt: int) -> None:
        self.clock += dt

    @rule()
    def restart(self) -> None:
        self.run(self.broker.stop())
        self.broker = None
        self.start()

    def check_final(self) -> None:
        """Every message not acked comes out, in order, acked as it comes; no acked one does."""
        self.clock += 60_000
        got: list[int] = []
        for i in range(self.size + 5):
            res = self.run(self.svc.pop(PopRequest(GROUP, TOPIC, max_messages=4, invisible_time_ms=600_000,
                                                   order=True, attempt_id=f"final{i}")))
            if not res.messages:
                break
            got += [m.queue_offset for m in res.messages]
            rs = self.run(self.svc.batch_ack(GROUP, TOPIC, [m.extra_info for m in res.messages]))
            assert all(r.status is AckStatus.OK for r in rs), rs
        assert got == [o for o in range(self.size) if o not in self.acked]


FifoModel.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])
TestFifoModel = FifoModel.TestCase
