"""Fixtures of the web console's browser tests: a cluster (mq's own daemons, or RocketMQ 4.9's name server and
broker where ``$MQ_JAVA_BROKER_CLASSPATH`` is set), the console run as ``mq dashboard`` in its own process, and
a headless Chromium driven by Playwright.

    target         module-scoped, parametrized "mq" / "rocketmq": ``Target(kind, namesrv, broker_addr)``
    console        module-scoped: the console for ``target`` (``console.url``), refreshing every second
    page           a fresh browser page (its own cookies) per test
    shot(page, n)  a screenshot of the page as docs/dashboard/<n>.png when $MQ_DASHBOARD_SCREENSHOTS names a
                   folder (taken against mq's daemons only)

Chromium is the system's (Debian ``chromium``, /usr/bin/chromium, or $MQ_CHROMIUM); without it or without the
``playwright`` package the tests skip with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.integration.broker_process import BrokerProcess, free_port

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REPO = Path(__file__).resolve().parents[2]


def chromium_path() -> str | None:
    for candidate in (os.environ.get("MQ_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def wait_port(port: int, proc: subprocess.Popen | None, timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"exited with {proc.returncode}: {log.read_text() if log else ''}")
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on {port} after {timeout} s: {log.read_text() if log else ''}")
            time.sleep(0.05)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Target:
    kind: str
    namesrv: str
    broker_addr: str
    cluster: str = "DefaultCluster"


class MqDaemons:
    """mq's name server and broker, each in its own process (``mq namesrv start``, ``mq broker start``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ns_port = free_port()
        self.namesrv = f"127.0.0.1:{self.ns_port}"
        self.ns_proc: subprocess.Popen | None = None
        self.broker = BrokerProcess(root / "broker", {"namesrvAddr": self.namesrv, "traceTopicEnable": "true",
                                                      "brokerName": "broker-a"})

    def start(self) -> None:
        log = self.root / "namesrv.log"
        self.ns_proc = subprocess.Popen(
            [sys.executable, "-m", "mq.cli.main", "namesrv", "start", "--port", str(self.ns_port)],
            stdout=open(log, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, MQ_HOME=str(self.root / "ns-home")))
        wait_port(self.ns_port, self.ns_proc, 30, log)
        self.broker.start()

    def stop(self) -> None:
        self.broker.stop()
        stop(self.ns_proc)


def wait_registered(namesrv: str, timeout: float = 30.0) -> None:
    """Until the name server lists a broker (a RocketMQ broker registers a moment after it listens)."""
    from mq.client.admin import MQAdmin
    from mq.errors import MQError
    from mq.client.sync import shared_loop

    async def brokers() -> int:
        async with MQAdmin([namesrv], timeout=2.0) as admin:
            return len((await admin.cluster_info()).broker_addr_table)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if shared_loop().run(brokers()):
                return
        except MQError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"no broker registered with {namesrv} within {timeout} s")


@contextlib.contextmanager
def mq_cluster(root: Path) -> Iterator[Target]:
    daemons = MqDaemons(root)
    daemons.start()
    try:
        wait_registered(daemons.namesrv)
        yield Target("mq", daemons.namesrv, daemons.broker.address)
    finally:
        daemons.stop()


@pytest.fixture(scope="module", params=["mq", "rocketmq"])
def target(request, tmp_path_factory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp(f"cluster-{request.param}")
    if request.param == "mq":
        with mq_cluster(root) as t:
            yield t
        return
    from tests.interop.java_broker import JavaBrokerUnavailable, JavaCluster

    cluster = JavaCluster(root, traceTopicEnable="true")
    try:
        cluster.start()
    except JavaBrokerUnavailable as exc:
        pytest.skip(f"RocketMQ 4.9 cluster unavailable: {exc}")
    try:
        wait_registered(cluster.namesrv)
        yield Target("rocketmq", cluster.namesrv, cluster.broker_addr)
    finally:
        cluster.stop()


class Console:
    """``mq dashboard`` in its own process."""

    def __init__(self, root: Path, namesrv: str, *, host: str = "127.0.0.1", config: dict[str, Any] | None = None,
                 users: str | None = None) -> None:
        self.root = root
        self.port = free_port()
        self.host = host
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root / f"console-{self.port}.log"
        cfg = {"refreshInterval": 1, **(config or {})}
        self.config_file = root / f"console-{self.port}.yaml"
        self.config_file.write_text("".join(f"{k}: {v}\n" for k, v in cfg.items()))
        self.args = [sys.executable, "-m", "mq.cli.main", "-n", namesrv, "dashboard", "--host", host,
                     "--port", str(self.port), "--config", str(self.config_file)]
        if users:
            self.args += ["--users", users]
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Console":
        self.proc = subprocess.Popen(self.args, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(REPO)),
                                     cwd=str(REPO))
        wait_port(self.port, self.proc, 30, self.log)
        return self

    def stop(self) -> None:
        stop(self.proc)


@pytest.fixture(scope="module")
def console(target, tmp_path_factory) -> Iterator[Console]:
    pytest.importorskip("starlette", reason="the dashboard extra is not installed (pip install 'mq[dashboard]')")
    c = Console(tmp_path_factory.mktemp("console"), target.namesrv).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Playwright's synchronous API runs an event loop in this thread while it is open: it is closed at the end
    of each module, so that later tests may run their own loops here."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    exe = chromium_path()
    if exe is None:
        pytest.skip("no Chromium: install Debian's chromium (apt-get install chromium) or set $MQ_CHROMIUM")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.set_default_timeout(20_000)
    p = context.new_page()
    yield p
    context.close()


@pytest.fixture
def shot(target):
    folder = os.environ.get("MQ_DASHBOARD_SCREENSHOTS")

    def take(page: Any, name: str) -> None:
        if folder and target.kind == "mq":
            out = Path(folder) if os.path.isabs(folder) else REPO / folder
            out.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)

    return take
