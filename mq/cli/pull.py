"""`mq pull`: read messages from queues at chosen offsets (no consumer group state is changed)."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import click

from mq.cli.common import json_option, undecodable_reporter
from mq.cli.send import client_config

PREVIEW = 60


def store_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def preview(body: bytes, n: int = PREVIEW) -> str:
    text = body[:n * 4].decode("utf-8", "replace").replace("\n", "\\n")
    return text if len(text) <= n else text[:n - 1] + "…"


def message_row(m) -> dict:
    return {"msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "topic": m.topic, "tags": m.tags or "",
            "keys": m.keys or "", "broker": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "storeTime": store_time(m.store_timestamp), "reconsumeTimes": m.reconsume_times,
            "bodySize": len(m.body), "body": preview(m.body)}


COLUMNS = ["MsgId", "Tags", "Keys", "Queue", "Offset", "Store time", "Body"]


def row_cells(r: dict) -> tuple:
    return (r["msgId"], r["tags"], r["keys"], f"{r['broker']}:{r['queueId']}", r["queueOffset"], r["storeTime"],
            r["body"])


def subscription_options(expression: str | None, sql: str | None) -> tuple[str, str]:
    """(expression, expression type) from ``--expression`` / ``--sql``, which exclude each other."""
    if sql is not None:
        if expression is not None:
            raise click.UsageError("--sql and --expression exclude each other")
        if not sql.strip():
            raise click.BadParameter("the SQL92 selector is empty", param_hint="--sql")
        return sql, "SQL92"
    return ("*" if expression is None else expression), "TAG"


def parse_time(text: str) -> int:
    """Epoch ms, or an ISO date/time (local time), or RocketMQ's yyyyMMddHHmmss."""
    if text.isdigit() and len(text) != 14:
        return int(text)
    for fmt in ("%Y%m%d%H%M%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
        try:
            return int(datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise click.BadParameter(f"{text!r} is not first, last, epoch ms or a date/time like 2024-05-01T12:00:00",
                             param_hint="--from")


@click.command("pull")
@click.option("-t", "--topic", required=True, help="Topic to read.")
@click.option("-g", "--group", default="MQ_CLI_PULL", show_default=True, help="Consumer group named in requests.")
@click.option("--expression", default=None, help="Tag expression, e.g. 'TagA || TagB' (default '*').")
@click.option("--sql", default=None,
              help="SQL92 property selector, e.g. \"a > 5 AND TAGS IS NOT NULL\" (broker needs "
                   "enablePropertyFilter=true); not with --expression.")
@click.option("--broker", default=None, help="Only this broker's queues.")
@click.option("--queue", "queue_id", type=click.IntRange(min=0), default=None, help="Only this queue id.")
@click.option("--offset", type=click.IntRange(min=0), default=None, help="Start offset (with --queue).")
@click.option("--count", type=click.IntRange(min=1), default=32, show_default=True, help="Messages to print at most.")
@click.option("--from", "from_", default="first", show_default=True, help="first, last, epoch ms or a date/time.")
@click.option("--follow", is_flag=True, help="Keep waiting for new messages (long polling) until --count or Ctrl-C.")
@click.option("--body-dir", type=click.Path(file_okay=False), default=None, help="Write each body to DIR/<msgId>.")
@json_option
@click.pass_obj
def pull(obj, topic, group, expression, sql, broker, queue_id, offset, count, from_, follow, body_dir,
         json_mode) -> None:
    """Print messages of a topic (every queue unless --queue): id, tags, keys, queue, offset, store time, body."""
    import asyncio

    import orjson

    from mq.cli.console import Console
    from mq.client.pull_api import PullConsumer, PullStatus
    from mq.common.topic import validate_topic
    from mq.errors import BrokerError
    from mq.remoting import run

    validate_topic(topic)
    expression, expression_type = subscription_options(expression, sql)
    if offset is not None and queue_id is None:
        raise click.UsageError("--offset needs --queue")
    console = Console(json_mode=json_mode)
    out_dir = Path(body_dir) if body_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []

    def emit(m) -> None:
        r = message_row(m)
        rows.append(r)
        if out_dir:
            (out_dir / m.msg_id).write_bytes(m.body)
        if follow:
            if json_mode:
                print(orjson.dumps(r).decode(), flush=True)
            else:
                console.line("  ".join(str(c) for c in row_cells(r)))

    async def main() -> None:
        async with PullConsumer(group, client_config(obj), on_undecodable=undecodable_reporter()) as pc:
            queues = await pc.fetch_subscribe_queues(topic)
            if broker is not None:
                queues = [q for q in queues if q.broker_name == broker]
            if queue_id is not None:
                queues = [q for q in queues if q.queue_id == queue_id]
            if not queues:
                raise click.UsageError(f"no such queue of topic {topic} (broker={broker}, queue={queue_id})")
            offsets = {}
            for q in queues:
                if offset is not None:
                    offsets[q] = offset
                elif from_ == "first":
                    offsets[q] = await pc.min_offset(q)
                elif from_ == "last":
                    offsets[q] = await pc.max_offset(q)
                else:
                    offsets[q] = await pc.search_offset(q, parse_time(from_))
            if not follow:
                for q in queues:
                    while len(rows) < count:
                        res = await pc.pull(q, offsets[q], min(32, count - len(rows)), expression,
                                            expression_type=expression_type)
                        if res.status is PullStatus.OFFSET_ILLEGAL and res.next_begin_offset != offsets[q]:
                            offsets[q] = res.next_begin_offset
                            continue
                        if res.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
                            break
                        offsets[q] = res.next_begin_offset
                        for m in res.messages[:count - len(rows)]:
                            emit(m)
                return
            done = asyncio.Event()
            refused: list[BrokerError] = []

            async def follow_queue(q) -> None:
                while not done.is_set():
                    try:
                        res = await pc.pull(q, offsets[q], 32, expression, block=15.0,
                                            expression_type=expression_type)
                    except BrokerError as exc:
                        if expression_type != "TAG":  # the broker refuses the selector: no point in retrying
                            refused.append(exc)
                            done.set()
                            return
                        console.warn(f"{q.broker_name}:{q.queue_id}: {exc}")
                        await asyncio.sleep(1.0)
                        continue
                    except Exception as exc:  # keep following through broker restarts
                        console.warn(f"{q.broker_name}:{q.queue_id}: {exc}")
                        await asyncio.sleep(1.0)
                        continue
                    offsets[q] = res.next_begin_offset
                    for m in res.messages:
                        if len(rows) >= count:
                            break
                        emit(m)
                    if len(rows) >= count:
                        done.set()

            tasks = [asyncio.ensure_future(follow_queue(q)) for q in queues]
            try:
                await done.wait()
            except asyncio.CancelledError:
                pass
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            if refused:
                raise refused[0]

    started = time.monotonic()
    run(main())
    if follow:
        return
    if json_mode:
        console.json(rows)
    else:
        console.table(None, COLUMNS, [row_cells(r) for r in rows],
                      caption=f"{len(rows)} message(s) in {time.monotonic() - started:.2f} s")
