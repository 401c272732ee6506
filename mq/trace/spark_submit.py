"""Find and run ``spark-submit`` for the trace analytics job. Imported by the CLI: never imports pyspark.

``spark-submit`` is ``$SPARK_HOME/bin/spark-submit`` when SPARK_HOME is set, else the one shipped inside
the installed pyspark package (located with ``importlib.util.find_spec``, which does not import it).
Java must be on PATH. For cluster executors the ``mq`` package is zipped on the fly and shipped with
``--py-files``; in local mode the installed package is used as is.

The job reports progress on stderr as lines ``MQTRACE stage=<name> elapsed=<seconds> [k=v ...]``;
``run_job`` hands each one, parsed, to a callback and keeps Spark's own stderr chatter for the error
message if the job fails.
"""

from __future__ import annotations

import collections
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mq.errors import MQError
from mq.trace.class_archive import ClassArchive, class_archive

log = logging.getLogger(__name__)

PROGRESS_PREFIX = "MQTRACE "
DEFAULT_MASTER = "local[*]"
#: Driver memory used unless the caller passes spark.driver.memory (local mode runs everything there).
DEFAULT_DRIVER_MEMORY = "2g"
#: JVM options for driver and executors unless the caller passes extraJavaOptions:
#: - let the JIT compile methods over 8,000 bytecodes. Spark's generated code for the record decoder and the
#:   report aggregations exceeds that, and HotSpot would otherwise interpret it (measured 2-3x slower);
#: - the parallel collector: a batch job wants throughput, and G1's write barriers and concurrent threads
#:   cost more than its shorter pauses save (5 M live records on local[2]: 149 and 165 s against 159 and
#:   190 s with G1, 237-261 s of task time against 254-312 s).
DEFAULT_JAVA_OPTIONS = "-XX:-DontCompileHugeMethods -XX:+UseParallelGC"
#: JVM options of a job over a small input (``SubmitOptions.small_input``) in place of DEFAULT_JAVA_OPTIONS: only
#: the quick C1 compiler. A 100-record report compiles ~20,000 methods, once; C2 recompiling the hot ones
#: spent more CPU than it saved (user CPU 77 s -> 38 s on 2 cores), while a 5 M-record job needs C2's code.
SMALL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"
#: An input of at most this many trace messages (each carries up to a few hundred records) is small: its job
#: starts with SMALL_JAVA_OPTIONS and, on a local master, its driver pulls the messages itself.
SMALL_INPUT_MESSAGES = 1_000
#: A Parquet archive window of at most this many bytes is small.
SMALL_INPUT_BYTES = 4 << 20
#: Seconds a job gets to exit after SIGTERM when its caller stops (Ctrl-C, a failing callback).
STOP_GRACE_S = 10.0


class SparkUnavailableError(MQError):
    """spark-submit or Java cannot be found; the message names what to install."""


class TraceJobError(MQError):
    """The Spark job exited non-zero; the message carries the tail of its stderr."""

    def __init__(self, returncode: int, tail: str) -> None:
        self.returncode = returncode
        self.tail = tail
        super().__init__(f"trace analytics job failed (exit {returncode}):\n{tail}")


@dataclass(frozen=True, slots=True)
class Progress:
    """One parsed progress line of the job."""

    stage: str
    elapsed: float
    detail: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SubmitOptions:
    """How to submit: master, deploy mode, ``--conf`` pairs, and whether to ship ``mq`` as a zip."""

    master: str = DEFAULT_MASTER
    deploy_mode: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    #: None: ship the zip unless the master is local.
    ship_package: bool | None = None
    #: The input is known to be small (see SMALL_INPUT_MESSAGES): start the JVM for a short job.
    small_input: bool = False
    #: Directory of the driver's class-data archive (``class_archive``), used on a local master; None: none.
    class_cache: str | None = None

    @property
    def local(self) -> bool:
        return self.master.startswith("local")


def job_script() -> Path:
    """Path of ``mq/trace/analytics/job.py`` (the application file given to spark-submit)."""
    return Path(__file__).resolve().parent / "analytics" / "job.py"


def find_spark_submit(environ: Mapping[str, str] | None = None) -> Path:
    """$SPARK_HOME/bin/spark-submit if SPARK_HOME is set, else pyspark's bundled bin/spark-submit."""
    env = os.environ if environ is None else environ
    home = env.get("SPARK_HOME")
    if home:
        p = Path(home) / "bin" / "spark-submit"
        if p.is_file():
            return p
        raise SparkUnavailableError(f"SPARK_HOME={home} has no bin/spark-submit; fix SPARK_HOME or unset it")
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkUnavailableError("pyspark is not installed: pip install 'pyspark>=3.5' (or set SPARK_HOME)")
    for loc in spec.submodule_search_locations:
        p = Path(loc) / "bin" / "spark-submit"
        if p.is_file():
            return p
    raise SparkUnavailableError("the installed pyspark has no bin/spark-submit; reinstall pyspark or set SPARK_HOME")


def check_java(environ: Mapping[str, str] | None = None) -> str:
    """Path of ``java`` ($JAVA_HOME/bin/java, else PATH); raises SparkUnavailableError naming what to install."""
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java", path=env.get("PATH", ""))
    if java is None:
        raise SparkUnavailableError("java not found on PATH: install a Java 17 runtime (e.g. openjdk-17-jre-headless)")
    return java


def build_package_zip(dest_dir: str | os.PathLike[str]) -> Path:
    """Zip the ``mq`` package (its .py files) into ``dest_dir/mq.zip`` for ``--py-files``."""
    root = Path(__file__).resolve().parents[1]  # .../mq
    out = Path(dest_dir) / "mq.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            zf.write(path, str(path.relative_to(root.parent)))
    return out


def build_command(
    spark_submit: str | os.PathLike[str],
    job_args: Sequence[str],
    options: SubmitOptions = SubmitOptions(),
    py_files: str | os.PathLike[str] | None = None,
    archive: ClassArchive | None = None,
) -> list[str]:
    """The spark-submit argv: master, deploy mode, confs (driver memory and JVM options defaulted), py-files,
    job, args. ``archive``: the class-data archive the driver maps (or dumps), unless ``options.conf`` sets
    the driver's JVM options itself."""
    cmd = [str(spark_submit), "--master", options.master]
    if options.deploy_mode:
        cmd += ["--deploy-mode", options.deploy_mode]
    driver = SMALL_JAVA_OPTIONS if options.small_input else DEFAULT_JAVA_OPTIONS
    if archive is not None:
        driver += " " + archive.java_option()
    conf = {"spark.ui.showConsoleProgress": "false", "spark.driver.memory": DEFAULT_DRIVER_MEMORY,
            "spark.driver.extraJavaOptions": driver, "spark.executor.extraJavaOptions": DEFAULT_JAVA_OPTIONS}
    if options.small_input:
        conf["spark.ui.enabled"] = "false"
    conf.update(options.conf)
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    if py_files is not None:
        cmd += ["--py-files", str(py_files)]
    return cmd + [str(job_script()), *job_args]


def parse_progress(line: str) -> Progress | None:
    """Parse ``MQTRACE stage=x elapsed=1.5 k=v`` (None for any other line)."""
    if not line.startswith(PROGRESS_PREFIX):
        return None
    kv = dict(tok.split("=", 1) for tok in line[len(PROGRESS_PREFIX) :].split() if "=" in tok)
    try:
        stage, elapsed = kv.pop("stage"), float(kv.pop("elapsed"))
    except (KeyError, ValueError):
        return None
    return Progress(stage, elapsed, kv)


def finisher_command(archive: ClassArchive, job_cmd: Sequence[str]) -> list[str]:
    """The argv that runs ``job_cmd`` under ``mq.trace.archive_finisher`` for a dumping ``archive``."""
    assert archive.dump_to is not None and archive.lock_fd is not None
    return [sys.executable, "-m", "mq.trace.archive_finisher", "--archive", str(archive.path),
            "--dump", str(archive.dump_to), "--lock-fd", str(archive.lock_fd), "--", *job_cmd]  # fmt: skip


def run_job(
    job_args: Sequence[str],
    out_dir: str | os.PathLike[str],
    *,
    options: SubmitOptions = SubmitOptions(),
    on_progress: Callable[[Progress], None] | None = None,
    environ: Mapping[str, str] | None = None,
    tail_lines: int = 40,
) -> Path:
    """Run the job (``job_args`` without ``--out``) writing to ``out_dir``; returns ``out_dir``.

    Progress lines go to ``on_progress``; other stderr lines are logged at DEBUG and the last
    ``tail_lines`` of them are put in the TraceJobError raised on a non-zero exit.

    A job whose driver dumps the class-data archive runs under ``mq.trace.archive_finisher``, and this returns
    when the job reports ``done`` (its output is written): the finisher waits out the JVM's dump and
    installs the archive.
    """
    env = dict(os.environ if environ is None else environ)
    submit = find_spark_submit(env)
    java = check_java(env)
    archive = None
    if options.class_cache and options.local and "spark.driver.extraJavaOptions" not in options.conf:
        # Dumped by small jobs only: the dump costs CPU once, which a long job should not pay.
        archive = class_archive(options.class_cache, java, submit, options.conf, env, dump=options.small_input)
    # Driver and workers use this interpreter, where mq and its dependencies are installed.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    ship = options.ship_package if options.ship_package is not None else not options.local
    out = Path(out_dir)
    lock_fd = archive.lock_fd if archive is not None else None  # set when this job dumps the archive
    try:
        with tempfile.TemporaryDirectory(prefix="mq-trace-submit-") as tmp:
            zip_path = build_package_zip(tmp) if ship else None
            cmd = build_command(submit, [*job_args, "--out", str(out)], options, zip_path, archive)
            log.info("running %s", " ".join(cmd))
            if archive is not None and lock_fd is not None:
                cmd = finisher_command(archive, cmd)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                                    errors="replace", stdin=subprocess.DEVNULL,
                                    pass_fds=() if lock_fd is None else (lock_fd,))  # fmt: skip
            early = lock_fd is not None  # the finisher waits for the dump
            if lock_fd is not None:
                os.close(lock_fd)  # the finisher holds the lock now
                lock_fd = None
            _follow(proc, on_progress, tail_lines, early)
    finally:
        if lock_fd is not None:  # the job never started: give the lock back
            os.close(lock_fd)
    return out


def stop_process(proc: subprocess.Popen[Any], grace_s: float = STOP_GRACE_S) -> None:
    """Close the pipe of ``proc``'s output (its last words get EPIPE rather than block on a pipe nobody
    drains), send SIGTERM, and SIGKILL after ``grace_s``; wait for it."""
    if proc.stdout is not None:
        proc.stdout.close()
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _follow(proc: subprocess.Popen[str], on_progress: Callable[[Progress], None] | None, tail_lines: int,
            early: bool) -> None:
    """Read the job's output to its end, or with ``early`` until it reports ``done`` (the finisher then
    drains the rest and waits for the job); raise TraceJobError if it failed."""
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            prog = parse_progress(line)
            if prog is None:
                log.debug("spark: %s", line)
                tail.append(line)
                continue
            if on_progress is not None:
                on_progress(prog)
            if early and prog.stage == "done":
                proc.stdout.close()
                # Reaped in the background: in a long-lived caller the finisher must not stay a zombie.
                threading.Thread(target=proc.wait, name="mq-trace-finisher", daemon=True).start()
                return
    except BaseException:  # Ctrl-C (which the job gets too) or a failing callback: stop the job
        stop_process(proc)
        raise
    if proc.wait() != 0:
        raise TraceJobError(proc.returncode, "\n".join(tail))
