"""`mq dlq list -g GROUP` and `mq dlq resend -g GROUP (-i MSGID... | --all) [--to-topic T | --to-original]`.

Dead letters of a consumer group live in ``%DLQ%<group>`` (one queue per broker). ``list`` reads every one of
them (PULL_MESSAGE from the queue's min offset, nothing committed) and shows its failure count (the
reconsumeTimes it reached), the original topic (RETRY_TOPIC) and a body preview.

``resend`` puts the chosen dead letters back for consumption. By default they go to ``%RETRY%<group>``: only
the group that failed them sees them again (a resend to the original topic would also reach every other group
subscribed to it), the consumer presents them under their original topic (RETRY_TOPIC), and their retry count
starts again from 0 (RECONSUME_TIME=0), so a message that fails again goes back through the full retry
schedule before it returns to the DLQ. ``--to-original`` sends to the RETRY_TOPIC recorded in each message, and
``--to-topic T`` to T. The message keeps its UNIQ_KEY (msgId) and user properties; broker bookkeeping
(REAL_TOPIC, REAL_QID, DELAY, CLUSTER, MIN/MAX_OFFSET, WAIT, transaction and timer properties) is dropped. Dead
letters stay in the DLQ after a resend (it is a log, expired by the store's retention like any topic).
"""

from __future__ import annotations

from typing import Any

import click

from mq.cli.common import json_option, undecodable_reporter

# The reading and resending live in the client (mq.client.dead_letters), shared with the web console.
from mq.client.dead_letters import dead_letter_dict, read_dead_letters


@click.group("dlq")
def dlq() -> None:
    """Dead-letter queues of consumer groups: list and resend."""


@dlq.command("list")
@click.option("-g", "--group", required=True, help="Consumer group.")
@json_option
@click.pass_obj
def dlq_list(obj, group: str, json_mode: bool) -> None:
    """List the dead letters of a group with their failure counts."""
    from mq.cli.common import with_admin
    from mq.cli.console import Console
    from mq.cli.consumer_admin import format_ms

    msgs = with_admin(obj, lambda admin: read_dead_letters(admin, group), timeout=10.0)
    console = Console(json_mode=json_mode)
    rows = [dead_letter_dict(m) for m in msgs]
    if json_mode:
        console.json({"group": group, "count": len(rows), "messages": rows})
        return
    if not rows:
        console.note(f"no dead letter for group {group}")
        return
    console.table(f"Dead letters of {group} ({len(rows)})",
                  ["MsgId", "Original Topic", "Failures", "Broker", "Offset", "Tags", "Stored", "Body"],
                  [(r["msgId"], r["originalTopic"], r["failures"], r["broker"], r["queueOffset"], r["tags"],
                    format_ms(r["storeTimestamp"]), r["body"]) for r in rows])


@dlq.command("resend")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-i", "--msg-id", "msg_ids", multiple=True, help="msgId (UNIQ_KEY) or offsetMsgId; repeatable.")
@click.option("--all", "resend_all", is_flag=True, help="Resend every dead letter of the group.")
@click.option("--to-topic", help="Send to this topic instead of %RETRY%<group>.")
@click.option("--to-original", is_flag=True, help="Send to each message's original topic (RETRY_TOPIC).")
@json_option
@click.pass_obj
def dlq_resend(obj, group: str, msg_ids: tuple[str, ...], resend_all: bool, to_topic: str | None,
               to_original: bool, json_mode: bool) -> None:
    """Put dead letters back for consumption (to %RETRY%<group> unless told otherwise)."""
    from mq.cli.console import Console

    if bool(msg_ids) == resend_all:
        raise click.UsageError("give either -i MSGID (one or more) or --all")
    if to_topic and to_original:
        raise click.UsageError("--to-topic and --to-original exclude each other")

    async def main() -> list[dict[str, Any]]:
        from mq.client import dead_letters
        from mq.client.admin import MQAdmin
        from mq.client.producer import Producer
        from mq.config import ClientConfig, ProducerConfig

        async with MQAdmin(obj.namesrv_addrs, timeout=10.0, credentials=obj.credentials,
                           on_undecodable=undecodable_reporter()) as admin:
            msgs = await read_dead_letters(admin, group)
        chosen = dead_letters.choose(msgs, group, None if resend_all else msg_ids)
        producer = Producer(ProducerConfig(group=dead_letters.RESEND_GROUP),
                            ClientConfig(namesrv_addr=";".join(obj.namesrv_addrs), instance_name="mq-dlq",
                                         **obj.credential_options))
        async with producer:
            return await dead_letters.resend(producer, chosen, group, to_topic=to_topic, to_original=to_original)

    from mq.remoting import run

    done = run(main())
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "resent": done})
        return
    console.table(f"Resent {len(done)} dead letter(s) of {group}", ["MsgId", "To", "Status", "QID", "Offset"],
                  [(d["msgId"], d["to"], d["status"], d["queueId"], d["queueOffset"]) for d in done])
