"""rocketmq_rpc_latency and flow-control refusals, recorded by the remoting server's observer: first against
explicit times, then through a real HandlerRegistry over the in-memory transport (answers now, answers later,
oneway, refusals of every kind)."""

from __future__ import annotations

import asyncio

from mq.config import ProcessorLimits
from mq.daemon.metrics.families import Families
from mq.daemon.metrics.rpc import RpcMetrics
from mq.daemon.metrics import rpc as rpc_module
from mq.protocol.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand
from mq.remoting import RejectRequest, RemotingServer
from mq.remoting.testing import ConnectionPair

from .helpers import FamiliesCollector, expose

LAT = "rocketmq_rpc_latency_milliseconds"
COMMON = (("cluster", "C"), ("node_type", "broker"), ("node_id", "b"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def exposed(rpc: RpcMetrics):
    fams = Families(COMMON)
    return expose(FamiliesCollector(lambda f: [*rpc.collect(f), *rpc.collect_busy(f)], fams))


def request(code: int, oneway: bool = False) -> RemotingCommand:
    return RemotingCommand.request(code, {}, oneway=oneway)


class Conn:
    def __init__(self) -> None:
        self.attrs: dict = {}


def test_latencies_fall_in_rocketmqs_buckets_with_cumulative_counts_and_a_sum():
    clock = Clock()
    clock.now = 0.0  # so that a bound (1 ms) is met exactly
    rpc = RpcMetrics(clock)
    send = request(RequestCode.SEND_MESSAGE_V2)
    for ms in (0.4, 1.0, 2.5, 8.0, 150.0, 4000.0):  # arrived `ms` before now
        rpc.answered(send, send.response(ResponseCode.SUCCESS), clock.now - ms / 1000)
    rpc.answered(send, send.response(ResponseCode.FLUSH_DISK_TIMEOUT), clock.now - 0.002)
    out = exposed(rpc)
    labels = dict(request_code="send_message_v2", response_code="success", is_long_polling="false",
                  result="success", protocol_type="remoting", cluster="C", node_type="broker", node_id="b")
    buckets = {s.labels["le"]: s.value for s in out.find(LAT + "_bucket", **labels)}
    assert buckets == {"1.0": 2, "3.0": 3, "5.0": 3, "7.0": 3, "10.0": 4, "100.0": 4, "1000.0": 5,
                       "2000.0": 5, "3000.0": 5, "+Inf": 6}
    assert out.value(LAT + "_count", **labels) == 6
    assert abs(out.value(LAT + "_sum", **labels) - (0.4 + 1 + 2.5 + 8 + 150 + 4000)) < 1e-6
    assert out.value(LAT + "_count", response_code="flush_disk_timeout") == 1


def test_answered_later_is_timed_when_sent_and_a_held_pull_is_long_polling():
    clock = Clock()
    rpc = RpcMetrics(clock)
    conn = Conn()
    pull, send = request(RequestCode.PULL_MESSAGE), request(RequestCode.SEND_MESSAGE_V2)
    pull.opaque, send.opaque = 1, 2
    rpc.deferred(conn, pull, clock.now)
    rpc.deferred(conn, send, clock.now)
    clock.now += 0.5
    rpc.sent_later(conn, pull.response(ResponseCode.PULL_NOT_FOUND))
    rpc.sent_later(conn, send.response(ResponseCode.SUCCESS))
    rpc.sent_later(conn, send.response(ResponseCode.SUCCESS))  # an answer nobody waits for: not counted
    out = exposed(rpc)
    held = dict(request_code="pull_message", response_code="pull_not_found", is_long_polling="true")
    assert out.value(LAT + "_count", **held) == 1
    assert out.value(LAT + "_bucket", le="100.0", **held) == 0
    assert out.value(LAT + "_bucket", le="1000.0", **held) == 1
    assert out.value(LAT + "_count", request_code="send_message_v2", is_long_polling="false") == 1
    assert conn.attrs[rpc_module._DEFERRED] == {}


def test_requests_kept_for_later_are_bounded_per_connection(monkeypatch):
    monkeypatch.setattr(rpc_module, "MAX_DEFERRED_PER_CONNECTION", 3)
    rpc = RpcMetrics(Clock())
    conn = Conn()
    cmds = [request(RequestCode.PULL_MESSAGE) for _ in range(5)]
    for i, cmd in enumerate(cmds):
        cmd.opaque = i
        rpc.deferred(conn, cmd, 0.0)
    assert len(conn.attrs[rpc_module._DEFERRED]) == 3
    for cmd in cmds:
        rpc.sent_later(conn, cmd.response(ResponseCode.SUCCESS))
    assert exposed(rpc).value(LAT + "_count", request_code="pull_message") == 3


def test_refusals_counted_by_reason():
    rpc = RpcMetrics(Clock())
    send = request(RequestCode.SEND_MESSAGE_V2)
    for code, remark in ((ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while"),
                         (ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while"),
                         (ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy"),
                         (ResponseCode.SYSTEM_BUSY, "[TIMEOUT_CLEAN_QUEUE]broker busy, ..."),
                         (ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control"),
                         (ResponseCode.SYSTEM_ERROR, "topic[X] not exist"),  # an error, not flow control
                         (ResponseCode.SYSTEM_BUSY, None),
                         (ResponseCode.SYSTEM_BUSY, "[SOMETHING_ELSE] x")):
        rpc.answered(send, send.response(code, remark), 100.0)
    out = exposed(rpc)
    busy = "mq_broker_busy_refusals_total"
    assert {s.labels["reason"]: s.value for s in out.find(busy)} == {
        "overload": 2, "reject_request": 1, "timeout_clean_queue": 1, "pc_synchronized": 1}


def test_through_the_registry_every_way_a_request_is_answered():
    async def main():
        rpc = RpcMetrics()
        server = RemotingServer("127.0.0.1", 0)
        server.registry.observer = rpc
        held: list = []
        gate = asyncio.Event()

        def inline(conn, cmd):
            return cmd.response(ResponseCode.SUCCESS)

        def keep(conn, cmd):  # long polling: answered later
            held.append((conn, cmd))
            return None

        def reject(conn, cmd):
            raise RejectRequest("page cache busy")

        async def slow(conn, cmd):
            await gate.wait()
            return cmd.response(ResponseCode.SUCCESS)

        server.register(RequestCode.HEART_BEAT, inline)
        server.register(RequestCode.PULL_MESSAGE, keep)
        server.register(RequestCode.SEND_MESSAGE, reject)
        server.configure_group("send", ProcessorLimits(concurrency=1, queue_capacity=1))
        server.register(RequestCode.SEND_MESSAGE_V2, slow, group="send")
        pair = ConnectionPair(server)
        c = pair.client_conn
        await c.invoke(request(RequestCode.HEART_BEAT), 5)
        c.invoke_oneway(request(RequestCode.HEART_BEAT, oneway=True))
        assert (await c.invoke(request(RequestCode.SEND_MESSAGE), 5)).code == ResponseCode.SYSTEM_BUSY
        assert (await c.invoke(request(9999), 5)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        pulled = asyncio.ensure_future(c.invoke(request(RequestCode.PULL_MESSAGE), 5))
        running = asyncio.ensure_future(c.invoke(request(RequestCode.SEND_MESSAGE_V2), 5))
        queued = asyncio.ensure_future(c.invoke(request(RequestCode.SEND_MESSAGE_V2), 5))
        await pair.settle()
        overload = await c.invoke(request(RequestCode.SEND_MESSAGE_V2), 5)
        assert overload.code == ResponseCode.SYSTEM_BUSY
        assert server.clean_expired_requests("send", 0.0) == 1  # the queued one: [TIMEOUT_CLEAN_QUEUE]
        assert (await queued).code == ResponseCode.SYSTEM_BUSY
        gate.set()
        assert (await running).code == ResponseCode.SUCCESS
        conn, cmd = held.pop()
        conn.send_response(cmd.response(ResponseCode.PULL_NOT_FOUND))
        assert (await pulled).code == ResponseCode.PULL_NOT_FOUND
        await server.stop()
        return rpc

    rpc = asyncio.run(main())
    out = exposed(rpc)
    count = LAT + "_count"
    assert out.value(count, request_code="heart_beat", result="success") == 1
    assert out.value(count, request_code="heart_beat", result="oneway") == 1  # made, not sent
    assert out.value(count, request_code="send_message", response_code="system_busy") == 1
    assert out.value(count, request_code="9999", response_code="request_code_not_supported") == 1
    assert out.value(count, request_code="send_message_v2", response_code="success") == 1
    assert out.value(count, request_code="send_message_v2", response_code="system_busy") == 2
    assert out.value(count, request_code="pull_message", response_code="pull_not_found",
                     is_long_polling="true") == 1
    busy = {s.labels["reason"]: s.value for s in out.find("mq_broker_busy_refusals_total")}
    assert busy == {"reject_request": 1, "overload": 1, "timeout_clean_queue": 1}


def test_oneway_results_are_labelled_oneway():
    rpc = RpcMetrics(Clock())
    send = request(RequestCode.SEND_MESSAGE_V2, oneway=True)
    rpc.answered(send, send.response(ResponseCode.SUCCESS), 100.0)
    assert exposed(rpc).value(LAT + "_count", result="oneway") == 1


def test_an_unset_observer_changes_nothing():
    async def main():
        server = RemotingServer("127.0.0.1", 0)
        server.register(RequestCode.HEART_BEAT, lambda conn, cmd: cmd.response(0))
        pair = ConnectionPair(server)
        assert (await pair.client_conn.invoke(request(RequestCode.HEART_BEAT), 5)).code == 0
        assert pair.server_conn.attrs == {}
        await server.stop()

    asyncio.run(main())
