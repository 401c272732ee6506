"""Clients that do not read, and clients that trickle: over raw sockets against the in-process daemons.

A pipelined burst of requests with large answers must not make a daemon build every answer at once: the daemon
holds at most about one high-water mark of unsent output per connection, stops reading the connection, serves the
rest once the client reads, and closes a connection whose client never reads. A frame trickled byte by byte
must not keep a connection open, and the bytes of unfinished frames are bounded over all connections.
"""

from __future__ import annotations

import struct
import time

from mq.protocol import headers as H
from mq.protocol.codec import encode
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

from .broker.wire import pull_cmd, send_cmd
from .hostile import Raw, held_output, json_header, serving

MB = 1024 * 1024
PIPELINED = 64


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _put_big_message(addr: str, topic: str, size: int) -> None:
    r = Raw(addr)
    resp = r.call(send_cmd(topic, b"m" * size))
    r.close()
    assert resp is not None and resp.code == ResponseCode.SUCCESS, resp


def test_broker_bounds_output_of_a_client_that_pipelines_pulls_and_does_not_read(broker, loop):
    with serving(loop):
        _put_big_message(broker.address, "BigPull", 1 * MB)
        hog = Raw(broker.address, rcvbuf=64 * 1024)
        hog.send(b"".join(_encoded(pull_cmd("BigPull", 0, 0, max_nums=1), i) for i in range(PIPELINED)))
        # Give the broker time to build whatever it is going to build.
        _wait(lambda: held_output(broker.server) > 40 * MB, 3.0)
        time.sleep(0.5)
        held = held_output(broker.server)
        assert held < 12 * MB, f"the broker holds {held / MB:.1f} MiB for a client that does not read"
        # Another client is still served.
        other = Raw(broker.address)
        resp = other.call(send_cmd("Other", b"x"))
        assert resp is not None and resp.code == ResponseCode.SUCCESS
        other.close()
        # Once the client reads, every one of its requests is answered: nothing was dropped.
        codes = []
        for _ in range(PIPELINED):
            resp = hog.response()
            assert resp is not None, f"only {len(codes)} of {PIPELINED} answers arrived"
            codes.append(resp.code)
        assert codes == [ResponseCode.SUCCESS] * PIPELINED
        hog.close()


def test_namesrv_bounds_output_of_a_client_that_pipelines_kv_lists_and_does_not_read(namesrv, loop):
    with serving(loop):
        r = Raw(namesrv.address)
        for i in range(8):  # a 2 MiB namespace
            put = H.PutKVConfigRequestHeader(namespace="NS", key=f"k{i}", value="v" * (256 * 1024))
            resp = r.call(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, put.to_ext()))
            assert resp.code == ResponseCode.SUCCESS
        r.close()
        hog = Raw(namesrv.address, rcvbuf=64 * 1024)
        get = H.GetKVListByNamespaceRequestHeader(namespace="NS").to_ext()
        hog.send(b"".join(_encoded(RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE, dict(get)), i)
                          for i in range(PIPELINED)))
        _wait(lambda: held_output(namesrv.server) > 60 * MB, 3.0)
        time.sleep(0.5)
        held = held_output(namesrv.server)
        assert held < 12 * MB, f"the name server holds {held / MB:.1f} MiB for a client that does not read"
        other = Raw(namesrv.address)
        resp = other.call(RemotingCommand.request(RequestCode.GET_KV_CONFIG,
                                                  H.GetKVConfigRequestHeader(namespace="NS", key="k0").to_ext()))
        assert resp is not None and resp.code == ResponseCode.SUCCESS
        other.close()
        for n in range(PIPELINED):
            resp = hog.response()
            assert resp is not None and resp.code == ResponseCode.SUCCESS, f"answer {n} of {PIPELINED}: {resp}"
        hog.close()


def test_held_pulls_woken_together_do_not_build_every_answer_for_a_client_that_does_not_read(broker, loop):
    with serving(loop):
        _put_big_message(broker.address, "Held", 10)  # the topic exists; queue 0 now has offset 1 next
        hog = Raw(broker.address, rcvbuf=64 * 1024)
        hog.send(b"".join(_encoded(pull_cmd("Held", 0, 1, max_nums=1, sys_flag=0x4 | 0x2, suspend_ms=15_000), i)
                          for i in range(PIPELINED)))
        assert _wait(lambda: broker.hold_service.held_count >= PIPELINED, 5.0)
        _put_big_message(broker.address, "Held", 1 * MB)  # wakes every held pull at once
        _wait(lambda: held_output(broker.server) > 40 * MB, 2.0)
        held = held_output(broker.server)
        assert held < 12 * MB, f"the broker holds {held / MB:.1f} MiB for a client that does not read"
        answers = [hog.response() for _ in range(PIPELINED)]
        assert all(a is not None for a in answers)
        got = [a for a in answers if a.code == ResponseCode.SUCCESS]
        retry = [a for a in answers if a.code == ResponseCode.PULL_RETRY_IMMEDIATELY]
        assert got and len(got) + len(retry) == PIPELINED
        assert all(a.ext_fields["nextBeginOffset"] == "1" for a in retry)  # nothing skipped
        hog.close()


def test_a_client_that_never_reads_is_closed_after_the_stall_timeout(broker_factory, loop):
    broker = broker_factory(write_stall_timeout_seconds=1.0)
    with serving(loop):
        _put_big_message(broker.address, "Stall", 1 * MB)
        hog = Raw(broker.address, rcvbuf=64 * 1024)
        hog.send(b"".join(_encoded(pull_cmd("Stall", 0, 0, max_nums=1), i) for i in range(PIPELINED)))
        assert _wait(lambda: not broker.server.connections, 10.0), "the stalled connection is still open"
        assert held_output(broker.server) == 0
        assert broker.server.budget.output == 0
        hog.close()


def test_the_server_wide_total_closes_the_longest_stalled_client(broker_factory, loop):
    broker = broker_factory(write_buffer_high_water_mark=2 * MB, write_buffer_low_water_mark=512 * 1024,
                            write_buffer_total_limit=6 * MB, write_stall_timeout_seconds=0)
    with serving(loop):
        _put_big_message(broker.address, "Total", 1 * MB)
        hogs = []
        for _ in range(6):
            hog = Raw(broker.address, rcvbuf=64 * 1024)
            hog.send(b"".join(_encoded(pull_cmd("Total", 0, 0, max_nums=1), i) for i in range(16)))
            hogs.append(hog)
            time.sleep(0.3)
        time.sleep(0.5)
        held = held_output(broker.server)
        assert held < 10 * MB, f"{held / MB:.1f} MiB held over a total limit of 6 MiB"
        closed = sum(h.closed_by_peer(0.2) for h in hogs)
        assert closed >= 1
        other = Raw(broker.address)
        resp = other.call(send_cmd("Other", b"x"))
        assert resp is not None and resp.code == ResponseCode.SUCCESS
        for h in (other, *hogs):
            h.close()


# ---------------------------------------------------------------------------------------------
# slowloris (defect 7)
# ---------------------------------------------------------------------------------------------
def _slow_frame_prefix() -> bytes:
    header = json_header(RequestCode.SEND_MESSAGE, {"a": "PG"})
    return struct.pack(">ii", 4 + len(header) + 1 * MB, len(header))


def test_a_trickled_frame_does_not_count_as_traffic_for_the_idle_timeout(broker_factory, loop):
    broker = broker_factory(server_channel_max_idle_time_seconds=1)
    with serving(loop):
        r = Raw(broker.address)
        r.send(_slow_frame_prefix())
        closed = False
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline and not closed:
            try:
                r.send(b"x")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed = r.closed_by_peer(0.3)
        assert closed, "a connection trickling one byte every 0.3 s outlived an idle timeout of 1 s"
        r.close()


def test_a_frame_must_complete_within_the_frame_timeout(broker_factory, loop):
    broker = broker_factory(frame_complete_timeout_seconds=1.0, server_channel_max_idle_time_seconds=0)
    with serving(loop):
        r = Raw(broker.address)
        r.send(_slow_frame_prefix() + b"x" * 1000)
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 6.0 and not closed:
            try:
                r.send(b"x" * 100)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed = r.closed_by_peer(0.2)
        assert closed, "a frame still unfinished after 6 s kept its connection open"
        assert broker.server.budget.partial == 0
        r.close()


def test_unfinished_frames_are_bounded_over_all_connections(broker_factory, loop):
    broker = broker_factory(partial_frame_total_limit=1 * MB)
    with serving(loop):
        first = Raw(broker.address)
        first.send(_slow_frame_prefix() + b"y" * (700 * 1024))
        assert _wait(lambda: broker.server.budget.partial >= 700 * 1024, 5.0)
        second = Raw(broker.address)
        second.send(_slow_frame_prefix() + b"z" * (700 * 1024))
        assert second.closed_by_peer(5.0), "the connection that went over the total was not closed"
        assert not first.closed_by_peer(0.3)
        assert broker.server.budget.partial <= 1 * MB
        first.close()
        second.close()
        assert _wait(lambda: broker.server.budget.partial == 0, 5.0)


def _encoded(cmd: RemotingCommand, opaque: int) -> bytes:
    cmd.opaque = opaque
    return encode(cmd)

