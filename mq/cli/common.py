"""Helpers shared by the admin commands: the --json option and running an admin session."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, TypeVar

import click

T = TypeVar("T")

json_option = click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")


def with_admin(ctx_obj: Any, fn: Callable[[Any], Awaitable[T]], *, timeout: float = 5.0) -> T:
    """Run ``fn(admin)`` with an MQAdmin bound to the global name server addresses."""
    from mq.client.admin import MQAdmin
    from mq.remoting import run

    async def main() -> T:
        async with MQAdmin(ctx_obj.namesrv_addrs, timeout=timeout) as admin:
            return await fn(admin)

    return run(main())
