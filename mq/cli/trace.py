"""`mq trace`: message trace commands. `mq trace -i MSGID` shows one message's path.

The group runs its own body when no sub-command is given (``invoke_without_command``), so sub-commands
(``analyze``, ``export``) can be attached with ``@trace.command(...)`` without changing ``-i``.
"""

from __future__ import annotations

from typing import Any

import click

from mq.cli.common import json_option


@click.group("trace", invoke_without_command=True)
@click.option("-i", "--msg-id", "msg_id", default=None, help="The message id (UNIQ_KEY / msgId) to follow.")
@click.option("-t", "--topic", default=None, help="The message's topic (default: read from its Pub record).")
@click.option("--trace-topic", default=None, help="Trace topic [default: RMQ_SYS_TRACE_TOPIC].")
@click.option("--max", "max_num", type=click.IntRange(1, 1024), default=64, show_default=True,
              help="Trace messages to fetch per broker.")
@click.option("--no-groups", is_flag=True, help="Skip the check of subscribed groups that left no record.")
@json_option
@click.pass_context
def trace(ctx: click.Context, msg_id: str | None, topic: str | None, trace_topic: str | None, max_num: int,
          no_groups: bool, json_mode: bool) -> None:
    """Message trace: `mq trace -i MSGID` prints the message's path (Pub, each consumer group's attempts,
    transaction ends) from its trace records."""
    if ctx.invoked_subcommand is not None:
        return
    if not msg_id:
        click.echo(ctx.get_help())
        raise click.UsageError("give -i/--msg-id (or a sub-command)")
    show_trace(ctx, msg_id, topic, trace_topic, max_num, not no_groups, json_mode)


def show_trace(ctx: click.Context, msg_id: str, topic: str | None, trace_topic: str | None, max_num: int,
               check_groups: bool, json_mode: bool) -> None:
    """Query and print one message's trace; exit code 2 when no trace record names it."""
    from mq.cli.common import with_admin
    from mq.cli.console import Console
    from mq.trace.query import query_trace

    console = Console(json_mode=json_mode)
    result = with_admin(ctx.obj, lambda admin: query_trace(admin, msg_id.strip(), topic=topic,
                                                           trace_topic=trace_topic, max_num=max_num,
                                                           check_groups=check_groups), timeout=5.0)
    if json_mode:
        console.json(result.to_dict())
    else:
        print_trace(console, result)
    if not result.found:
        ctx.exit(2)


@click.command("queryMsgTraceById")
@click.option("-i", "--msgId", "--msg-id", "msg_id", required=True, help="The message id (UNIQ_KEY / msgId).")
@click.option("-t", "--traceTopic", "--trace-topic", "trace_topic", default=None,
              help="Trace topic [default: RMQ_SYS_TRACE_TOPIC].")
@json_option
@click.pass_context
def query_msg_trace_by_id(ctx: click.Context, msg_id: str, trace_topic: str | None, json_mode: bool) -> None:
    """mqadmin's name for `mq trace -i`: the message's path from its trace records (Pub, each consumer group's
    attempts, transaction ends). Exit code 2 when no trace record names it."""
    show_trace(ctx, msg_id, None, trace_topic, 64, True, json_mode)


def _ms(v: int | None) -> str:
    return "-" if v is None else f"{v} ms"


def print_trace(console: Any, tr: Any) -> None:
    """The path as a rich tree (oldest first)."""
    from rich.text import Text
    from rich.tree import Tree

    from mq.cli.consumer_admin import format_ms

    if not tr.found:
        console.line(f"no trace record of {tr.msg_id} in {tr.trace_topic} "
                     f"({tr.trace_messages} trace message(s) matched)")
        for note in tr.notes:
            console.line(f"  {note['note']}")
        return
    root = Tree(Text(f"message {tr.msg_id}" + (f"  topic {tr.topic}" if tr.topic else ""), style="bold"))
    if tr.stored is not None:
        s = tr.stored
        root.add(f"stored  {format_ms(s.store_time)}  broker {s.broker} ({s.store_host}) queue {s.queue_id} "
                 f"offset {s.queue_offset}")
    for p in tr.pubs:
        style = "green" if p.status == "success" else "red"
        node = root.add(Text(f"Pub  {format_ms(p.send_time)}  group {p.group}  {p.status}  cost {p.cost_ms} ms",
                             style=style))
        node.add(f"client {p.client_host} -> broker {p.store_host}   {p.msg_type}  {p.body_length} bytes  "
                 f"tags {p.tags or '-'}  keys {p.keys or '-'}")
    for e in tr.end_transactions:
        root.add(f"EndTransaction  {format_ms(e.time)}  group {e.group}  {e.state}"
                 f"{' (from check)' if e.from_check else ''}  tx {e.transaction_id or '-'}  client {e.client_host}")
    for g in tr.groups:
        style = {"consumed": "green", "retrying": "yellow"}.get(g.status, "cyan")
        retries = sum(1 for a in g.attempts if (a.retry_times or 0) > 0)
        head = (f"group {g.group or '%UNKNOWN_GROUP%'}  {g.status}  attempts {len(g.attempts)}"
                f"{f' (retries {retries})' if retries else ''}  delivery lag {_ms(g.delivery_lag_ms)}"
                f"  consumed after {_ms(g.consumed_after_ms)}")
        node = root.add(Text(head, style=style))
        for n, a in enumerate(g.attempts, 1):
            st = a.status + (f" ({a.return_type})" if a.return_type and a.return_type != "SUCCESS" else "")
            node.add(Text(f"#{n}  {format_ms(a.begin if a.begin is not None else a.start)}  client {a.client_host}  "
                          f"retry {'-' if a.retry_times is None else a.retry_times}  cost {_ms(a.cost_ms)}  {st}",
                          style="green" if a.status == "success" else ("red" if a.status == "failed" else "")))
    for note in tr.notes:
        root.add(Text(note["note"], style="yellow"))
    for msg in tr.incomplete:
        root.add(Text(f"trace incomplete: {msg}", style="magenta"))
    console.out.print(root)


# The Spark analytics sub-commands live in their own module (mq/cli/trace_analytics.py, only click at import).
from mq.cli.trace_analytics import analyze as _analyze, export as _export  # noqa: E402

trace.add_command(_analyze)
trace.add_command(_export)
