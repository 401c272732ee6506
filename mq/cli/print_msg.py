"""`mq printMsg`, `mq printMsgByQueue`, `mq consumeMessage`: mqadmin's read-only message dumps
(RocketMQ 4.9 ``PrintMessageSubCommand``, ``PrintMessageByQueueCommand``, ``ConsumeMessageCommand``).

Each reads queues with plain pulls (``PullConsumer``, as Java's ``DefaultMQPullConsumer``) over an offset
window and never commits a consumer offset. The window of a queue is [min offset, max offset); a begin time
moves its start to SEARCH_OFFSET_BY_TIMESTAMP(begin), an end time its end to SEARCH_OFFSET_BY_TIMESTAMP(end).

Deliberate differences from Java, where it is plainly wrong:

* The time search answers the *nearest* message, which may lie on either side of the time. Java prints that
  neighbour at the begin edge, misses the last message before the end when the nearest one is older, and
  misses a queue's last message whenever the end time is after it. Here the window runs one offset past the
  end's answer and messages are kept when ``begin <= storeTimestamp < end``.
* Java prints whole batches of 32, so messages past the window's end show up; here the window's end is kept.
* ``printMsgByQueue`` stops at the first batch without a matching tag (NO_MATCHED_MSG); here the filter skips
  it and goes on. Its ``-f`` counts also show untagged messages (as "(no tag)"), so the counts add up.
* ``consumeMessage`` takes one offset too many off its message budget per queue (it can then never reach
  zero and print every queue whole) and ignores ``-b`` without ``-i``; here ``-c`` is the number of messages
  printed in all, and ``-b`` alone keeps that broker's queues.
* A begin time after the end time, a queue or broker that is not in the topic's route, and a bad charset are
  errors (Java prints nothing, or fails in the pull).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import click

from mq.cli.common import bool_option, json_option, undecodable_reporter
from mq.cli.pull import COLUMNS, message_row, row_cells
from mq.cli.query import message_dict
from mq.cli.send import client_config
from mq.client.message_window import (TimeRange, Window, fill, find_queue, queue_window, topic_queues,
                                      window_messages)

TOOLS_CONSUMER = "TOOLS_CONSUMER"
BATCH = 32
NO_BODY = "NOT PRINT BODY"
NO_TAG = "(no tag)"
TIME_HELP = "[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"


# ---------------------------------------------------------------------------------------------------------
# option parsing
# ---------------------------------------------------------------------------------------------------------
def _time_value(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """mqadmin's timestampFormat: epoch ms or yyyy-MM-dd#HH:mm:ss:SSS (also ISO and 'now'); exit 2 if neither."""
    import time

    from mq.cli.consumer_admin import _time_option

    return None if value is None else _time_option(value, now_ms=int(time.time() * 1000))


def _charset(ctx: click.Context, param: click.Parameter, value: str) -> str:
    import codecs

    try:
        codecs.lookup(value.strip())
    except LookupError:
        raise click.BadParameter(f"unknown charset {value!r} (e.g. UTF-8, GBK)") from None
    return value.strip()


def time_range(begin: int | None, end: int | None) -> TimeRange:
    try:
        return TimeRange(begin, end)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def decode_body(body: bytes, charset: str) -> str:
    return body.decode(charset, "replace")


# ---------------------------------------------------------------------------------------------------------
# reading (the windows by time live in the client, shared with the web console)
# ---------------------------------------------------------------------------------------------------------
def run_pulls(obj, group: str, fn):
    """Run ``fn(pull_consumer)`` on a PullConsumer of ``group`` (requests name it; nothing is committed)."""
    from mq.client.pull_api import PullConsumer
    from mq.remoting import run

    async def main():
        async with PullConsumer(group, client_config(obj), on_undecodable=undecodable_reporter()) as pc:
            return await fn(pc)

    return run(main())


# ---------------------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------------------
def message_doc(m, charset: str, print_body: bool) -> dict[str, Any]:
    """``message_dict`` of a pulled message: ``msgId`` (its UNIQ_KEY when it has one) next to the real
    ``offsetMsgId``, and the whole body decoded with ``charset`` (None when not printed)."""
    d = message_dict(m)
    d.update(msgId=m.msg_id, offsetMsgId=m.offset_msg_id, body=decode_body(m.body, charset) if print_body else None)
    return d


def message_cells(m, charset: str, print_body: bool) -> tuple:
    r = message_row(m)
    r["body"] = decode_body(m.body, charset) if print_body else NO_BODY
    return row_cells(r)


def window_doc(w: Window, charset: str, print_body: bool) -> dict[str, Any]:
    return {"brokerName": w.queue.broker_name, "queueId": w.queue.queue_id, "minOffset": w.begin,
            "maxOffset": w.end, "messages": [message_doc(m, charset, print_body) for m in w.messages]}


def show_window(console, w: Window, charset: str, print_body: bool, count: int | None = None) -> None:
    """A line for the queue (``count`` messages read, by default those kept) and a table of its messages."""
    console.line(f"{w.queue.broker_name}:{w.queue.queue_id}  minOffset={w.begin}, maxOffset={w.end}: "
                 f"{len(w.messages) if count is None else count} message(s)")
    if w.messages:
        console.table(None, COLUMNS, [message_cells(m, charset, print_body) for m in w.messages])


def show_windows(console, doc: dict[str, Any], windows: list[Window], charset: str, print_body: bool) -> None:
    """The JSON document ``doc`` + queues + count, or a line and a table per queue and a total."""
    total = sum(len(w.messages) for w in windows)
    if console.json_mode:
        console.json({**doc, "queues": [window_doc(w, charset, print_body) for w in windows], "count": total})
        return
    for w in windows:
        show_window(console, w, charset, print_body)
    console.line(f"{total} message(s) in {len(windows)} queue(s) of {doc['topic']}")


# ---------------------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------------------
def time_options(begin: str, end: str, begin_name: str = "beginTimestamp", end_name: str = "endTimestamp"):
    def wrap(f):
        f = click.option(end, f"--{end_name}", "end", callback=_time_value,
                         help=f"End timestamp (exclusive) {TIME_HELP}.")(f)
        return click.option(begin, f"--{begin_name}", "begin", callback=_time_value,
                            help=f"Begin timestamp {TIME_HELP}.")(f)
    return wrap


charset_option = click.option("-c", "--charset", "--charsetName", "charset", default="UTF-8", show_default=True,
                              callback=_charset, help="Charset of the bodies (e.g. UTF-8, GBK).")
expression_option = click.option("-s", "--subExpression", "--expression", "expression", default="*",
                                 show_default=True, help="Tag expression, e.g. 'TagA || TagB'.")


@click.command("printMsg")
@click.option("-t", "--topic", required=True, help="Topic name.")
@charset_option
@expression_option
@time_options("-b", "-e")
@bool_option("-d", "--printBody", "--print-body", "print_body", default=True, help="Print the bodies.")
@json_option
@click.pass_obj
def print_msg(obj, topic: str, charset: str, expression: str, begin: int | None, end: int | None,
              print_body: bool, json_mode: bool) -> None:
    """Print the messages of every readable queue of a topic (those matching -s, stored between -b and -e)."""
    from mq.cli.console import Console

    times = time_range(begin, end)

    async def read(pc) -> list[Window]:
        windows = [await queue_window(pc, q, times) for q in await topic_queues(pc, topic.strip())]
        for w in windows:
            await fill(pc, w, expression.strip(), times)
        return windows

    windows = run_pulls(obj, TOOLS_CONSUMER, read)
    show_windows(Console(json_mode=json_mode), {"topic": topic.strip(), "subExpression": expression.strip()},
                 windows, charset, print_body)


@click.command("printMsgByQueue")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--brokerName", "--broker", "broker", required=True, help="Broker name.")
@click.option("-i", "--queueId", "--queue", "queue_id", type=click.IntRange(min=0), required=True, help="Queue id.")
@charset_option
@expression_option
@time_options("-b", "-e")
@bool_option("-p", "--printMsg", "--print-msg", "print_msgs", help="Print the messages.")
@bool_option("-d", "--printBody", "--print-body", "print_body", help="With -p: print the bodies.")
@bool_option("-f", "--calculate", "--calculate-by-tag", "by_tag", help="Count the messages by tag.")
@json_option
@click.pass_obj
def print_msg_by_queue(obj, topic: str, broker: str, queue_id: int, charset: str, expression: str,
                       begin: int | None, end: int | None, print_msgs: bool, print_body: bool, by_tag: bool,
                       json_mode: bool) -> None:
    """Read one queue between -b and -e (messages matching -s): count them, print them with -p, count them by
    tag with -f (most frequent first)."""
    from mq.cli.console import Console

    times = time_range(begin, end)
    tags: Counter[str] = Counter()

    async def read(pc) -> tuple[Window, int]:
        w = await queue_window(pc, await find_queue(pc, topic.strip(), broker.strip(), queue_id), times)
        n = 0
        async with contextlib.aclosing(window_messages(pc, w, expression.strip(), times)) as it:
            async for m in it:
                n += 1
                tags[m.tags or ""] += 1
                if print_msgs:
                    w.messages.append(m)
        return w, n

    w, n = run_pulls(obj, TOOLS_CONSUMER, read)
    counts = sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))
    console = Console(json_mode=json_mode)
    if json_mode:
        doc = {"topic": topic.strip(), "subExpression": expression.strip(), "count": n,
               **window_doc(w, charset, print_body)}
        if not print_msgs:
            doc.pop("messages")
        if by_tag:
            doc["tagCounts"] = [{"tag": t, "count": c} for t, c in counts]
        console.json(doc)
        return
    show_window(console, w, charset, print_body, n)
    if by_tag:
        console.table("Count by tag", ["Tag", "Count"], [(t or NO_TAG, c) for t, c in counts],
                      justify={"Count": "right"})


@click.command("consumeMessage")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "--broker", "broker", help="Broker name (alone: only its queues).")
@click.option("-i", "--queueId", "--queue", "queue_id", type=click.IntRange(min=0), help="Queue id (needs -b).")
@click.option("-o", "--offset", type=click.IntRange(min=0), help="First queue offset (needs -i).")
@click.option("-g", "--consumerGroup", "--group", "group", default=TOOLS_CONSUMER, show_default=True,
              help="Consumer group named in the pulls (no offset is committed).")
@time_options("-s", "-e")
@click.option("-c", "--MessageNumber", "--count", "count", type=click.IntRange(min=1), default=128,
              show_default=True, help="Messages to print at most, in all.")
@json_option
@click.pass_obj
def consume_message(obj, topic: str, broker: str | None, queue_id: int | None, offset: int | None, group: str,
                    begin: int | None, end: int | None, count: int, json_mode: bool) -> None:
    """Print the oldest -c messages of a queue (-b -i, from offset -o) or of the whole topic, optionally only
    those stored between -s and -e; bodies as UTF-8."""
    from mq.cli.console import Console

    times = consume_times(begin, end)
    if queue_id is not None and broker is None:
        raise click.UsageError("-i/--queueId needs -b/--brokerName")
    if offset is not None and queue_id is None:
        raise click.UsageError("-o/--offset needs -i/--queueId")

    async def read(pc) -> list[Window]:
        t = topic.strip()
        queues = [await find_queue(pc, t, broker, queue_id)] if queue_id is not None else \
            await topic_queues(pc, t, broker)
        windows: list[Window] = []
        left = count
        for q in queues:
            if left <= 0:
                break
            w = await queue_window(pc, q, times)
            w.begin = max(w.begin, offset or 0)
            await fill(pc, w, "*", times, left)
            left -= len(w.messages)
            windows.append(w)
        return windows

    windows = run_pulls(obj, group.strip(), read)
    console = Console(json_mode=json_mode)
    show_windows(console, {"topic": topic.strip(), "consumerGroup": group.strip(), "limit": count}, windows,
                 "UTF-8", True)
    if sum(len(w.messages) for w in windows) >= count:
        console.note(f"stopped after {count} message(s) (-c/--MessageNumber)")


def consume_times(begin: int | None, end: int | None) -> TimeRange:
    """consumeMessage's checks: neither time after now, begin not after end."""
    import time

    now = int(time.time() * 1000)
    if begin and begin > now:
        raise click.UsageError("-s/--beginTimestamp is after now")
    if end and end > now:
        raise click.UsageError("-e/--endTimestamp is after now")
    return time_range(begin, end)
