"""Run a Spark job whose driver writes the class-data archive as it exits, and install the archive afterwards.

    python -m mq.trace.archive_finisher --archive PATH --dump TMP --lock-fd N -- spark-submit ...

``run_job`` starts this process in place of spark-submit when the driver dumps the archive
(``mq.trace.class_archive``). It is the job's parent: it passes the job's output on, line by line, to its
own stdout, which ``run_job`` reads. Once the job has reported ``done`` its output is written, and ``run_job``
stops reading and returns; this process keeps draining the job's output, waits for the JVM to finish writing
the archive (12 s of a first 100-record report's 28 s on 2 cores), then commits the archive if the job
exited 0, else discards it, and exits with the job's status. It holds the archive's lock (``--lock-fd``,
inherited) until then.

If the reader goes away before ``done`` (the caller was stopped), nobody will read the job's result: the job
is terminated and its dump discarded, as on SIGTERM. SIGINT and SIGHUP are ignored here: a Ctrl-C reaches
the job itself (same process group), and its exit status decides.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

from mq.trace.class_archive import ClassArchive
from mq.trace.spark_submit import parse_progress, stop_process

class _Terminated(Exception):
    """SIGTERM arrived."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def _relay(job: subprocess.Popen[bytes], out: BinaryIO) -> bool:
    """Pass the job's lines to ``out`` until it is closed or the job ends; then drain the rest. True if the
    job reported ``done`` or the reader stayed to the end."""
    assert job.stdout is not None
    done = False
    reading = True
    for raw in job.stdout:
        if not reading:
            continue
        try:
            out.write(raw)
            out.flush()
        except OSError:  # the reader has gone (EPIPE): nothing this process writes is read any more
            reading = False
            _silence()
            if not done:
                return False
            continue
        if not done and raw.startswith(b"MQTRACE "):
            prog = parse_progress(raw.decode("utf-8", "replace").rstrip("\n"))
            done = prog is not None and prog.stage == "done"
    return True


def _silence() -> None:
    """Point stdout and stderr (the gone reader's pipe) at /dev/null."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mq.trace.archive_finisher", description=__doc__)
    p.add_argument("--archive", required=True, type=Path)
    p.add_argument("--dump", required=True, type=Path)
    p.add_argument("--lock-fd", required=True, type=int)
    p.add_argument("job", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    job_cmd = a.job[1:] if a.job[:1] == ["--"] else a.job
    if not job_cmd:
        p.error("no job command after --")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    archive = ClassArchive(a.archive, a.dump, a.lock_fd)
    job = subprocess.Popen(job_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           restore_signals=True, preexec_fn=_default_signals)  # fmt: skip
    try:
        if not _relay(job, sys.stdout.buffer):
            stop_process(job)
        rc = job.wait()
    except _Terminated:
        stop_process(job)
        archive.discard()
        return 128 + signal.SIGTERM
    except BaseException:
        stop_process(job)
        archive.discard()
        raise
    if rc != 0 or not archive.commit():
        archive.discard()
    return rc


def _default_signals() -> None:
    """In the job's process, before exec: the signals ignored here back to their defaults."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
