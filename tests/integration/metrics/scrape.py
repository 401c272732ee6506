"""Fetching and reading a daemon's /metrics over HTTP (a uniquely named helper module)."""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


def fetch(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        return resp.read().decode()


class Scrape:
    """Samples of one scrape: ``value(name, **labels)`` is the single sample with those labels (0 if absent and
    ``default`` is given)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]

    def find(self, name: str, **labels: str) -> list[Any]:
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, default: float | None = None, **labels: str) -> float:
        found = self.find(name, **labels)
        if not found and default is not None:
            return default
        assert len(found) == 1, f"{name} {labels}: {len(found)} samples"
        return found[0].value


async def scrape(url: str) -> Scrape:
    import asyncio

    return Scrape(await asyncio.to_thread(fetch, url))
