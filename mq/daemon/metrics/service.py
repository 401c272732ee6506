"""Switching a daemon's metrics on: the settings, the request observer, the collectors and the HTTP endpoint.

``broker_metrics(controller)`` / ``namesrv_metrics(server)`` read RocketMQ 5's settings from the daemon's config
and return None when ``metricsExporterType`` is ``DISABLE``. Otherwise they install the request observer on the
daemon's remoting server at once (so it times requests from the first one) and return a ``MetricsService``
whose ``start`` binds ``metricsPromExporterHost:metricsPromExporterPort`` (empty host: the daemon's bind
address) and ``stop`` closes it. ``OTLP_GRPC`` and ``LOG``, RocketMQ's other exporters, are refused with a
message naming what is supported.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Iterable

from mq.daemon.metrics import names as N
from mq.daemon.metrics.exporter import MetricsEndpoint
from mq.daemon.metrics.process import ProcessMetrics
from mq.daemon.metrics.rpc import RpcMetrics
from mq.daemon.runtime import DaemonError, describe_bind_error

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController
    from mq.daemon.namesrv.server import NamesrvServer

log = logging.getLogger(__name__)

DISABLE, PROM = "DISABLE", "PROM"
_OTHER_EXPORTERS = ("OTLP_GRPC", "LOG")


def exporter_type(value: str) -> str:
    """``metricsExporterType`` checked: DISABLE or PROM (any case); DaemonError for anything else."""
    kind = (value or DISABLE).strip().upper()
    if kind in (DISABLE, PROM):
        return kind
    if kind in _OTHER_EXPORTERS:
        raise DaemonError(f"metricsExporterType {kind} is not supported here: use PROM (a Prometheus endpoint) or "
                          f"DISABLE")
    raise DaemonError(f"metricsExporterType must be PROM or DISABLE, not {value!r}")


class MetricsService:
    """One daemon's metrics endpoint. ``collector`` is the daemon's own collector (tests read it directly)."""

    def __init__(self, rpc: RpcMetrics, collector: Any, host: str, port: int) -> None:
        self.rpc = rpc
        self.collector = collector
        # a collector that reports the scrapes' times is told of each one the endpoint serves
        self.endpoint = MetricsEndpoint(_collectors(collector), host, port, getattr(collector, "rendered", None))

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def port(self) -> int:
        return self.endpoint.port

    async def start(self) -> None:
        try:
            self.endpoint.start()
        except OSError as exc:
            raise DaemonError("metrics endpoint (metricsPromExporterPort): " + describe_bind_error(
                exc, self.endpoint.host, self.endpoint.requested_port)) from None

    async def stop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.endpoint.stop)


def _collectors(own: Any) -> Iterable[Any]:
    return (own, ProcessMetrics())


def _labels_checked(make: Any, source: Any) -> None:
    try:
        make(source)
    except ValueError as exc:
        raise DaemonError(str(exc)) from None


def broker_metrics(controller: "BrokerController") -> MetricsService | None:
    from mq.daemon.metrics.broker import BrokerCollector, broker_labels

    cfg = controller.config
    if exporter_type(cfg.metrics_exporter_type) == DISABLE:
        return None
    _labels_checked(broker_labels, controller)
    rpc = RpcMetrics()
    controller.server.registry.observer = rpc
    return MetricsService(rpc, BrokerCollector(controller, rpc), cfg.metrics_prom_exporter_host or cfg.host,
                          cfg.metrics_prom_exporter_port)


def namesrv_metrics(server: "NamesrvServer") -> MetricsService | None:
    from mq.daemon.metrics.namesrv import NamesrvCollector

    cfg = server.config
    if exporter_type(cfg.metrics_exporter_type) == DISABLE:
        return None
    _labels_checked(N.parse_metrics_label, cfg.metrics_label)
    rpc = RpcMetrics()
    server.server.registry.observer = rpc
    return MetricsService(rpc, NamesrvCollector(server, rpc), cfg.metrics_prom_exporter_host or cfg.host,
                          cfg.metrics_prom_exporter_port)
