"""What the interop tests share: our own CLI as the reference reader, and the end of a driver's consumer."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.interop.node_client import NodeClientUnavailable


def mq_cli(ns: str, *args: str, creds: dict[str, str] | None = None) -> dict | list:
    """``mq ARGS -n NS --json`` (signed with ``creds`` when given); its parsed output. Fails unless it exited 0."""
    proc = subprocess.run([sys.executable, "-m", "mq.cli.main", *args, "-n", ns, "--json"], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, env={**os.environ, **(creds or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def start_consumer(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start a driver's consumer and return once it printed ``{"started": true}``."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         stdin=subprocess.DEVNULL)
    while True:
        line = p.stdout.readline()
        if not line:
            p.kill()
            raise AssertionError(f"the consumer exited before starting: {p.stderr.read()[-2000:]}")
        if line.startswith("{") and json.loads(line).get("started"):
            return p


def consumer_result(p: subprocess.Popen, exit_code: int | None = 0, timeout: float = 120) -> list[dict]:
    """Wait for a driver's consumer to finish; the list of its last ``{"received": [...]}`` line. Checks its
    exit code unless ``exit_code`` is None."""
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    results = [json.loads(ln)["received"] for ln in out.splitlines() if ln.startswith('{"received"')]
    assert results, f"the consumer printed no result (exit code {p.returncode}): {err[-2000:]}"
    assert exit_code is None or p.returncode == exit_code, (results[-1], err[-2000:])
    return results[-1]


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str]) -> Iterator[Callable[..., list[dict]]]:
    """A driver's consumer process, yielded once it printed ``{"started": true}``; yields ``finish(timeout)``,
    which waits for it to exit 0 and returns every JSON line it printed. Killed if still running at the end."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         stdin=subprocess.DEVNULL)
    lines: list[dict] = []
    try:
        while True:
            line = p.stdout.readline()
            assert line, f"the consumer exited before starting: {p.stderr.read()[-3000:]}"
            if line.startswith("{"):
                lines.append(json.loads(line))
                if lines[-1].get("started"):
                    break

        def finish(timeout: float = 120) -> list[dict]:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, err[-3000:]
            return lines + [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]

        yield finish
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def group_connections(ns: str, group: str, timeout: float = 20) -> list[dict]:
    """``mq consumerConnection -g GROUP``'s connections once there are any; [] after ``timeout`` seconds."""
    deadline = time.time() + timeout
    while True:
        try:
            out = mq_cli(ns, "consumerConnection", "-g", group)
            conns = out.get("connectionSet") or out.get("connections") or []
            if conns:
                return conns
        except AssertionError:
            pass
        if time.time() > deadline:
            return []
        time.sleep(1)


def npm_package(install: Callable[[], Path], what: str) -> Path:
    """The directory ``install`` (one of ``node_client``'s npm installers) returns, or the test skipped with why
    ``what`` cannot be installed here: a tool not on PATH, or npm unable to reach its registry."""
    try:
        return install()
    except NodeClientUnavailable as exc:
        pytest.skip(f"cannot install {what} here: {exc}")
    except RuntimeError as exc:  # npm failed: the tail of its output says why
        pytest.skip(f"cannot install {what} here: {str(exc)[-500:]}")
