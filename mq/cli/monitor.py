"""`mq startMonitoring`: mqadmin's monitor (RocketMQ ``MonitorService``), a round of checks over every consumer
group of the cluster, over and over.

One round, for every group that has a retry topic (``%RETRY%<group>`` in the name server's topic list, as
MonitorService finds groups):

* **undone messages**, per topic the group consumes (GET_CONSUME_STATS on every master): the backlog summed over
  the queues (negative differences ignored), the largest backlog of one queue, and the delay: over the queues
  where the group has consumed something, the largest gap between the store time of the queue's last message
  (pulled at ``brokerOffset - 1``) and that of the last message the group consumed (``lastTimestamp``);
* **notices** from the online clients' running infos (GET_CONSUMER_RUNNING_INFO relayed by a broker, clients
  from version V3_1_8_SNAPSHOT on): different subscriptions within the group, and per push queue a blocked
  concurrent queue or an orderly queue that cannot be locked (``mq consumerStatus`` runs the same checks); also a
  client that did not answer and a queue whose last message could not be read for the delay (MonitorService
  passes over both in silence);
* **deleted messages**: the ``OffsetMovedEvent``s brokers stored in ``OFFSET_MOVED_EVENT`` since the monitor
  started (a consumer asked for an offset that no longer exists, so its offset was moved and messages skipped).

Where this differs from mqadmin's, which logs each report to the client log and never ends:

* the first round runs at once (MonitorService waits 20 s for its own consumers to start; this one has none);
  ``-i`` sets the time between rounds (MonitorService's roundInterval, 60 s) and ``-r`` ends after N rounds;
* a group with no client online is still reported (MonitorService skips it silently), with 0 clients: a backlog
  nobody consumes is what a monitor is for;
* the offset-moved events are read with pulls from where the topic ended when the monitor started, without
  joining a consumer group (MonitorService subscribes a push consumer in ``__MONITOR_CONSUMER``, which commits
  offsets on the brokers); nothing on the cluster is changed.

Exit status: 0 when every round completed; 1 when a round could not be done in full (the name server or a
broker did not answer: the reason is printed in the round and at the end); 130 on Ctrl-C with no such failure.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from mq.cli.common import json_option

#: MonitorService asks only clients from this version on for their running info (MQVersion ordinal)
V3_1_8_SNAPSHOT = 62
#: offset-moved events read per queue and round at most (the rest wait for the next round)
MAX_EVENTS_PER_ROUND = 1000


# ---------------------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------------------
def undone_by_topic(group: str, offset_table: dict, last_store_time: dict) -> list[dict[str, Any]]:
    """MonitorService's ``computeUndoneMsgs`` per topic of ``offset_table`` ({MessageQueue: OffsetWrapper}).

    ``last_store_time`` maps a queue to the store time of its last message, for the queues where one was read;
    a queue missing from it adds no delay."""
    by_topic: dict[str, list] = {}
    for mq, ow in offset_table.items():
        by_topic.setdefault(mq.topic, []).append((mq, ow))
    rows = []
    for topic in sorted(by_topic):
        total = single = delay = 0
        for mq, ow in by_topic[topic]:
            diff = ow.broker_offset - ow.consumer_offset
            single = max(single, diff)
            if diff > 0:
                total += diff
            last = last_store_time.get(mq)
            if ow.last_timestamp > 0 and last is not None:
                delay = max(delay, last - ow.last_timestamp)
        rows.append({"consumerGroup": group, "topic": topic, "undoneMsgsTotal": total,
                     "undoneMsgsSingleMQ": single, "undoneMsgsDelayTimeMills": delay})
    return rows


def offset_moved_event(body: bytes, store_timestamp: int) -> dict[str, Any] | None:
    """An ``OffsetMovedEvent`` body as a flat row, or None when it is not one."""
    from mq.common import fastjson

    try:
        ev = fastjson.loads(body)
        mq = ev["messageQueue"]
        return {"consumerGroup": str(ev["consumerGroup"]), "topic": str(mq["topic"]),
                "brokerName": str(mq["brokerName"]), "queueId": int(mq["queueId"]),
                "offsetRequest": int(ev["offsetRequest"]), "offsetNew": int(ev["offsetNew"]),
                "eventTimestamp": store_timestamp}
    except (fastjson.FastJsonDecodeError, KeyError, TypeError, ValueError):
        return None


def groups_of(topics: list[str]) -> list[str]:
    """The consumer groups MonitorService watches: those with a retry topic."""
    from mq.common.topic import RETRY_GROUP_TOPIC_PREFIX

    return sorted({t[len(RETRY_GROUP_TOPIC_PREFIX):] for t in topics if t.startswith(RETRY_GROUP_TOPIC_PREFIX)})


# ---------------------------------------------------------------------------------------------------------
# one round
# ---------------------------------------------------------------------------------------------------------
class Monitor:
    """The state kept between rounds: where each OFFSET_MOVED_EVENT queue was read up to."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin
        #: (broker address, queue id) -> next offset to read in OFFSET_MOVED_EVENT
        self.event_offsets: dict[tuple[str, int], int] = {}
        self.started = False

    async def round(self) -> dict[str, Any]:
        from mq.errors import MQError

        begin = time.time()
        out: dict[str, Any] = {"timestamp": int(begin * 1000), "groups": 0, "undone": [], "notices": [],
                               "deleteEvents": [], "errors": []}
        errors = out["errors"]
        if not self.started:  # the events that count are those after the start
            try:
                await self._events(errors, skip=True)
                self.started = True
            except MQError as exc:
                errors.append(f"OFFSET_MOVED_EVENT: {exc}")
        else:
            try:
                out["deleteEvents"] = await self._events(errors, skip=False)
            except MQError as exc:
                errors.append(f"OFFSET_MOVED_EVENT: {exc}")
        try:
            groups = groups_of(await self.admin.topic_list())
            masters = await self.admin.master_addrs()
        except MQError as exc:
            errors.append(f"name server: {exc}")
            groups, masters = [], {}
        out["groups"] = len(groups)
        for group in groups:
            notices: list[str] = []
            try:
                clients = await self._clients(group, masters, notices)
                rows = await self._undone(group, masters, notices)
            except MQError as exc:
                errors.append(f"{group}: {exc}")
                continue
            for r in rows:
                r["clients"] = clients
            out["undone"].extend(rows)
            out["notices"].extend({"consumerGroup": group, "notice": n} for n in notices)
        out["spentMillis"] = int((time.time() - begin) * 1000)
        return out

    async def _undone(self, group: str, masters: dict[str, str], notices: list[str]) -> list[dict[str, Any]]:
        """The group's undone rows; a queue whose last message cannot be read adds no delay (a notice says so)."""
        from mq.errors import MQError

        table: dict = {}
        for addr in masters.values():
            table.update((await self.admin.examine_consume_stats(addr, group)).offset_table)
        last: dict = {}
        for mq, ow in table.items():
            addr = masters.get(mq.broker_name)
            # caught up: no delay (Java's figure is 0 there too), and nothing to read outside the queue
            if ow.last_timestamp <= 0 or ow.broker_offset <= ow.consumer_offset or addr is None:
                continue
            try:
                _code, msgs, *_ = await self.admin.pull_message_at(addr, mq.topic, mq.queue_id,
                                                                    ow.broker_offset - 1)
            except MQError as exc:
                notices.append(f"no delay for {mq.topic}/{mq.broker_name}/{mq.queue_id}: its last message "
                               f"could not be read: {exc}")
                continue
            if msgs:
                last[mq] = msgs[0].store_timestamp
        return undone_by_topic(group, table, last)

    async def _clients(self, group: str, masters: dict[str, str], notices: list[str]) -> int:
        """Clients online; adds the checks of their running infos to ``notices`` (and the clients that did not
        answer, which MonitorService leaves out silently)."""
        from mq.cli.consumer_status import analyze, running_info
        from mq.errors import ConsumerNotOnlineError, MQError

        try:
            cc = await self.admin.examine_consumer_connection_all(group)
        except ConsumerNotOnlineError:
            return 0
        infos = {}
        addrs = list(masters.values())
        for c in cc.connection_set:
            if c.version < V3_1_8_SNAPSHOT:
                continue
            try:
                _, infos[c.client_id] = await running_info(self.admin, addrs, group, c.client_id, False)
            except MQError as exc:  # left out of the checks
                notices.append(f"client {c.client_id} did not give its running info: {exc}")
        notices.extend(analyze(infos))
        return len(cc.connection_set)

    async def _events(self, errors: list[str], *, skip: bool) -> list[dict[str, Any]]:
        """Read OFFSET_MOVED_EVENT from where the last round stopped; ``skip`` only notes where each queue ends.
        A read that fails is added to ``errors``; that queue's rest waits for the next round."""
        from mq.common.topic import OFFSET_MOVED_EVENT
        from mq.errors import MQError, TopicNotExistError

        try:
            route = await self.admin.topic_route(OFFSET_MOVED_EVENT)
        except TopicNotExistError:  # no broker has stored one yet
            return []
        masters = {bd.broker_name: bd.broker_addrs.get(0) for bd in route.broker_datas}
        events: list[dict[str, Any]] = []
        for qd in route.queue_datas:
            addr = masters.get(qd.broker_name)
            if addr is None:
                continue
            for qid in range(qd.read_queue_nums):
                key = (addr, qid)
                if skip or key not in self.event_offsets:  # a broker seen for the first time: from its end
                    self.event_offsets[key] = await self.admin.max_offset(addr, OFFSET_MOVED_EVENT, qid)
                    continue
                offset = self.event_offsets[key]
                # kept inside the queue: a pull outside it would itself store an OffsetMovedEvent
                lo = await self.admin.min_offset(addr, OFFSET_MOVED_EVENT, qid)
                hi = await self.admin.max_offset(addr, OFFSET_MOVED_EVENT, qid)
                offset = min(max(offset, lo), hi)
                for _ in range(min(hi - offset, MAX_EVENTS_PER_ROUND)):
                    try:
                        _code, msgs, nxt, *_ = await self.admin.pull_message_at(addr, OFFSET_MOVED_EVENT, qid,
                                                                                offset)
                    except MQError as exc:
                        errors.append(f"OFFSET_MOVED_EVENT on {addr}: {exc}")
                        break
                    for m in msgs:
                        ev = offset_moved_event(m.body or b"", m.store_timestamp)
                        if ev is not None:
                            events.append(ev)
                    if nxt <= offset:
                        break
                    offset = nxt
                self.event_offsets[key] = offset
        return events


# ---------------------------------------------------------------------------------------------------------
# command
# ---------------------------------------------------------------------------------------------------------
@click.command("startMonitoring")
@click.option("-i", "--interval", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds between the starts of two rounds (MonitorService's roundInterval).")
@click.option("-r", "--rounds", type=click.IntRange(min=0), default=0, show_default=True,
              help="Stop after this many rounds (0: run until Ctrl-C).")
@json_option
@click.pass_obj
def start_monitoring(obj, interval: float, rounds: int, json_mode: bool) -> None:
    """Watch every consumer group of the cluster: backlog and consume delay per topic, client problems, and
    messages skipped because a consumer's offset was moved. Prints one report per round (with --json one JSON
    document per round); exit 1 if a round could not be done in full."""
    import sys

    from mq.cli.console import Console
    from mq.client.admin import MQAdmin
    from mq.remoting import run

    console = Console(json_mode=json_mode)
    failures: list[str] = []

    async def main() -> None:
        async with MQAdmin(obj.namesrv_addrs, timeout=10.0, credentials=obj.credentials) as admin:
            monitor = Monitor(admin)
            n = 0
            while True:
                n += 1
                start = time.monotonic()
                rnd = {"round": n, **await monitor.round()}
                if json_mode:
                    console.json(rnd)
                else:
                    _print_round(console, rnd)
                failures.extend(f"round {n}: {e}" for e in rnd["errors"])
                if rounds and n >= rounds:
                    return
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - start)))

    try:
        run(main())
    except KeyboardInterrupt:  # the usual end: every finished round was printed
        if failures:
            console.error(f"{len(failures)} part(s) of the rounds failed; first: {failures[0]}")
            sys.exit(1)
        sys.exit(130)
    if failures:
        console.error(f"{len(failures)} part(s) of the rounds failed; first: {failures[0]}")
        sys.exit(1)


def _print_round(console: Any, rnd: dict[str, Any]) -> None:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rnd["timestamp"] / 1000))
    console.line(f"Round {rnd['round']} at {when}: {rnd['groups']} consumer group(s), {rnd['spentMillis']} ms",
                 style="bold")
    if rnd["undone"]:
        console.table("Undone messages", ["Group", "Topic", "Clients", "Undone", "Max in one queue", "Delay"],
                      [(r["consumerGroup"], r["topic"], r["clients"], r["undoneMsgsTotal"], r["undoneMsgsSingleMQ"],
                        _delay(r["undoneMsgsDelayTimeMills"])) for r in rnd["undone"]],
                      justify={"Clients": "right", "Undone": "right", "Max in one queue": "right", "Delay": "right"})
    elif not rnd["errors"]:
        console.line("No consume progress to report.")
    for n in rnd["notices"]:
        console.warn(f"{n['consumerGroup']}: {n['notice']}")
    if rnd["deleteEvents"]:
        console.table("Offsets moved (messages skipped)", ["Group", "Topic", "Broker", "Queue", "Requested",
                                                           "Moved to", "At"],
                      [(e["consumerGroup"], e["topic"], e["brokerName"], e["queueId"], e["offsetRequest"],
                        e["offsetNew"], time.strftime("%H:%M:%S", time.localtime(e["eventTimestamp"] / 1000)))
                       for e in rnd["deleteEvents"]],
                      justify={"Queue": "right", "Requested": "right", "Moved to": "right"})
    for e in rnd["errors"]:
        console.error(e)


def _delay(ms: int) -> str:
    if ms <= 0:
        return "0"
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"
