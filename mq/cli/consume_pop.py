"""`mq consume --pop`: receive with pop (RocketMQ 5: each message is invisible to the group for a while and must be
acked, or it comes back with its delivery attempt raised), print each message, ack it (unless ``--no-ack``)."""

from __future__ import annotations

import asyncio
import time

import orjson

from mq.cli.pull import message_row, row_cells
from mq.cli.send import client_config

#: Longest wait of one pop for new messages (long polling), seconds.
POLL_S = 5.0


def consume_pop(obj, topic: str, group: str, expression: str, expression_type: str, count: int | None,
                from_: str, timeout: float | None, json_mode: bool, orderly: bool, invisible_ms: int,
                ack: bool) -> int:
    """Pop and print until ``count`` messages or ``timeout`` seconds; returns how many were printed."""
    from mq.cli.console import Console
    from mq.client.pop import INIT_MAX, INIT_MIN, PopConsumer, PopStatus
    from mq.remoting import run

    console = Console(json_mode=json_mode)
    seen = 0

    async def main() -> None:
        nonlocal seen
        consumer = PopConsumer(group, topic, client_config(obj), expression=expression,
                               expression_type=expression_type, order=orderly,
                               init_mode=INIT_MIN if from_ == "first" else INIT_MAX)
        await consumer.start()
        if not json_mode:
            how = "FIFO pop" if orderly else "pop"
            console.note(f"consuming {topic} ({expression}) as {group} ({how}, invisible {invisible_ms} ms"
                         f"{', no ack' if not ack else ''}); Ctrl-C to stop")
        end = None if timeout is None else time.monotonic() + timeout
        try:
            while count is None or seen < count:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    break
                wait = POLL_S if left is None else max(0.0, min(POLL_S, left - 0.5))
                want = 32 if count is None else min(32, count - seen)
                res = await consumer.receive(want, invisible_ms, int(wait * 1000))
                if res.status is not PopStatus.FOUND:
                    if res.status is PopStatus.POLLING_FULL:
                        await asyncio.sleep(0.5)
                    continue
                for m in res.messages:
                    seen += 1
                    r = message_row(m)
                    r["deliveryAttempt"] = m.reconsume_times + 1
                    if json_mode:
                        print(orjson.dumps(r).decode(), flush=True)
                    else:
                        console.line("  ".join(str(c) for c in row_cells(r)) + f"  (attempt {r['deliveryAttempt']})")
                if ack:
                    await consumer.ack_all(res.messages)
        except asyncio.CancelledError:
            pass
        finally:
            await consumer.shutdown()

    run(main())
    return seen
