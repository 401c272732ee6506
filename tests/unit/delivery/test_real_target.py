"""Where the timer and the schedule service may deliver a parked message (``requeue.real_target``)."""

from __future__ import annotations

import pytest

from mq.common import properties as P
from mq.common import topic as T
from mq.common.message import MessageExt
from mq.daemon.broker.requeue import real_target


def _msg(**props: str) -> MessageExt:
    return MessageExt(topic=T.TIMER_TOPIC, body=b"x", properties=dict(props))


def test_a_real_topic_a_client_could_send_to_is_delivered():
    assert real_target(_msg(REAL_TOPIC="Good", REAL_QID="3", TAGS="a")) == ("Good", 3, {
        P.REAL_TOPIC: "Good", P.REAL_QUEUE_ID: "3", P.TAGS: "a"})
    assert real_target(_msg(REAL_TOPIC="%RETRY%g"))[:2] == ("%RETRY%g", 0)  # type: ignore[index]
    assert real_target(_msg(REAL_TOPIC="T", REAL_QID="1", DELAY="3"), drop=(P.DELAY_TIME_LEVEL,)) == (
        "T", 1, {P.REAL_TOPIC: "T", P.REAL_QUEUE_ID: "1"})


@pytest.mark.parametrize("props,why", [
    ({}, "no REAL_TOPIC"),
    ({"REAL_TOPIC": "../../../x"}, "not a valid topic name"),
    ({"REAL_TOPIC": "x/../Victim"}, "not a valid topic name"),
    ({"REAL_TOPIC": T.SCHEDULE_TOPIC}, "internal topic"),
    ({"REAL_TOPIC": T.TIMER_TOPIC}, "internal topic"),
    ({"REAL_TOPIC": T.TRANS_HALF_TOPIC}, "internal topic"),
    ({"REAL_TOPIC": "Good", "REAL_QID": "-1"}, "not a queue id"),
    ({"REAL_TOPIC": "Good", "REAL_QID": "2147483648"}, "not a queue id"),
    ({"REAL_TOPIC": "Good", "REAL_QID": "1" * 5000}, "not a queue id"),
    ({"REAL_TOPIC": "Good", "REAL_QID": "٣"}, "not a queue id"),
])
def test_a_message_that_cannot_be_delivered_says_why(props, why):
    out = real_target(_msg(**props))
    assert isinstance(out, str) and why in out
