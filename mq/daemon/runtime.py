"""Process plumbing shared by the daemons: logging, signals, pid files, detaching.

The only place (with ``cli/main.py``) that configures logging. Daemons run in the foreground by default;
``--daemon`` re-executes the same command detached (new session, output to a log file) and waits until the
child is serving or has failed, so the parent's exit code tells the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import logging.handlers
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from mq.errors import MQError
from mq.remoting.gc_pause import freeze_started_heap

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"


class DaemonError(MQError):
    """A daemon could not start, stop or be found."""


async def cancel_tasks(*tasks: "asyncio.Task | None") -> None:
    """Cancel every task given (None and finished ones are skipped) and wait until each has ended."""
    live = [t for t in tasks if t is not None and not t.done()]
    for t in live:
        t.cancel()
    for t in live:
        with contextlib.suppress(asyncio.CancelledError):
            await t


def mq_home() -> Path:
    """Where pid files, logs and the default store live: $MQ_HOME or ~/.mq."""
    return Path(os.environ.get("MQ_HOME") or Path.home() / ".mq")


def instance_name(kind: str, port: int, name: str | None = None) -> str:
    """The key of one daemon on this machine: ``namesrv-9876``, ``broker-broker-a-10911``. Several name servers
    and brokers run side by side (several clusters, parallel tests), each with its own pid and log file."""
    parts = [kind] + ([re.sub(r"[^A-Za-z0-9_.-]", "_", name)] if name else []) + [str(port)]
    return "-".join(parts)


def default_pid_file(kind: str, port: int, name: str | None = None) -> Path:
    return mq_home() / "run" / f"{instance_name(kind, port, name)}.pid"


def default_log_file(kind: str, port: int, name: str | None = None) -> Path:
    return mq_home() / "logs" / f"{instance_name(kind, port, name)}.log"


@dataclasses.dataclass(frozen=True)
class Instance:
    """A daemon found through its pid file in ``$MQ_HOME/run``."""

    pid_file: Path
    pid: int
    #: from the file's name; None for a pid file of an older version (``namesrv.pid``, ``broker.pid``)
    port: int | None
    name: str | None

    def describe(self) -> str:
        what = " ".join(x for x in (self.name, f"port {self.port}" if self.port is not None else None) if x)
        return f"{what or 'unknown port'} (pid {self.pid}, pid file {self.pid_file})"


def running_instances(kind: str) -> list[Instance]:
    """Every live daemon of ``kind`` with a pid file in ``$MQ_HOME/run``, ordered by name and port."""
    found = []
    run_dir = mq_home() / "run"
    for path in sorted(run_dir.glob(f"{kind}*.pid")) if run_dir.is_dir() else []:
        stem = path.stem
        port: int | None = None
        name: str | None = None
        if stem != kind:
            if not stem.startswith(kind + "-"):
                continue
            rest, _, tail = stem[len(kind) + 1:].rpartition("-")
            if not tail.isdigit():
                continue
            port, name = int(tail), rest or None
        pid = running_pid(path)
        if pid is not None:
            found.append(Instance(path, pid, port, name))
    return found


def select_instances(kind: str, label: str, *, port: int | None = None, name: str | None = None,
                     every: bool = False) -> list[Instance]:
    """The running daemons ``mq KIND stop`` means: the one on ``port`` / named ``name``, every one with
    ``every``, else the only one; DaemonError naming the candidates when that is ambiguous or none runs."""
    live = running_instances(kind)
    chosen = [i for i in live if (port is None or i.port == port) and (name is None or i.name == name)]
    wanted = " ".join(x for x in (name, f"on port {port}" if port is not None else None) if x)
    if not chosen:
        where = mq_home() / "run"
        raise DaemonError(f"no running {label} found{' ' + wanted if wanted else ''} (pid files in {where})")
    if len(chosen) > 1 and not every:
        listing = "; ".join(i.describe() for i in chosen)
        raise DaemonError(f"{len(chosen)} {label}s are running: {listing}; pick one with --port"
                          f"{' or --broker-name' if kind == 'broker' else ''}, or stop them all with --all")
    return chosen


def setup_logging(level: str = "INFO", log_file: Path | None = None) -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=64 * 1024 * 1024, backupCount=5, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


# -------------------------------------------------------------------------------------------------
# pid files
# -------------------------------------------------------------------------------------------------
def write_pid_file(path: Path, pid: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{pid or os.getpid()}\n")
    os.replace(tmp, path)


def read_pid_file(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def remove_pid_file(path: Path, pid: int | None = None) -> None:
    """Remove the pid file if it still names ``pid`` (default: this process)."""
    if read_pid_file(path) == (pid or os.getpid()):
        with contextlib.suppress(OSError):
            path.unlink()


def running_pid(path: Path) -> int | None:
    """The pid in ``path`` if that process is alive and is an mq process, else None."""
    import psutil

    pid = read_pid_file(path)
    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        cmd = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return pid if "mq" in cmd else None


def stop_by_pid_file(path: Path, *, kind: str, timeout: float = 15.0) -> int:
    """SIGTERM the process named in ``path`` and wait for it to exit; returns its pid."""
    import psutil

    pid = running_pid(path)
    if pid is None:
        raise DaemonError(f"no running {kind} found (pid file {path})")
    proc = psutil.Process(pid)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except psutil.TimeoutExpired:
        log.warning("%s pid %s did not stop within %.0fs; killing it", kind, pid, timeout)
        proc.kill()
        proc.wait(timeout=5)
    with contextlib.suppress(OSError):
        if read_pid_file(path) == pid:
            path.unlink()
    return pid


# -------------------------------------------------------------------------------------------------
# detaching
# -------------------------------------------------------------------------------------------------
def spawn_detached(argv: list[str], *, log_file: Path, pid_file: Path, ready: Callable[[], bool],
                   timeout: float = 20.0) -> int:
    """Start ``argv`` in a new session with output to ``log_file``; wait until ``ready()`` or failure.

    Returns the child's pid. The child itself writes ``pid_file``; on failure the tail of the log is
    put into the error so the user sees why.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise DaemonError(f"daemon exited with code {code} during start-up; see {log_file}:\n"
                              + _tail(log_file))
        if ready():
            return proc.pid
        time.sleep(0.1)
    proc.terminate()
    raise DaemonError(f"daemon did not become ready within {timeout:.0f}s; see {log_file}")


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    import socket

    try:
        with socket.create_connection((host if host not in ("0.0.0.0", "") else "127.0.0.1", port),
                                      timeout=timeout):
            return True
    except OSError:
        return False


def describe_bind_error(exc: OSError, host: str, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {host}:{port}: address already in use"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}:{port}: address not available on this machine"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {host}:{port}: permission denied"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


# -------------------------------------------------------------------------------------------------
# running
# -------------------------------------------------------------------------------------------------
def start_detached(argv: list[str], *, host: str, port: int, pid_file: Path, log_file: Path) -> tuple[int, Path]:
    """``--daemon``: re-run ``argv`` detached and wait until it has written its pid file and listens."""
    pid = spawn_detached(argv, log_file=log_file, pid_file=pid_file,
                         ready=lambda: running_pid(pid_file) is not None and port_open(host, port))
    return pid, log_file


def serve_in_foreground(make_daemon: Callable[[], Any], *, pid_file: Path,
                        banner: Callable[[Any], str]) -> None:
    """Start ``make_daemon()`` (an object with async ``start``/``stop``), write the pid file, print the
    banner on stderr, and run until SIGINT/SIGTERM; then stop it and remove the pid file."""

    async def main(stop: asyncio.Event) -> None:
        daemon = make_daemon()
        await daemon.start()
        freeze_started_heap()
        write_pid_file(pid_file)
        try:
            print(banner(daemon), file=sys.stderr, flush=True)
            await stop.wait()
        finally:
            await daemon.stop()
            remove_pid_file(pid_file)

    run_until_signalled(main)


def raise_open_file_limit() -> tuple[int, int] | None:
    """Raise this process's soft limit of open files to its hard limit, as the JVM does for a Java broker
    (``-XX:+MaxFDLimit``): a broker holds one file per commit-log segment, consume-queue segment and index
    file, and the usual soft limit of 1,024 runs out at about a hundred topics of eight queues. Returns (old,
    new) when it was raised, None when it already was at the limit or cannot be changed here."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a POSIX system
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:  # the kernel caps at fs.nr_open (macOS: OPEN_MAX)
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read())
        except (OSError, ValueError):
            target = 10240
    if soft == resource.RLIM_INFINITY or soft >= target:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.debug("cannot raise the open-file limit from %s to %s: %s", soft, target, exc)
        return None
    log.debug("open-file limit raised from %s to %s", soft, target)
    return soft, target


def run_until_signalled(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop_event)`` on a fresh loop; SIGINT/SIGTERM set the event for a clean shutdown. The
    open-file limit is raised first (``raise_open_file_limit``)."""
    from mq.remoting import new_event_loop

    raise_open_file_limit()

    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        loop.run_until_complete(main(stop))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        asyncio.set_event_loop(None)
