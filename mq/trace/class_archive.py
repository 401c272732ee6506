"""A class-data-sharing (CDS) archive of the Spark driver's classes, kept between local trace jobs.

A local Spark driver loads about 20,000 classes from Spark's jars before it has read a record; parsing and
verifying them is most of the JVM's start-up. A CDS archive holds those classes already parsed and verified,
and a JVM that maps it skips that work (measured on a 2-core machine: SparkSession creation 13 s -> 3 s,
a 100-record ``mq trace analyze`` 81 s -> 38 s wall).

The archive is dynamic (``-XX:ArchiveClassesAtExit``, JDK 13+), layered over the JDK's own default archive:
a job that finds none in the cache directory dumps the classes it loaded to a temporary file when its JVM
exits, and ``commit`` makes that file the archive once the job has succeeded; later jobs map it
(``-XX:SharedArchiveFile``). Its name is a hash of what it was built from: the java binary and its
``libjvm.so``, spark-submit's jars (names, sizes, modification times) and the class path settings given, so
that an upgrade of Java or Spark starts a new archive (and ``commit`` removes the old ones). The JVM also
checks an archive against its own build and class path itself and runs without it on any mismatch
(``-Xshare:auto``, its default), so a stale archive costs speed, never a failure.

Writing the archive is most of a first job's wall time (12 of 28 s for a 100-record report on 2 cores), so a
dumping job is run by ``mq.trace.archive_finisher``, which installs the archive after the JVM has exited while
the caller already has its report. One job at a time dumps: the finisher holds ``<stem>.lock`` until it is
done, and a job that finds the lock taken runs without an archive rather than writing a second one.

An archive takes 100-200 MB; the directory is ``$MQ_HOME/cache/spark`` (``mq.cli.trace_analytics``).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: First four bytes of a dynamic CDS archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC 0xf00baba8, little-endian).
DYNAMIC_MAGIC = bytes.fromhex("a8ab0bf0")
SUFFIX = ".jsa"
#: A dump file older than this was left by a job that was killed (a dump is written in seconds): removed.
STALE_DUMP_S = 3600.0
#: Spark settings and environment variables that change the driver's class path (part of the archive's key).
CLASSPATH_CONFS = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages", "spark.driver.userClassPathFirst")
CLASSPATH_ENV = ("SPARK_DIST_CLASSPATH", "SPARK_CLASSPATH", "HADOOP_CONF_DIR", "SPARK_CONF_DIR")


@dataclass(frozen=True, slots=True)
class ClassArchive:
    """The archive for one Java and Spark installation: ``path``, and ``dump_to`` (a temporary file the JVM
    writes) when it does not exist yet, with ``lock_fd``, the open lock file that says a dump is under way
    (whoever finishes the job holds it, and closing it ends the claim)."""

    path: Path
    dump_to: Path | None = None
    lock_fd: int | None = None

    def java_option(self) -> str:
        """The JVM option that maps the archive, or dumps one at exit."""
        if self.dump_to is not None:
            return f"-XX:ArchiveClassesAtExit={self.dump_to}"
        return f"-XX:SharedArchiveFile={self.path}"

    def commit(self) -> bool:
        """After a successful job: make the dumped file the archive (if it is one) and remove archives of
        other installations from the directory. True if an archive was installed. HotSpot writes the header,
        and with it the magic, after every region, so a file that starts with the magic is whole."""
        if self.dump_to is None:
            return False
        try:
            with open(self.dump_to, "rb") as f:
                ok = f.read(len(DYNAMIC_MAGIC)) == DYNAMIC_MAGIC
            if not ok:
                self._failed(f"the JVM did not write a class-data archive to {self.dump_to}")
                self.dump_to.unlink(missing_ok=True)
                return False
            os.replace(self.dump_to, self.path)
        except OSError as exc:
            self._failed(f"cannot install the class-data archive {self.path}: {exc}")
            return False
        failure_note(self.path).unlink(missing_ok=True)
        for other in self.path.parent.glob(f"*{SUFFIX}"):
            if other != self.path:
                other.unlink(missing_ok=True)
        log.info("class-data archive for the Spark driver written to %s", self.path)
        return True

    def _failed(self, reason: str) -> None:
        """Log why no archive was installed, and leave the reason for the next job to report: the finisher
        that commits runs after the CLI has returned, when nobody reads its output any more."""
        log.warning("%s; start-up stays uncached", reason)
        try:
            failure_note(self.path).write_text(reason + "\n", encoding="utf-8")
        except OSError:  # a full disk, most likely: the reason is only logged
            pass

    def discard(self) -> None:
        """After a failed job: remove whatever was dumped."""
        if self.dump_to is not None:
            self.dump_to.unlink(missing_ok=True)


def failure_note(archive_path: Path) -> Path:
    """The file where a finisher that could not install ``archive_path`` leaves the reason."""
    return archive_path.with_name(f"{archive_path.stem}.failed")


def lock_path(archive_path: Path) -> Path:
    """The lock file held while ``archive_path`` is being dumped."""
    return archive_path.with_name(f"{archive_path.stem}.lock")


def _claim(lock: Path) -> int | None:
    """The lock file, opened and locked (exclusive, not blocking); None when another job holds it."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _sweep_stale_dumps(directory: Path, now: float) -> None:
    """Remove dump files a killed job left behind (called under the lock, so no dump is being written)."""
    for tmp in directory.glob("*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_DUMP_S:
                tmp.unlink()
        except OSError:
            pass


def dump_in_progress(cache_dir: str | os.PathLike[str]) -> bool:
    """Whether a job is writing a class-data archive in ``cache_dir`` (holds a lock there)."""
    for lock in Path(cache_dir).glob("*.lock"):
        try:
            fd = _claim(lock)
        except OSError:
            continue
        if fd is None:
            return True
        os.close(fd)
    return False


def wait_for_dumps(cache_dir: str | os.PathLike[str], timeout_s: float, poll_s: float = 0.05) -> bool:
    """Wait until no job is writing a class-data archive in ``cache_dir``; False if one still is after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while dump_in_progress(cache_dir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def _stat_line(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path} -"
    return f"{path} {st.st_size} {st.st_mtime_ns}"


def archive_key(java: str | os.PathLike[str], spark_submit: str | os.PathLike[str], conf: Mapping[str, str],
                environ: Mapping[str, str]) -> str:
    """A hash of the java binary and its libjvm.so, spark-submit's jars and the class path settings."""
    h = hashlib.sha256()
    jbin = Path(java).resolve()
    lines = [_stat_line(jbin), _stat_line(jbin.parent.parent / "lib" / "server" / "libjvm.so")]
    jars = Path(spark_submit).resolve().parent.parent / "jars"
    try:
        lines += sorted(_stat_line(p) for p in jars.iterdir())
    except OSError:
        lines.append(f"{jars} -")
    lines += [f"{k}={conf[k]}" for k in CLASSPATH_CONFS if k in conf]
    lines += [f"${k}={environ[k]}" for k in CLASSPATH_ENV if k in environ]
    h.update("\n".join(lines).encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:20]


def class_archive(cache_dir: str | os.PathLike[str], java: str | os.PathLike[str],
                  spark_submit: str | os.PathLike[str], conf: Mapping[str, str], environ: Mapping[str, str], *,
                  dump: bool = True) -> ClassArchive | None:
    """The archive to map, or to dump (``dump`` False: None when there is none yet). None also when the cache
    directory cannot be created, or another job is dumping the archive already. A dumping archive holds the
    lock (``lock_fd``): the caller hands it to the process that finishes the job, then closes its copy."""
    directory = Path(cache_dir)
    path = directory / f"spark-driver-{archive_key(java, spark_submit, conf, environ)}{SUFFIX}"
    if path.is_file():
        return ClassArchive(path)
    if not dump:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = _claim(lock_path(path))
    except OSError as exc:
        log.warning("no class-data archive for the Spark driver: cannot use %s: %s", directory, exc)
        return None
    if fd is None:
        log.info("another job is writing the class-data archive in %s; this one runs without", directory)
        return None
    if path.is_file():  # installed since the check above, by a finisher that has just let the lock go
        os.close(fd)
        return ClassArchive(path)
    _sweep_stale_dumps(directory, time.time())
    _report_last_failure(failure_note(path))
    return ClassArchive(path, directory / f"{path.stem}.{os.getpid()}.tmp", fd)


def _report_last_failure(note: Path) -> None:
    """Tell the user why the archive of an earlier job was not installed (``ClassArchive._failed``), once."""
    try:
        reason = note.read_text(encoding="utf-8").strip()
    except OSError:  # no note: the usual case
        return
    try:
        note.unlink()
    except OSError as exc:
        log.warning("cannot remove %s: %s", note, exc)
    if reason:
        log.warning("the Spark driver's class-data archive of an earlier report was not installed (%s); this "
                    "report writes it again", reason)
