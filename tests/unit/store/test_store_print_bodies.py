"""`mq store print` shows a compressed body inflated, and says so when a body flagged compressed does not
inflate (issue 28 defect 4: every decode path says what it could not decode)."""

from __future__ import annotations

import json
import zlib

from click.testing import CliRunner

from mq.cli.main import cli
from mq.common import sysflag as SF

from .conftest import inner


def test_store_print_inflates_bodies_and_names_one_that_does_not_inflate(make_store, tmp_path):
    root = tmp_path / "store"
    s = make_store(root)
    s.put_message(inner(body=zlib.compress(b"hello inflated"), sys_flag=SF.COMPRESSED | SF.COMPRESSION_ZLIB))
    bad = s.put_message(inner(body=b"not zlib at all", sys_flag=SF.COMPRESSED))
    s.put_message(inner(body=b"plain"))
    s.shutdown()
    res = CliRunner().invoke(cli, ["store", "print", str(root), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    recs = json.loads(res.stdout)["records"]
    assert [r["body"] for r in recs] == ["hello inflated", "not zlib at all", "plain"]
    assert "bodyError" not in recs[0] and "bodyError" not in recs[2]
    assert "does not inflate" in recs[1]["bodyError"] and recs[1]["offset"] == bad.wrote_offset

    res = CliRunner().invoke(cli, ["store", "print", str(root)], catch_exceptions=False)
    assert res.exit_code == 0
    assert f"record at commit-log offset {bad.wrote_offset}" in res.stderr and "shown as stored" in res.stderr
