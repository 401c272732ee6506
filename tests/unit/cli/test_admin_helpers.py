"""Pure helpers of the admin CLI: time parsing/formatting, id classification, table shaping."""

from __future__ import annotations

import datetime as dt

import pytest

from mq.cli.broker_admin import first_number, runtime_summary, today_counts
from mq.cli.consumer_admin import format_ms, parse_time, progress_rows, progress_totals
from mq.cli.query import IdKind, body_preview, classify_msg_id, message_dict
from mq.cli.topic_admin import order_conf
from mq.common.message import MessageExt
from mq.common.msg_id import UniqKeyGenerator, create_offset_msg_id
from mq.protocol.bodies import MessageQueue, OffsetWrapper


# -- parse_time / format_ms -------------------------------------------------------------------------------
def test_parse_time_epoch_ms_and_latest():
    assert parse_time("1700000000123") == 1700000000123
    assert parse_time(" now ") == -1
    assert parse_time("-1") == -1
    assert parse_time("now", now_ms=42) == 42


def test_parse_time_iso_with_zone_is_exact():
    assert parse_time("2024-05-01T10:00:00Z") == 1714557600000
    assert parse_time("2024-05-01T12:00:00+02:00") == 1714557600000
    assert parse_time("2024-05-01T10:00:00.250+00:00") == 1714557600250


def test_parse_time_naive_is_local_time():
    want = int(dt.datetime(2024, 5, 1, 10, 0, 0).timestamp() * 1000)
    assert parse_time("2024-05-01T10:00:00") == want
    assert parse_time("2024-05-01 10:00") == want


def test_parse_time_mqadmin_format():
    want = int(dt.datetime(2024, 5, 1, 10, 0, 1, 234000).timestamp() * 1000)
    assert parse_time("2024-05-01#10:00:01:234") == want


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", "12:00", "", "1.5"])
def test_parse_time_rejects_garbage_with_a_hint(bad):
    with pytest.raises(ValueError, match="epoch ms"):
        parse_time(bad)


def test_format_ms_round_trips_through_parse_time():
    ms = 1714557600250
    text = format_ms(ms)
    assert text.endswith(".250")
    assert parse_time(text) == ms
    assert format_ms(0) == "-" and format_ms(None) == "-" and format_ms(-5) == "-"


# -- classify_msg_id -------------------------------------------------------------------------------------
def test_offset_msg_id_decodes_to_its_broker():
    mid = create_offset_msg_id(("127.0.0.1", 10911), 123456)
    assert classify_msg_id(mid) == (IdKind.OFFSET_MSG_ID, ("127.0.0.1:10911", 123456))
    assert classify_msg_id(mid.lower())[0] is IdKind.OFFSET_MSG_ID


def test_ipv6_offset_msg_id():
    mid = create_offset_msg_id(("2001:db8::1", 10911), 7)
    assert len(mid) == 56
    assert classify_msg_id(mid) == (IdKind.OFFSET_MSG_ID, ("[2001:db8::1]:10911", 7))


@pytest.mark.parametrize("pid", [1, 4242, 30000, 65535])
def test_uniq_key_is_not_taken_for_an_offset_msg_id(pid):
    gen = UniqKeyGenerator("10.0.0.5", pid=pid, salt=0x12345678)
    key = gen.next()
    assert len(key) == 32
    assert classify_msg_id(key) == (IdKind.UNIQ_KEY, None)


def test_zero_host_id_is_a_uniq_key():
    assert classify_msg_id("00000000" + "00002A9F" + "0000000000000010")[0] is IdKind.UNIQ_KEY


@pytest.mark.parametrize("bad", ["", "xyz", "ABCD", "G" * 32, "A" * 31, "A" * 40])
def test_not_an_id(bad):
    with pytest.raises(ValueError, match="hexadecimal"):
        classify_msg_id(bad)


# -- tables ----------------------------------------------------------------------------------------------
def test_progress_rows_sorted_with_diff_and_totals():
    table = {
        MessageQueue("T", "b", 1): OffsetWrapper(10, 4, 1700000000000),
        MessageQueue("T", "a", 0): OffsetWrapper(5, 5, 1700000000500, 8),  # a pop group: 3 in flight
        MessageQueue("%RETRY%G", "a", 0): OffsetWrapper(0, 0, 0),
    }
    rows = progress_rows(table)
    assert [(r["topic"], r["brokerName"], r["queueId"]) for r in rows] == [
        ("%RETRY%G", "a", 0), ("T", "a", 0), ("T", "b", 1)]
    assert [r["diff"] for r in rows] == [0, 0, 6]
    assert [r["inflight"] for r in rows] == [0, 3, 0]
    assert progress_totals(rows) == {"queues": 3, "brokerOffset": 15, "consumerOffset": 9, "diff": 6,
                                     "inflight": 3, "lastTimestamp": 1700000000500}
    assert progress_totals([]) == {"queues": 0, "brokerOffset": 0, "consumerOffset": 0, "diff": 0,
                                   "inflight": 0, "lastTimestamp": 0}


def test_runtime_summary_reads_mqadmin_keys():
    kv = {"putTps": "12.5 10.0 8.0", "getTransferedTps": "3.25 1 1", "brokerVersionDesc": "V4_9_4",
          "msgPutTotalTodayMorning": "100", "msgPutTotalTodayNow": "150", "msgGetTotalTodayMorning": "7",
          "msgGetTotalTodayNow": "9", "commitLogDiskRatio": "0.42"}
    assert runtime_summary(kv) == {"version": "V4_9_4", "inTps": 12.5, "outTps": 3.25, "putToday": 50,
                                   "getToday": 2, "commitLogDiskRatio": "0.42"}
    assert first_number(None) == 0.0 and first_number("") == 0.0 and first_number("n/a 1") == 0.0
    assert today_counts({"msgPutTotalTodayNow": "x"}) == (0, 0)


def test_order_conf_lists_brokers_in_name_order():
    assert order_conf({"broker-b": "h:2", "broker-a": "h:1"}, 4) == "broker-a:4;broker-b:4"
    assert order_conf({}, 4) == ""


# -- message display -------------------------------------------------------------------------------------
def test_body_preview_text_binary_and_long():
    assert body_preview(b"hello") == "hello"
    assert body_preview("héllo".encode()) == "héllo"
    assert body_preview(b"\xff\xfe\x00").startswith("<3 bytes, not UTF-8> ff fe 00")
    assert body_preview(b"\x00\x01\x02\x03").startswith("<4 bytes, binary>")
    long = body_preview(b"a" * 2000, limit=100)
    assert long.startswith("a" * 100) and long.endswith("(2000 chars)")


def test_message_dict_has_every_field():
    m = MessageExt(topic="T", body=b"payload", properties={"KEYS": "k1 k2", "TAGS": "tagA", "UNIQ_KEY": "AB"},
                   queue_id=3, queue_offset=9, commit_log_offset=4096, store_host=("127.0.0.1", 10911),
                   born_host=("10.0.0.1", 5555), store_timestamp=1700000000000, born_timestamp=1699999999999,
                   msg_id="MID", broker_name="broker-a", reconsume_times=2)
    d = message_dict(m)
    assert d["topic"] == "T" and d["keys"] == "k1 k2" and d["tags"] == "tagA" and d["uniqKey"] == "AB"
    assert d["storeHost"] == "127.0.0.1:10911" and d["bornHost"] == "10.0.0.1:5555"
    assert d["queueId"] == 3 and d["queueOffset"] == 9 and d["commitLogOffset"] == 4096
    assert d["body"] == "payload" and d["bodyLength"] == 7 and d["reconsumeTimes"] == 2
    assert d["properties"] == {"KEYS": "k1 k2", "TAGS": "tagA", "UNIQ_KEY": "AB"}
