"""Helpers shared by the admin commands: the --json option and running an admin session."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import click

from mq.client.bounded import gather_bounded  # noqa: F401  (re-exported for the commands)

T = TypeVar("T")

json_option = click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")


def bool_option(*decls: str, default: bool = False, **kw: Any):
    """A boolean option that takes mqadmin's ``-o true`` / ``-o false`` and also works bare (``-o``: true)."""
    return click.option(*decls, type=click.BOOL, is_flag=False, flag_value=True, default=default,
                        show_default=True, **kw)


def undecodable_reporter() -> Callable[[Any], None]:
    """The ``on_undecodable`` of the CLI's consumers and admin sessions: each stored record a command steps over
    because it cannot be decoded is one ``warning:`` line on stderr naming it (topic, queue, queue offset,
    commit-log offset) and saying why."""
    from mq.cli.console import Console

    console = Console()

    def report(skipped: Any) -> None:
        console.warn(f"skipped {skipped.describe()}")
    return report


def with_admin(ctx_obj: Any, fn: Callable[[Any], Awaitable[T]], *, timeout: float = 5.0) -> T:
    """Run ``fn(admin)`` with an MQAdmin bound to the global name server addresses."""
    from mq.client.admin import MQAdmin
    from mq.remoting import run

    async def main() -> T:
        async with MQAdmin(ctx_obj.namesrv_addrs, timeout=timeout, credentials=ctx_obj.credentials,
                           on_undecodable=undecodable_reporter()) as admin:
            return await fn(admin)

    return run(main())


def daemon_options(kind: str):
    """--daemon, --pid-file, --log-file and --log-level for ``mq KIND start``."""
    def wrap(f):
        for opt in reversed((
            click.option("--daemon", is_flag=True, help="Detach, write a pid file and log to a file."),
            click.option("--pid-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                         help=f"Pid file.  [default: ~/.mq/run/{kind}.pid]"),
            click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                         help=f"Log file with --daemon.  [default: ~/.mq/logs/{kind}.log]"),
            click.option("--log-level", default="INFO", show_default=True),
        )):
            f = opt(f)
        return f
    return wrap


def stop_command(group: click.Group, kind: str, label: str, timeout: float):
    """``mq KIND stop``: find the daemon through its pid file, SIGTERM it and wait for it to exit."""
    @group.command("stop")
    @click.option("--pid-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                  help=f"Pid file.  [default: ~/.mq/run/{kind}.pid]")
    @click.option("--timeout", type=float, default=timeout, show_default=True, help="Seconds to wait for exit.")
    def stop(pid_file: Path | None, timeout: float) -> None:
        from mq.daemon import runtime

        pid_file = pid_file or runtime.default_pid_file(kind)
        pid = runtime.stop_by_pid_file(pid_file, kind=label, timeout=timeout)
        click.echo(f"{label} stopped (pid {pid})")

    stop.__doc__ = f"Stop the {label} started with --daemon (found through its pid file)."
    stop.help = stop.__doc__
    return stop
