"""`mq up`: a name server and a broker on embedded defaults, in the foreground, for a newcomer.

Both serve Prometheus metrics by default (RocketMQ 5's ``metricsExporterType: PROM``): the broker on
``--metrics-port`` (5557, RocketMQ's ``metricsPromExporterPort``), the name server on ``--namesrv-metrics-port``
(5558); ``--no-metrics`` turns both off. The banner names every address.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address both daemons listen on.")
@click.option("--namesrv-port", type=int, default=9876, show_default=True)
@click.option("--broker-port", type=int, default=10911, show_default=True)
@click.option("--grpc-port", type=int, default=8081, show_default=True,
              help="gRPC endpoint for RocketMQ 5.x clients (their access point); -1: none.")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Store root directory.  [default: ~/.mq/store]")
@click.option("--metrics-port", type=int, default=5557, show_default=True,
              help="Port of the broker's Prometheus endpoint (metricsPromExporterPort).")
@click.option("--namesrv-metrics-port", type=int, default=5558, show_default=True,
              help="Port of the name server's Prometheus endpoint.")
@click.option("--metrics/--no-metrics", default=True, show_default=True,
              help="Serve Prometheus metrics (metricsExporterType PROM).")
@click.option("--log-level", default="INFO", show_default=True)
def up(host: str, namesrv_port: int, broker_port: int, grpc_port: int, store: Path | None, metrics_port: int,
       namesrv_metrics_port: int, metrics: bool, log_level: str) -> None:
    """Run a name server and a broker in the foreground; Ctrl-C stops both cleanly."""
    import dataclasses

    from mq.cli.broker import build_configs, grpc_banner
    from mq.config import NamesrvConfig
    from mq.daemon import runtime
    from mq.daemon.namesrv.server import NamesrvServer

    runtime.setup_logging(log_level)
    exporter = "PROM" if metrics else "DISABLE"
    ns_cfg = dataclasses.replace(NamesrvConfig(), host=host, listen_port=namesrv_port,
                                 metrics_exporter_type=exporter, metrics_prom_exporter_port=namesrv_metrics_port)

    async def main(stop) -> None:
        from mq.daemon.broker.controller import BrokerController

        server = NamesrvServer(ns_cfg)
        await server.start()
        ctrl = None
        try:
            bcfg, scfg = build_configs(None, namesrv=f"{host}:{server.port}", host=host, port=broker_port,
                                       advertise=None, store=store, broker_name=None, cluster=None,
                                       broker_id=None, grpc_port=grpc_port)
            bcfg = dataclasses.replace(bcfg, metrics_exporter_type=exporter,
                                       metrics_prom_exporter_port=metrics_port)
            ctrl = BrokerController(bcfg, store_config=scfg)
            await ctrl.start()
            if ctrl.grpc is not None:
                server.server.registry.foreign_protocol_hint = (
                    f"RocketMQ 5.x gRPC clients connect to the broker's gRPC endpoint {ctrl.grpc.advertised_address}")
            banner = (f"name server {host}:{server.port}, {bcfg.broker_name} {ctrl.address}{grpc_banner(ctrl)}, "
                      f"store {scfg.store_path_root_dir}")
            if ctrl.metrics is not None and server.metrics is not None:
                banner += f"; metrics {ctrl.metrics.url} (broker), {server.metrics.url} (name server)"
            runtime.freeze_started_heap()
            click.echo(banner + " (Ctrl-C to stop)", err=True)
            await stop.wait()
        finally:
            if ctrl is not None:
                await ctrl.stop()
            await server.stop()

    runtime.run_until_signalled(main)
