"""The HTTP endpoint Prometheus scrapes: a WSGI application over prometheus_client's encoders, served from a thread.

``render.make_app`` answers as ``prometheus_client.make_wsgi_app`` does (the Prometheus text format, or
OpenMetrics when the scraper asks for it, ``?name[]=`` filtering), keeping the text of series that did not change
since the previous scrape; the standard library's WSGI server runs it in its own thread, so the event loop never
serves HTTP. Unlike ``prometheus_client.start_http_server`` (a thread per
connection, without bound), the server here bounds what an untrusted peer can hold:

- at most ``MAX_CONCURRENT`` requests are served at once; a connection beyond that is closed at once;
- a connection that sends nothing for ``REQUEST_TIMEOUT`` seconds is closed (no slow-loris thread pile-up);
- request lines and headers are read by ``http.server`` with its own limits (64 KiB line, 100 headers).

Answers are not gzipped, even to a scraper that accepts it: prometheus_client compresses at level 9, which for a
broker with a thousand topics (3 MiB of text) costs more CPU than rendering it, and that CPU is the broker's.

The collectors run in that thread: they read the broker's tables through snapshots (see ``broker.py``).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from socketserver import ThreadingMixIn
from typing import Any, Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry

from mq.daemon.metrics.render import make_app

log = logging.getLogger(__name__)

#: Requests served at once; more connections are closed.
MAX_CONCURRENT = 8
#: Seconds a connection may stay silent while its request is read or its answer written.
REQUEST_TIMEOUT = 10.0


class _QuietHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("metrics endpoint %s: " + format, self.client_address[0], *args)


class _BoundedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.debug("metrics endpoint: %d requests in progress, connection from %s closed", MAX_CONCURRENT,
                      client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _server_class(host: str, port: int) -> type[_BoundedServer]:
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    return type("MetricsServer", (_BoundedServer,), {"address_family": family})


class MetricsEndpoint:
    """``/metrics`` of ``collectors`` on ``host:port`` (port 0: a free one), served by a daemon thread."""

    def __init__(self, collectors: Iterable[Any], host: str, port: int,
                 on_rendered: Callable[[float, float], None] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            self.registry.register(collector)
        self.host = host
        self.requested_port = port
        self._on_rendered = on_rendered
        #: the endpoint's ``render.Exposition`` once started (its counters tell what the last scrape rendered)
        self.exposition: Any = None
        self._server: _BoundedServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_port if self._server is not None else 0

    @property
    def url(self) -> str:
        host = self.host or "0.0.0.0"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> None:
        """Bind (OSError when the address is taken) and serve in a thread."""
        cls = _server_class(self.host, self.requested_port)
        app = make_app(self.registry, self._on_rendered)
        self.exposition = app.exposition
        self._server = make_server(self.host, self.requested_port, app, cls, handler_class=_QuietHandler)
        # no poll interval: the serve loop sleeps in select until a connection comes (``stop`` sends one), instead
        # of taking the interpreter lock from the event loop several times a second
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": None},
                                        name=f"metrics-http-{self.port}", daemon=True)
        self._thread.start()
        log.info("metrics endpoint serving %s", self.url)

    def stop(self) -> None:
        """Stop serving and close the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        stopper = threading.Thread(target=server.shutdown, name="metrics-http-stop", daemon=True)
        stopper.start()  # sets the loop's stop flag, then waits for the loop to see it
        deadline = time.monotonic() + 5.0
        while stopper.is_alive() and time.monotonic() < deadline:
            _wake(server)
            stopper.join(0.05)
        server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None


def _wake(server: _BoundedServer) -> None:
    """Connect to ``server`` and hang up, so that its serve loop comes out of select."""
    host, port = server.server_address[:2]
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except OSError:
        pass
