"""`mq resumeCheckHalfMessage`: restart the transaction checks of a half message the broker gave up on."""

from __future__ import annotations

import click

from mq.cli.common import json_option, with_admin


@click.command("resumeCheckHalfMessage")
@click.option("-i", "--msgId", "--msg-id", "msg_id", required=True,
              help="offsetMsgId of the half message (or of its copy in TRANS_CHECK_MAX_TIME_TOPIC); or its "
                   "UNIQ_KEY (the transaction id) with -t.")
@click.option("-t", "--topic", help="With a UNIQ_KEY: the topic holding the message, usually "
              "TRANS_CHECK_MAX_TIME_TOPIC (where the broker moves a half message after its last check).")
@json_option
@click.pass_obj
def resume_check_half_message(obj, msg_id: str, topic: str | None, json_mode: bool) -> None:
    """Put a half message back in the transaction check queue with its check count at 0, so the broker asks its
    producer group about it again (RocketMQ's MQAdminExt.resumeCheckHalfMessage).

    The broker discards a half message to TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax checks; its log
    names the transaction id. `mq pull -t TRANS_CHECK_MAX_TIME_TOPIC` lists those messages."""
    from mq.cli.console import Console
    from mq.cli.query import IdKind, classify_msg_id
    from mq.errors import QueryNotFoundError

    try:
        kind, _ = classify_msg_id(msg_id)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="-i/--msgId") from None
    msg_id = msg_id.strip()
    if kind is IdKind.UNIQ_KEY and not topic:
        raise click.UsageError(f"{msg_id} does not decode to a broker address, so it is a UNIQ_KEY: give the topic "
                               "holding it with -t (usually TRANS_CHECK_MAX_TIME_TOPIC)")

    async def run(admin) -> dict:
        offset_id = msg_id
        if kind is IdKind.UNIQ_KEY:
            found = await admin.query_message_by_key(topic, msg_id, 32, unique=True)
            if not found:
                raise QueryNotFoundError(22, f"no message with id {msg_id} in topic {topic}")
            offset_id = found[0].offset_msg_id  # the newest copy
        addr = await admin.resume_check_half_message(offset_id)
        return {"msgId": msg_id, "offsetMsgId": offset_id, "brokerAddr": addr, "resumed": True}

    row = with_admin(obj, run, timeout=10.0)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json(row)
        return
    console.line(f"half message {row['offsetMsgId']} put back in the check queue of {row['brokerAddr']}: its "
                 "producer group will be asked about it at the next check")
