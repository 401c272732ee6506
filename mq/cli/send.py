"""`mq send`: send one message (or ``--count`` of them) and print where each was stored."""

from __future__ import annotations

import sys
import time

import click

from mq.cli.common import bool_option, json_option


def read_body(body: str | None, file: str | None, size: int | None) -> bytes | None:
    """--body, --file, or a non-empty piped stdin; None means "generate one"."""
    if body is not None and file is not None:
        raise click.UsageError("give either --body or --file, not both")
    if body is not None:
        return body.encode()
    if file is not None:
        with open(file, "rb") as f:
            return f.read()
    if size is None and not sys.stdin.isatty():
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        if data:
            return data
    return None


def generated_body(i: int, size: int | None) -> bytes:
    text = f"Hello mq {time.strftime('%Y-%m-%dT%H:%M:%S')} #{i}".encode()
    if size is None:
        return text
    return (text + b" " + b"x" * size)[:size] if size > len(text) else text[:max(size, 1)]


def parse_properties(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise click.BadParameter(f"{item!r} is not k=v", param_hint="--property")
        out[k] = v
    return out


def client_config(obj, **kw):
    from mq.config import ClientConfig

    return ClientConfig(namesrv_addr=obj.namesrv, **obj.credential_options, **kw)


@click.command("send")
@click.option("-t", "--topic", required=True, help="Topic to send to.")
@click.option("--tag", default=None, help="Message tag.")
@click.option("--keys", default=None, help="Message keys, comma separated.")
@click.option("--body", default=None, help="Message body text (else --file, piped stdin, or a generated one).")
@click.option("--file", "file", type=click.Path(exists=True, dir_okay=False), default=None, help="Body from a file.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True, help="Messages to send.")
@click.option("--size", type=click.IntRange(min=1), default=None, help="Generated body size in bytes.")
@click.option("--property", "props", multiple=True, metavar="K=V", help="User property (repeatable).")
@click.option("--delay-level", type=click.IntRange(min=0, max=18), default=0, help="Delay level (1-18).")
# delivery options (parsing in mq/cli/delivery_options.py)
@click.option("--delay", default=None, metavar="DURATION", help="Arbitrary delay: 90s, 5m, 1h30m, 2d (<= 30 d).")
@click.option("--deliver-at", default=None, metavar="TIME", help="Deliver at: epoch ms or ISO 8601 time.")
@click.option("--transaction", type=click.Choice(["commit", "rollback", "unknown"]), default=None,
              help="Send as a transactional message and end it so (unknown: the broker checks back later).")
@click.option("--queue", "queue_id", type=click.IntRange(min=0), default=None, help="Send to this queue id.")
@click.option("--broker", default=None, help="Send to this broker (with --queue: that exact queue).")
@click.option("-g", "--group", default="MQ_CLI_PRODUCER", show_default=True, help="Producer group.")
@click.option("--timeout", type=float, default=3.0, show_default=True, help="Send timeout in seconds.")
@click.option("--oneway", "mode", flag_value="oneway", help="Send oneway (no answer, no result).")
@click.option("--async", "mode", flag_value="async", help="Send asynchronously (up to 64 in flight).")
@click.option("--trace", is_flag=True, help="Trace the sends (Pub records; see `mq trace -i MSGID`).")
@json_option
@click.pass_obj
def send(obj, topic, tag, keys, body, file, count, size, props, delay_level, queue_id, broker, group, timeout, mode,
         json_mode, delay=None, deliver_at=None, transaction=None, trace=False) -> None:
    """Send messages; print broker, queue, offset, msgId and status of each (a summary with --count)."""
    from mq.cli.console import Console
    from mq.client.producer import Producer
    from mq.client.sync import build_message
    from mq.common.topic import validate_topic
    from mq.config import ProducerConfig
    from mq.remoting import run

    validate_topic(topic)
    given = read_body(body, file, size)
    properties = parse_properties(props)
    console = Console(json_mode=json_mode)
    mode = mode or "sync"
    from mq.cli.delivery_options import delivery_properties, transaction_producer

    properties.update(delivery_properties(delay, deliver_at))
    if transaction and (mode != "sync" or queue_id is not None or broker is not None):
        raise click.UsageError("--transaction sends synchronously to a queue the producer picks")

    async def main():
        from mq.client.stats import Stats, cause_of
        from mq.common.message import MessageQueue

        pcfg = ProducerConfig(group=group, send_msg_timeout=timeout)
        producer = (Producer(pcfg, client_config(obj)) if transaction is None
                    else transaction_producer(transaction, pcfg, client_config(obj)))
        if trace:
            from mq.trace.enable import enable_trace
            enable_trace(producer)
        await producer.start()
        stats = Stats()
        rows: list[dict] = []
        try:
            queues = await producer.fetch_publish_queues(topic)
            target: MessageQueue | None = None
            if broker is not None or queue_id is not None:
                brokers = sorted({q.broker_name for q in queues})
                name = broker
                if name is None:
                    if len(brokers) != 1:
                        raise click.UsageError(f"--queue needs --broker: topic {topic} is on {', '.join(brokers)}")
                    name = brokers[0]
                own = [q for q in queues if q.broker_name == name]
                if not own:
                    raise click.UsageError(f"broker {name!r} has no writable queue of topic {topic} "
                                           f"(brokers: {', '.join(brokers)})")
                if queue_id is not None:
                    if queue_id >= len(own):
                        raise click.UsageError(f"queue {queue_id} does not exist on {name} "
                                               f"(it has {len(own)} write queues)")
                    target = MessageQueue(topic, name, queue_id)
                else:
                    cycle = iter(range(1 << 62))
                    own_queues = own

            def make(i: int):
                b = given if given is not None else generated_body(i, size)
                return build_message(topic, b, tags=tag, keys=keys.split(",") if keys else None,
                                     properties=properties, delay_level=delay_level)

            def pick():
                if target is not None:
                    return target
                if broker is not None:
                    return own_queues[next(cycle) % len(own_queues)]
                return None

            async def one(i: int) -> None:
                msg = make(i)
                started = time.monotonic()
                try:
                    if mode == "oneway":
                        await producer.send_oneway(msg, queue=pick())
                        res = None
                    elif mode == "async":
                        res = await producer.send_async(msg, queue=pick())
                    elif transaction:
                        res = (await producer.send_in_transaction(msg)).send
                    else:
                        res = await producer.send(msg, queue=pick())
                except Exception as exc:
                    if count == 1:
                        raise
                    stats.fail(cause_of(exc))
                    return
                stats.record((time.monotonic() - started) * 1000, len(msg.body))
                row = res.to_dict() if res is not None else {
                    "status": "SENT_ONEWAY", "msgId": msg.uniq_key, "topic": topic, "broker": "", "queueId": "",
                    "queueOffset": "", "offsetMsgId": ""}
                if len(rows) < 10000:
                    rows.append(row)

            if count == 1:
                await one(0)
            else:
                await _with_progress(console, count, one, window=64 if mode == "async" else 1)
        finally:
            await producer.shutdown()
        return rows, stats

    rows, stats = run(main())
    summary = stats.summary()
    if json_mode:
        console.json({"results": rows, "summary": summary} if count > 1 else rows[0])
    else:
        if count == 1 or len(rows) <= 20:
            console.table(None, ["Broker", "Queue", "Offset", "MsgId", "Status"],
                          [(r["broker"], r["queueId"], r["queueOffset"], r["msgId"], r["status"]) for r in rows])
        if count > 1:
            print_summary(console, summary)
    if summary["failed"]:
        sys.exit(1)


async def _with_progress(console, count: int, one, *, window: int) -> None:
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("sending"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console.err, transient=True, disable=console.json_mode) as progress:
        task = progress.add_task("send", total=count)
        if window <= 1:
            for i in range(count):
                await one(i)
                progress.advance(task)
            return
        counter = iter(range(count))

        async def worker() -> None:
            for i in counter:
                await one(i)
                progress.advance(task)

        await asyncio.gather(*(worker() for _ in range(min(window, count))))


def print_summary(console, s: dict) -> None:
    console.line(f"sent {s['ok']} ok, {s['failed']} failed in {s['elapsed_s']} s: {s['per_second']} msg/s, "
                 f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms")
    for cause, n in sorted(s["failures"].items(), key=lambda kv: -kv[1]):
        console.line(f"  {n} x {cause}")


@click.command("sendMessage")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-p", "--body", required=True, help="UTF-8 string format of the message body.")
@click.option("-k", "--key", default=None, help="Message keys.")
@click.option("-c", "--tags", default=None, help="Message tags.")
@click.option("-b", "--broker", default=None, help="Send message to target broker (its name).")
@click.option("-i", "--qid", "queue_id", type=click.IntRange(min=0), default=None,
              help="Send message to target queue (needs -b).")
@bool_option("-m", "--msgTraceEnable", "trace", help="Trace the send (a Pub record; see `mq trace -i MSGID`).")
@json_option
@click.pass_context
def send_message(ctx: click.Context, topic: str, body: str, key: str | None, tags: str | None, broker: str | None,
                 queue_id: int | None, trace: bool, json_mode: bool) -> None:
    """mqadmin's sendMessage: send one message and print its broker, queue, result and msgId (the same as
    `mq send -t TOPIC --body TEXT`, with mqadmin's option letters)."""
    if queue_id is not None and broker is None:
        raise click.UsageError("Broker name must be set if the queue is chosen! (-i needs -b)")
    ctx.invoke(send, topic=topic, tag=tags, keys=key, body=body, queue_id=queue_id, broker=broker, trace=trace,
               json_mode=json_mode)
