"""Recalling a parked message (RocketMQ 5.3's RECALL_MESSAGE, used by the 5.x clients' RecallMessage).

A recall is a *marker* put into the timer topic: a message with ``TIMER_DEL_UNIQKEY`` = ``<topic> <UNIQ_KEY>``
whose fire time is two timer ticks before the recalled message's, so the timer meets the marker first.
Meeting it, the timer remembers the key until the recalled message's deliver time has passed (plus a
minute); meeting the message, it drops it instead of delivering it. The marker lives in the commit log like
every parked message, so a recall survives a restart that happens before the marker fires; a broker that
dies in the two ticks between the marker and the message delivers the message (at least once, as the timer
always is). A recall within two ticks of the deliver time, or after it, is refused: the message is on its
way.
"""

from __future__ import annotations

import time

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties

TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
#: Recalled keys are forgotten this long after their message's deliver time.
KEEP_AFTER_MS = 60_000


def marker_key(topic: str, uniq: str) -> str:
    return f"{topic} {uniq}"


def build_marker(topic: str, uniq: str, deliver_ms: int, precision_ms: int, timer_topic: str,
                 store_host: tuple[str, int], out_ms_key: str) -> MessageExtBrokerInner:
    fire = deliver_ms - 2 * precision_ms
    props = {TIMER_DEL_UNIQKEY: marker_key(topic, uniq), out_ms_key: str(fire), P.REAL_TOPIC: topic,
             P.REAL_QUEUE_ID: "0", "RECALL_DELIVER_MS": str(deliver_ms), P.WAIT_STORE_MSG_OK: "false"}
    return MessageExtBrokerInner(topic=timer_topic, body=b"recall", flag=0, properties=props, queue_id=0,
                                 sys_flag=0, born_timestamp=int(time.time() * 1000), born_host=store_host,
                                 properties_string=encode_properties(props), tags_code=fire)


class RecallTable:
    """Keys of recalled messages the timer met the marker of, until their deliver time has passed."""

    def __init__(self) -> None:
        self._keys: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def on_marker(self, props: dict[str, str]) -> None:
        try:
            deliver = int(props.get("RECALL_DELIVER_MS") or 0)
        except ValueError:
            deliver = 0
        self._keys[props[TIMER_DEL_UNIQKEY]] = deliver or int(time.time() * 1000)

    def recalled(self, props: dict[str, str], now_ms: int) -> bool:
        """True (and forgotten) when the message with ``props`` was recalled."""
        if not self._keys:
            return False
        key = marker_key(props.get(P.REAL_TOPIC, ""), props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""))
        hit = self._keys.pop(key, None) is not None
        if len(self._keys) > 64:
            for k in [k for k, at in self._keys.items() if at + KEEP_AFTER_MS < now_ms]:
                del self._keys[k]
        return hit
