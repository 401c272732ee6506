"""spark_submit: locating spark-submit and java, the command line, progress parsing, the package zip."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from mq.trace.spark_submit import (
    SparkUnavailableError,
    SubmitOptions,
    build_command,
    build_package_zip,
    check_java,
    find_spark_submit,
    job_script,
    parse_progress,
)


def test_spark_home_wins_and_a_broken_one_is_a_clear_error(tmp_path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    assert find_spark_submit({"SPARK_HOME": str(tmp_path)}) == tmp_path / "bin" / "spark-submit"
    with pytest.raises(SparkUnavailableError, match="SPARK_HOME"):
        find_spark_submit({"SPARK_HOME": str(tmp_path / "nope")})


def test_bundled_spark_submit_is_found_without_importing_pyspark() -> None:
    code = ("import sys; from mq.trace.spark_submit import find_spark_submit; import mq.trace.report; "
            "p = find_spark_submit({}); print(p.name, 'pyspark' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["spark-submit", "False"]


def test_missing_java_names_what_to_install(tmp_path) -> None:
    with pytest.raises(SparkUnavailableError, match="install a Java 17"):
        check_java({"PATH": str(tmp_path)})
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text("")
    assert check_java({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": ""}) == str(fake / "java")


def test_command_line_passes_master_deploy_mode_confs_and_py_files() -> None:
    opts = SubmitOptions(master="yarn", deploy_mode="cluster", conf={"spark.executor.memory": "4g",
                                                                      "spark.driver.memory": "8g"})  # fmt: skip
    cmd = build_command("/x/spark-submit", ["--input-format", "raw"], opts, "/tmp/mq.zip")
    assert cmd[:5] == ["/x/spark-submit", "--master", "yarn", "--deploy-mode", "cluster"]
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    assert "spark.executor.memory=4g" in confs and "spark.driver.memory=8g" in confs
    assert "spark.driver.memory=2g" not in confs
    assert cmd[cmd.index("--py-files") + 1] == "/tmp/mq.zip"
    assert cmd[-3:] == [str(job_script()), "--input-format", "raw"]
    local = build_command("s", [], SubmitOptions())
    assert local[1:3] == ["--master", "local[*]"] and "--py-files" not in local


def test_jit_option_is_a_default_the_caller_can_replace() -> None:
    confs = lambda cmd: [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]  # noqa: E731
    default = confs(build_command("s", [], SubmitOptions()))
    assert "spark.driver.extraJavaOptions=-XX:-DontCompileHugeMethods -XX:+UseParallelGC" in default
    assert "spark.executor.extraJavaOptions=-XX:-DontCompileHugeMethods -XX:+UseParallelGC" in default
    own = confs(build_command("s", [], SubmitOptions(conf={"spark.driver.extraJavaOptions": "-Dx=1"})))
    assert "spark.driver.extraJavaOptions=-Dx=1" in own
    assert not any(c.startswith("spark.driver.extraJavaOptions=-XX") for c in own)


def test_progress_lines_are_parsed_and_others_ignored() -> None:
    p = parse_progress("MQTRACE stage=load elapsed=3.25 records=12")
    assert p is not None and (p.stage, p.elapsed, p.detail) == ("load", 3.25, {"records": "12"})
    assert parse_progress("25/01/01 WARN NativeCodeLoader: ...") is None
    assert parse_progress("MQTRACE stage=x elapsed=soon") is None


def test_package_zip_holds_the_mq_package(tmp_path) -> None:
    z = build_package_zip(tmp_path)
    names = zipfile.ZipFile(z).namelist()
    assert "mq/trace/encoder.py" in names and "mq/trace/analytics/job.py" in names and "mq/__init__.py" in names
    assert not any("__pycache__" in n for n in names)
    assert job_script().is_file() and os.path.basename(job_script()) == "job.py"
