"""A cache of the interop tests' client builds (``$MQ_INTEROP_CACHE``, default ``~/.cache/mq/interop``).

Each build runs at most once per machine: it is made in a scratch directory next to its final place and only
becomes visible by a rename when complete, so a half-finished build is never used."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable


class ClientUnavailable(Exception):
    """What is missing on this machine to build or run a client (a tool, a download, a classpath)."""


def cache_root() -> Path:
    return Path(os.environ.get("MQ_INTEROP_CACHE") or Path.home() / ".cache/mq/interop")


def cached(name: str, build_into: Callable[[Path], None]) -> Path:
    """``build_into(work_dir)`` once; the finished directory appears only by a rename."""
    final = cache_root() / name
    if not (final / "ready").exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="building-", dir=final.parent))
        try:
            build_into(work)
            (work / "ready").write_text("ok\n")
            try:
                work.rename(final)
            except OSError:  # another run finished first: use its build
                if not (final / "ready").exists():
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def run_tool(args: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> None:
    """Run a build step; RuntimeError with the tail of its output when it fails."""
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed with exit code {proc.returncode}:\n"
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
