"""RocketMQ 5's metrics settings in broker.conf / namesrv YAML, and their checks."""

from __future__ import annotations

import pytest

from mq.config import NamesrvConfig, broker_configs_from_mapping, from_mapping
from mq.daemon.metrics.service import exporter_type
from mq.daemon.runtime import DaemonError


def test_broker_keys_use_rocketmq_5_spelling():
    bcfg, _ = broker_configs_from_mapping({"metricsExporterType": "PROM", "metricsPromExporterHost": "0.0.0.0",
                                           "metricsPromExporterPort": "9557", "metricsLabel": "env:prod"})
    assert (bcfg.metrics_exporter_type, bcfg.metrics_prom_exporter_host, bcfg.metrics_prom_exporter_port,
            bcfg.metrics_label) == ("PROM", "0.0.0.0", 9557, "env:prod")
    default, _ = broker_configs_from_mapping({})
    assert (default.metrics_exporter_type, default.metrics_prom_exporter_port) == ("DISABLE", 5557)


def test_the_name_server_has_its_own_port_default():
    cfg = from_mapping(NamesrvConfig, {"metricsExporterType": "PROM"})
    assert (cfg.metrics_exporter_type, cfg.metrics_prom_exporter_port, cfg.metrics_prom_exporter_host) == \
        ("PROM", 5558, "")
    assert from_mapping(NamesrvConfig, {"metricsPromExporterPort": 6000}).metrics_prom_exporter_port == 6000


def test_exporter_types():
    assert exporter_type("PROM") == "PROM" and exporter_type("prom") == "PROM"
    assert exporter_type("") == "DISABLE" and exporter_type("DISABLE") == "DISABLE"
    for other in ("OTLP_GRPC", "LOG"):
        with pytest.raises(DaemonError, match=f"{other} is not supported here: use PROM"):
            exporter_type(other)
    with pytest.raises(DaemonError, match="must be PROM or DISABLE, not 'prometheus'"):
        exporter_type("prometheus")
