"""Hostile values and whole hostile requests, as hypothesis strategies.

Values are drawn from sets an attacker would try (issue 28): path pieces (``../``, ``/``, ``..``, absolute paths,
NUL, very long names), huge and negative numbers, 2^31, 2^63, non-numbers where numbers are expected
(``"1_0"``, ``" 1 "``, ``"0x10"``), wrong JSON types, every sysFlag bit, bytes that are not UTF-8, oversize
headers and bodies, malformed and fastjson-dialect JSON. A request (``HostileRequest``) starts from a header
a well-behaved client would send for its code (``registry.base_ext``), so a hostile value in one field reaches
the code behind the header parsing; some requests also carry fields that do not belong, drop required ones, or
use RocketMQ's binary header with raw bytes.

Every hostile name that could become a path carries ``rig.MARKER``, and hostile absolute paths point under the
rig's ``abs`` directory, so a file that escapes the store is found (``Rig.check``).
"""

from __future__ import annotations

import functools
import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.topic import (DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, TRACE_TOPIC,
                             TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC)
from mq.protocol.codes import RequestCode
from tests.adversarial import registry
from tests.adversarial.rig import MARKER
from tests.adversarial.wire import FLAG_ONEWAY, binary_frame, json_frame

R = RequestCode
TIMER_TOPIC = "rmq_sys_wheel_timer"

# -- values ------------------------------------------------------------------------------------------------
INT32_EDGES = [0, 1, -1, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32, 2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64,
               10**30, 65535, 65536, 127, 128, 255, 256]
#: Text no Java ``Integer.parseInt`` / ``Long.parseLong`` accepts.
NON_NUMBERS = ["1_0", " 1 ", "1 ", " 1", "\t1", "1\n", "0x10", "1e3", "1.0", "1.5", "--1", "NaN", "Infinity",
               "null", "true", "one", "0b1", "0o7", "1,000", "\u0661\u0662_3", "", " "]
PATH_PIECES = ["..", "../", "/", ".", "./", "\\", "..\\", "%2e%2e%2f", "~", "\x00", "//", "/./", "....//"]
WRONG_TYPES: list[Any] = [None, True, False, [], {}, [1, 2], {"a": 1}, 1.5, -0.0, 10**20, [None], {"": ""}]
LONG_LENGTHS = [127, 128, 255, 256, 300, 1_000, 5_000, 70_000]


@functools.lru_cache(maxsize=None)
def sysflag_values() -> st.SearchStrategy[int]:
    """Every single bit, the bits that describe how a record is laid out, and any int32."""
    return st.one_of(st.sampled_from([1 << i for i in range(32)]),
                     st.sampled_from([SF.BORNHOST_V6, SF.STOREHOST_V6, SF.BORNHOST_V6 | SF.STOREHOST_V6,
                                      SF.COMPRESSED, SF.COMPRESSED | SF.COMPRESSION_LZ4, SF.INNER_BATCH,
                                      SF.NEED_UNWRAP, SF.TRANSACTION_PREPARED_TYPE, SF.TRANSACTION_COMMIT_TYPE,
                                      SF.TRANSACTION_ROLLBACK_TYPE, -1, 0x7FFFFFFF, -2**31]),
                     st.integers(-2**31, 2**31 - 1))


@functools.lru_cache(maxsize=None)
def marked_name(abs_target: str) -> st.SearchStrategy[str]:
    """A name that becomes a path somewhere if nothing checks it: traversal, absolute, NUL, long."""
    tag = st.integers(0, 999).map(lambda n: f"{MARKER}{n}")
    ups = st.integers(1, 7).map(lambda n: "../" * n)
    return st.one_of(
        st.builds(lambda u, t: u + t, ups, tag),
        st.builds(lambda t: f"x/../../{t}", tag),
        st.builds(lambda t: f"{abs_target}/{t}", tag),
        st.builds(lambda t: f"/{t}", tag),
        st.builds(lambda t: f"..\\..\\{t}", tag),
        st.builds(lambda t: f"{t}\x00.json", tag),
        st.builds(lambda n, t: t + "a" * n, st.sampled_from(LONG_LENGTHS), tag),
        st.builds(lambda p, t: p + t, st.sampled_from(PATH_PIECES), tag),
        st.builds(lambda t: f"{RETRY_GROUP_TOPIC_PREFIX}../../{t}", tag),
        st.builds(lambda t: f"{DLQ_GROUP_TOPIC_PREFIX}../{t}", tag),
        st.sampled_from(PATH_PIECES),
    )


@functools.lru_cache(maxsize=None)
def hostile_text(abs_target: str) -> st.SearchStrategy[str]:
    return st.one_of(
        marked_name(abs_target),
        st.sampled_from(NON_NUMBERS),
        st.sampled_from([TIMER_TOPIC, SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRACE_TOPIC,
                         "TBW102", "%RETRY%AdvGroup", "%DLQ%AdvGroup", "OFFSET_MOVED_EVENT", "rmq_sys_x"]),
        st.text(max_size=40),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda s: s * 4),
        st.sampled_from(["\u202e", "\ud800", "\x01\x02", "a\x01b\x02", "\r\n", "${jndi:x}", "%s%n", "'\"<>"]),
    )


@functools.lru_cache(maxsize=None)
def hostile_number_text() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(INT32_EDGES).map(str), st.sampled_from(NON_NUMBERS),
                     st.integers().map(str))


@functools.lru_cache(maxsize=None)
def hostile_value(kind: type, abs_target: str) -> st.SearchStrategy[Any]:
    """A value for a header field of ``kind``: mostly text (what the wire carries), sometimes a wrong type."""
    if kind is int or kind is float:
        main = hostile_number_text()
    elif kind is bool:
        main = st.sampled_from(["true", "false", "1", "0", "TRUE", "yes", "", "null", "2"])
    else:
        main = hostile_text(abs_target)
    return st.one_of(main, main, main, st.sampled_from(WRONG_TYPES), hostile_text(abs_target))


# -- bodies ------------------------------------------------------------------------------------------------
def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


def fastjson_dialect(value: str) -> st.SearchStrategy[bytes]:
    """What fastjson reads but strict JSON does not: unquoted and single-quoted keys, trailing commas, object keys,
    comments; plus things that are not JSON at all."""
    v = json.dumps(value)
    return st.sampled_from([
        f"{{topic:{v},queueId:0}}", f"{{'topic':{v},'queueId':'0'}}", f'{{"topic":{v},}}',
        f'{{"offsetTable":{{{{"topic":{v},"brokerName":"adv-broker","queueId":0}}:5}}}}',
        f'{{"offsetTable":{{{v}:{{"0":5}}}}}}', f'/* c */ {{"topic":{v}}}', f'{{"topic":{v}', f'[{v}',
        "{" * 2000 + "}" * 2000, "[" * 100_000, '{"a":' * 50_000, "\ufeff{}", "null", "[]", '"x"', "1e999",
        '{"topic":"\\ud800"}', '{"":{"":{"":[]}}}',
    ]).map(lambda text: text.encode("utf-8", "surrogatepass"))


def subscription(topic: str, sub: str, version: Any) -> dict[str, Any]:
    return {"topic": topic, "subString": sub, "tagsSet": [sub], "codeSet": [], "subVersion": version,
            "classFilterMode": False, "expressionType": "TAG"}


@st.composite
def json_body(draw: st.DrawFn, code: int, abs_target: str) -> bytes:
    """A body shaped like the one ``code`` takes, with hostile values in its slots."""
    text = hostile_text(abs_target)
    num = st.one_of(st.sampled_from(INT32_EDGES), st.sampled_from(WRONG_TYPES), st.sampled_from(NON_NUMBERS))
    name = st.one_of(text, st.just(registry.TOPIC), st.just(registry.GROUP))
    if code == R.HEART_BEAT:
        obj = {"clientID": draw(text), "consumerDataSet": [{
            "groupName": draw(name), "consumeType": draw(st.sampled_from(["CONSUME_PASSIVELY", "X", 7])),
            "messageModel": draw(st.sampled_from(["CLUSTERING", "BROADCASTING", None])),
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [subscription(draw(name), draw(text), draw(num))]}],
            "producerDataSet": [{"groupName": draw(name)}]}
    elif code in (R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ):
        mqs = [{"topic": draw(name), "brokerName": draw(st.one_of(st.just(registry.BROKER_NAME), text)),
                "queueId": draw(num)} for _ in range(draw(st.integers(0, 3)))]
        obj = {"consumerGroup": draw(name), "clientId": draw(text), "onlyThisBroker": draw(st.booleans()),
               "mqSet": mqs}
    elif code == R.CHECK_CLIENT_CONFIG:
        obj = {"clientId": draw(text), "group": draw(name),
               "subscriptionData": {**subscription(draw(name), draw(text), draw(num)),
                                    "expressionType": draw(st.sampled_from(["SQL92", "TAG", "x", None]))}}
    elif code == R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP:
        obj = {"groupName": draw(name), "consumeEnable": draw(st.sampled_from([True, False, "x"])),
               "retryQueueNums": draw(num), "retryMaxTimes": draw(num), "brokerId": draw(num),
               "whichBrokerWhenConsumeSlowly": draw(num), "consumeBroadcastEnable": True}
    elif code == R.REGISTER_BROKER:
        topic = draw(name)
        obj = {"topicConfigSerializeWrapper": {
            "topicConfigTable": {topic: {"topicName": topic, "readQueueNums": draw(num), "writeQueueNums": draw(num),
                                         "perm": draw(num), "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                         "order": False}},
            "dataVersion": {"timestamp": draw(num), "counter": draw(num)}},
            "filterServerList": [draw(text)]}
    elif code in (R.UPDATE_BROKER_CONFIG, R.UPDATE_NAMESRV_CONFIG):
        keys = st.sampled_from(["storePathRootDir", "storePathCommitLog", "kvConfigPath", "configStorePath",
                                "rocketmqHome", "brokerPermission", "fileReservedTime", "deleteWhen",
                                "diskMaxUsedSpaceRatio", "orderMessageEnable", "listenPort", "aclEnable",
                                "filterServerNums", "maxMsgsNumBatch", "namesrvAddr", "brokerName"])
        lines = [f"{draw(keys)}={draw(st.one_of(text, hostile_number_text()))}" for _ in range(draw(st.integers(1, 3)))]
        return "\n".join(lines).encode("utf-8", "surrogatepass")
    else:
        obj = {"topic": draw(name), "group": draw(name), "offsetTable": {draw(text): draw(num)}}
    return _json(obj)


@functools.lru_cache(maxsize=None)
def batch_body(abs_target: str) -> st.SearchStrategy[bytes]:
    """SEND_BATCH_MESSAGE bodies: entries with hostile properties, lengths that lie, truncations."""
    import struct

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        parts = []
        for _ in range(draw(st.integers(0, 4))):
            body = draw(st.binary(max_size=64))
            props = draw(properties_text(abs_target)).encode("utf-8", "surrogatepass")
            total = 20 + len(body) + 2 + len(props)
            total = draw(st.one_of(st.just(total), st.sampled_from([0, -1, total + 1, 2**31 - 1])))
            body_len = draw(st.one_of(st.just(len(body)), st.sampled_from([-1, len(body) + 5, 2**31 - 1])))
            props_len = draw(st.one_of(st.just(len(props)), st.sampled_from([-1, 32767, len(props) + 3])))
            parts.append(struct.pack(">iiiii", total, 0, 0, draw(st.integers(-2**31, 2**31 - 1)), body_len)
                         + body + struct.pack(">H", props_len & 0xFFFF) + props)
        out = b"".join(parts)
        cut = draw(st.integers(0, len(out)))
        return out if draw(st.booleans()) else out[:cut]
    return build()


@functools.lru_cache(maxsize=None)
def properties_text(abs_target: str) -> st.SearchStrategy[str]:
    """A message properties string with hostile values for the keys the broker acts on."""
    keys = st.sampled_from([P.REAL_TOPIC, P.REAL_QUEUE_ID, P.DELAY_TIME_LEVEL, "TIMER_OUT_MS", "TIMER_DELIVER_MS",
                            "TIMER_DELAY_SEC", "__STARTDELIVERTIME", P.TRANSACTION_PREPARED, P.KEYS, P.TAGS,
                            P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, P.RETRY_TOPIC, P.RECONSUME_TIME, P.MAX_RECONSUME_TIMES,
                            "PGROUP", "CLUSTER", "REPLY_TO_CLIENT", "CORRELATION_ID", "MSG_TYPE", "INNER_NUM",
                            "TRAN_PREPARED_QUEUE_OFFSET", "WAIT", "\x00", "", "a\x01b"])
    value = st.one_of(hostile_text(abs_target), hostile_number_text(),
                      st.sampled_from(["0", "1", "18", "19", "-1", "true"]))
    pair = st.tuples(keys, value).map(lambda kv: (kv[0], timing_value(kv[0], kv[1])))
    pairs = st.lists(pair, max_size=5)
    return st.one_of(pairs.map(lambda ps: "".join(f"{k}\x01{v}\x02" for k, v in ps)),
                     st.text(max_size=60), st.just("\x01\x02\x01\x02"), st.just("k" * 40_000))


#: Properties that delay a message (schedule levels, timer). Their hostile values deliver at once, in about a
#: second, or never (past, 1 s, far future, not a number), so that what a delayed delivery breaks shows up in
#: the example that caused it (``Rig.check`` waits ``TIMING_SETTLE`` after such an example).
TIMING_KEYS = (P.DELAY_TIME_LEVEL, "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "__STARTDELIVERTIME", "TIMER_OUT_MS")
TIMING_SETTLE = 1.5


def timing_value(key: str, value: str) -> str:
    if key not in TIMING_KEYS:
        return value
    if key == P.DELAY_TIME_LEVEL:
        return value if value in ("0", "1", "19", "-1", "100", "x", "") else "1"
    if key == "TIMER_DELAY_SEC":
        return value if value in ("0", "1", "-1", "x", "") else str(10**9)
    now = int(time.time() * 1000)
    return {0: str(now - 1000), 1: str(now + 500), 2: str(2**63 - 1), 3: "-1", 4: "x"}[len(value) % 5]


#: Bodies too big to build for each example: a JSON object of 1 MiB and one just over 4 MiB of blanks, and
#: 10 MB of JSON deflated to about 10 KB (a small zlib bomb for the compressed REGISTER_BROKER body).
BIG_BODIES = [b"{" + b" " * (1024 * 1024) + b"}", b"{" + b" " * (4 * 1024 * 1024 + 1) + b"}",
              zlib.compress(b'{"topicConfigSerializeWrapper":{}}' + b" " * 10_000_000, 9)]


@functools.lru_cache(maxsize=None)
def generic_body(code: int, abs_target: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.just(b""),
        st.binary(max_size=256),
        json_body(code, abs_target),
        json_body(code, abs_target),
        hostile_text(abs_target).flatmap(fastjson_dialect),
        st.sampled_from([b"\xff\xfe\xfd", b"\xc3\x28", b'{"topic":"\xff"}', b"\x00" * 64]),
        st.sampled_from(BIG_BODIES),
    )


# -- requests ----------------------------------------------------------------------------------------------
@dataclass
class HostileRequest:
    code: int
    ext: dict[Any, Any]
    body: bytes = b""
    binary: bool = False
    oneway: bool = False
    #: a note of what makes it hostile (shown in failures)
    what: list[str] = field(default_factory=list)

    def frame(self, opaque: int) -> bytes:
        flag = FLAG_ONEWAY if self.oneway else 0
        if self.binary:
            ext = {(k if isinstance(k, bytes) else str(k).encode("utf-8", "surrogatepass")):
                   (v if isinstance(v, bytes) else _text(v).encode("utf-8", "surrogatepass"))
                   for k, v in self.ext.items()}
            return binary_frame(self.code, ext, self.body, opaque=opaque, flag=flag)
        return json_frame(self.code, self.ext, self.body, opaque=opaque, flag=flag)

    @property
    def timed(self) -> bool:
        """It may deliver something a moment later (a delay or timer property)."""
        text = repr(self.ext) + repr(self.body)
        return any(k in text for k in TIMING_KEYS)

    def __repr__(self) -> str:
        ext = {k: (v[:80] + f"...({len(v)} chars)" if isinstance(v, str) and len(v) > 80 else v)
               for k, v in self.ext.items()}
        body = self.body[:120] + (f"...({len(self.body)} bytes)".encode() if len(self.body) > 120 else b"")
        return (f"HostileRequest({registry.code_name(self.code)}, ext={ext!r}, body={body!r}, binary={self.binary}, "
                f"oneway={self.oneway}, what={self.what})")


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v) if v is not None else ""


BODY_CODES = {R.HEART_BEAT, R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ, R.CHECK_CLIENT_CONFIG, R.REGISTER_BROKER,
              R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, R.UPDATE_BROKER_CONFIG, R.UPDATE_NAMESRV_CONFIG}
SEND_CODES = {R.SEND_MESSAGE, R.SEND_MESSAGE_V2, R.SEND_BATCH_MESSAGE, R.SEND_REPLY_MESSAGE,
              R.SEND_REPLY_MESSAGE_V2, R.CONSUMER_SEND_MSG_BACK}


#: A send body just over RocketMQ's 4 MiB maxMessageSize.
OVERSIZE_BODY = b"x" * (4 * 1024 * 1024 + 1)


@functools.lru_cache(maxsize=None)
def _body_strategy(code: int, abs_target: str) -> st.SearchStrategy[bytes]:
    if code == R.SEND_BATCH_MESSAGE:
        return batch_body(abs_target)
    if code in SEND_CODES:
        return st.one_of(st.binary(max_size=512), st.just(b""), st.just(OVERSIZE_BODY), batch_body(abs_target))
    if code in BODY_CODES:
        return st.one_of(json_body(code, abs_target), generic_body(code, abs_target))
    return st.one_of(st.just(b""), st.just(b""), generic_body(code, abs_target))


@st.composite
def hostile_request(draw: st.DrawFn, code: int, broker_addr: str, abs_target: str) -> HostileRequest:
    """A request for ``code``: its plausible header with 1-3 fields made hostile (sometimes a field that does not
    belong, a required one dropped), a hostile body, sometimes the binary header or the oneway flag."""
    ext: dict[Any, Any] = registry.base_ext(code, broker_addr)
    cls = registry.header_class(code)
    fields = {f.wire: f for f in cls.FIELDS} if cls else {}
    what: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        choice = draw(st.sampled_from(["field", "field", "field", "extra", "drop"] if fields else ["extra"]))
        if choice == "field":
            wire = draw(st.sampled_from(sorted(fields)))
            f = fields[wire]
            if f.attr in ("sys_flag", "topic_sys_flag") or wire == "sysFlag":
                ext[wire] = str(draw(sysflag_values()))
            elif f.attr == "properties":
                ext[wire] = draw(properties_text(abs_target))
            else:
                ext[wire] = draw(hostile_value(f.kind, abs_target))
            what.append(f"{wire}")
        elif choice == "extra":
            wire = draw(st.sampled_from(registry.all_wire_names()))
            ext[wire] = draw(hostile_value(str, abs_target))
            what.append(f"+{wire}")
        else:
            wire = draw(st.sampled_from(sorted(fields)))
            ext.pop(wire, None)
            what.append(f"-{wire}")
    body = draw(_body_strategy(code, abs_target))
    return HostileRequest(code, ext, body, binary=draw(st.integers(0, 5)) == 0,
                          oneway=draw(st.integers(0, 9)) == 0, what=what)
