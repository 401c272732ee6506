"""`mq dashboard`: the web console (mq.dashboard), and `mq dashboard hash-password` for its users file."""

from __future__ import annotations

import click

INSTALL_HINT = "the web console needs its extra: pip install 'mq[dashboard]' (starlette, uvicorn, jinja2, python-multipart)"


@click.group("dashboard", invoke_without_command=True)
@click.option("--host", default=None, help="Address to listen on.  [default: 127.0.0.1; another needs --users]")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="HTTP port.  [default: 8080]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="YAML file of DashboardConfig keys (docs/operations.md).")
@click.option("--users", "users_file", type=click.Path(dir_okay=False), default=None,
              help="YAML users file: required to listen on any address but loopback.")
@click.option("--trace-report-dir", default=None, type=click.Path(file_okay=False),
              help="Folder of `mq trace analyze --html` reports (the newest is shown).")
@click.pass_context
def dashboard(ctx: click.Context, host: str | None, port: int | None, config_file: str | None,
              users_file: str | None, trace_report_dir: str | None) -> None:
    """Serve the web console for the cluster behind -n: clusters, topics, consumer groups and their lag,
    messages, traces, producers. Binds to 127.0.0.1:8080 unless told otherwise; any other address needs a
    users file (see `mq dashboard hash-password`)."""
    if ctx.invoked_subcommand is not None:
        return
    import dataclasses
    import importlib.util

    from mq.config import DashboardConfig, from_mapping, load_yaml

    missing = [m for m in ("starlette", "uvicorn", "jinja2", "multipart") if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(f"{INSTALL_HINT}; missing: {', '.join(missing)}")
    cfg = from_mapping(DashboardConfig, load_yaml(config_file), source=config_file) if config_file else DashboardConfig()
    over = {k: v for k, v in {"host": host, "listen_port": port, "users_file": users_file,
                              "trace_report_dir": trace_report_dir}.items() if v is not None}
    cfg = dataclasses.replace(cfg, **over)
    if not cfg.access_key and ctx.obj.access_key:
        cfg = dataclasses.replace(cfg, access_key=ctx.obj.access_key, secret_key=ctx.obj.secret_key)
    namesrv = ctx.obj.namesrv if _namesrv_given(ctx) or not cfg.namesrv_addr else cfg.namesrv_addr
    addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
    from mq.dashboard.server import serve

    click.echo(f"mq dashboard on http://{cfg.host if ':' not in cfg.host else f'[{cfg.host}]'}:{cfg.listen_port} "
               f"for name server {';'.join(addrs)}" + (" (login required)" if cfg.users_file else ""), err=True)
    serve(cfg, addrs)


def _namesrv_given(ctx: click.Context) -> bool:
    """Whether -n (before or after the command) or $NAMESRV_ADDR names the name server: it then wins over the
    config file's namesrvAddr."""
    import os

    from click.core import ParameterSource

    root = ctx.find_root()
    return (root.get_parameter_source("namesrv") is not ParameterSource.DEFAULT
            or ctx.obj.namesrv != root.params.get("namesrv") or bool(os.environ.get("NAMESRV_ADDR")))


@dashboard.command("hash-password")
@click.option("--password", default=None, help="The password (default: asked for, not echoed).")
def hash_password(password: str | None) -> None:
    """Print the hash of a password for the users file (scrypt)."""
    from mq.dashboard.auth import hash_password as make

    if password is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.UsageError("the password is empty")
    click.echo(make(password))
