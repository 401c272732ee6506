"""`mq namesrv start|stop`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mq.cli.common import daemon_options, stop_command


@click.group()
def namesrv() -> None:
    """Run or stop the name server."""


@namesrv.command("start")
@click.option("--host", default=None, help="Address to listen on.  [default: 127.0.0.1]")
@click.option("--port", type=int, default=None, help="Port to listen on.  [default: 9876]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="YAML file with RocketMQ namesrv keys (listenPort, ...).")
@daemon_options("namesrv")
def start(host: str | None, port: int | None, config_file: Path | None, daemon: bool, pid_file: Path | None,
          log_file: Path | None, log_level: str) -> None:
    """Start the name server (foreground unless --daemon)."""
    import dataclasses

    from mq.config import NamesrvConfig, from_mapping, load_yaml
    from mq.daemon import runtime

    cfg = from_mapping(NamesrvConfig, load_yaml(config_file), source=str(config_file)) if config_file \
        else NamesrvConfig()
    overrides = {k: v for k, v in (("host", host), ("listen_port", port)) if v is not None}
    cfg = dataclasses.replace(cfg, **overrides)
    pid_file = pid_file or runtime.default_pid_file("namesrv")

    existing = runtime.running_pid(pid_file)
    if existing is not None:
        raise runtime.DaemonError(f"a name server is already running (pid {existing}, pid file {pid_file})")

    if daemon:
        argv = [sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--host", cfg.host, "--port",
                str(cfg.listen_port), "--pid-file", str(pid_file), "--log-level", log_level]
        if config_file:
            argv += ["--config", str(config_file)]
        pid, log_file = runtime.start_detached(argv, kind="namesrv", host=cfg.host, port=cfg.listen_port,
                                               pid_file=pid_file, log_file=log_file)
        click.echo(f"name server started: {cfg.host}:{cfg.listen_port} (pid {pid}, log {log_file})")
        return

    from mq.daemon.namesrv.server import NamesrvServer

    runtime.setup_logging(log_level)
    runtime.serve_in_foreground(
        lambda: NamesrvServer(cfg), pid_file=pid_file,
        banner=lambda server: (f"name server listening on {cfg.host}:{server.port}"
                               + (f", metrics {server.metrics.url}" if server.metrics is not None else "")
                               + " (Ctrl-C to stop)"))


stop = stop_command(namesrv, "namesrv", "name server", 15.0)
