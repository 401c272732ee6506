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
    key = f"{kind}-<brokerName>-<port>" if kind == "broker" else f"{kind}-<port>"

    def wrap(f):
        for opt in reversed((
            click.option("--daemon", is_flag=True, help="Detach, write a pid file and log to a file."),
            click.option("--pid-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                         help=f"Pid file.  [default: ~/.mq/run/{key}.pid]"),
            click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                         help=f"Log file with --daemon.  [default: ~/.mq/logs/{key}.log]"),
            click.option("--log-level", default="INFO", show_default=True),
        )):
            f = opt(f)
        return f
    return wrap


def stop_command(group: click.Group, kind: str, label: str, timeout: float):
    """``mq KIND stop``: find the daemon(s) through their pid files, SIGTERM each and wait for it to exit."""
    options = [
        click.option("--port", type=int, default=None, help=f"Stop the {label} listening on this port."),
        click.option("--all", "every", is_flag=True, help=f"Stop every {label} started from this $MQ_HOME."),
        click.option("--pid-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Stop the daemon named in this pid file (one started with --pid-file)."),
        click.option("--timeout", type=float, default=timeout, show_default=True, help="Seconds to wait for exit."),
    ]
    if kind == "broker":
        options.insert(1, click.option("--broker-name", "name", default=None, help="Stop the broker of this name."))

    def stop(port: int | None, every: bool, pid_file: Path | None, timeout: float, name: str | None = None) -> None:
        from mq.daemon import runtime

        if pid_file is not None:
            files = [pid_file]
        else:
            files = [i.pid_file for i in runtime.select_instances(kind, label, port=port, name=name, every=every)]
        for path in files:
            pid = runtime.stop_by_pid_file(path, kind=label, timeout=timeout)
            click.echo(f"{label} stopped (pid {pid}, pid file {path})")

    for opt in reversed(options):
        stop = opt(stop)
    stop = group.command("stop")(stop)
    stop.__doc__ = (f"Stop the {label} started with --daemon, found through its pid file: the only one running, "
                    f"or the one picked with --port{' / --broker-name' if kind == 'broker' else ''}, or all of "
                    f"them with --all.")
    stop.help = stop.__doc__
    return stop
