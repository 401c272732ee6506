"""`mq setConsumeMode`: mqadmin's switch of a consumer group between PULL and POP (RocketMQ 5's
SET_MESSAGE_REQUEST_MODE, read back by 5.x remoting consumers through QUERY_ASSIGNMENT)."""

from __future__ import annotations

import click

from mq.cli.common import json_option, with_admin


@click.command("setConsumeMode")
@click.option("-g", "--group", "--groupName", "group", required=True, help="Consumer group.")
@click.option("-t", "--topic", "--topicName", "topic", required=True, help="Topic.")
@click.option("-m", "--mode", type=click.Choice(["PULL", "POP"], case_sensitive=False), required=True,
              help="PULL (4.x rebalance) or POP (brokers hand out messages with pop).")
@click.option("-q", "--pop-share-queue-num", "--popShareQueueNum", "pop_share_queue_num", type=click.IntRange(0),
              default=0, show_default=True,
              help="POP: how many other clients' queues each client also pops (0: every client pops every queue).")
@click.option("-c", "--cluster", "--clusterName", "cluster", help="Every master of this cluster.")
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", help="This broker (ip:port).")
@json_option
@click.pass_obj
def set_consume_mode(obj, group: str, topic: str, mode: str, pop_share_queue_num: int, cluster: str | None,
                     broker: str | None, json_mode: bool) -> None:
    """Set how a group consumes a topic: PULL or POP (RocketMQ 5 consumers that let the broker assign queues)."""
    from mq.cli.console import Console
    from mq.common.topic import validate_group, validate_topic
    from mq.protocol.codes import RequestCode
    from mq.protocol.command import RemotingCommand
    from mq.protocol.pop_bodies import MessageRequestMode, SetMessageRequestModeRequestBody

    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -c/--cluster and -b/--broker-addr")
    validate_group(group)
    validate_topic(topic)
    body = SetMessageRequestModeRequestBody(topic, group, MessageRequestMode[mode.upper()], pop_share_queue_num)

    async def run(admin) -> dict[str, str]:
        targets = await admin.master_addrs(cluster) if cluster else {broker: broker}
        for addr in targets.values():
            await admin.call_broker(addr, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, {},
                                                                  body.to_json()))
        return targets

    targets = with_admin(obj, run)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"group": group, "topic": topic, "mode": mode.upper(), "popShareQueueNum": pop_share_queue_num,
                      "brokers": targets})
        return
    for name, addr in sorted(targets.items()):
        console.line(f"set consume mode of {group} on {topic} to {mode.upper()} at {addr} ({name})")
