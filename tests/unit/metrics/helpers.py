"""Reading what a collector exposes: the Prometheus text format parsed back by prometheus_client's parser."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families


class Exposed:
    """Samples of one exposition: ``value(name, **labels)`` is the one sample matching those labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]

    def find(self, name: str, **labels: str) -> list[Any]:
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        found = self.find(name, **labels)
        assert len(found) == 1, f"{name} {labels}: {len(found)} samples\n{self.text}"
        return found[0].value

    def has(self, name: str, **labels: str) -> bool:
        return bool(self.find(name, **labels))


def expose(collector: Any) -> Exposed:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return Exposed(generate_latest(registry).decode())


class FamiliesCollector:
    """A collector of whatever ``fn(families)`` yields."""

    def __init__(self, fn, families) -> None:
        self.fn, self.families = fn, families

    def collect(self):
        return list(self.fn(self.families))
