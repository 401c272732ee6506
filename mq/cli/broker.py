"""`mq broker start|stop`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mq.cli.common import daemon_options, stop_command


def default_store_dir() -> Path:
    from mq.daemon import runtime

    return runtime.mq_home() / "store"


def build_configs(config_file: Path | None, *, namesrv: str | None, host: str | None, port: int | None,
                  advertise: str | None, store: Path | None, broker_name: str | None, cluster: str | None,
                  broker_id: int | None, grpc_port: int | None = None):
    """(BrokerConfig, StoreConfig) from an optional broker.yaml / broker.conf plus command-line overrides."""
    import dataclasses

    from mq.config import BrokerConfig, StoreConfig, broker_configs_from_mapping, load_yaml

    base_store = StoreConfig(store_path_root_dir=str(default_store_dir()))
    if config_file:
        bcfg, scfg = broker_configs_from_mapping(load_yaml(config_file), source=str(config_file),
                                                 base_store=base_store)
    else:
        bcfg, scfg = BrokerConfig(), base_store
    over = {k: v for k, v in (("namesrv_addr", namesrv), ("host", host), ("listen_port", port),
                              ("broker_ip1", advertise), ("broker_name", broker_name),
                              ("broker_cluster_name", cluster), ("broker_id", broker_id),
                              ("grpc_server_port", grpc_port)) if v is not None}
    bcfg = dataclasses.replace(bcfg, **over)
    if store is not None:
        scfg = dataclasses.replace(scfg, store_path_root_dir=str(store))
    scfg = dataclasses.replace(scfg, store_path_root_dir=str(Path(scfg.store_path_root_dir).expanduser()))
    return bcfg, scfg


@click.group()
def broker() -> None:
    """Run or stop the broker."""


@broker.command("start")
@click.option("--namesrv", "namesrv", default=None,
              help="Name server address(es), ';'-separated.  [default: $NAMESRV_ADDR or 127.0.0.1:9876]")
@click.option("--host", default=None, help="Address to listen on.  [default: 127.0.0.1]")
@click.option("--port", type=int, default=None, help="Port to listen on.  [default: 10911]")
@click.option("--advertise", default=None, help="IPv4 address clients reach the broker at.  [default: --host]")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Store root directory.  [default: ~/.mq/store]")
@click.option("--broker-name", default=None, help="Broker name.  [default: broker-a]")
@click.option("--cluster", default=None, help="Cluster name.  [default: DefaultCluster]")
@click.option("--broker-id", type=int, default=None, help="0 = master.  [default: 0]")
@click.option("--grpc-port", type=int, default=None,
              help="gRPC endpoint port for RocketMQ 5.x clients (grpcServerPort); -1: none.  [default: 8081]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="YAML or broker.conf file with RocketMQ keys (brokerName, listenPort, storePathRootDir, ...).")
@daemon_options("broker")
@click.pass_context
def start(ctx: click.Context, namesrv: str | None, host: str | None, port: int | None, advertise: str | None,
          store: Path | None, broker_name: str | None, cluster: str | None, broker_id: int | None,
          grpc_port: int | None, config_file: Path | None, daemon: bool, pid_file: Path | None, log_file: Path | None,
          log_level: str) -> None:
    """Start the broker (foreground unless --daemon)."""
    from mq.daemon import runtime

    if namesrv is None and not (config_file and _file_sets_namesrv(config_file)):
        namesrv = getattr(ctx.obj, "namesrv", None) or "127.0.0.1:9876"
    bcfg, scfg = build_configs(config_file, namesrv=namesrv, host=host, port=port, advertise=advertise,
                               store=store, broker_name=broker_name, cluster=cluster, broker_id=broker_id,
                               grpc_port=grpc_port)
    pid_file = pid_file or runtime.default_pid_file("broker")
    existing = runtime.running_pid(pid_file)
    if existing is not None:
        raise runtime.DaemonError(f"a broker is already running (pid {existing}, pid file {pid_file})")

    if daemon:
        argv = [sys.executable, "-m", "mq.cli.main", "broker", "start", "--namesrv", bcfg.namesrv_addr,
                "--host", bcfg.host, "--port", str(bcfg.listen_port), "--store", scfg.store_path_root_dir,
                "--broker-name", bcfg.broker_name, "--cluster", bcfg.broker_cluster_name, "--broker-id",
                str(bcfg.broker_id), "--grpc-port", str(bcfg.grpc_server_port), "--pid-file", str(pid_file),
                "--log-level", log_level]
        if bcfg.broker_ip1:
            argv += ["--advertise", bcfg.broker_ip1]
        if config_file:
            argv += ["--config", str(config_file)]
        pid, log_file = runtime.start_detached(argv, kind="broker", host=bcfg.host, port=bcfg.listen_port,
                                               pid_file=pid_file, log_file=log_file)
        click.echo(f"broker {bcfg.broker_name} started: {bcfg.advertised_host}:{bcfg.listen_port} (pid {pid}, "
                   f"store {scfg.store_path_root_dir}, log {log_file})")
        return

    from mq.daemon.broker.controller import BrokerController

    runtime.setup_logging(log_level)
    runtime.serve_in_foreground(
        lambda: BrokerController(bcfg, store_config=scfg), pid_file=pid_file,
        banner=lambda ctrl: (f"broker {bcfg.broker_name} listening on {ctrl.address}"
                             f"{grpc_banner(ctrl)}, store {scfg.store_path_root_dir}, name servers "
                             f"{bcfg.namesrv_addr or '(none)'}"
                             + (f", metrics {ctrl.metrics.url}" if ctrl.metrics is not None else "")
                             + " (Ctrl-C to stop)"))


def grpc_banner(ctrl) -> str:
    """", gRPC host:port" for a broker serving RocketMQ 5.x clients, else ""."""
    grpc = getattr(ctrl, "grpc", None)
    return f", gRPC (RocketMQ 5.x clients) {grpc.advertised_address}" if grpc is not None else ""


def _file_sets_namesrv(path: Path) -> bool:
    from mq.config import load_yaml

    return "namesrvAddr" in load_yaml(path)


stop = stop_command(broker, "broker", "broker", 30.0)
