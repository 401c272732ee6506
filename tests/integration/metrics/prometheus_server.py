"""A real Prometheus server for tests: Debian's ``prometheus`` binary run on a free loopback port with a temporary
configuration and data directory, and always stopped (a uniquely named helper module).

    prom = PrometheusServer(workdir, {"mq-broker": ["127.0.0.1:5557"]}, rule_files=[...])
    prom.start()                 # returns once /-/ready answers
    prom.query('sum(up)')        # the instant vector of Prometheus's HTTP API, as [(labels, value)]
    prom.stop()
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.ports import free_port


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


class PrometheusServer:
    def __init__(self, workdir: Path, jobs: dict[str, list[str]], *, scrape_interval: str = "1s",
                 rule_files: list[Path] = ()) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "prometheus.log"
        lines = ["global:", f"  scrape_interval: {scrape_interval}", f"  evaluation_interval: {scrape_interval}"]
        if rule_files:
            lines.append("rule_files:")
            lines += [f"  - {json.dumps(str(p))}" for p in rule_files]
        lines.append("scrape_configs:")
        for job, targets in jobs.items():
            lines += [f"  - job_name: {json.dumps(job)}", "    static_configs:",
                      f"      - targets: {json.dumps(targets)}"]
        self.config = self.workdir / "prometheus.yml"
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        binary = prometheus_binary()
        assert binary, "prometheus is not installed"
        args = [binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h",
                "--log.level=warn"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"prometheus not ready within {timeout} s:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        data = self.api("query", query=promql)
        assert data["resultType"] == "vector", data
        return [(item["metric"], float(item["value"][1])) for item in data["result"]]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
