"""The admin CLI against the daemons of tests/integration/conftest.py, run by CliRunner in a worker thread so that
the test's event loop keeps serving while a command talks to it:

    mq_at(namesrv_arg, *args)   click Result of ``mq -n namesrv_arg *args``
    mq(*args)                   the same against the ``cluster`` fixture's name server
"""

from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner

from mq.cli.main import cli as mq_cli


@pytest.fixture
def mq_at(run):
    runner = CliRunner()

    def invoke(namesrv_arg: str, *args: str):
        return run(asyncio.to_thread(runner.invoke, mq_cli, ["-n", namesrv_arg, *args], env={"COLUMNS": "250"}),
                   timeout=60)
    return invoke


@pytest.fixture
def mq(cluster, mq_at):
    return lambda *args: mq_at(cluster.namesrv_addr, *args)
