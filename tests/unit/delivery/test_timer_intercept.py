"""The send-path hook of the timer (no sockets): which messages are parked and how they are rewritten."""

from __future__ import annotations

import time
from types import SimpleNamespace

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner
from mq.config import BrokerConfig, StoreConfig
from mq.daemon.broker.timer.service import TIMER_TOPIC, TimerMessageService, deliver_time


def _svc(tmp_path) -> TimerMessageService:
    ctrl = SimpleNamespace(config=BrokerConfig(), store_config=StoreConfig(store_path_root_dir=str(tmp_path)))
    svc = TimerMessageService(ctrl)  # type: ignore[arg-type]
    svc._running = True
    return svc


def _msg(props: dict[str, str]) -> MessageExtBrokerInner:
    s = P.encode_properties(props) + P.PROPERTY_SEPARATOR + "CLUSTER" + P.NAME_VALUE_SEPARATOR + "C"
    return MessageExtBrokerInner(topic="T", body=b"b", properties=dict(props), queue_id=3, properties_string=s)


def test_deliver_time_forms():
    assert deliver_time({}, 1000) is None
    assert deliver_time({P.START_DELIVER_TIME: "5000"}, 1000) == 5000
    assert deliver_time({"TIMER_DELIVER_MS": "7000"}, 1000) == 7000
    assert deliver_time({"TIMER_DELAY_SEC": "3"}, 1000) == 4000
    assert isinstance(deliver_time({"TIMER_DELAY_SEC": "x"}, 1000), str)


def test_future_message_is_parked(tmp_path):
    svc = _svc(tmp_path)
    at = int(time.time() * 1000) + 60_000
    m = _msg({P.TAGS: "a", P.START_DELIVER_TIME: str(at), P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U"})
    assert svc.intercept(m) is None
    assert m.topic == TIMER_TOPIC and m.queue_id == 0 and m.tags_code == at
    stored = P.decode_properties(m.properties_string)
    assert stored[P.REAL_TOPIC] == "T" and stored[P.REAL_QUEUE_ID] == "3" and stored["TIMER_OUT_MS"] == str(at)
    assert stored["CLUSTER"] == "C" and stored[P.TAGS] == "a"  # the rest of the stored string is kept
    assert m.properties[P.REAL_TOPIC] == "T"


def test_delay_level_is_dropped_and_limits(tmp_path):
    svc = _svc(tmp_path)
    m = _msg({P.DELAY_TIME_LEVEL: "3", "TIMER_DELAY_SEC": "10"})
    assert svc.intercept(m) is None
    assert P.DELAY_TIME_LEVEL not in P.decode_properties(m.properties_string)
    assert P.DELAY_TIME_LEVEL not in m.properties
    past = _msg({P.START_DELIVER_TIME: str(int(time.time() * 1000) - 1000)})
    assert svc.intercept(past) is None and past.topic == "T"  # due: delivered as a normal message
    far = _msg({"TIMER_DELAY_SEC": str(31 * 86400)})
    assert "ahead" in svc.intercept(far)
    svc._running = False  # not started (a slave, or timerEnable=false): left alone
    m = _msg({"TIMER_DELAY_SEC": "10"})
    assert svc.intercept(m) is None and m.topic == "T"
