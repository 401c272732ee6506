"""The Spark driver's class-data archive: its key and files, and the finisher that installs it after a job.

``run_job`` runs a fake spark-submit (a script that behaves like the job: progress lines, report.json, then
the JVM's archive dump at exit) under a fake JAVA_HOME, so these need neither Java nor Spark.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import pytest

from mq.trace.class_archive import (
    DYNAMIC_MAGIC,
    STALE_DUMP_S,
    ClassArchive,
    archive_key,
    class_archive,
    dump_in_progress,
    failure_note,
    lock_path,
    wait_for_dumps,
)
from mq.trace.spark_submit import SubmitOptions, TraceJobError, run_job

FAKE_SUBMIT = """#!{python}
import json, os, sys, time
argv = sys.argv[1:]
confs = [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]
opts = next((c.split("=", 1)[1] for c in confs if c.startswith("spark.driver.extraJavaOptions=")), "")
out = argv[argv.index("--out") + 1]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps({{"pid": os.getpid(), "opts": opts.split()}}) + "\\n")
mode = os.environ.get("FAKE_MODE", "ok")
say = lambda stage: print(f"MQTRACE stage={{stage}} elapsed=0.10", file=sys.stderr, flush=True)
say("session")
if mode == "fail-early":
    print("AnalysisException: no such table", file=sys.stderr, flush=True)
    sys.exit(2)
if mode == "hang":
    time.sleep(120)
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "report.json"), "w") as f:
    f.write("{{}}")
say("done")
for i in range(200):  # the JVM's shutdown chatter, after its reader has gone
    print(f"INFO ShutdownHookManager: line {{i}}", file=sys.stderr, flush=True)
dump = next((o.split("=", 1)[1] for o in opts.split() if o.startswith("-XX:ArchiveClassesAtExit=")), None)
if dump:
    time.sleep(float(os.environ.get("FAKE_DUMP_S", "1.5")))
    with open(dump, "wb") as f:
        f.write(bytes.fromhex("a8ab0bf0") + bytes(4096))
sys.exit(3 if mode == "fail-late" else 0)
"""


@pytest.fixture
def fake_spark(tmp_path):  # type: ignore[no-untyped-def]
    """(environ, cache dir, log file): a SPARK_HOME whose spark-submit is the fake job, a JAVA_HOME."""
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "jars" / "spark-core.jar").write_bytes(b"jar")
    submit = home / "bin" / "spark-submit"
    submit.write_text(FAKE_SUBMIT.format(python=sys.executable))
    submit.chmod(0o755)
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    log = tmp_path / "jobs.log"
    env = dict(os.environ, SPARK_HOME=str(home), JAVA_HOME=str(tmp_path / "jdk"), FAKE_LOG=str(log))
    return env, tmp_path / "cache", log


def _run(env, cache, out, **kw):  # type: ignore[no-untyped-def]
    opts = SubmitOptions(master="local[1]", small_input=True, class_cache=str(cache))
    return run_job([], out, options=opts, environ=env, **kw)


def _jobs(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _wait_for_finisher(cache: Path, timeout: float = 20.0) -> None:
    assert wait_for_dumps(cache, timeout), "the finisher still holds the archive's lock"


def _archives(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.jsa"))


def test_first_job_returns_at_done_and_the_archive_follows(fake_spark, tmp_path) -> None:
    env, cache, log = fake_spark
    env["FAKE_DUMP_S"] = "3"
    t0 = time.monotonic()
    out = _run(env, cache, tmp_path / "out")
    returned = time.monotonic() - t0
    assert (out / "report.json").is_file()
    assert returned < 3.0, f"run_job waited for the dump ({returned:.1f} s)"
    assert dump_in_progress(cache) and not _archives(cache)
    _wait_for_finisher(cache)
    [archive] = _archives(cache)
    assert archive.read_bytes()[:4] == DYNAMIC_MAGIC
    assert not list(cache.glob("*.tmp"))
    first = _jobs(log)[0]["opts"]
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in first)

    _run(env, cache, tmp_path / "out2")  # maps it, and reads to the job's end
    assert f"-XX:SharedArchiveFile={archive}" in _jobs(log)[1]["opts"]
    assert not dump_in_progress(cache)


def test_while_one_job_dumps_another_neither_dumps_nor_maps(fake_spark, tmp_path) -> None:
    env, cache, log = fake_spark
    env["FAKE_DUMP_S"] = "4"
    _run(env, cache, tmp_path / "a")
    assert dump_in_progress(cache)
    _run(env, cache, tmp_path / "b")
    second = _jobs(log)[1]["opts"]
    assert not any(o.startswith(("-XX:ArchiveClassesAtExit", "-XX:SharedArchiveFile")) for o in second)
    _wait_for_finisher(cache)
    assert len(_archives(cache)) == 1


def test_a_job_that_fails_after_its_report_leaves_no_archive(fake_spark, tmp_path) -> None:
    env, cache, _ = fake_spark
    env.update(FAKE_MODE="fail-late", FAKE_DUMP_S="0.5")
    _run(env, cache, tmp_path / "out")  # the report was written: the caller has it
    _wait_for_finisher(cache)
    assert not _archives(cache) and not list(cache.glob("*.tmp"))


def test_a_job_that_fails_is_an_error_with_its_output_and_frees_the_lock(fake_spark, tmp_path) -> None:
    env, cache, _ = fake_spark
    env["FAKE_MODE"] = "fail-early"
    with pytest.raises(TraceJobError, match="no such table") as err:
        _run(env, cache, tmp_path / "out")
    assert err.value.returncode == 2
    assert not dump_in_progress(cache) and not _archives(cache) and not list(cache.glob("*.tmp"))


def test_a_caller_that_stops_reading_stops_the_job(fake_spark, tmp_path) -> None:
    env, cache, log = fake_spark
    env["FAKE_MODE"] = "hang"

    def interrupt(progress) -> None:  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(env, cache, tmp_path / "out", on_progress=interrupt)
    job_pid = _jobs(log)[0]["pid"]
    deadline = time.monotonic() + 15
    while _alive(job_pid):
        assert time.monotonic() < deadline, "the job outlived its caller"
        time.sleep(0.05)
    assert not dump_in_progress(cache) and not _archives(cache)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_commit_installs_only_a_whole_archive_and_replaces_other_installations(tmp_path) -> None:
    old = tmp_path / "spark-driver-old.jsa"
    old.write_bytes(DYNAMIC_MAGIC)
    torn = ClassArchive(tmp_path / "spark-driver-new.jsa", tmp_path / "spark-driver-new.1.tmp")
    torn.dump_to.write_bytes(bytes(4096))  # regions written, header (with the magic) not yet
    assert not torn.commit() and not torn.dump_to.exists() and old.exists()
    whole = ClassArchive(tmp_path / "spark-driver-new.jsa", tmp_path / "spark-driver-new.2.tmp")
    whole.dump_to.write_bytes(DYNAMIC_MAGIC + bytes(4096))
    assert whole.commit()
    assert _archives(tmp_path) == [whole.path] and not whole.dump_to.exists()


def test_a_dump_claims_the_lock_and_sweeps_what_killed_jobs_left(tmp_path) -> None:
    java, submit = tmp_path / "java", tmp_path / "bin" / "spark-submit"
    cache = tmp_path / "cache"
    cache.mkdir()
    stale, fresh = cache / "spark-driver-x.99.tmp", cache / "spark-driver-y.98.tmp"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"being written")
    past = time.time() - STALE_DUMP_S - 60
    os.utime(stale, (past, past))
    assert class_archive(cache, java, submit, {}, {}, dump=False) is None
    a = class_archive(cache, java, submit, {}, {})
    assert a is not None and a.dump_to is not None and a.lock_fd is not None
    try:
        assert not stale.exists() and fresh.exists()
        assert lock_path(a.path).is_file() and dump_in_progress(cache)
        assert class_archive(cache, java, submit, {}, {}) is None  # one dump at a time
        assert not wait_for_dumps(cache, 0.1)
    finally:
        os.close(a.lock_fd)
    assert not dump_in_progress(cache)
    a.path.write_bytes(DYNAMIC_MAGIC)
    mapped = class_archive(cache, java, submit, {}, {})
    assert mapped == ClassArchive(a.path) and mapped.java_option() == f"-XX:SharedArchiveFile={a.path}"


def test_the_key_follows_the_installation(tmp_path) -> None:
    java, submit = tmp_path / "java", tmp_path / "spark" / "bin" / "spark-submit"
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    jar = tmp_path / "spark" / "jars" / "a.jar"
    jar.write_bytes(b"1")
    first = archive_key(java, submit, {}, {})
    assert archive_key(java, submit, {}, {}) == first
    assert archive_key(java, submit, {"spark.jars": "x.jar"}, {}) != first
    assert archive_key(java, submit, {}, {"SPARK_DIST_CLASSPATH": "/x"}) != first
    assert archive_key(java, submit, {"spark.executor.memory": "4g"}, {}) == first
    jar.write_bytes(b"22")
    assert archive_key(java, submit, {}, {}) != first


def test_a_failed_install_is_reported_by_the_next_dumping_job(tmp_path, caplog) -> None:
    """The finisher commits after the CLI has returned, so its warning reaches nobody; the reason is kept
    beside the archive and the next job that dumps logs it once. An installed archive clears it."""
    java, submit = tmp_path / "java", tmp_path / "bin" / "spark-submit"
    cache = tmp_path / "cache"
    a = class_archive(cache, java, submit, {}, {})
    assert a is not None and a.dump_to is not None and a.lock_fd is not None
    os.close(a.lock_fd)
    a.dump_to.write_bytes(bytes(64))  # torn
    assert not a.commit() and failure_note(a.path).is_file()
    with caplog.at_level(logging.WARNING, logger="mq.trace.class_archive"):
        b = class_archive(cache, java, submit, {}, {})
    assert b is not None and b.lock_fd is not None
    os.close(b.lock_fd)
    said = [r.getMessage() for r in caplog.records if "earlier report was not installed" in r.getMessage()]
    assert len(said) == 1 and str(a.dump_to) in said[0]
    assert not failure_note(a.path).exists()  # reported once
    a.dump_to.write_bytes(bytes(64))
    assert not a.commit() and failure_note(a.path).is_file()
    b.dump_to.write_bytes(DYNAMIC_MAGIC + bytes(64))
    assert b.commit() and not failure_note(a.path).exists()
