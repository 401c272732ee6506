"""`mq sendMsgStatus`, `mq checkMsgSendRT`, `mq clusterRT`: send test messages one at a time and report each
send's result and round-trip time (RT), as mqadmin's commands of the same names.

Every send goes to an explicit queue (round robin over the topic's writable queues), so each RT is exactly one
attempt: no retry on another broker hides a failure. ``sendMsgStatus`` and ``clusterRT`` use the topic named
after each broker (every broker serves one, ``brokerTopicEnable``). As in mqadmin the average RT leaves out
the first send of a run, which also pays for connecting to the broker; min/max/p99 cover every successful send.
A failed send (any error: refused, timed out, broker down) makes the exit code 1 after the figures are printed.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Sequence

import click

from mq.cli.common import json_option
from mq.cli.consumer_status import valid_topic

DEFAULT_SIZE = 128


# ---------------------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------------------
def status_body(size: int) -> bytes:
    """sendMsgStatus's body: ``hello jodie`` repeated, cut to exactly ``size`` bytes."""
    return (b"hello jodie" * (size // 11 + 1))[:size]


def rt_body(size: int) -> bytes:
    """checkMsgSendRT's and clusterRT's body: ``size`` times ``a``."""
    return b"a" * size


def rt_summary(results: Sequence[dict[str, Any]], planned: int | None = None) -> dict[str, Any]:
    """ok/failed counts and RT figures (ms) of a run of sends, in send order.

    ``planned`` sends were asked for; those never made (the broker was unreachable) are ``skipped`` and count
    as failed. ``avgRtMs`` is over every send made but the first (mqadmin's rule: the first one connects),
    failed ones included as mqadmin does; ``avgOkRtMs``, min, max and p99 are over the successful sends."""
    from mq.client.stats import percentile

    planned = len(results) if planned is None else planned
    rts = [r["rtMs"] for r in results]
    ok = sorted(r["rtMs"] for r in results if r["error"] is None)
    tail = rts[1:] if len(rts) > 1 else rts
    return {"count": planned, "ok": len(ok), "failed": planned - len(ok), "skipped": planned - len(results),
            "avgRtMs": round(sum(tail) / len(tail), 3) if tail else 0.0,
            "avgOkRtMs": round(sum(ok) / len(ok), 3) if ok else 0.0,
            "minRtMs": round(ok[0], 3) if ok else 0.0, "maxRtMs": round(ok[-1], 3) if ok else 0.0,
            "p99RtMs": round(percentile(ok, 99), 3)}


def summary_line(s: dict[str, Any]) -> str:
    skipped = f" ({s['skipped']} skipped: broker unreachable)" if s["skipped"] else ""
    return (f"{s['ok']} ok, {s['failed']} failed{skipped}; Avg RT: {s['avgRtMs']:.2f} ms (first send left out), "
            f"min {s['minRtMs']:.2f} ms, max {s['maxRtMs']:.2f} ms, p99 {s['p99RtMs']:.2f} ms")


# ---------------------------------------------------------------------------------------------------------
# sending
# ---------------------------------------------------------------------------------------------------------
async def _start_producer(obj, group: str, timeout: float):
    from mq.cli.send import client_config
    from mq.client.producer import Producer
    from mq.config import ProducerConfig

    cfg = ProducerConfig(group=group, send_msg_timeout=timeout, retry_times_when_send_failed=0)
    return await Producer(cfg, client_config(obj)).start()


async def _writable_queues(producer, topic: str, broker_name: str | None = None) -> list:
    """The topic's writable queues (only ``broker_name``'s when given); a topic unknown to the name server is
    an error here, never auto-created through TBW102."""
    from mq.errors import BrokerError

    await producer.instance.admin.topic_route(topic)
    queues = [q for q in await producer.fetch_publish_queues(topic)
              if broker_name is None or q.broker_name == broker_name]
    if not queues:
        where = f" on broker {broker_name}" if broker_name else ""
        raise BrokerError(1, f"topic {topic!r} has no writable queue{where} (perm without write?)")
    return queues


#: After this many sends in a row fail because the broker cannot be reached (refused, timed out), the rest of
#: a series is skipped rather than waiting out one timeout per message.
GIVE_UP_AFTER = 3


async def _send_series(producer, topic: str, queues: Sequence[Any], count: int, body: bytes,
                       advance: Callable[[int], None] = lambda n: None) -> list[dict[str, Any]]:
    """Up to ``count`` sends one after another, queue ``i % len(queues)``; one result row per send made."""
    from mq.client.sync import build_message
    from mq.errors import MQError, RemotingError

    rows: list[dict[str, Any]] = []
    unreachable = 0
    for i in range(count):
        q = queues[i % len(queues)]
        row: dict[str, Any] = {"seq": i + 1, "broker": q.broker_name, "queueId": q.queue_id, "status": "FAILED",
                               "rtMs": 0.0, "queueOffset": None, "msgId": None, "offsetMsgId": None, "error": None}
        started = time.perf_counter()
        try:
            res = await producer.send(build_message(topic, body), queue=q)
        except MQError as exc:
            row["error"] = str(exc)
            unreachable = unreachable + 1 if isinstance(exc, RemotingError) else 0
        else:
            unreachable = 0
            row.update(status=res.status.value, queueOffset=res.queue_offset, msgId=res.msg_id,
                       offsetMsgId=res.offset_msg_id)
        row["rtMs"] = round((time.perf_counter() - started) * 1000, 3)
        rows.append(row)
        advance(1)
        if unreachable >= GIVE_UP_AFTER and i + 1 < count:
            advance(count - i - 1)
            break
    return rows


class _Progress:
    """A transient progress bar on stderr for long runs (none with --json or when stderr is not a terminal)."""

    def __init__(self, console, total: int, label: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                 console=console.err, transient=True,
                                 disable=console.json_mode or not console.err.is_terminal or total < 20)
        self.task = self.progress.add_task(label, total=total)

    def __enter__(self) -> "_Progress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def advance(self, n: int = 1) -> None:
        self.progress.advance(self.task, n)


def _run(main):
    from mq.remoting import run

    return run(main)


def _results_table(console, title: str, rows: Sequence[dict[str, Any]]) -> None:
    console.table(title, ["#", "Broker", "QID", "Result", "RT (ms)", "Offset", "MsgId"],
                  [(r["seq"], r["broker"], r["queueId"], r["status"] if r["error"] is None else f"FAILED: {r['error']}",
                    f"{r['rtMs']:.2f}", r["queueOffset"], r["msgId"]) for r in rows],
                  justify={"#": "right", "QID": "right", "RT (ms)": "right", "Offset": "right"})


def _finish(console, summary: dict[str, Any]) -> None:
    if summary["failed"]:
        console.error(f"{summary['failed']} of {summary['count']} send(s) failed")
        sys.exit(1)


_size_option = click.option("-s", "--size", "size", type=click.IntRange(1, 4 * 1024 * 1024), default=DEFAULT_SIZE,
                            show_default=True, help="Body size in bytes.")
_timeout_option = click.option("--timeout", type=click.FloatRange(0.1, 60.0), default=3.0, show_default=True,
                               help="Timeout of each send in seconds.")


# ---------------------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------------------
@click.command("sendMsgStatus")
@click.option("-b", "--broker-name", "--brokerName", "broker_name", required=True, callback=valid_topic,
              help="Broker name (its own topic is used).")
@click.option("-s", "--size", "--messageSize", "size", type=click.IntRange(1, 4 * 1024 * 1024), default=DEFAULT_SIZE,
              show_default=True, help="Body size in bytes.")
@click.option("-c", "--count", type=click.IntRange(1, 1_000_000), default=50, show_default=True,
              help="Messages to send.")
@_timeout_option
@json_option
@click.pass_obj
def send_msg_status(obj, broker_name: str, size: int, count: int, timeout: float, json_mode: bool) -> None:
    """Send COUNT messages to the topic named after a broker; print each send's result and RT."""
    from mq.cli.console import Console

    console = Console(json_mode=json_mode)

    async def main() -> list[dict[str, Any]]:
        producer = await _start_producer(obj, "PID_SMSC", timeout)
        try:
            info = await producer.instance.admin.cluster_info()
            if broker_name not in info.broker_addr_table:
                from mq.errors import BrokerError

                known = ", ".join(sorted(info.broker_addr_table)) or "none"
                raise BrokerError(1, f"broker {broker_name!r} is not known to the name server (known: {known})")
            queues = await _writable_queues(producer, broker_name, broker_name)
            with _Progress(console, count, "sending") as bar:
                return await _send_series(producer, broker_name, queues, count, status_body(size), bar.advance)
        finally:
            await producer.shutdown()

    rows = _run(main())
    summary = rt_summary(rows, count)
    if json_mode:
        console.json({"broker": broker_name, "topic": broker_name, "size": size, "results": rows, "summary": summary})
    else:
        _results_table(console, f"Sends to broker {broker_name} (topic {broker_name}, {size} bytes)", rows)
        console.line(summary_line(summary))
    _finish(console, summary)


@click.command("checkMsgSendRT")
@click.option("-t", "--topic", required=True, callback=valid_topic, help="Topic to send to.")
@click.option("-a", "--amount", type=click.IntRange(1, 1_000_000), default=100, show_default=True,
              help="Messages to send.")
@_size_option
@_timeout_option
@json_option
@click.pass_obj
def check_msg_send_rt(obj, topic: str, amount: int, size: int, timeout: float, json_mode: bool) -> None:
    """Send AMOUNT messages to a topic, round robin over its writable queues; per send broker, queue, result and
    RT, then the average RT."""
    from mq.cli.console import Console

    console = Console(json_mode=json_mode)

    async def main() -> list[dict[str, Any]]:
        producer = await _start_producer(obj, "CHECK_MSG_SEND_RT_TOOLS", timeout)
        try:
            queues = await _writable_queues(producer, topic)
            with _Progress(console, amount, "sending") as bar:
                return await _send_series(producer, topic, queues, amount, rt_body(size), bar.advance)
        finally:
            await producer.shutdown()

    rows = _run(main())
    summary = rt_summary(rows, amount)
    if json_mode:
        console.json({"topic": topic, "size": size, "results": rows, "summary": summary})
    else:
        _results_table(console, f"Send RT of {topic} ({size} bytes)", rows)
        console.line(summary_line(summary))
    _finish(console, summary)


def effective_rounds(ctx: click.Context, rounds: int) -> int:
    """clusterRT's rounds: ``-i`` without ``-r`` means mqadmin's endless loop (0); otherwise ``rounds``."""
    from click.core import ParameterSource

    given = {ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT}
    if ctx.get_parameter_source("interval") in given and ctx.get_parameter_source("rounds") not in given:
        return 0
    return rounds


def tlog_line(now: float, machine_room: str, cluster: str, broker: str, avg_rt_ms: float) -> str:
    """mqadmin clusterRT's ``-p true`` line: ``time|machineRoom|cluster|broker|rt`` (rt rounded half up)."""
    from decimal import ROUND_HALF_UP, Decimal

    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    rt = Decimal(str(avg_rt_ms)).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return f"{stamp}|{machine_room}|{cluster}|{broker}|{rt}"


@click.command("clusterRT")
@click.option("-c", "--cluster", default=None, help="Only this cluster (default: every cluster).")
@click.option("-a", "--amount", type=click.IntRange(1, 1_000_000), default=100, show_default=True,
              help="Messages to send to each broker per round.")
@_size_option
@click.option("-p", "--print-as-tlog", "tlog", type=click.BOOL, default=False, show_default=True,
              help="Print each broker as a `time|machineRoom|cluster|broker|rt` line instead of a table.")
@click.option("-m", "--machine-room", default="noname", show_default=True, help="Machine room name for -p lines.")
@click.option("-r", "--rounds", type=click.IntRange(0), default=1, show_default=True,
              help="Rounds to run; 0 = until interrupted (Ctrl-C), as mqadmin's endless loop (the default with -i).")
@click.option("-i", "--interval", type=click.FloatRange(0), default=10.0, show_default=True,
              help="Seconds between rounds; given without --rounds, repeat until Ctrl-C as mqadmin does.")
@_timeout_option
@json_option
@click.pass_obj
def cluster_rt(obj, cluster: str | None, amount: int, size: int, tlog: bool, machine_room: str, rounds: int,
               interval: float, timeout: float, json_mode: bool) -> None:
    """For each broker of each cluster (or of -c), send AMOUNT messages to the broker-named topic; print success
    count, failure count and average RT. One round unless --rounds says otherwise (or -i is given: every INTERVAL
    seconds until Ctrl-C, as mqadmin); with --json one JSON document per round."""
    import asyncio

    from mq.cli.console import Console

    rounds = effective_rounds(click.get_current_context(), rounds)
    console = Console(json_mode=json_mode)

    async def one_round(producer) -> list[dict[str, Any]]:
        from mq.errors import MQError

        info = await producer.instance.admin.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            from mq.errors import BrokerError

            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise BrokerError(1, f"cluster {cluster!r} is not known to the name server (known: {known})")
        names = [cluster] if cluster is not None else sorted(info.cluster_addr_table)
        targets = [(c, b) for c in names for b in sorted(info.cluster_addr_table[c])]
        rows = []
        with _Progress(console, amount * len(targets), "measuring") as bar:
            for cname, bname in targets:
                row: dict[str, Any] = {"cluster": cname, "broker": bname, "error": None}
                try:
                    queues = await _writable_queues(producer, bname, bname)
                except MQError as exc:
                    row.update(rt_summary([], amount), error=str(exc))
                    bar.advance(amount)
                else:
                    results = await _send_series(producer, bname, queues, amount, rt_body(size), bar.advance)
                    row.update(rt_summary(results, amount))
                    errors = [r["error"] for r in results if r["error"]]
                    row["error"] = errors[0] if errors else None
                rows.append(row)
                if tlog and not json_mode:
                    console.line(tlog_line(time.time(), machine_room, cname, bname, row["avgRtMs"]))
        return rows

    failures: list[tuple[int, str, str | None]] = []  # (round, broker, first error) of rows with failed sends

    async def main() -> None:
        producer = await _start_producer(obj, "CLUSTER_RT_TOOLS", timeout)
        try:
            n = 0
            while True:
                n += 1
                rnd = {"round": n, "timestamp": int(time.time() * 1000), "amount": amount, "size": size,
                       "brokers": await one_round(producer)}
                if json_mode:  # one JSON document per round, printed as it ends
                    console.json(rnd)
                elif not tlog:
                    _round_table(console, rnd, rounds)
                bad = [(n, r["broker"], r["error"]) for r in rnd["brokers"] if r["failed"]]
                if bad and len(failures) < 100:
                    failures.extend(bad)
                if rounds and n >= rounds:
                    return
                await asyncio.sleep(interval)
        finally:
            await producer.shutdown()

    try:
        _run(main())
    except KeyboardInterrupt:  # --rounds 0 ends with Ctrl-C; every finished round was printed
        if failures:
            console.error(f"round {failures[0][0]}: {failures[0][1]}: {failures[0][2]}")
            sys.exit(1)
        sys.exit(130)
    if failures:
        r, broker, error = failures[0]
        console.error(f"{len(failures)} broker measurement(s) had failed sends; first: {broker}: {error}"
                      + (f" (round {r})" if rounds != 1 else ""))
        sys.exit(1)


def _round_table(console, rnd: dict[str, Any], rounds: int) -> None:
    title = "Send RT per broker" + (f" (round {rnd['round']})" if rounds != 1 else "")
    console.table(title, ["Cluster", "Broker", "Avg RT (ms)", "Success", "Failed", "Max RT (ms)", "Error"],
                  [(r["cluster"], r["broker"], f"{r['avgRtMs']:.2f}", r["ok"], r["failed"], f"{r['maxRtMs']:.2f}",
                    r["error"] or "") for r in rnd["brokers"]],
                  justify={"Avg RT (ms)": "right", "Success": "right", "Failed": "right", "Max RT (ms)": "right"})
