"""`mq trace -i`'s assembly: records of Java 4.9 layout -> one message's path (pairing by requestId, orphans,
incomplete traces, lag), and the fetch side against an in-memory admin returning real encoded records
(zlib bodies flagged by sysflag bit 0, key filtering, born host as client host)."""

from __future__ import annotations

import asyncio
import json
import zlib

from mq.cli.console import to_json
from mq.common import properties as P
from mq.common.message import MessageExt
from mq.common.record import encode_record
from mq.protocol.codes import ResponseCode
from mq.protocol.command import RemotingCommand
from mq.trace.encoder import decode_text
from mq.trace.query import StoredMessage, TraceRecord, build_trace, query_trace

S, T = "\x01", "\x02"
MID = "AC110001000018B4AAC2176F22A60000"
OTHER = "AC110001000018B4AAC2176F22A69999"


def rec(*fields: str) -> str:
    return S.join(fields) + T


PUB = rec("Pub", "1000", "DefaultRegion", "PG", "TopicT", MID, "TagA", "k1", "10.0.0.1:10911", "5", "4", "0", "OFF",
          "true")
# group A: one clean attempt; group B: failed, then retried successfully; group C: SubAfter only (SubBefore
# lost: its group and time still come from fields 7-8); group D: SubBefore only (still running or lost)
RECORDS = [
    PUB,
    rec("SubBefore", "1010", "null", "CGA", "RA1", MID, "0", "k1"),
    rec("SubAfter", "RA1", MID, "7", "true", "k1", "0", "1017", "CGA"),
    rec("SubBefore", "1012", "null", "CGB", "RB1", MID, "0", "k1"),
    rec("SubAfter", "RB1", MID, "2", "false", "k1", "4", "1014", "CGB"),
    rec("SubBefore", "1200", "null", "CGB", "RB2", MID, "1", "k1"),
    rec("SubAfter", "RB2", MID, "3", "true", "k1", "0", "1203", "CGB"),
    rec("SubAfter", "RC1", MID, "6", "true", "k1", "0", "1030", "CGC"),
    rec("SubBefore", "1040", "null", "CGD", "RD1", MID, "0", "k1"),
    rec("SubBefore", "1010", "null", "CGA", "RX", OTHER, "0", "k1"),  # another message in the same batch
]


def records(texts: list[str], host: str = "10.0.0.9") -> list[TraceRecord]:
    return [TraceRecord(c, host) for t in texts for c in decode_text(t)]


def test_path_pairs_attempts_by_request_id_and_reports_what_is_missing() -> None:
    tr = build_trace(MID, records(RECORDS))
    (pub,) = tr.pubs
    assert (pub.group, pub.client_host, pub.store_host, pub.send_time, pub.cost_ms, pub.status) == (
        "PG", "10.0.0.9", "10.0.0.1:10911", 1000, 4, "success")
    g = {v.group: v for v in tr.groups}
    assert list(g) == ["CGA", "CGB", "CGC", "CGD"]
    a = g["CGA"].attempts
    assert [(x.begin, x.end, x.retry_times, x.cost_ms, x.status) for x in a] == [(1010, 1017, 0, 7, "success")]
    assert g["CGA"].delivery_lag_ms == 1010 - (1000 + 4 // 2) and g["CGA"].consumed_after_ms == 17
    b = g["CGB"].attempts
    assert [(x.retry_times, x.status, x.return_type) for x in b] == [(0, "failed", "FAILED"), (1, "success", "SUCCESS")]
    assert g["CGB"].status == "consumed" and g["CGB"].consumed_after_ms == 203
    (c,) = g["CGC"].attempts
    assert (c.begin, c.end, c.start, c.retry_times, c.status) == (None, 1030, 1024, None, "success")
    (d,) = g["CGD"].attempts
    assert (d.status, d.cost_ms, g["CGD"].status) == ("unknown", None, "consuming")
    assert tr.incomplete == ["group CGC: SubAfter RC1 has no SubBefore (record lost)",
                             "group CGD: SubBefore RD1 has no SubAfter (still consuming, or the record was lost)"]
    assert tr.records == 9 and tr.found and tr.topic == "TopicT"
    data = json.loads(to_json(tr.to_dict()))
    assert data["groups"][2]["attempts"][0]["start"] == 1024 and data["pubs"][0]["msg_type"] == "Normal_Msg"


def test_stored_time_beats_the_estimate_and_retrying_status() -> None:
    texts = [PUB, rec("SubBefore", "1500", "null", "CGB", "RB1", MID, "0", "k1"),
             rec("SubAfter", "RB1", MID, "2", "false", "k1", "2", "1502", "CGB")]
    tr = build_trace(MID, records(texts), stored=StoredMessage("broker-a", 1, 7, 1003, "10.0.0.1:10911"))
    (g,) = tr.groups
    assert g.status == "retrying" and g.delivery_lag_ms == 497 and g.consumed_after_ms is None
    assert g.attempts[0].return_type == "EXCEPTION"


def test_old_sub_after_without_group_pairs_by_request_id_and_no_pub_is_incomplete() -> None:
    texts = [rec("SubBefore", "1010", "null", "CGA", "RA1", MID, "0", "null"),
             rec("SubAfter", "RA1", MID, "7", "true", "null", "0")]  # pre-4.9: no timestamp, no group
    tr = build_trace(MID, records(texts))
    (g,) = tr.groups
    (a,) = g.attempts
    assert (g.group, a.begin, a.end, a.cost_ms, a.status) == ("CGA", 1010, None, 7, "success")
    assert tr.incomplete == ["no Pub record (the producer may not have tracing on, or the record was lost)"]


def test_end_transaction_view() -> None:
    texts = [rec("EndTransaction", "1100", "DefaultRegion", "PG", "TopicT", MID, "null", "null", "10.0.0.1:10911",
                 "2", "TX1", "COMMIT_MESSAGE", "true")]
    tr = build_trace(MID, records(texts))
    (e,) = tr.end_transactions
    assert (e.group, e.state, e.transaction_id, e.from_check, e.time) == ("PG", "COMMIT_MESSAGE", "TX1", True, 1100)
    assert tr.topic == "TopicT"


class FakeAdmin:
    """Answers the calls query_trace makes with real encoded commit-log records."""

    def __init__(self, per_broker: dict[str, list[MessageExt]]) -> None:
        self.per_broker = per_broker
        self.asked: list[tuple[str, str]] = []

    async def topic_master_addrs(self, topic: str) -> dict[str, str]:
        return {name: f"{name}:10911" for name in self.per_broker}

    async def call_broker(self, addr: str, cmd: RemotingCommand, *, ok=(0,), timeout=None) -> RemotingCommand:
        name = addr.split(":")[0]
        self.asked.append((name, cmd.ext_fields["key"]))
        body = b"".join(encode_record(m) for m in self.per_broker[name])
        if not body:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "no message")
        return cmd.response(ResponseCode.SUCCESS, None, body=body)


def trace_msg(text: str, keys: str, *, compress: bool, born: str, topic: str = "RMQ_SYS_TRACE_TOPIC") -> MessageExt:
    body = text.encode()
    return MessageExt(topic=topic, body=zlib.compress(body) if compress else body, sys_flag=0x301 if compress else 0,
                      properties={P.KEYS: keys}, born_host=(born, 5555), store_host=("10.0.0.1", 10911),
                      store_timestamp=2000)


def test_query_reads_every_broker_inflates_by_sysflag_and_filters_keys() -> None:
    admin = FakeAdmin({
        "broker-a": [trace_msg(PUB, f"{MID} k1", compress=True, born="10.0.0.5")],
        "broker-b": [trace_msg("".join(RECORDS[1:3]), f"{MID} k1", compress=False, born="10.0.0.6"),
                     trace_msg(RECORDS[9], f"{OTHER} k1", compress=False, born="10.0.0.6"),  # key does not match
                     trace_msg(RECORDS[3], f"{MID}", compress=False, born="10.0.0.7", topic="OtherTopic")],
        "broker-c": [],
    })
    tr = asyncio.run(query_trace(admin, MID, check_groups=False))
    assert sorted(admin.asked) == [("broker-a", MID), ("broker-b", MID), ("broker-c", MID)]
    assert tr.trace_messages == 2 and tr.records == 3
    assert tr.pubs[0].client_host == "10.0.0.5"
    (g,) = tr.groups
    assert g.group == "CGA" and g.attempts[0].client_host == "10.0.0.6" and g.status == "consumed"
    assert tr.incomplete == []
