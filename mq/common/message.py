"""The message model shared by client, broker and store (RocketMQ Message / MessageExt / MessageQueue).

``Message`` is what a producer sends; ``MessageExt`` is a stored record decoded (``mq.common.record``);
``MessageExtBrokerInner`` is the broker's input to the store: it carries the properties both as a dict
(read once by the broker) and as the string to store, so the store neither re-parses nor re-encodes.
Hosts are ``(ip, port)`` tuples; ``mq.common.hosts`` packs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from mq.common import properties as P
from mq.common.hosts import Address
from mq.common.javanum import INT32_MAX, INT32_MIN, parse_java_int


@dataclass(slots=True)
class Message:
    """A message as a producer builds it."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    transaction_id: str | None = None

    # -- well-known property accessors ------------------------------------------------------------------
    @property
    def tags(self) -> str | None:
        return self.properties.get(P.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(P.TAGS, value)

    @property
    def keys(self) -> str | None:
        """The raw KEYS property (space-separated)."""
        return self.properties.get(P.KEYS)

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if value is not None and not isinstance(value, str):
            value = P.KEY_SEPARATOR.join(value)
        self._set(P.KEYS, value)

    @property
    def key_list(self) -> list[str]:
        return P.split_keys(self.keys)

    @property
    def delay_time_level(self) -> int:
        v = self.properties.get(P.DELAY_TIME_LEVEL)
        return int(v) if v else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self._set(P.DELAY_TIME_LEVEL, str(level) if level else None)

    @property
    def wait_store_msg_ok(self) -> bool:
        """``WAIT`` property; absent means true."""
        return self.properties.get(P.WAIT_STORE_MSG_OK) != "false"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self._set(P.WAIT_STORE_MSG_OK, "true" if value else "false")

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    def _set(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value


@dataclass(slots=True)
class MessageExt(Message):
    """A stored message, as decoded from a commit-log record."""

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Address = ("0.0.0.0", 0)
    store_timestamp: int = 0
    store_host: Address = ("0.0.0.0", 0)
    msg_id: str = ""
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    broker_name: str = ""

    @property
    def offset_msg_id(self) -> str:
        from mq.common.msg_id import create_offset_msg_id

        return create_offset_msg_id(self.store_host, self.commit_log_offset)


@dataclass(slots=True)
class MessageExtBrokerInner(MessageExt):
    """Broker -> store input. ``properties_string`` is stored as is (None: encode ``properties``);
    ``tags_code`` None means "compute from TAGS"."""

    properties_string: str | None = None
    tags_code: int | None = None


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; sorts like Java's ``MessageQueue.compareTo``."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def to_json_value(self) -> dict:
        """RocketMQ's JSON form (fastjson field order), also used when a MessageQueue is a map key."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json_value(cls, obj: object) -> "MessageQueue":
        """Tolerant of what clients send: a numeric queueId given as text, missing members."""
        if not isinstance(obj, dict):
            raise ValueError(f"a MessageQueue must be a JSON object, not {type(obj).__name__}")
        qid = obj.get("queueId", 0)
        if type(qid) is str:
            qid = parse_java_int(qid)  # ValueError when Integer.parseInt would refuse it
        elif type(qid) is not int or not INT32_MIN <= qid <= INT32_MAX:
            raise ValueError(f"MessageQueue queueId is not an int: {str(qid)[:40]!r}")
        return cls(str(obj.get("topic") or ""), str(obj.get("brokerName") or ""), qid)
