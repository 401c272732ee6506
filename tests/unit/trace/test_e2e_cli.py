"""`mq trace` is a group: -i runs without a sub-command, sub-commands can attach; usage errors are clean."""

from __future__ import annotations

import click
from click.testing import CliRunner

from mq.cli.main import COMMANDS, cli
from mq.cli.trace import trace


def test_trace_is_registered_and_is_an_open_group() -> None:
    assert COMMANDS["trace"][0] == "mq.cli.trace:trace"
    assert isinstance(trace, click.Group) and trace.invoke_without_command
    res = CliRunner().invoke(cli, ["--help"])
    assert "trace" in res.output


def test_missing_msg_id_is_a_usage_error_and_subcommands_attach() -> None:
    res = CliRunner().invoke(cli, ["trace"])
    assert res.exit_code == 2 and "-i/--msg-id" in res.output

    @trace.command("probe-sub")
    def probe_sub() -> None:
        click.echo("sub ran")

    try:
        res = CliRunner().invoke(cli, ["trace", "probe-sub"])
        assert res.exit_code == 0 and res.output.strip() == "sub ran"
    finally:
        trace.commands.pop("probe-sub")
