"""The exposition that keeps unchanged series' text: byte for byte what prometheus_client renders, scrape after
scrape, as series change, appear and go, in both formats; and the WSGI application's answers."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from mq.daemon.metrics import names as N
from mq.daemon.metrics.families import Families
from mq.daemon.metrics.render import Exposition, make_app

GAUGE = N.Spec("t_gauge", N.GAUGE, 'A gauge, "quoted" \\ and\nnewline')
COUNTER = N.Spec("t_messages_total", N.COUNTER, "A counter")
HIST = N.Spec("t_size", N.HISTOGRAM, "A histogram")
LES = ["1.0", "10.0", "+Inf"]
OPENMETRICS = "application/openmetrics-text; version=1.0.0"

label_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
state_st = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), label_text),
    st.tuples(st.integers(0, 3), st.floats(allow_nan=False, width=32), st.lists(st.integers(0, 5), min_size=3,
                                                                                 max_size=3)),
    max_size=6)


class StateCollector:
    """Three families over ``state``: (topic, group) -> (counter, gauge, histogram bucket counts)."""

    def __init__(self) -> None:
        self.families = Families([("cluster", 'c"1'), ("node_id", "n\\1")])
        self.state: dict[tuple[str, str], tuple[int, float, list[int]]] = {}
        self.extra: list[Metric] = []

    def collect(self) -> list[Any]:
        f = self.families
        counter = f.family(COUNTER, ("topic", "group"))
        gauge = f.family(GAUGE, ("topic", "group"), const=(("kind", "x"),))
        hist = f.family(HIST, ("topic", "group"))
        for key, (n, g, counts) in sorted(self.state.items()):
            counter.add(key, n)
            gauge.add(key, g)
            hist.add_histogram(key, LES, counts, float(sum(counts)))
        return [counter, gauge, hist, *self.extra]


def registry_of(collector: Any) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def frozen(registry: CollectorRegistry) -> Any:
    """A registry answering the metrics of one collection (the library's render of the same samples)."""
    metrics = list(registry.collect())

    class Frozen:
        def collect(self) -> list[Any]:
            return metrics

    return Frozen()


@settings(max_examples=150, deadline=None)
@given(st.lists(state_st, min_size=1, max_size=5))
def test_each_scrape_is_what_the_library_renders(states):
    collector = StateCollector()
    registry = registry_of(collector)
    exposition = Exposition(registry)
    for accept in ("", OPENMETRICS):
        encoder, content_type = choose_encoder(accept)
        for state in states:
            collector.state = state
            ours = exposition.render(encoder, content_type)
            fresh = StateCollector()  # nothing kept from earlier scrapes
            fresh.state = state
            assert ours == encoder(registry_of(fresh)), (accept, state)


def test_unchanged_series_are_not_rendered_again_and_changed_ones_are():
    collector = StateCollector()
    collector.state = {("t1", "g1"): (1, 0.5, [1, 0, 0]), ("t2", "g1"): (2, 1.5, [0, 1, 0])}
    registry = registry_of(collector)
    exposition = Exposition(registry)
    encoder, content_type = choose_encoder("")
    exposition.render(encoder, content_type)
    assert (exposition.rendered, exposition.reused) == (6, 0)
    exposition.render(encoder, content_type)
    assert (exposition.rendered, exposition.reused) == (0, 6)
    collector.state[("t2", "g1")] = (3, 1.5, [0, 1, 0])  # the counter moves
    collector.state[("t3", "g2")] = (0, 0.0, [0, 0, 0])  # a new pair
    text = exposition.render(encoder, content_type)
    # the new pair's three series by the encoder, the moved counter from its line prefix and its new value
    assert (exposition.rendered, exposition.reused, exposition.relabelled) == (3, 5, 1)
    assert text == generate_latest(registry)
    assert b't_messages_total{cluster="c\\"1",group="g1",node_id="n\\\\1",topic="t2"} 3.0\n' in text
    del collector.state[("t1", "g1")]
    text = exposition.render(encoder, content_type)
    assert b'topic="t1"' not in text and text == generate_latest(registry)


def test_other_collectors_are_rendered_as_the_library_renders_them():
    collector = StateCollector()
    collector.state = {("t1", "g1"): (1, 0.5, [1, 0, 0])}
    registry = registry_of(collector)
    registry.register(ProcessCollector(registry=None))
    exposition = Exposition(registry)
    for accept in ("", OPENMETRICS):
        encoder, content_type = choose_encoder(accept)
        snapshot = frozen(registry)
        registry_now = CollectorRegistry(auto_describe=False)
        registry_now.register(snapshot)
        exposition.registry = registry_now
        assert exposition.render(encoder, content_type) == encoder(registry_now)


def call(app: Any, method: str = "GET", path: str = "/metrics", query: str = "", accept: str = "") -> tuple[str,
                                                                                                          dict, bytes]:
    got: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        got["status"], got["headers"] = status, dict(headers)

    body = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "HTTP_ACCEPT": accept,
                         "wsgi.input": io.BytesIO()}, start_response))
    return got["status"], got["headers"], body


def test_the_application_answers_as_prometheus_clients_does():
    collector = StateCollector()
    collector.state = {("t1", "g1"): (1, 0.5, [1, 0, 0])}
    registry = registry_of(frozen(registry_of(collector)))
    app = make_app(registry)
    status, headers, body = call(app)
    assert status == "200 OK" and headers["Content-Type"].startswith("text/plain")
    assert body == generate_latest(registry)
    status, headers, body = call(app, accept=OPENMETRICS)
    assert headers["Content-Type"].startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")
    status, headers, body = call(app, query="name[]=t_gauge")
    assert b"t_gauge{" in body and b"t_messages_total" not in body
    assert call(app, method="POST")[0].startswith("405")
    assert call(app, method="OPTIONS")[1] == {"Allow": "OPTIONS,GET"}
    assert call(app, path="/favicon.ico")[2] == b""


def test_series_that_go_take_their_line_prefixes_with_them():
    collector = StateCollector()
    registry = registry_of(collector)
    exposition = Exposition(registry)
    encoder, content_type = choose_encoder("")
    collector.state = {(f"t{i}", "g"): (i, float(i), [i, 0, 1]) for i in range(200)}
    exposition.render(encoder, content_type)
    collector.state = {("t7", "g"): (8, 8.5, [7, 1, 1])}  # one survivor, every value moved
    assert exposition.render(encoder, content_type) == generate_latest(registry)
    assert exposition.relabelled == 3 and exposition.rendered == 0
    kept = exposition._kept[content_type]
    assert all(len(prefixes) <= 1 for _header, _texts, prefixes in kept.values())
    collector.state = {("t7", "g"): (9, 8.5, [7, 1, 1]), ("t8", "g"): (1, 1.0, [0, 0, 0])}
    assert exposition.render(encoder, content_type) == generate_latest(registry)
