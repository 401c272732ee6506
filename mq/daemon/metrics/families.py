"""Metric families with the process's common labels in front, whose samples are kept from scrape to scrape.

``Families(common)`` makes, once per scrape and ``Spec`` (``names.py``), a ``Family``: a prometheus_client
``Metric`` of the spec's kind, as ``CounterMetricFamily`` / ``GaugeMetricFamily`` / ``HistogramMetricFamily``
would make it. ``Family.add(values, value)`` adds one series (one sample; ``add_histogram``: a histogram's
buckets, ``_count`` and ``_sum``) whose label values are the common ones, then the family's constant ones, then
``values``.

A broker with thousands of topics has tens of thousands of series, and most do not change from one scrape to the
next. So a series whose label values and value are those of the same family's previous scrape reuses that
scrape's samples: the same tuple of ``Sample`` objects (``Family.series``), nothing built. The exposition
(``render.py``) keys its text on that tuple's identity, so an unchanged series is neither built nor rendered
again; a series whose value changed still reuses its label dicts (fewer objects for each scrape to allocate,
and the exposition rebuilds its lines from their kept label prefixes). Only the previous scrape is kept: a series
that is gone is forgotten at the next scrape.
"""

from __future__ import annotations

from math import copysign
from typing import Iterable, Sequence

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from mq.daemon.metrics import names as N

#: one series: its label values (the key), what it was built from (the signature), its samples
_Kept = dict[tuple[str, ...], tuple[object, tuple[Sample, ...]]]


def _signature(value: float) -> object:
    """What decides a value's text: equal values render alike, but for 0.0 and -0.0."""
    return value if value else (value, copysign(1.0, value))


class Family(Metric):
    """One family's samples of one scrape, plus ``series``: the samples grouped by series, in order."""

    def __init__(self, spec: N.Spec, labelnames: tuple[str, ...], prefix: tuple[str, ...], previous: _Kept) -> None:
        name = spec.name
        if spec.kind == N.COUNTER and name.endswith("_total"):
            name = name[:-6]  # as CounterMetricFamily: the family is named without it, its samples with it
        super().__init__(name, spec.help, spec.kind)
        self._labelnames = labelnames
        self._prefix = prefix
        self._previous = previous
        #: label values -> (signature, samples) of this scrape: the next scrape's ``previous``
        self.kept: _Kept = {}
        self.series: list[tuple[Sample, ...]] = []
        self._sample_name = self.name + "_total" if spec.kind == N.COUNTER else self.name

    def _keep(self, key: tuple[str, ...], signature: object, samples: tuple[Sample, ...]) -> None:
        self.kept[key] = (signature, samples)
        self.series.append(samples)
        self.samples.extend(samples)

    def _labels(self, values: tuple[str, ...]) -> dict[str, str]:
        return dict(zip(self._labelnames, self._prefix + values))

    def add(self, values: Sequence[str] = (), value: float = 0.0) -> None:
        """One sample of a counter or a gauge."""
        key = tuple(values)
        signature = _signature(value)
        old = self._previous.get(key)
        if old is not None and old[0] == signature:
            self._keep(key, signature, old[1])
            return
        # a series' labels never change: a changed value reuses the previous sample's (never mutated) dict
        labels = old[1][0].labels if old is not None else self._labels(key)
        self._keep(key, signature, (Sample(self._sample_name, labels, value),))

    def add_histogram(self, values: Sequence[str], les: Sequence[str], counts: Sequence[float],
                      sum_value: float) -> None:
        """One histogram: ``counts[i]`` observations fell in bucket ``les[i]`` (not cumulative; the last ``le`` is
        ``+Inf``), adding up to ``sum_value``."""
        key = tuple(values)
        signature = (tuple(les), tuple(counts), _signature(sum_value))
        old = self._previous.get(key)
        if old is not None and old[0] == signature:
            self._keep(key, signature, old[1])
            return
        if old is not None and old[0][0] == signature[0]:  # the same buckets: their label dicts are reused
            bucket_labels = [s.labels for s in old[1][:-2]]
            labels = old[1][-1].labels
        else:
            labels = self._labels(key)
            bucket_labels = [{**labels, "le": le} for le in les]
        bucket = self.name + "_bucket"
        samples = []
        total = 0
        for le_labels, n in zip(bucket_labels, counts):
            total += n
            samples.append(Sample(bucket, le_labels, total))
        samples.append(Sample(self.name + "_count", labels, total))
        samples.append(Sample(self.name + "_sum", labels, sum_value))
        self._keep(key, signature, tuple(samples))


class Families:
    """The common labels, and the series each family kept at the previous scrape."""

    def __init__(self, common: Iterable[tuple[str, str]]) -> None:
        pairs = list(common)
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a label is given twice: {', '.join(keys)}")
        self.keys = keys
        self.values = [v for _, v in pairs]
        self._last: dict[str, Family] = {}

    def family(self, spec: N.Spec, labels: Sequence[str] = (),
               const: Sequence[tuple[str, str]] = ()) -> Family:
        """This scrape's family of ``spec`` (one per spec and scrape: the previous one's series are reused)."""
        names = tuple(self.keys + [k for k, _ in const] + list(labels))
        prefix = tuple(self.values + [v for _, v in const])
        last = self._last.get(spec.name)
        previous = last.kept if last is not None and last._labelnames == names and last._prefix == prefix else {}
        fam = Family(spec, names, prefix, previous)
        self._last[spec.name] = fam
        return fam
