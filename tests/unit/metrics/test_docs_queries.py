"""The Grafana dashboard and the alert rules in docs/ query only metrics the daemons export (or Prometheus's
own ``up`` and prometheus_client's ``process_*``), and their templating and labels exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from mq.daemon.metrics import names as N

DOCS = Path(__file__).resolve().parents[3] / "docs"
FUNCTIONS = {"sum", "max", "min", "count", "rate", "deriv", "topk", "histogram_quantile", "by", "on", "and",
             "or", "unless", "label_values", "avg", "irate", "increase", "delta", "absent"}


def exported() -> set[str]:
    out = {"up", "process_cpu_seconds_total", "process_resident_memory_bytes"}
    for spec in (v for v in vars(N).values() if isinstance(v, N.Spec)):
        out.add(spec.name)
        if spec.kind == N.HISTOGRAM:
            out |= {spec.name + "_bucket", spec.name + "_sum", spec.name + "_count"}
    return out


def metric_names(expr: str) -> set[str]:
    expr = re.sub(r"^label_values\((.*),\s*[a-zA-Z_]+\s*\)$", r"\1", expr)  # its second argument is a label
    expr = re.sub(r"\{[^}]*\}", "{}", expr)          # label matchers
    expr = re.sub(r"\[[^\]]*\]", "[]", expr)          # ranges
    expr = re.sub(r"\b(by|on|without|ignoring)\s*\([^)]*\)", "", expr)
    expr = re.sub(r'"[^"]*"', "", expr)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {w for w in words if w not in FUNCTIONS and not w.startswith("__") and "_" in w}


def dashboard_exprs() -> list[str]:
    d = json.loads((DOCS / "grafana" / "mq-dashboard.json").read_text())
    exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in d["templating"]["list"] if v["type"] == "query"]
    return exprs


def rule_exprs() -> list[str]:
    doc = yaml.safe_load((DOCS / "prometheus" / "mq-alerts.yml").read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def test_every_queried_metric_is_exported():
    known = exported()
    for expr in dashboard_exprs() + rule_exprs():
        unknown = metric_names(expr) - known
        assert not unknown, f"{expr}: {unknown}"


def test_dashboard_shape():
    d = json.loads((DOCS / "grafana" / "mq-dashboard.json").read_text())
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    titles = {p["title"] for p in d["panels"] if p["type"] == "row"}
    assert {"Cluster", "Topics", "Consumer groups", "Store", "Replication"} <= titles
    variables = {v["name"] for v in d["templating"]["list"]}
    for p in d["panels"]:
        for t in p.get("targets", []):
            used = set(re.findall(r"\$([a-z_]+)", t["expr"])) - {"__rate_interval"}
            assert used <= variables, (p["title"], used)
            assert t["datasource"]["uid"] == "${datasource}"
