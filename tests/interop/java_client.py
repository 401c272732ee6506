"""Compile the interop driver (``java_driver/JavaDriver.java``) against the official RocketMQ Java client.

The client is not on PyPI or npm, and Maven Central may be out of reach, so its classpath is given:
``$MQ_JAVA_CLIENT_CLASSPATH`` lists rocketmq-client 4.9.x (with rocketmq-common, -remoting, -logging, -acl)
and their dependencies (netty 4.1, fastjson 1.2, commons-lang3, commons-codec, commons-validator, slf4j-api…),
for example the output of ``mvn dependency:build-classpath`` on a project depending on
``org.apache.rocketmq:rocketmq-client:4.9.7`` and ``rocketmq-acl``. Without it, or without ``javac``, the tests
skip and say why. The compiled driver is cached (``build_cache``) under a name that changes with its source
and the classpath."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tests.interop.build_cache import ClientUnavailable, cached, run_tool

SOURCE = Path(__file__).with_name("java_driver") / "JavaDriver.java"


class JavaClientUnavailable(ClientUnavailable):
    """What is missing to compile or run the driver."""


def build() -> list[str]:
    """The command that runs the driver: ``java -cp ... JavaDriver``."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        raise JavaClientUnavailable("javac and java are not both on PATH")
    classpath = os.environ.get("MQ_JAVA_CLIENT_CLASSPATH", "")
    if not classpath:
        raise JavaClientUnavailable("MQ_JAVA_CLIENT_CLASSPATH is not set (the rocketmq-client 4.9.x classpath)")
    digest = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:12]

    def compile_into(work: Path) -> None:
        run_tool([javac, "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(work), str(SOURCE)], cwd=work)

    classes = cached(f"java-driver-{digest}", compile_into)
    return [java, "-cp", os.pathsep.join([str(classes), classpath]), "JavaDriver"]
