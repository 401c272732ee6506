"""``gather_bounded``: many admin calls at once, but never more than a limit in flight."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable, TypeVar

T = TypeVar("T")


async def gather_bounded(fn: Callable[[Any], Awaitable[T]], items: Iterable[Any], limit: int) -> list[T]:
    """``[await fn(x) for x in items]``, with at most ``limit`` calls in flight (a broker may have thousands of
    topics or groups to ask about); results in the order of ``items``."""
    gate = asyncio.Semaphore(limit)

    async def one(x: Any) -> T:
        async with gate:
            return await fn(x)

    return list(await asyncio.gather(*(one(x) for x in items)))
