"""`mq store verify|print`: read a store directory with no broker running (ours or RocketMQ 4.9's)."""

from __future__ import annotations

from pathlib import Path

import click

from mq.cli.common import json_option


@click.group()
def store() -> None:
    """Inspect a store directory offline."""


def _root(path: Path) -> Path:
    if not path.is_dir():
        raise click.BadParameter(f"{path} is not a directory", param_hint="DIR")
    if not (path / "commitlog").is_dir() and not any(p.name.isdigit() for p in path.iterdir()):
        raise click.BadParameter(f"{path} holds no commitlog directory (is it a store root?)", param_hint="DIR")
    return path


@store.command("verify")
@click.argument("directory", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--no-crc", is_flag=True, help="Skip body CRC checks (faster).")
@json_option
def verify(directory: Path, no_crc: bool, json_mode: bool) -> None:
    """Check every record (magic, size, CRC) and that consume queues agree with the commit log.

    Exit code 0 when the store is consistent, 1 when problems were found."""
    from mq.cli.console import Console
    from mq.store.tools import verify_store

    rep = verify_store(_root(directory), check_crc=not no_crc)
    console = Console(json_mode=json_mode)
    data = {"ok": rep.ok, "segments": rep.segments, "records": rep.records, "badRecords": rep.bad_records,
            "endOffset": rep.end_offset, "consumeQueues": rep.consume_queues, "consumeQueueUnits": rep.cq_units,
            "tornTailAt": rep.tail_end, "problems": rep.problems}
    if json_mode:
        console.json(data)
    else:
        console.table(f"Store {directory}", ["Check", "Result"], [
            ("commit-log segments", rep.segments), ("valid records", rep.records),
            ("invalid records", rep.bad_records), ("end of data (offset)", rep.end_offset),
            ("consume queues", rep.consume_queues), ("consume-queue units", rep.cq_units),
            ("bytes after the last record", "none" if rep.tail_end is None else f"from {rep.tail_end}")])
        for p in rep.problems:
            console.line(f"problem: {p}")
        console.line("store is consistent" if rep.ok else f"{len(rep.problems) or rep.bad_records} problem(s) found")
    if not rep.ok:
        raise SystemExit(1)


@store.command("print")
@click.argument("directory", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("-t", "--topic", default=None, help="Only this topic.")
@click.option("-q", "--queue", "queue_id", type=int, default=None,
              help="Read through this consume queue of --topic (offsets are then queue offsets).")
@click.option("--from", "start", type=int, default=0, show_default=True,
              help="First commit-log offset, or first queue offset with -q.")
@click.option("--count", type=int, default=20, show_default=True, help="At most this many records.")
@json_option
def print_(directory: Path, topic: str | None, queue_id: int | None, start: int, count: int,
           json_mode: bool) -> None:
    """Print records of the commit log, or of one consume queue with -t and -q.

    A body flagged compressed is shown inflated; one that does not inflate is shown as stored, with
    ``bodyError`` saying why."""
    from mq.cli.console import Console
    from mq.cli.query import body_preview
    from mq.common import sysflag as SF
    from mq.common.record import inflate
    from mq.store.tools import RecordInfo, describe, iter_consume_queue, iter_records, read_record

    def describe_with_body(info: RecordInfo) -> dict:
        row = describe(info)
        m = info.message
        if m is not None:
            body = m.body
            if m.sys_flag & SF.COMPRESSED:
                try:
                    body = inflate(body, m.sys_flag)
                except ValueError as exc:
                    row["bodyError"] = str(exc)
            row["body"] = body_preview(body)
        return row

    root = _root(directory)
    if queue_id is not None and not topic:
        raise click.UsageError("-q/--queue needs -t/--topic")
    rows: list[dict] = []
    if queue_id is not None:
        for qoff, phy, size, tags_code in iter_consume_queue(root, topic, queue_id):
            if qoff < start:
                continue
            msg = read_record(root, phy)
            info = RecordInfo(phy, size, msg is not None, msg, "" if msg else "no record at this offset")
            row = describe_with_body(info)
            row["tagsCode"] = tags_code
            rows.append(row)
            if len(rows) >= count:
                break
    else:
        for info in iter_records(root, start=start):
            if not info.ok:  # shown, and the walk goes on at the next valid record (as recovery does)
                rows.append(describe_with_body(info))
                if len(rows) >= count:
                    break
                continue
            if topic and info.message is not None and info.message.topic != topic:
                continue
            rows.append(describe_with_body(info))
            if len(rows) >= count:
                break
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"records": rows})
        return
    if not rows:
        console.note("no records")
        return
    console.table(None, ["Offset", "Topic", "Q", "QOffset", "Store time", "MsgId", "Tags", "Keys", "Body"],
                  [(r["offset"], r.get("topic", ""), r.get("queueId", ""), r.get("queueOffset", ""),
                    _time(r.get("storeTimestamp")), r.get("msgId", r.get("error", "")),
                    (r.get("properties") or {}).get("TAGS", ""), (r.get("properties") or {}).get("KEYS", ""),
                    _short(r["body"]) if "body" in r else "") for r in rows])
    for r in rows:
        if "bodyError" in r:
            console.warn(f"record at commit-log offset {r['offset']} (topic {r.get('topic')}, queue "
                         f"{r.get('queueId')}, queue offset {r.get('queueOffset')}): {r['bodyError']}; its body "
                         "is shown as stored")


def _short(text: str, n: int = 40) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= n else text[:n - 1] + "…"


def _time(ms: object) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return ""
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
