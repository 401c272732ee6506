"""`mq store verify|print` on a store written by MessageStore, then damaged."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mq.cli.main import cli

from .conftest import inner


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_verify_and_print_a_clean_store(make_store, tmp_path):
    root = tmp_path / "store"
    s = make_store(root)
    for i in range(30):
        assert s.put_message(inner(topic="T" if i % 3 else "U", queue_id=i % 2, tags=f"Tag{i % 2}",
                                   keys=f"k{i}", body=f"b{i}".encode())).ok
    s.shutdown()
    res = run("store", "verify", str(root), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["ok"] and data["records"] == 30 and data["consumeQueueUnits"] == 30

    res = run("store", "print", str(root), "-t", "T", "-q", "1", "--from", "2", "--count", "3", "--json")
    assert res.exit_code == 0, res.output
    recs = json.loads(res.output)["records"]
    assert [r["queueOffset"] for r in recs] == [2, 3, 4]
    assert all(r["topic"] == "T" and r["queueId"] == 1 for r in recs)
    assert all(r["properties"]["TAGS"] == "Tag1" for r in recs)

    res = run("store", "print", str(root), "-t", "U", "--count", "100", "--json")
    assert [r["body"] for r in json.loads(res.output)["records"]] == [f"b{i}" for i in range(0, 30, 3)]

    table = run("store", "print", str(root), "--count", "2")
    assert table.exit_code == 0 and "Tag0" in table.output and "b1" in table.output


def test_verify_reports_a_corrupted_record_and_exits_1(make_store, tmp_path):
    root = tmp_path / "store"
    s = make_store(root)
    results = [s.put_message(inner(body=b"x" * 100, keys=f"k{i}")) for i in range(10)]
    s.shutdown()
    seg = sorted((root / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    off = results[3].wrote_offset
    body_at = data.index(b"x" * 100, off)
    data[body_at + 50] ^= 0xFF  # flip a body byte: the CRC no longer matches
    seg.write_bytes(bytes(data))
    res = run("store", "verify", str(root))
    assert res.exit_code == 1
    assert "problem" in res.output


def test_not_a_store_is_a_usage_error(tmp_path):
    res = run("store", "verify", str(tmp_path))
    assert res.exit_code == 2
    assert "commitlog" in res.output
