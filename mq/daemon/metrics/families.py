"""Metric families with the process's common labels in front: a thin layer over prometheus_client's.

``Families(common)`` makes ``Family`` objects for a ``Spec`` (``names.py``); ``Family.add(values, value)`` adds
one sample whose label values are the common ones, then the family's constant ones, then ``values``.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from mq.daemon.metrics import names as N

_KINDS = {N.COUNTER: CounterMetricFamily, N.GAUGE: GaugeMetricFamily, N.HISTOGRAM: HistogramMetricFamily}


class Family:
    __slots__ = ("family", "_prefix", "_histogram")

    def __init__(self, family: Any, prefix: list[str]) -> None:
        self.family = family
        self._prefix = prefix
        self._histogram = isinstance(family, HistogramMetricFamily)

    def add(self, values: Sequence[str] = (), value: float = 0.0, *, buckets: Sequence[tuple[str, float]] = (),
            sum_value: float = 0.0) -> None:
        labels = self._prefix + list(values) if values else self._prefix
        if self._histogram:
            self.family.add_metric(labels, buckets, sum_value)
        else:
            self.family.add_metric(labels, value)


class Families:
    def __init__(self, common: Iterable[tuple[str, str]]) -> None:
        pairs = list(common)
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a label is given twice: {', '.join(keys)}")
        self.keys = keys
        self.values = [v for _, v in pairs]

    def family(self, spec: N.Spec, labels: Sequence[str] = (),
               const: Sequence[tuple[str, str]] = ()) -> Family:
        names = self.keys + [k for k, _ in const] + list(labels)
        family = _KINDS[spec.kind](spec.name, spec.help, labels=names)
        return Family(family, self.values + [v for _, v in const])
