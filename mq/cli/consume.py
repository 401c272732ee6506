"""`mq consume`: a push consumer that prints messages as they arrive (until --count or Ctrl-C)."""

from __future__ import annotations

import click

from mq.cli.common import json_option, undecodable_reporter
from mq.cli.pull import message_row, row_cells, subscription_options
from mq.cli.send import client_config


@click.command("consume")
@click.option("-t", "--topic", required=True, help="Topic to subscribe to.")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("--expression", default=None, help="Tag expression, e.g. 'TagA || TagB' (default '*').")
@click.option("--sql", default=None,
              help="SQL92 property selector, e.g. \"a BETWEEN 1 AND 3 AND TAGS IN ('TagA')\" (broker needs "
                   "enablePropertyFilter=true); not with --expression.")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many messages.")
@click.option("--broadcast", is_flag=True, help="BROADCASTING model (offsets kept locally) instead of CLUSTERING.")
@click.option("--from", "from_", type=click.Choice(["last", "first"]), default="last", show_default=True,
              help="Where a new group starts.")
@click.option("--timeout", type=float, default=None, help="Stop after this many seconds.")
@click.option("--trace", is_flag=True, help="Trace consumption (SubBefore/SubAfter records; see `mq trace -i`).")
@click.option("--orderly", is_flag=True,
              help="Orderly: lock each queue at its broker and consume it one message at a time, in queue order "
                   "(with --pop: a FIFO pop).")
@click.option("--pop", is_flag=True,
              help="Receive with pop (RocketMQ 5): each message is invisible to the group for --invisible-time and "
                   "acked once printed; an un-acked one comes back with its delivery attempt raised.")
@click.option("--invisible-time", type=click.IntRange(min=0), default=60_000, show_default=True,
              help="With --pop: ms a received message stays invisible to the group.")
@click.option("--no-ack", is_flag=True, help="With --pop: do not ack (the messages come back later).")
@json_option
@click.pass_obj
def consume(obj, topic, group, expression, sql, count, broadcast, from_, timeout, json_mode, trace=False,
             orderly=False, pop=False, invisible_time=60_000, no_ack=False) -> None:
    """Consume with a push consumer (or with pop: --pop) and print each message (id, tags, keys, queue, offset,
    store time, body)."""
    import asyncio

    import orjson

    from mq.cli.console import Console
    from mq.client.consumer import PushConsumer
    from mq.client.hooks import ConsumeStatus
    from mq.common.topic import validate_group, validate_topic
    from mq.config import ConsumerConfig
    from mq.remoting import run

    validate_topic(topic)
    validate_group(group)
    expression, expression_type = subscription_options(expression, sql)
    console = Console(json_mode=json_mode)
    if pop:
        if broadcast or trace:
            raise click.UsageError("--pop takes neither --broadcast nor --trace")
        from mq.cli.consume_pop import consume_pop

        n = consume_pop(obj, topic, group, expression, expression_type, count, from_, timeout, json_mode, orderly,
                        invisible_time, not no_ack)
        if not json_mode:
            console.note(f"{n} message(s) consumed")
        return
    if no_ack:
        raise click.UsageError("--no-ack needs --pop")
    seen = 0

    async def main() -> int:
        nonlocal seen
        done = asyncio.Event()

        async def listener(msgs, ctx):
            nonlocal seen
            if count is not None and seen >= count:
                done.set()
                await asyncio.get_running_loop().create_future()  # park it: cancelled at shutdown, not committed
            for m in msgs:
                seen += 1
                r = message_row(m)
                if json_mode:
                    print(orjson.dumps(r).decode(), flush=True)
                else:
                    console.line("  ".join(str(c) for c in row_cells(r)))
            if count is not None and seen >= count:
                done.set()
            return ConsumeStatus.CONSUME_SUCCESS

        cfg = ConsumerConfig(group=group, message_model="BROADCASTING" if broadcast else "CLUSTERING",
                             consume_from_where=from_.upper(), consume_thread_max=1)
        consumer = PushConsumer(cfg, listener, client_config(obj), orderly=orderly,
                                on_undecodable=undecodable_reporter())
        consumer.subscribe(topic, expression, expression_type)
        if trace:
            from mq.trace.enable import enable_trace
            enable_trace(consumer)
        await consumer.start()
        if not json_mode:
            how = f"{cfg.message_model}, orderly" if orderly else cfg.message_model
            what = f"SQL92: {expression}" if expression_type == "SQL92" else expression
            console.note(f"consuming {topic} ({what}) as {group} ({how}); Ctrl-C to stop")
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        finally:
            await consumer.shutdown(grace=0.5)
        return seen

    run(main())
    if not json_mode:
        console.note(f"{seen} message(s) consumed")
