"""The metrics endpoint's lifecycle: it serves scrapes while idle in between, and stops at once (its serve loop
sleeps in select with no poll interval; ``stop`` wakes it), on every kind of bind address."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest

from mq.daemon.metrics.exporter import MetricsEndpoint
from mq.daemon.metrics.process import ProcessMetrics


def _loopback(host: str) -> str:
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "[::1]", "::1": "[::1]"}.get(host, host)


@pytest.mark.parametrize("host", ["127.0.0.1", "", "::1"])
def test_serves_then_stops_at_once(host):
    if ":" in host and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    endpoint = MetricsEndpoint([ProcessMetrics()], host, 0)
    try:
        endpoint.start()
    except OSError as exc:
        pytest.skip(f"cannot bind {host!r} here: {exc}")
    url = f"http://{_loopback(host)}:{endpoint.port}/metrics"
    for _ in range(2):  # the loop goes back to sleep after a scrape and still wakes for the next
        with urllib.request.urlopen(url, timeout=5) as r:
            assert b"process_cpu_seconds_total" in r.read()
        time.sleep(0.3)
    port = endpoint.port
    threads = threading.active_count()
    t0 = time.monotonic()
    endpoint.stop()
    assert time.monotonic() - t0 < 1.0
    assert threading.active_count() < threads  # the serve thread is gone
    with pytest.raises(OSError):
        socket.create_connection((_loopback(host).strip("[]"), port), timeout=1).close()
    endpoint.stop()  # twice is harmless
