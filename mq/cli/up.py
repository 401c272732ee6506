"""`mq up`: a local system on embedded defaults, in the foreground, for a newcomer."""

from __future__ import annotations

import click


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address both daemons listen on.")
@click.option("--namesrv-port", type=int, default=9876, show_default=True)
@click.option("--log-level", default="INFO", show_default=True)
def up(host: str, namesrv_port: int, log_level: str) -> None:
    """Run a name server (and, once it exists, a broker) in the foreground; Ctrl-C stops them."""
    import dataclasses

    from mq.config import NamesrvConfig
    from mq.daemon import runtime
    from mq.daemon.namesrv.server import NamesrvServer

    runtime.setup_logging(log_level)
    cfg = dataclasses.replace(NamesrvConfig(), host=host, listen_port=namesrv_port)

    async def main(stop) -> None:
        server = NamesrvServer(cfg)
        await server.start()
        try:
            click.echo(f"name server {host}:{server.port}", err=True)
            click.echo("the broker is not part of this build yet: running the name server alone "
                       "(Ctrl-C to stop)", err=True)
            await stop.wait()
        finally:
            await server.stop()

    runtime.run_until_signalled(main)
