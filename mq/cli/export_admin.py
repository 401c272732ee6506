"""`mq exportMetadata`, `mq exportConfigs`, `mq exportMetrics`: mqadmin 4.9's export/ commands, same options,
same file names, same JSON documents (as fastjson writes them: a null member is left out).

Each command writes one file under ``-f/--filePath`` (default ``/tmp/rocketmq/export``, created if missing),
prints where it wrote it (``--json``: ``{"file": PATH, "document": DOC}``) and exits 0; a cluster the name server
does not know, a broker that cannot be asked, or a file that cannot be written ends with one line and exit 1;
bad option combinations are usage errors (exit 2) before any network call.

exportMetadata (-c CLUSTER | -b ADDR) [-f DIR] [-t | -g] [-s]
    "User" topics and subscription groups (DefaultMQAdminExt getUserTopicConfig / getUserSubscriptionGroup):
    the broker's system topics (GET_SYSTEM_TOPIC_LIST_FROM_BROKER, plus RocketMQ's fixed ones and ``rmq_sys_*``,
    which a 5.x mqadmin also treats as system) are left out, and so are ``%RETRY%`` and ``%DLQ%`` topics unless
    ``-s``; groups named ``CID_RMQ_SYS_*`` and mqadmin's built-in groups are left out.
    -t and -g are flags (no value): -t writes topics only to ``topic.json``, -g groups only to
    ``subscriptionGroup.json``; given both, -t wins, as in mqadmin. Otherwise ``metadata.json``.

    -c: every master of the cluster; a topic found on several masters gets the sum of their read/write queue
    numbers, a group the sum of its retryQueueNums (the other fields are the last broker's, brokers taken in name
    order). Document: ``{"topicConfigTable": {topic: TopicConfig}, "subscriptionGroupTable": {group:
    SubscriptionGroupConfig}, "exportTime": ms}`` without the table that -t/-g leaves out.

    -b -t / -b -g: the broker's wrapper as mqadmin writes it, ``{"topicConfigTable": ..., "dataVersion":
    {"timestamp", "counter"}}`` / ``{"subscriptionGroupTable": ..., "dataVersion": ...}``, no exportTime.

exportConfigs -c CLUSTER [-f DIR]  ->  configs.json
    ``{"brokerConfigs": {brokerName: {16 keys of the master's config}}, "clusterScale": {"namesrvSize",
    "masterBrokerSize", "slaveBrokerSize"}}``; the 16 keys are ``BROKER_CONFIG_KEYS``. namesrvSize counts the
    name servers given with -n. As in mqadmin, the document holds no name server config and no other broker key
    (``listenPort`` is not among the 16).

exportMetrics -c CLUSTER [-f DIR]  ->  metrics.json
    ``{"evaluateReport": {brokerName: {"runtimeEnv": {"cpuNum", "totalMemKBytes"}, "runtimeQuota": {"diskRatio":
    {"commitLogDiskRatio", "consumeQueueDiskRatio"}, "tps": {"normalInTps", "normalOutTps", "transInTps",
    "scheduleInTps"}, "oneDayNum": {"normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum",
    "scheduleOneDayInNum"}, "messageAverageSize", "topicSize", "groupSize"}, "runtimeVersion": {"rocketmqVersion",
    "clientInfo": ["LANGUAGE%VERSION", ...]}}}, "totalData": {"totalTps": {"totalNormalInTps", "totalNormalOutTps",
    "totalTransInTps", "totalScheduleInTps"}, "totalOneDayNum": {the four oneDayNum keys summed}}}``.
    normal*Tps is the first (10 s) figure of putTps / getTransferedTps; normalOneDay*Num is yesterday's count
    (today's morning total minus yesterday's); trans/schedule figures are the TOPIC_PUT_NUMS stats of
    RMQ_SYS_TRANS_HALF_TOPIC / SCHEDULE_TOPIC_XXXX (last minute's TPS, compute24HourSum), where a broker, ours
    as a Java one, counts prepared and delayed messages; 0 when it has none; topicSize / groupSize count the user
    topics (no retry/DLQ) and groups; clientInfo lists the language and version of the clients online in those
    groups on that broker.

What a broker does not provide is left out, as fastjson leaves out a null: ``runtimeEnv`` has ``cpuNum`` (the
broker config's ``clientCallbackExecutorThreads``, the number of processors) and no ``totalMemKBytes``, which a
4.9 broker's runtime table, ours as a Java one, does not have. A broker config key of the 16 that a broker does not
report is left out of brokerConfigs (mqadmin would stop on a NullPointerException). ``messageAverageSize`` is the
broker's ``putMessageAverageSize`` when it reports one, else computed from ``putMessageSizeTotal /
putMessageTimesTotal`` exactly as a Java broker computes that key (a total of 0 counts as 1).

Where mqadmin is plainly wrong we do the sensible thing:
- ``exportMetadata -b`` without -t or -g writes nothing in mqadmin; here it writes ``metadata.json`` in the -c
  document form for that one broker.
- An unknown cluster makes mqadmin print ``[error]`` and still write an empty document (exportMetrics stops on a
  NullPointerException); here it is an error naming the known clusters, and nothing is written. A cluster
  without a master is an error too.
- -b together with -c is a usage error, as in this toolkit's other -b/-c commands (mqadmin silently uses -b).
- ``rocketmqVersion`` is the broker's own version (``brokerVersionDesc``), where mqadmin writes the version of
  the mqadmin tool itself under every broker.
- clientInfo asks each broker about its own clients (GET_CONSUMER_CONNECTION_LIST on that broker), where mqadmin
  asks whichever broker the group's retry topic routes to.
- Broker sets without a master are skipped (mqadmin fails on them); their slaves still count in slaveBrokerSize.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

import click

from mq.cli.common import json_option, with_admin
from mq.cli.stats_admin import TOPIC_PUT_NUMS, check_addr

DEFAULT_FILE_PATH = "/tmp/rocketmq/export"

#: MixAll.CID_RMQ_SYS_PREFIX and DefaultMQAdminExtImpl.SYSTEM_GROUP_SET: groups getUserSubscriptionGroup drops.
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
SYSTEM_GROUPS = frozenset({
    "DEFAULT_CONSUMER", "DEFAULT_PRODUCER", "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER", "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS",
})

#: ExportConfigsCommand.needBrokerProprties: the broker config keys exportConfigs keeps.
BROKER_CONFIG_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
    "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable", "traceOn",
    "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)

#: totalData.totalTps key -> runtimeQuota.tps key it sums.
TOTAL_TPS_KEYS = {"totalNormalInTps": "normalInTps", "totalNormalOutTps": "normalOutTps",
                  "totalTransInTps": "transInTps", "totalScheduleInTps": "scheduleInTps"}
ONE_DAY_KEYS = ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum")


# ---------------------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------------------
def without_none(d: dict[str, Any]) -> dict[str, Any]:
    """fastjson's default: a map member whose value is null is not written."""
    return {k: v for k, v in d.items() if v is not None}


def is_user_topic(topic: str, system_topics: set[str], special: bool) -> bool:
    """getUserTopicConfig's filter: no system topic; retry and DLQ topics only with ``special`` (-s).

    System: what the broker lists (GET_SYSTEM_TOPIC_LIST_FROM_BROKER), RocketMQ's fixed system topics, and the
    ``rmq_sys_`` prefix (our broker keeps its timer topic ``rmq_sys_wheel_timer`` out of its list)."""
    from mq.common.topic import is_dlq_topic, is_retry_topic, is_system_topic

    if is_system_topic(topic, system_topics):
        return False
    return special or not (is_retry_topic(topic) or is_dlq_topic(topic))


def is_user_group(group: str) -> bool:
    """getUserSubscriptionGroup's filter: no ``CID_RMQ_SYS_*`` group and none of mqadmin's built-in groups."""
    return not group.startswith(SYS_GROUP_PREFIX) and group not in SYSTEM_GROUPS


def merge_tables(tables: Iterable[dict[str, dict[str, Any]]], summed: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Wire-form tables of several brokers as one: a name found again takes the later entry, with the ``summed``
    members added up (exportMetadata -c: queue numbers of topics, retryQueueNums of groups)."""
    merged: dict[str, dict[str, Any]] = {}
    for table in tables:
        for name, entry in table.items():
            prev = merged.get(name)
            merged[name] = dict(entry) if prev is None else {**entry, **{k: prev[k] + entry[k] for k in summed}}
    return merged


def pick_broker_config(props: dict[str, str]) -> dict[str, str]:
    """The ``BROKER_CONFIG_KEYS`` a broker reports, in that order."""
    return {k: props[k] for k in BROKER_CONFIG_KEYS if k in props}


def _int(kv: dict[str, str], key: str) -> int:
    try:
        return int(kv.get(key) or 0)
    except ValueError:
        return 0


def message_average_size(kv: dict[str, str]) -> str | None:
    """``putMessageAverageSize``, or the Java broker's formula for it over the counters we report."""
    if "putMessageAverageSize" in kv:
        return kv["putMessageAverageSize"]
    if "putMessageSizeTotal" not in kv or "putMessageTimesTotal" not in kv:
        return None
    return str(_int(kv, "putMessageSizeTotal") / (_int(kv, "putMessageTimesTotal") or 1))


def _minute_tps_and_day(bsd: Any) -> tuple[float, int]:
    from mq.cli.stats_admin import sum_24h

    return (bsd.stats_minute.tps, sum_24h(bsd)) if bsd is not None else (0.0, 0)


def runtime_quota(kv: dict[str, str], trans: Any, schedule: Any, topic_size: int, group_size: int) -> dict[str, Any]:
    """One broker's ``runtimeQuota`` from its runtime table and the half/schedule topics' BrokerStatsData."""
    from mq.cli.broker_admin import first_number, yesterday_counts

    trans_tps, trans_day = _minute_tps_and_day(trans)
    schedule_tps, schedule_day = _minute_tps_and_day(schedule)
    day_in, day_out = yesterday_counts(kv)
    return without_none({
        "diskRatio": without_none({"commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                                   "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio")}),
        "tps": {"normalInTps": first_number(kv.get("putTps")), "normalOutTps": first_number(kv.get("getTransferedTps")),
                "transInTps": trans_tps, "scheduleInTps": schedule_tps},
        "oneDayNum": {"normalOneDayInNum": day_in, "normalOneDayOutNum": day_out, "transOneDayInNum": trans_day,
                      "scheduleOneDayInNum": schedule_day},
        "messageAverageSize": message_average_size(kv),
        "topicSize": topic_size,
        "groupSize": group_size,
    })


def client_info(connections: Iterable[Any]) -> list[str]:
    """``LANGUAGE%VERSION`` of each connection (mqadmin's clientInfo set), sorted."""
    from mq.cli.consumer_status import version_desc

    return sorted({f"{c.language.name}%{version_desc(c.version)}" for c in connections})


def total_data(reports: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``totalData``: the tps and oneDayNum figures of every broker's report summed."""
    tps = {total: 0.0 for total in TOTAL_TPS_KEYS}
    day = {key: 0 for key in ONE_DAY_KEYS}
    for report in reports:
        quota = report["runtimeQuota"]
        for total, key in TOTAL_TPS_KEYS.items():
            tps[total] += quota["tps"][key]
        for key in ONE_DAY_KEYS:
            day[key] += quota["oneDayNum"][key]
    return {"totalTps": tps, "totalOneDayNum": day}


def metadata_file_name(only_topic: bool, only_group: bool) -> str:
    """-t wins over -g, as in mqadmin."""
    return "topic.json" if only_topic else "subscriptionGroup.json" if only_group else "metadata.json"


def write_document(file_path: str, name: str, document: Any) -> Path:
    """``document`` as JSON in ``file_path/name``, creating the directory; failures are one-line ConfigErrors."""
    from mq.cli.console import to_json
    from mq.errors import ConfigError

    directory = Path(file_path.strip() or DEFAULT_FILE_PATH)
    target = directory / name
    try:
        directory.mkdir(parents=True, exist_ok=True)
        target.write_text(to_json(document) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {target} (-f/--filePath): {exc.strerror or exc}") from None
    return target


# ---------------------------------------------------------------------------------------------------------
# admin calls
# ---------------------------------------------------------------------------------------------------------
async def user_topic_config(admin: Any, addr: str, special: bool) -> Any:
    """DefaultMQAdminExt.getUserTopicConfig: the broker's TopicConfigSerializeWrapper, user topics only."""
    wrapper = await admin.get_all_topic_config(addr)
    system = await admin.get_system_topic_list_from_broker(addr)
    wrapper.topic_config_table = {name: tc for name, tc in wrapper.topic_config_table.items()
                                  if is_user_topic(name, system, special)}
    return wrapper


async def user_subscription_group(admin: Any, addr: str) -> Any:
    """DefaultMQAdminExt.getUserSubscriptionGroup: the broker's SubscriptionGroupWrapper, user groups only."""
    wrapper = await admin.get_all_subscription_group(addr)
    wrapper.subscription_group_table = {name: cfg for name, cfg in wrapper.subscription_group_table.items()
                                        if is_user_group(name)}
    return wrapper


def _no_master(cluster: str) -> Exception:
    from mq.errors import BrokerError
    from mq.protocol.codes import ResponseCode

    return BrokerError(ResponseCode.SYSTEM_ERROR, f"cluster {cluster!r} has no master broker")


async def master_addrs(admin: Any, cluster: str) -> dict[str, str]:
    """Broker name -> master address of ``cluster``; unknown (BrokerError naming the known ones) or masterless:
    BrokerError."""
    masters = await admin.master_addrs(cluster)
    if not masters:
        raise _no_master(cluster)
    return masters


def _table(wrapper: Any, attr: str) -> dict[str, dict[str, Any]]:
    return {name: value.to_json_value() for name, value in getattr(wrapper, attr).items()}


async def metadata_document(admin: Any, addrs: Iterable[str], only_topic: bool, only_group: bool,
                            special: bool) -> dict[str, Any]:
    """The -c form: the user topics and groups of ``addrs`` merged, with exportTime."""
    doc: dict[str, Any] = {}
    addrs = list(addrs)
    if only_topic or not only_group:
        doc["topicConfigTable"] = merge_tables(
            [_table(await user_topic_config(admin, a, special), "topic_config_table") for a in addrs],
            ("readQueueNums", "writeQueueNums"))
    if not only_topic:
        doc["subscriptionGroupTable"] = merge_tables(
            [_table(await user_subscription_group(admin, a), "subscription_group_table") for a in addrs],
            ("retryQueueNums",))
    doc["exportTime"] = int(time.time() * 1000)
    return doc


async def broker_wrapper_document(admin: Any, addr: str, only_topic: bool, special: bool) -> dict[str, Any]:
    """``-b -t`` / ``-b -g``: the broker's wrapper with its dataVersion, as mqadmin writes it."""
    if only_topic:
        return (await user_topic_config(admin, addr, special)).to_json_value()
    return (await user_subscription_group(admin, addr)).to_json_value()


async def broker_configs_document(admin: Any, cluster: str) -> dict[str, Any]:
    """exportConfigs' document: the masters' main config keys and the size of the cluster."""
    brokers = await admin.cluster_broker_addrs(cluster)  # unknown cluster: BrokerError
    masters = [(name, addr) for name, broker_id, addr in brokers if broker_id == 0]
    if not masters:
        raise _no_master(cluster)
    configs = {}
    for name, addr in masters:
        props = await admin.get_broker_config(addr)
        configs[props.get("brokerName", name)] = pick_broker_config(props)
    scale = {"namesrvSize": len(admin.namesrv_addrs), "masterBrokerSize": len(masters),
             "slaveBrokerSize": len(brokers) - len(masters)}
    return {"brokerConfigs": configs, "clusterScale": scale}


async def _stats_or_none(admin: Any, addr: str, topic: str) -> Any:
    """TOPIC_PUT_NUMS of ``topic``, or None when the broker answers with an error (mqadmin catches it)."""
    from mq.errors import BrokerError

    try:
        return await admin.view_broker_stats_data(addr, TOPIC_PUT_NUMS, topic)
    except BrokerError:
        return None


async def _online_connections(admin: Any, addr: str, groups: Iterable[str]) -> list[Any]:
    from mq.errors import BrokerError

    connections = []
    for group in groups:
        try:
            connections.extend((await admin.examine_consumer_connection_info(addr, group)).connection_set)
        except BrokerError:  # not online here: mqadmin skips the group too
            continue
    return connections


async def broker_report(admin: Any, addr: str) -> dict[str, Any]:
    """One broker's ``evaluateReport`` entry."""
    from mq.common.topic import SCHEDULE_TOPIC, TRANS_HALF_TOPIC

    kv = await admin.fetch_broker_runtime_stats(addr)
    props = await admin.get_broker_config(addr)
    groups = (await user_subscription_group(admin, addr)).subscription_group_table
    topics = (await user_topic_config(admin, addr, False)).topic_config_table
    trans = await _stats_or_none(admin, addr, TRANS_HALF_TOPIC)
    schedule = await _stats_or_none(admin, addr, SCHEDULE_TOPIC)
    return {
        "runtimeEnv": without_none({"cpuNum": props.get("clientCallbackExecutorThreads"),
                                    "totalMemKBytes": kv.get("totalMemKBytes")}),
        "runtimeQuota": runtime_quota(kv, trans, schedule, len(topics), len(groups)),
        "runtimeVersion": without_none({"rocketmqVersion": kv.get("brokerVersionDesc"),
                                        "clientInfo": client_info(await _online_connections(admin, addr, groups))}),
    }


async def metrics_document(admin: Any, cluster: str) -> dict[str, Any]:
    """exportMetrics' document: a report per master of ``cluster`` and their totals."""
    reports = {name: await broker_report(admin, addr) for name, addr in (await master_addrs(admin, cluster)).items()}
    return {"evaluateReport": reports, "totalData": total_data(reports.values())}


# ---------------------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------------------
def _emit(json_mode: bool, path: Path, document: dict[str, Any], summary: str) -> None:
    from mq.cli.console import Console

    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"file": str(path), "document": document})
    else:
        console.line(f"export {path} success")
        console.line(summary)


def _metadata_summary(document: dict[str, Any], source: str) -> str:
    parts = []
    if "topicConfigTable" in document:
        parts.append(f"{len(document['topicConfigTable'])} topic(s)")
    if "subscriptionGroupTable" in document:
        parts.append(f"{len(document['subscriptionGroupTable'])} subscription group(s)")
    return f"{' and '.join(parts)} of {source}"


def _configs_summary(document: dict[str, Any], cluster: str) -> str:
    scale = document["clusterScale"]
    return (f"cluster {cluster}: {scale['masterBrokerSize']} master(s), {scale['slaveBrokerSize']} slave(s), "
            f"{scale['namesrvSize']} name server(s)")


def _metrics_summary(document: dict[str, Any], cluster: str) -> str:
    tps = document["totalData"]["totalTps"]
    return (f"{len(document['evaluateReport'])} broker(s) of cluster {cluster}: in {tps['totalNormalInTps']:.2f} "
            f"TPS, out {tps['totalNormalOutTps']:.2f} TPS")


# ---------------------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------------------
def _check_optional_addr(ctx: Any, param: Any, value: str | None) -> str | None:
    return check_addr(ctx, param, value) if value is not None else None


_cluster_option = click.option("-c", "--cluster", "--clusterName", "cluster", help="Cluster to export.")
_file_option = click.option("-f", "--file-path", "--filePath", "file_path", default=DEFAULT_FILE_PATH,
                            show_default=True, help="Directory to write the JSON file to (created if missing).")


@click.command("exportMetadata")
@_cluster_option
@click.option("-b", "--broker-addr", "--brokerAddr", "broker", callback=_check_optional_addr,
              help="Broker to export (ip:port).")
@_file_option
@click.option("-t", "--topic", "only_topic", is_flag=True, help="Only topics, to topic.json (wins over -g).")
@click.option("-g", "--subscription-group", "--subscriptionGroup", "only_group", is_flag=True,
              help="Only subscription groups, to subscriptionGroup.json.")
@click.option("-s", "--special-topic", "--specialTopic", "special", is_flag=True,
              help="Include %RETRY% and %DLQ% topics.")
@json_option
@click.pass_obj
def export_metadata(obj, cluster: str | None, broker: str | None, file_path: str, only_topic: bool,
                    only_group: bool, special: bool, json_mode: bool) -> None:
    """Export the topics and subscription groups of a cluster or broker to metadata.json."""
    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -c/--clusterName and -b/--brokerAddr")
    cluster = cluster.strip() if cluster else None

    async def run(admin) -> dict[str, Any]:
        if broker and (only_topic or only_group):
            return await broker_wrapper_document(admin, broker, only_topic, special)
        addrs = [broker] if broker else (await master_addrs(admin, cluster)).values()
        return await metadata_document(admin, addrs, only_topic, only_group, special)

    document = with_admin(obj, run, timeout=10.0)
    path = write_document(file_path, metadata_file_name(only_topic, only_group), document)
    _emit(json_mode, path, document, _metadata_summary(document, f"broker {broker}" if broker else
                                                       f"cluster {cluster}"))


@click.command("exportConfigs")
@click.option("-c", "--cluster", "--clusterName", "cluster", required=True, help="Cluster to export.")
@_file_option
@json_option
@click.pass_obj
def export_configs(obj, cluster: str, file_path: str, json_mode: bool) -> None:
    """Export the main broker configs and the size of a cluster to configs.json."""
    _export_cluster(obj, cluster, file_path, "configs.json", broker_configs_document, _configs_summary, json_mode)


@click.command("exportMetrics")
@click.option("-c", "--cluster", "--clusterName", "cluster", required=True, help="Cluster to export.")
@_file_option
@json_option
@click.pass_obj
def export_metrics(obj, cluster: str, file_path: str, json_mode: bool) -> None:
    """Export the runtime figures (TPS, daily counts, sizes, client versions) of a cluster to metrics.json."""
    _export_cluster(obj, cluster, file_path, "metrics.json", metrics_document, _metrics_summary, json_mode)


def _export_cluster(obj, cluster: str, file_path: str, name: str, build, summarize, json_mode: bool) -> None:
    """exportConfigs / exportMetrics: ``build(admin, cluster)``, written to ``file_path/name``, then reported."""
    cluster = cluster.strip()
    document = with_admin(obj, lambda admin: build(admin, cluster), timeout=10.0)
    path = write_document(file_path, name, document)
    _emit(json_mode, path, document, summarize(document, cluster))
