"""Broker CPU cost per message without sockets: the whole server path of a send or a pull in one process.

A real ``BrokerController`` (its own store in a temporary directory, no name server) is started on this
process's event loop; pre-encoded request frames are fed to a server-side ``Connection`` through a transport
that only counts the response frames it is asked to write. What is measured is everything the broker does for
a request except the socket system calls: frame decoding, header parsing, the send/pull processors, the store
(append, consume queue, index thread, group commit thread), response encoding. The figure is CPU time of the
whole process (``time.process_time``: every thread) per message, which stays comparable on a shared, noisy
machine where wall-clock rates do not.

    python benchmarks/broker_inprocess_bench.py [--n 40000] [--flush ASYNC_FLUSH|SYNC_FLUSH|both] [--no-index]
        [--no-freeze]

Cases: single sends fed 1 and 16 frames per read (how many a read delivers under pipelining), batches of 32
fed 4 per read, a backlog drain with PULLs of 32, a push consumer's PULLs answered at once with 1, 2 or 8
messages each (the fixed cost of a pull against its cost per message), and held pulls woken by sends: a push
consumer's pattern (registered by HEART_BEAT, one PULL with SUSPEND and COMMIT_OFFSET held per queue of 8) while
reads of 8 sends, one per queue, wake them; every answer is followed by the next PULL from its
``nextBeginOffset``, so each message costs a send, a held pull's wake-up and answer, and a new pull that is held
again. The broker runs with pull coalescing off (``pullCoalesceMicros: 0``): these cases time a pull's own
work, not how long it waits for company. Sends also print the event-loop thread's own CPU (``time.thread_time``): the rest of the process figure
is the store's threads (the flush threads; the index passes run on the loop, as in the daemon). ``--no-index``
turns the key index off to show its share.

The broker's start-up heap is frozen as the daemons freeze it (``freeze_started_heap``; ``--no-freeze`` leaves it
to the collector). The send cases print the collector's full (generation 2) collections and their time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # an installed or PYTHONPATH mq wins
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_send_bench import send_frame  # noqa: E402
from machine import CpuWindow  # noqa: E402

from mq.config import BrokerConfig, StoreConfig  # noqa: E402
from mq.protocol import headers as H  # noqa: E402
from mq.protocol.bodies import (ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData,  # noqa: E402
                                MessageModel, SubscriptionData, TopicConfig)
from mq.protocol.codec import FrameDecoder, encode  # noqa: E402
from mq.protocol.codes import RequestCode  # noqa: E402
from mq.protocol.command import RemotingCommand  # noqa: E402

_LEN = struct.Struct(">i")


class FullCollections:
    """Counts the collector's full (generation 2) collections and their wall time while open."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._t0

    def __enter__(self) -> "FullCollections":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def short(self) -> str:
        return f"full GC {self.count} ({self.seconds * 1e3:.1f} ms)"


class CountingTransport:
    """Enough of ``asyncio.Transport`` for a server ``Connection``: counts the response frames written."""

    def __init__(self, decode: bool = False) -> None:
        self.frames = 0
        self.bytes = 0
        self.closed = False
        self.decoder = FrameDecoder() if decode else None
        #: thread CPU spent decoding the responses (the client's side, not the broker's)
        self.decode_s = 0.0
        self.last: list[RemotingCommand] = []
        self.waiter: asyncio.Future | None = None
        self.want = 0

    def write(self, data: bytes | bytearray) -> None:
        self.bytes += len(data)
        if self.decoder is not None:
            t0 = time.thread_time()
            cmds = self.decoder.feed(bytes(data))
            self.decode_s += time.thread_time() - t0
            self.last = cmds
            self.frames += len(cmds)
        else:
            mv = memoryview(data)
            pos, end = 0, len(mv)
            while pos < end:
                pos += 4 + _LEN.unpack_from(mv, pos)[0]
                self.frames += 1
        if self.waiter is not None and self.frames >= self.want and not self.waiter.done():
            self.waiter.set_result(None)

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("10.0.0.2", 50000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _until(tr: CountingTransport, frames: int, timeout: float = 120.0) -> None:
    if tr.frames >= frames:
        return
    tr.want = frames
    tr.waiter = asyncio.get_running_loop().create_future()
    await asyncio.wait_for(tr.waiter, timeout)
    tr.waiter = None


async def _sends(ctrl, frame: bytes, n: int, per_read: int, msgs_per_frame: int = 1
                 ) -> tuple[float, float, float]:
    """Feed ``n`` frames, ``per_read`` per data_received; returns (process CPU s, wall s, loop-thread CPU s)
    until all are answered and indexed."""
    conn = ctrl.server.make_connection()
    tr = CountingTransport()
    conn.connection_made(tr)
    chunk = frame * per_read
    loops = n // per_read
    store = ctrl.store
    c0, t0, m0 = time.process_time(), time.perf_counter(), time.thread_time()
    for i in range(loops):
        conn.data_received(chunk)
        if i % 64 == 63:
            await asyncio.sleep(0)  # let late (SYNC_FLUSH) replies and posted callbacks run
    await _until(tr, loops * per_read)
    m1 = time.thread_time()
    if store.index_dispatcher is not None:
        await asyncio.get_running_loop().run_in_executor(None, store.index_dispatcher.wait_idle, 60)
    c1, t1 = time.process_time(), time.perf_counter()
    conn.connection_lost(None)
    return c1 - c0, t1 - t0, m1 - m0


async def _drain(ctrl, topic: str, queue_id: int, total: int) -> tuple[float, float, int]:
    conn = ctrl.server.make_connection()
    tr = CountingTransport(decode=True)
    conn.connection_made(tr)
    offset, got = 0, 0
    c0, t0 = time.process_time(), time.perf_counter()
    while got < total:
        h = H.PullMessageRequestHeader(consumer_group="BenchCG", topic=topic, queue_id=queue_id,
                                       queue_offset=offset, max_msg_nums=32, sys_flag=4, commit_offset=0,
                                       suspend_timeout_millis=0, sub_version=0, subscription="*")
        conn.data_received(encode(RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())))
        resp = tr.last[-1]
        if resp.code != 0:
            break
        nxt = int(resp.ext_fields["nextBeginOffset"])
        got += nxt - offset
        offset = nxt
    c1, t1 = time.process_time(), time.perf_counter()
    conn.connection_lost(None)
    return c1 - c0, t1 - t0, got


def _pull_frame(topic: str, queue_id: int, offset: int, opaque: int, max_msgs: int = 32) -> bytes:
    """A push consumer's PULL: SUSPEND and COMMIT_OFFSET, the subscription from its heartbeat, 15 s hold."""
    h = H.PullMessageRequestHeader(consumer_group="BenchCG", topic=topic, queue_id=queue_id, queue_offset=offset,
                                   max_msg_nums=max_msgs, sys_flag=1 | 2, commit_offset=offset,
                                   suspend_timeout_millis=15_000, sub_version=0)
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())
    cmd.opaque = opaque
    return encode(cmd)


async def _push_consumer(ctrl, topic: str, decode: bool):
    """A server connection whose client registered group BenchCG (push, clustering, ``*``) by HEART_BEAT."""
    cons = ctrl.server.make_connection()
    ctr = CountingTransport(decode=decode)
    cons.connection_made(ctr)
    hb = HeartbeatData(client_id="bench@1", consumer_data_set=[ConsumerData(
        group_name="BenchCG", consume_type=ConsumeType.CONSUME_PASSIVELY, message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscription_data_set=[SubscriptionData(topic=topic, sub_string="*")])])
    cons.data_received(encode(RemotingCommand.request(RequestCode.HEART_BEAT, {}, hb.to_json())))
    await _until(ctr, 1)
    answer = ctr.last[-1] if decode else None
    if answer is not None and answer.code != 0:
        raise SystemExit(f"HEART_BEAT refused: {answer.remark}")
    return cons, ctr


async def _pulls_at_once(ctrl, topic: str, pulls: int, per_pull: int) -> tuple[float, int]:
    """``pulls`` push-consumer PULLs (SUSPEND, COMMIT_OFFSET), one a read, each finding ``per_pull`` stored
    messages and answered at once (``max_msg_nums`` = ``per_pull``); returns the event-loop thread's CPU s and
    the messages the store handed out for them. The frames are built before the clock starts."""
    ctrl.topic_config.put(TopicConfig(topic_name=topic, read_queue_nums=1, write_queue_nums=1))
    await _sends(ctrl, send_frame(topic, 0), -(-pulls * per_pull // 16) * 16, 16)  # whole reads of 16
    cons, ctr = await _push_consumer(ctrl, topic, decode=False)
    await asyncio.sleep(0.05)  # the broker also tells the new consumer its group changed (a request)
    frames = [_pull_frame(topic, 0, i * per_pull, 10 + i, per_pull) for i in range(pulls)]
    stats = ctrl.store.stats
    before = stats.get_transferred
    m0 = time.thread_time()
    for f in frames:
        cons.data_received(f)
    m1 = time.thread_time()
    cons.connection_lost(None)
    return m1 - m0, stats.get_transferred - before


async def _held_pulls(ctrl, topic: str, reads: int, queues: int = 8) -> tuple[float, float, int, int]:
    """``reads`` reads of ``queues`` sends (one per queue), each waking the held pulls; returns (process CPU s,
    loop-thread CPU s, messages pulled, pulls made). Both CPU figures leave out the client's side, which runs on
    the same thread: building the PULL frames, decoding and reading their answers."""
    ctrl.topic_config.put(TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues))
    cons, ctr = await _push_consumer(ctrl, topic, decode=True)
    prod = ctrl.server.make_connection()
    prod.connection_made(CountingTransport())
    batch = b"".join(send_frame(topic, q) for q in range(queues))
    offsets = {q: ctrl.store.get_max_offset(topic, q) for q in range(queues)}
    by_opaque: dict[int, int] = {}
    opaque = 1_000

    def pulls(qids) -> bytes:
        nonlocal opaque
        out = []
        for q in qids:
            opaque += 1
            by_opaque[opaque] = q
            out.append(_pull_frame(topic, q, offsets[q], opaque))
        return b"".join(out)

    cons.data_received(pulls(range(queues)))
    await asyncio.sleep(0.05)  # the broker also tells the new consumer its group changed (a request)
    answered = [r for r in ctr.last if r.opaque in by_opaque]
    if answered:
        raise SystemExit(f"a first PULL was answered instead of held: {answered[0].code} {answered[0].remark}")
    ctr.last = []
    got = made = 0
    client_s = 0.0
    c0, m0, d0 = time.process_time(), time.thread_time(), ctr.decode_s
    for _ in range(reads):
        prod.data_received(batch)
        await asyncio.sleep(0)  # the woken pulls run in the loop's next callback,
        await asyncio.sleep(0)  # and their answers are written in the one after it
        t0 = time.thread_time()
        answers, ctr.last = ctr.last, []
        again = []
        for r in answers:
            q = by_opaque.pop(r.opaque, None)
            if q is None:  # not an answer to a pull
                continue
            if "nextBeginOffset" not in r.ext_fields:
                raise SystemExit(f"a PULL was refused: code {r.code}, {r.remark}")
            nxt = int(r.ext_fields["nextBeginOffset"])
            if r.code == 0:
                got += nxt - offsets[q]
            offsets[q] = nxt
            again.append(q)
        frames = pulls(again)
        client_s += time.thread_time() - t0
        if again:
            made += len(again)
            cons.data_received(frames)
    c1, m1 = time.process_time(), time.thread_time()
    client_s += ctr.decode_s - d0
    await asyncio.sleep(0.05)  # answers of the last read that were still to run
    for r in ctr.last:
        q = by_opaque.pop(r.opaque, None)
        if q is not None and r.code == 0:
            got += int(r.ext_fields["nextBeginOffset"]) - offsets[q]
    cons.connection_lost(None)
    prod.connection_lost(None)
    return c1 - c0 - client_s, m1 - m0 - client_s, got, made


async def run_case(flush: str, n: int, root: str, index: bool = True, freeze: bool = True) -> None:
    from mq.daemon.broker.controller import BrokerController
    from mq.remoting.gc_pause import freeze_started_heap

    # pull coalescing off: the pull cases measure what answering a pull costs, driven one read at a time
    bcfg = BrokerConfig(host="127.0.0.1", listen_port=0, namesrv_addr="", pull_coalesce_micros=0)
    scfg = StoreConfig(store_path_root_dir=root, flush_disk_type=flush, mapped_file_size_commit_log=1 << 30,
                       message_index_enable=index)
    ctrl = BrokerController(bcfg, store_config=scfg)
    await ctrl.start()
    if freeze:
        freeze_started_heap()
    try:
        frame = send_frame("BenchT", 0)
        await _sends(ctrl, frame, 64, 1)  # auto-create the topic, warm up
        for per_read in (1, 16):
            with CpuWindow() as w, FullCollections() as full:
                cpu, wall, main = await _sends(ctrl, frame, n, per_read)
            print(f"{flush:11s} send, {per_read:2d} frames per read: CPU {cpu / n * 1e6:6.2f} us/msg   "
                  f"{n / wall:9,.0f} msg/s   (loop thread {main / n * 1e6:6.2f} us/msg)   {full.short()}   "
                  f"{w.short()}", flush=True)
        bframe = send_frame("BenchT", 1, batch=32)
        frames = max(4, n // 32 // 4 * 4)
        with CpuWindow() as w:
            cpu, wall, _main = await _sends(ctrl, bframe, frames, 4)
        print(f"{flush:11s} batch of 32, 4 frames per read: CPU {cpu / (frames * 32) * 1e6:6.2f} us/msg   "
              f"{frames * 32 / wall:9,.0f} msg/s   {w.short()}", flush=True)
        if flush == "ASYNC_FLUSH":
            dframe = send_frame("DrainT", 0, batch=32)
            await _sends(ctrl, dframe, max(1, n // 32), 8)
            total = max(1, n // 32) * 32
            with CpuWindow() as w:
                cpu, wall, got = await _drain(ctrl, "DrainT", 0, total)
            print(f"{flush:11s} drain, PULL of 32: CPU {cpu / max(got, 1) * 1e6:6.2f} us/msg   "
                  f"{got / wall:9,.0f} msg/s ({got} messages)   {w.short()}", flush=True)
            for k in (1, 2, 8):
                pulls = max(1, n // 4 // k)
                with CpuWindow() as w:
                    main, got = await _pulls_at_once(ctrl, f"AtOnceT{k}", pulls, k)
                print(f"{flush:11s} PULL answered at once with {k} message{'s' if k > 1 else ' '}, one a read: loop "
                      f"thread {main / pulls * 1e6:6.2f} us per pull, {main / (pulls * k) * 1e6:6.2f} per message "
                      f"({got:,} of {pulls * k:,} pulled)   {w.short()}", flush=True)
            reads = max(1, n // 8)
            with CpuWindow() as w:
                cpu, main, got, made = await _held_pulls(ctrl, "HeldT", reads)
            sent = reads * 8
            print(f"{flush:11s} held pulls woken by sends (8 queues, 8 sends a read): CPU {cpu / sent * 1e6:6.2f} "
                  f"us per message sent and pulled (loop thread {main / sent * 1e6:6.2f}); {got:,} of {sent:,} "
                  f"pulled, {got / max(made, 1):.2f} per pull   {w.short()}", flush=True)
    finally:
        await ctrl.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--flush", default="both", choices=["ASYNC_FLUSH", "SYNC_FLUSH", "both"])
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--no-index", action="store_true", help="messageIndexEnable=false")
    ap.add_argument("--no-freeze", action="store_true", help="leave the start-up heap to the collector")
    a = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
          f"{'   (key index off)' if a.no_index else ''}{'   (start-up heap not frozen)' if a.no_freeze else ''}",
          flush=True)
    for flush in (("ASYNC_FLUSH", "SYNC_FLUSH") if a.flush == "both" else (a.flush,)):
        root = tempfile.mkdtemp(dir=a.dir, prefix="mq-inproc-")
        try:
            asyncio.run(run_case(flush, a.n, root, index=not a.no_index, freeze=not a.no_freeze))
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
