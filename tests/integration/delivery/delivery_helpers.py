"""Helpers shared by the delivery integration tests (a uniquely named module: ``conftest`` is ambiguous when
several test directories are collected together)."""

from __future__ import annotations


#: Small delay levels so retries and delay levels take seconds, not minutes.
FAST_LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


async def wait_for(pred, timeout: float = 15.0, step: float = 0.05):
    """Poll ``pred()`` until it is truthy; returns its value or raises AssertionError on timeout."""
    import asyncio
    import time

    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(step)


async def make_topic(broker, topic: str, queues: int = 4) -> None:
    """Create ``topic`` on ``broker`` and register it with the name server now."""
    from mq.protocol.bodies import TopicConfig

    broker.topic_config.put(TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6))
    await broker.register_all(force=True)


def stored_records(broker, topic: str, queues: int = 4) -> list:
    """Every message stored in ``topic``'s queues, read straight from the broker's store (decoded records)."""
    from mq.common.record import decode_record

    out = []
    for q in range(queues):
        off = 0
        while True:
            r = broker.store.get_message("t", topic, q, off, 32)
            if not r.buffers:
                break
            out += [decode_record(b) for b in r.buffers]
            off = r.next_begin_offset
    return out
