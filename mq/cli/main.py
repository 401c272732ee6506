"""The `mq` executable: daemons (namesrv, broker, up) and the admin toolkit.

Sub-commands are imported lazily so that ``mq --help`` stays fast. This is the one place where unexpected
errors are shown: an ``MQError`` is one clear line and a non-zero exit; a traceback only with MQ_DEBUG=1.
"""

from __future__ import annotations

import importlib
import io
import os
import sys

import click

DEFAULT_NAMESRV = "127.0.0.1:9876"

#: command name -> ("module:attribute", one-line help). Modules load on first use, so ``--help`` is fast.
COMMANDS: dict[str, tuple[str, str]] = {
    "namesrv": ("mq.cli.namesrv:namesrv", "Run or stop the name server."),
    "broker": ("mq.cli.broker:broker", "Run or stop the broker."),
    "up": ("mq.cli.up:up", "Run a name server and a broker locally on embedded defaults."),
    "clusterList": ("mq.cli.cluster:cluster_list", "List clusters and their brokers, with in/out TPS."),
    "topicList": ("mq.cli.topic:topic_list", "List topics known to the name server."),
    "topicRoute": ("mq.cli.topic:topic_route", "Show the route of a topic."),
    "send": ("mq.cli.send:send", "Send messages to a topic and show where they were stored."),
    "pull": ("mq.cli.pull:pull", "Read messages from a topic's queues at chosen offsets."),
    "consume": ("mq.cli.consume:consume", "Consume a topic with a push consumer and print messages."),
    "bench": ("mq.cli.bench:bench", "Benchmark producing or consuming (throughput and latency)."),
    "topicStatus": ("mq.cli.topic_admin:topic_status", "Show min/max offset and last update of each queue of a topic."),
    "updateTopic": ("mq.cli.topic_admin:update_topic", "Create or update a topic on a broker or cluster."),
    "deleteTopic": ("mq.cli.topic_admin:delete_topic", "Delete a topic from a cluster and the name servers."),
    "brokerStatus": ("mq.cli.broker_admin:broker_status", "Show a broker's runtime statistics."),
    "getBrokerConfig": ("mq.cli.broker_admin:get_broker_config", "Show the configuration of a broker or cluster."),
    "updateBrokerConfig": ("mq.cli.broker_admin:update_broker_config", "Change a run-time setting of a broker or cluster."),
    "consumerProgress": ("mq.cli.consumer_admin:consumer_progress", "Show consume progress (lag) of groups."),
    "consumerConnection": ("mq.cli.consumer_admin:consumer_connection", "Show the online clients of a consumer group."),
    "producerConnection": ("mq.cli.consumer_admin:producer_connection", "Show the online clients of a producer group."),
    "resetOffsetByTime": ("mq.cli.consumer_admin:reset_offset_by_time", "Reset a group's offsets on a topic to a time."),
    "updateSubGroup": ("mq.cli.consumer_admin:update_sub_group", "Create or update a subscription group."),
    "deleteSubGroup": ("mq.cli.consumer_admin:delete_sub_group", "Delete a subscription group."),
    "setConsumeMode": ("mq.cli.pop_admin:set_consume_mode", "Set a group's consume mode on a topic: PULL or POP."),
    "queryMsgByKey": ("mq.cli.query:query_msg_by_key", "Find messages of a topic by key."),
    "queryMsgById": ("mq.cli.query:query_msg_by_id", "Show a message by offsetMsgId or UNIQ_KEY."),
    "resumeCheckHalfMessage": ("mq.cli.transaction_admin:resume_check_half_message",
                               "Restart the transaction checks of a discarded half message."),
    "queryMsgByOffset": ("mq.cli.query:query_msg_by_offset", "Show the message at a queue offset."),
    "queryMsgByUniqueKey": ("mq.cli.query:query_msg_by_unique_key", "Show a message by its UNIQ_KEY (client msgId) in a topic."),
    "queryMsgTraceById": ("mq.cli.trace:query_msg_trace_by_id", "Show one message's trace (mqadmin's name for mq trace -i)."),
    "sendMessage": ("mq.cli.send:send_message", "Send one message (mqadmin's options: -p body, -k keys, -c tags, -b, -i)."),
    "skipAccumulatedMessage": ("mq.cli.consumer_admin:skip_accumulated_message", "Move a group's offsets on a topic to the end (skip the backlog)."),
    "getConsumerConfig": ("mq.cli.consumer_admin:get_consumer_config", "Show a subscription group's config on every broker."),
    "printMsg": ("mq.cli.print_msg:print_msg", "Print the messages of a topic stored in a time range."),
    "printMsgByQueue": ("mq.cli.print_msg:print_msg_by_queue", "Print (or count by tag) the messages of one queue in a time range."),
    "consumeMessage": ("mq.cli.print_msg:consume_message", "Pull messages from a queue or topic by offset or time, without committing."),
    "exportMetadata": ("mq.cli.export_admin:export_metadata", "Export topics and subscription groups of a cluster or broker to JSON."),
    "exportConfigs": ("mq.cli.export_admin:export_configs", "Export the main broker configs and the size of a cluster to JSON."),
    "exportMetrics": ("mq.cli.export_admin:export_metrics", "Export a cluster's runtime metrics to JSON."),
    "trace": ("mq.cli.trace:trace", "Message trace: follow one message's path (mq trace -i MSGID)."),
    "dashboard": ("mq.cli.dashboard:dashboard", "Serve the web console (clusters, topics, groups, messages, traces)."),
    "store": ("mq.cli.store:store", "Verify or print a store directory offline (no broker needed)."),
    "dlq": ("mq.cli.dlq:dlq", "Dead letters of a consumer group: list, resend."),
    "wipeWritePerm": ("mq.cli.namesrv_admin:wipe_write_perm", "Take write permission away from a broker on the name servers."),
    "addWritePerm": ("mq.cli.namesrv_admin:add_write_perm", "Give a broker its write permission back on the name servers."),
    "updateKvConfig": ("mq.cli.namesrv_admin:update_kv_config", "Create or update a name server KV config entry."),
    "deleteKvConfig": ("mq.cli.namesrv_admin:delete_kv_config", "Delete a name server KV config entry."),
    "getNamesrvConfig": ("mq.cli.namesrv_admin:get_namesrv_config", "Show the configuration of each name server."),
    "updateNamesrvConfig": ("mq.cli.namesrv_admin:update_namesrv_config", "Change a run-time setting of the name servers."),
    "topicClusterList": ("mq.cli.namesrv_admin:topic_cluster_list", "List the clusters that hold a topic."),
    "updateOrderConf": ("mq.cli.namesrv_admin:update_order_conf", "Show, set or delete a topic's order config."),
    "updateTopicPerm": ("mq.cli.topic_admin:update_topic_perm", "Change a topic's permission on a broker or cluster."),
    "consumerStatus": ("mq.cli.consumer_status:consumer_status", "Show the running state of a consumer group's clients."),
    "startMonitoring": ("mq.cli.monitor:start_monitoring", "Watch every consumer group: backlog, delay, client problems, moved offsets."),
    "allocateMQ": ("mq.cli.consumer_status:allocate_mq", "Show how queues of a topic are allocated to client ids."),
    "sendMsgStatus": ("mq.cli.send_rt:send_msg_status", "Send test messages to one broker and show each round trip."),
    "checkMsgSendRT": ("mq.cli.send_rt:check_msg_send_rt", "Send test messages to a topic and show the send RT."),
    "clusterRT": ("mq.cli.send_rt:cluster_rt", "Measure the send RT of every broker of a cluster."),
    "cloneGroupOffset": ("mq.cli.queue_admin:clone_group_offset", "Copy a group's consume offsets to another group."),
    "queryCq": ("mq.cli.queue_admin:query_cq", "Show consume-queue units of a queue, with the messages they point at."),
    "cleanExpiredCQ": ("mq.cli.queue_admin:clean_expired_cq", "Delete consume queues whose messages have all expired."),
    "cleanUnusedTopic": ("mq.cli.queue_admin:clean_unused_topic", "Delete the store files of topics no longer configured."),
    "deleteExpiredCommitLog": ("mq.cli.queue_admin:delete_expired_commit_log", "Delete expired commit log files now."),
    "brokerConsumeStats": ("mq.cli.stats_admin:broker_consume_stats", "Show the consume progress of every group on a broker."),
    "statsAll": ("mq.cli.stats_admin:stats_all", "Show put/get TPS and today's totals of every topic and group."),
    "producer": ("mq.cli.stats_admin:producer", "Show the producers connected to a broker."),
    "getConsumerStatus": ("mq.cli.stats_admin:get_consumer_status", "Show the offsets each client of a group holds for a topic."),
    "updateAclConfig": ("mq.cli.acl_admin:update_acl_config", "Create or update an account in the brokers' ACL files."),
    "deleteAclConfig": ("mq.cli.acl_admin:delete_acl_config", "Delete an account from the brokers' ACL files."),
    "updateGlobalWhiteAddr": ("mq.cli.acl_admin:update_global_white_addr", "Set the addresses that skip every ACL check."),
    "clusterAclConfigVersion": ("mq.cli.acl_admin:cluster_acl_config_version", "Show the version of each broker's ACL files."),
}


# Commands that never talk to a name server (daemons and offline store tools) take no -n of their own.
_NO_NAMESRV = {"namesrv", "broker", "store", "up"}


def _set_namesrv(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.find_object(Context).namesrv = value


def _accept_namesrv_option(command: click.Command) -> None:
    """Let ``-n ADDR`` follow the command name too (``mq updateTopic -n ADDR ...``), as mqadmin's does.

    The address given after the command wins over the one given before it."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_namesrv_option(sub)
        if not command.invoke_without_command:  # only a group that runs itself (``mq trace -i ID``) takes it
            return
    if any(getattr(p, "name", None) == "namesrv" for p in command.params):
        return
    command.params.append(click.Option(
        ["-n", "--namesrv", "--namesrvAddr", "namesrv"], expose_value=False, callback=_set_namesrv, is_eager=True,
        help="Name server address(es), separated by ';' (also accepted before the command)."))


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module, attr = entry[0].split(":")
        command = getattr(importlib.import_module(module), attr)
        if name not in _NO_NAMESRV:
            _accept_namesrv_option(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class Context:
    """What every command gets through ``click.pass_obj``."""

    def __init__(self, namesrv: str, access_key: str | None = None, secret_key: str | None = None) -> None:
        self.namesrv = namesrv
        self.access_key = access_key or ""
        self.secret_key = secret_key or ""

    @property
    def credentials(self):
        """ACL credentials (``--access-key``/``--secret-key``), or None to send unsigned requests."""
        if not self.access_key:
            return None
        from mq.protocol.acl import SessionCredentials

        return SessionCredentials(self.access_key, self.secret_key)

    @property
    def credential_options(self) -> dict[str, str]:
        """The same, as ClientConfig keyword arguments."""
        return {"access_key": self.access_key, "secret_key": self.secret_key} if self.access_key else {}

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv.split(";") if a.strip()]


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("-n", "--namesrv", default=lambda: os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV,
              show_default="$NAMESRV_ADDR or 127.0.0.1:9876",
              help="Name server address(es), separated by ';' as in RocketMQ.")
@click.option("--access-key", envvar="MQ_ACCESS_KEY", default=None, metavar="KEY",
              help="ACL access key: sign every request, for brokers with aclEnable ($MQ_ACCESS_KEY).")
@click.option("--secret-key", envvar="MQ_SECRET_KEY", default=None, metavar="KEY",
              help="ACL secret key ($MQ_SECRET_KEY).")
@click.version_option(package_name="mq", prog_name="mq")
@click.pass_context
def cli(ctx: click.Context, namesrv: str, access_key: str | None, secret_key: str | None) -> None:
    """mq: a RocketMQ-compatible message system and its admin toolkit."""
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("--access-key and --secret-key go together (or $MQ_ACCESS_KEY and $MQ_SECRET_KEY)")
    ctx.obj = Context(namesrv, access_key, secret_key)


class _CompleteWrites(io.RawIOBase):
    """A file descriptor whose ``write`` returns only once every byte is written.

    A blocking write to a full pipe can return short when the thread is interrupted after some bytes went
    through, and the buffered stream over it then loses the rest without an error. uvloop does this to the
    first such write after its loop closes (libuv's teardown interrupts the thread): ``mq topicList --json``
    with 5,000 topics, read by a slower process, was cut at 64 KiB and exited 0."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:  # type: ignore[override]
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            view = view[os.write(self._fd, view):]
        return total


def _complete_stdio() -> None:
    """Put ``_CompleteWrites`` under ``sys.stdout`` and ``sys.stderr`` (when they are the real descriptors)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue  # replaced (a test runner): leave it alone
        stream.flush()
        raw = _CompleteWrites(fd)
        buffered = io.BufferedWriter(raw) if not stream.write_through else raw
        setattr(sys, name, io.TextIOWrapper(buffered, encoding=stream.encoding, errors=stream.errors,  # type: ignore[arg-type]
                                            line_buffering=stream.line_buffering,
                                            write_through=stream.write_through))


def main(argv: list[str] | None = None) -> None:
    from mq.errors import MQError

    debug = os.environ.get("MQ_DEBUG") not in (None, "", "0")
    _complete_stdio()
    try:
        rv = cli.main(args=argv, prog_name="mq", standalone_mode=False)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`mq ... | head`): stop quietly with 1, as click does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except MQError as exc:
        if debug:
            raise
        click.secho(f"error: {exc}", err=True, fg="red")
        sys.exit(1)
    except Exception as exc:  # the one place unexpected errors are shown
        if debug:
            raise
        click.secho(f"error: unexpected {type(exc).__name__}: {exc} (set MQ_DEBUG=1 for a traceback)",
                    err=True, fg="red")
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
