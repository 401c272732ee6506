"""One message's path from its trace records (``mqadmin queryMsgTraceById``, the dashboard's trace graph).

Lookup (TRACE.md §9): QUERY_MESSAGE for key = msgId on the trace topic, on the master of EVERY broker in
the trace topic's route (concurrently), at most ``max_num`` trace messages each. A trace message is kept when
its topic is the trace topic and its KEYS contain the msgId exactly; its body is inflated when the record's
sysflag has bit 0 (zlib) and decoded leniently; only records whose msgId equals the key are kept. The
client host of a record is the born host of the trace message carrying it (TRACE.md §8.1).

The view (``MessageTrace``):

- ``pubs``: each Pub (producer group, client host, broker, send time, cost, status, ...);
- ``groups``: per consumer group, its attempts in time order; an attempt pairs SubBefore and SubAfter by
  requestId (the dashboard's rule): begin and retry count from SubBefore, end, cost and status from SubAfter.
  Plus the delivery lag (first begin - store time) and the time to a successful consume (its end - send time);
- ``end_transactions``;
- ``notes``: for each group subscribed to the topic (QUERY_TOPIC_CONSUME_BY_WHO on the topic's brokers)
  with no record: consumed untraced (its offset passed the message) or "stored but not consumed";
- ``incomplete``: what is missing (no Pub, a SubBefore without SubAfter, a SubAfter without SubBefore,
  undecodable records, a broker that hit ``max_num``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.message import MessageExt, MessageQueue
from mq.errors import BrokerError, MQError, TopicNotExistError
from mq.trace.context import RMQ_SYS_TRACE_TOPIC, ConsumeReturnType, MessageType, TraceContext, TraceType
from mq.trace.encoder import TraceDecodeError, iter_decode_body

log = logging.getLogger(__name__)

#: mqadmin's maxNum of the trace key query.
DEFAULT_MAX_NUM = 64


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One decoded record with where it came from."""

    ctx: TraceContext
    client_host: str  # born host of the trace message
    trace_store_time: int = 0
    broker: str = ""


@dataclass(slots=True)
class PubView:
    group: str
    client_host: str
    store_host: str
    send_time: int
    cost_ms: int
    status: str  # success | failed
    topic: str
    tags: str | None
    keys: str | None
    msg_type: str
    offset_msg_id: str
    region_id: str | None
    body_length: int


@dataclass(slots=True)
class Attempt:
    request_id: str
    client_host: str
    begin: int | None  # SubBefore timestamp
    end: int | None  # SubAfter timestamp
    retry_times: int | None
    cost_ms: int | None
    status: str  # success | failed | unknown (no SubAfter)
    return_type: str | None  # ConsumeReturnType name from the SubAfter contextCode

    @property
    def start(self) -> int:
        if self.begin is not None:
            return self.begin
        if self.end is not None:
            return self.end - (self.cost_ms or 0)
        return 0


@dataclass(slots=True)
class GroupView:
    group: str
    attempts: list[Attempt] = field(default_factory=list)
    status: str = ""  # consumed | retrying | consuming
    delivery_lag_ms: int | None = None
    consumed_after_ms: int | None = None


@dataclass(slots=True)
class EndTxView:
    group: str
    client_host: str
    time: int
    state: str
    transaction_id: str | None
    from_check: bool
    store_host: str


@dataclass(slots=True)
class StoredMessage:
    broker: str
    queue_id: int
    queue_offset: int
    store_time: int
    store_host: str


@dataclass(slots=True)
class MessageTrace:
    msg_id: str
    trace_topic: str
    topic: str | None = None
    stored: StoredMessage | None = None
    pubs: list[PubView] = field(default_factory=list)
    groups: list[GroupView] = field(default_factory=list)
    end_transactions: list[EndTxView] = field(default_factory=list)
    notes: list[dict[str, str]] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    trace_messages: int = 0
    records: int = 0

    @property
    def found(self) -> bool:
        return bool(self.pubs or self.groups or self.end_transactions)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for g, gd in zip(self.groups, d["groups"]):
            for a, ad in zip(g.attempts, gd["attempts"]):
                ad["start"] = a.start
        d["found"] = self.found
        return d


def _status(success: bool) -> str:
    return "success" if success else "failed"


def _return_type(code: int) -> str:
    try:
        return ConsumeReturnType(code).name
    except ValueError:
        return str(code)


def build_trace(msg_id: str, records: list[TraceRecord], *, trace_topic: str = RMQ_SYS_TRACE_TOPIC,
                topic: str | None = None, stored: StoredMessage | None = None) -> MessageTrace:
    """The structured path of ``msg_id`` from its records (pure; ``query_trace`` fetches them)."""
    out = MessageTrace(msg_id=msg_id, trace_topic=trace_topic, topic=topic, stored=stored)
    befores: dict[tuple[str, str], TraceRecord] = {}
    afters: dict[tuple[str, str], TraceRecord] = {}
    for rec in records:
        ctx = rec.ctx
        if not ctx.beans or ctx.bean.msg_id != msg_id:
            continue
        out.records += 1
        b = ctx.bean
        if ctx.trace_type is TraceType.Pub:
            out.pubs.append(PubView(
                group=ctx.group_name, client_host=b.client_host or rec.client_host, store_host=b.store_host,
                send_time=ctx.timestamp or 0, cost_ms=ctx.cost_time, status=_status(ctx.success), topic=b.topic,
                tags=b.tags, keys=b.keys, msg_type=MessageType(b.msg_type).name, offset_msg_id=b.offset_msg_id,
                region_id=ctx.region_id, body_length=b.body_length))
            if out.topic is None:
                out.topic = b.topic
        elif ctx.trace_type is TraceType.SubBefore:
            befores.setdefault((ctx.group_name, ctx.request_id), rec)
        elif ctx.trace_type is TraceType.SubAfter:
            afters.setdefault((ctx.group_name, ctx.request_id), rec)
        elif ctx.trace_type is TraceType.EndTransaction:
            out.end_transactions.append(EndTxView(
                group=ctx.group_name, client_host=rec.client_host, time=ctx.timestamp or 0,
                state=b.transaction_state.value if b.transaction_state else "", transaction_id=b.transaction_id,
                from_check=b.from_transaction_check, store_host=b.store_host))
            if out.topic is None:
                out.topic = b.topic
    # a SubAfter written by a client older than 4.9 has no group: pair it by requestId alone
    by_request = {key[1]: key for key in befores}
    for key in list(afters):
        if key[0] == "" and key not in befores and key[1] in by_request:
            afters[by_request[key[1]]] = afters.pop(key)
    groups: dict[str, GroupView] = {}
    for key in sorted(set(befores) | set(afters)):
        group, request_id = key
        bef, aft = befores.get(key), afters.get(key)
        if aft is not None:
            status, cost = _status(aft.ctx.success), aft.ctx.cost_time
            rtype: str | None = _return_type(aft.ctx.context_code)
        else:
            status, cost, rtype = "unknown", None, None
        host = (bef or aft).client_host  # type: ignore[union-attr]
        attempt = Attempt(request_id=request_id, client_host=host, begin=bef.ctx.timestamp if bef else None,
                          end=aft.ctx.timestamp if aft else None,
                          retry_times=bef.ctx.bean.retry_times if bef else None, cost_ms=cost, status=status,
                          return_type=rtype)
        groups.setdefault(group, GroupView(group)).attempts.append(attempt)
        label = group or "%UNKNOWN_GROUP%"
        if bef is None:
            out.incomplete.append(f"group {label}: SubAfter {request_id} has no SubBefore (record lost)")
        elif aft is None:
            out.incomplete.append(f"group {label}: SubBefore {request_id} has no SubAfter (still consuming, "
                                  "or the record was lost)")
    stored_at = stored.store_time if stored else None
    pub = min(out.pubs, key=lambda p: p.send_time) if out.pubs else None
    if stored_at is None and pub is not None:
        stored_at = pub.send_time + pub.cost_ms // 2  # Java's storeTime estimate
    for gv in groups.values():
        gv.attempts.sort(key=lambda a: (a.start, a.retry_times or 0))
        ok = [a for a in gv.attempts if a.status == "success"]
        last = gv.attempts[-1]
        gv.status = "consumed" if ok else ("consuming" if last.status == "unknown" else "retrying")
        if stored_at is not None:
            gv.delivery_lag_ms = max(0, gv.attempts[0].start - stored_at)
        if ok and pub is not None and ok[0].end is not None:
            gv.consumed_after_ms = max(0, ok[0].end - pub.send_time)
    out.groups = [groups[g] for g in sorted(groups)]
    out.pubs.sort(key=lambda p: p.send_time)
    out.end_transactions.sort(key=lambda e: e.time)
    if not out.pubs and (out.groups or out.end_transactions or stored is not None):
        out.incomplete.append("no Pub record (the producer may not have tracing on, or the record was lost)")
    return out


# --------------------------------------------------------------------------------------------- fetching


async def _query_broker(admin: Any, name: str, addr: str, trace_topic: str, msg_id: str, max_num: int,
                        out: list[TraceRecord], problems: list[str]) -> int:
    from mq.common.record_scan import scan_records
    from mq.protocol import headers as h
    from mq.protocol.codes import RequestCode, ResponseCode
    from mq.protocol.command import RemotingCommand

    hd = h.QueryMessageRequestHeader(topic=trace_topic, key=msg_id, max_num=max_num, begin_timestamp=0,
                                     end_timestamp=2**63 - 1)
    try:
        resp = await admin.call_broker(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, hd.to_ext()),
                                       ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
    except MQError as exc:
        problems.append(f"broker {name} ({addr}) could not be queried: {exc}")
        return 0
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        return 0
    scan = scan_records(resp.body)  # bodies stay as stored: trace bodies are inflated leniently below
    msgs: list[MessageExt] = scan.messages
    for sk in scan.skipped:
        problems.append(f"broker {name} ({addr}) returned a trace message that cannot be decoded: "
                        f"{sk.located(source=addr).describe()}")
    kept = 0
    host_errors = 0
    for m in msgs:
        if m.topic != trace_topic or msg_id not in P.split_keys(m.properties.get(P.KEYS)):
            continue
        kept += 1
        born = f"{m.born_host[0]}"
        for item in iter_decode_body(m.body, compressed=bool(m.sys_flag & SF.COMPRESSED)):
            if isinstance(item, TraceDecodeError):
                host_errors += 1
                continue
            out.append(TraceRecord(item, born, m.store_timestamp, name))
    if host_errors:
        problems.append(f"{host_errors} undecodable trace record(s) on broker {name}")
    if len(msgs) >= max_num:
        problems.append(f"broker {name} returned the maximum of {max_num} trace messages: older records may "
                        "be missing (raise --max)")
    return kept


async def _find_stored(admin: Any, topic: str, msg_id: str) -> StoredMessage | None:
    try:
        found = await admin.query_message_by_key(topic, msg_id, max_num=32, unique=True)
    except MQError as exc:
        log.debug("cannot look %s up in %s: %s", msg_id, topic, exc)
        return None
    if not found:
        return None
    m = min(found, key=lambda x: x.store_timestamp)
    return StoredMessage(broker=m.broker_name, queue_id=m.queue_id, queue_offset=m.queue_offset,
                         store_time=m.store_timestamp, store_host=f"{m.store_host[0]}:{m.store_host[1]}")


async def _untraced_groups(admin: Any, trace: MessageTrace) -> None:
    """Notes for groups subscribed to the topic that left no record."""
    topic = trace.topic
    assert topic is not None
    try:
        masters = await admin.topic_master_addrs(topic)
    except MQError as exc:
        trace.notes.append({"group": "", "note": f"cannot read the route of {topic}: {exc}"})
        return
    subscribed: set[str] = set()
    for addr in masters.values():
        try:
            subscribed |= await admin.query_topic_consume_by_who(addr, topic)
        except MQError as exc:
            log.debug("QUERY_TOPIC_CONSUME_BY_WHO on %s failed: %s", addr, exc)
    traced = {g.group for g in trace.groups}
    for group in sorted(g for g in subscribed if g not in traced and not g.startswith("%")):
        trace.notes.append({"group": group, "note": await _group_note(admin, masters, trace, group)})


async def _group_note(admin: Any, masters: dict[str, str], trace: MessageTrace, group: str) -> str:
    st = trace.stored
    if st is None or st.broker not in masters:
        return f"stored but not consumed by {group} (no trace record from this group)"
    try:
        stats = await admin.examine_consume_stats(masters[st.broker], group, trace.topic)
    except MQError as exc:
        return f"stored but not consumed by {group} (no trace record; consume stats unavailable: {exc})"
    ow = stats.offset_table.get(MessageQueue(trace.topic or "", st.broker, st.queue_id))
    if ow is not None and ow.consumer_offset > st.queue_offset:
        return (f"passed by {group} without a trace record (its offset {ow.consumer_offset} is past the "
                f"message's {st.queue_offset}): consumed with tracing off, or skipped (e.g. it started from LAST)")
    offset = ow.consumer_offset if ow is not None else -1
    return (f"stored but not consumed by {group} (no trace record; consumer offset {offset} <= message offset "
            f"{st.queue_offset})")


async def uniq_key_of_offset_msg_id(admin: Any, msg_id: str) -> str | None:
    """The UNIQ_KEY of the message an offsetMsgId points at, when ``msg_id`` decodes to the address of a known
    broker (a UNIQ_KEY decodes to a random address: never contacted), else None."""
    from mq.common.msg_id import decode_offset_msg_id

    try:
        (ip, port), _offset = decode_offset_msg_id(msg_id)
        known = set((await admin.master_addrs()).values())
    except (MQError, ValueError):
        return None
    host = f"[{ip}]" if ":" in ip else ip
    if f"{host}:{port}" not in known:
        return None
    try:
        msg = await admin.view_message_by_offset_msg_id(msg_id)
    except MQError:
        return None
    return msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


async def query_trace(admin: Any, msg_id: str, *, topic: str | None = None,
                      trace_topic: str | None = None, max_num: int = DEFAULT_MAX_NUM,
                      check_groups: bool = True) -> MessageTrace:
    """Fetch and assemble the path of ``msg_id`` with an ``MQAdmin``. Raises MQError when the trace topic has
    no route; a message with no records gives a ``MessageTrace`` whose ``found`` is False. Traces are indexed
    by the client id (UNIQ_KEY); given a broker offsetMsgId with no record, the message's UNIQ_KEY is followed."""
    trace = await _query_trace(admin, msg_id, topic=topic, trace_topic=trace_topic, max_num=max_num,
                               check_groups=check_groups)
    if not trace.found:
        uniq = await uniq_key_of_offset_msg_id(admin, msg_id)
        if uniq and uniq != msg_id:
            trace = await _query_trace(admin, uniq, topic=topic, trace_topic=trace_topic, max_num=max_num,
                                       check_groups=check_groups)
            trace.notes.insert(0, {"group": "", "note": f"{msg_id} is an offsetMsgId: followed its UNIQ_KEY {uniq}"})
    return trace


async def _query_trace(admin: Any, msg_id: str, *, topic: str | None, trace_topic: str | None, max_num: int,
                       check_groups: bool) -> MessageTrace:
    trace_topic = trace_topic or RMQ_SYS_TRACE_TOPIC
    try:
        masters = await admin.topic_master_addrs(trace_topic)
    except TopicNotExistError:
        raise TopicNotExistError(17, f"trace topic {trace_topic!r} has no route: no client has sent a trace yet "
                                 "(enable tracing on a client, or start brokers with traceTopicEnable=true)") from None
    records: list[TraceRecord] = []
    problems: list[str] = []
    counts = await asyncio.gather(*(_query_broker(admin, name, addr, trace_topic, msg_id, max_num, records,
                                                  problems) for name, addr in sorted(masters.items())))
    topic_hint = topic
    if topic_hint is None:
        for r in records:
            if r.ctx.trace_type in (TraceType.Pub, TraceType.EndTransaction) and r.ctx.bean.msg_id == msg_id:
                topic_hint = r.ctx.bean.topic
                break
    stored = await _find_stored(admin, topic_hint, msg_id) if topic_hint and check_groups else None
    trace = build_trace(msg_id, records, trace_topic=trace_topic, topic=topic_hint, stored=stored)
    trace.trace_messages = sum(counts)
    trace.incomplete.extend(problems)
    if check_groups and trace.topic is not None:
        try:
            await _untraced_groups(admin, trace)
        except BrokerError as exc:
            trace.notes.append({"group": "", "note": f"subscribed groups unavailable: {exc}"})
    return trace
