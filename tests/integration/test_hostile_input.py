"""Loose numbers, oversize batches and floods of malformed requests, over raw sockets against the in-process
daemons: each gets Java's answer, nothing reaches the broker's files, and the log stays short."""

from __future__ import annotations

import logging

import orjson

from mq.common.message import Message
from mq.protocol import headers as H
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

from .broker.wire import batch_cmd, send_cmd
from .hostile import Raw, frame, json_header, serving

MB = 1024 * 1024


def _update_offset(queue_id: str) -> RemotingCommand:
    ext = {"consumerGroup": "G", "topic": "Loose", "queueId": queue_id, "commitOffset": "7"}
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)


def test_queue_ids_are_read_as_integer_parseint_reads_them(broker, loop):
    with serving(loop):
        r = Raw(broker.address)
        assert r.call(send_cmd("Loose", b"x")).code == ResponseCode.SUCCESS
        for text in ("1_0", " 1 ", "2147483648", "-2147483649", "0x1", "1.0"):
            resp = r.call(_update_offset(text))
            assert resp is not None and resp.code == ResponseCode.SYSTEM_ERROR, text
            assert resp.remark == f"the custom field <queueId> is not an int: {text!r}"
        assert r.call(_update_offset("+1")).code == ResponseCode.SUCCESS  # Java takes a plus sign
        r.close()
    assert broker.offsets.table().get("Loose@G") == {1: 7}
    broker.offsets.persist(force=True)
    stored = orjson.loads(broker.offsets.file.path.read_bytes())
    assert stored["offsetTable"]["Loose@G"] == {"1": 7}


def test_missing_fields_are_named_in_javas_words(broker, loop):
    with serving(loop):
        r = Raw(broker.address)
        r.send(frame(json_header(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T",
                                                                      "commitOffset": "1"})))
        resp = r.response()
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "the custom field <queueId> is null"
        r.close()


def test_a_batch_over_max_message_size_is_refused(broker_factory, loop):
    broker = broker_factory(max_message_size=1 * MB)
    with serving(loop):
        r = Raw(broker.address)
        msgs = [Message("BigBatch", b"b" * (600 * 1024)) for _ in range(3)]  # each fits, together they do not
        resp = r.call(batch_cmd("BigBatch", msgs))
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert "msg body length limit 1048576B" in resp.remark
        resp = r.call(batch_cmd("BigBatch", msgs[:1]))
        assert resp.code == ResponseCode.SUCCESS
        r.close()
    assert broker.store.get_max_offset("BigBatch", 0) == 1


def test_malformed_requests_are_logged_once_per_interval_without_traceback(broker, namesrv, loop, caplog):
    caplog.set_level(logging.INFO)
    bad_pull = {"consumerGroup": "G", "topic": "T", "queueId": "x", "queueOffset": "0", "maxMsgNums": "1",
                "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}
    with serving(loop):
        for addr, code, ext in ((broker.address, RequestCode.PULL_MESSAGE, bad_pull),
                                (namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {})):
            r = Raw(addr)
            for i in range(50):
                r.send(frame(json_header(code, ext, opaque=i)))
            answers = [r.response() for _ in range(50)]
            assert all(a is not None and a.code == ResponseCode.SYSTEM_ERROR for a in answers)
            r.close()
        for _ in range(20):  # malformed frames: each closes its connection
            r = Raw(broker.address)
            r.send(frame(b"{not json"))
            assert r.response() is None
            r.close()
    records = [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert records, "nothing was logged"
    assert len(records) <= 6, [rec.getMessage() for rec in records]
    assert not any(rec.exc_info for rec in records)
    assert all(rec.levelno == logging.WARNING for rec in records)


def test_header_fields_of_the_name_server_are_strict_too(namesrv, loop):
    with serving(loop):
        r = Raw(namesrv.address)
        ext = H.RegisterBrokerRequestHeader("b", "127.0.0.1:1", "C", "127.0.0.1:2", 0).to_ext()
        resp = r.call(RemotingCommand.request(RequestCode.REGISTER_BROKER, {**ext, "brokerId": "0_0"}))
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "the custom field <brokerId> is not a long: '0_0'"
        r.close()
    assert not namesrv.table.broker_live_table
