"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25) in RocketMQ 4.9.7's terms.

**getBrokerConfig.** RocketMQ answers every field of its BrokerConfig, NettyServerConfig, NettyClientConfig and
MessageStoreConfig as ``key=value`` lines (``ROCKETMQ_KEYS``; fields that are null are left out), which mqadmin's
getBrokerConfig and exportConfigs and the dashboard read. This broker answers the same keys, spelled as RocketMQ
spells them, then its own settings RocketMQ does not have (timer, schedule poll, flow-control bounds, ...). Every
value is true of this broker:

- a key backed by one of its settings shows the setting (``brokerIP1`` the advertised address,
  ``storePathCommitLog`` the commit log's directory, ``haListenPort`` the port the HA service listens on);
- ``clientCallbackExecutorThreads`` shows RocketMQ's default, the number of processors: mqadmin's exportMetrics
  reports it as the machine's cpuNum (callbacks run on the event loop here);
- the server's remoting keys are ``mq.daemon.remoting_keys``'s;
- a key that names a pool of worker threads shows how many workers serve that kind of request here: the size
  of its worker group, or 1 where the kind is answered on the event loop as it is read (pulls, offsets,
  client management; their queue capacity is then 0: nothing waits);
- a limit this broker does not enforce shows the largest value of the key's Java type (2147483647 for the
  client's semaphores, 9223372036854775807 for the queue waits), a limit that is never reached;
- a key of a feature this broker does not have shows the value that turns the feature off
  (``enableDLegerCommitLog=false``, ``enableLmq=false``, ``enableConsumeQueueExt=false``, ...);
- a key that only matters with such a feature on, or that RocketMQ 4.9.7 itself never reads, shows RocketMQ's
  default (``commercialEnable``, ``highSpeedMode``, ``maxDelayTime``, ``transientStorePoolSize``, ...).

docs/operations.md ("What mq does differently") lists the keys of the last three kinds.

**updateBrokerConfig.** ``RUNTIME_KEYS`` are the keys RocketMQ 4.9.7 reads again on every use (so a change
applies at once) that this broker implements; it applies them at once too, in RocketMQ's spelling or as the
camelCase of the field. RocketMQ also accepts every other key (and unknown ones), stores the value in its config
file and uses it after a restart; this broker refuses them, naming the keys it can change, so that an operator
is never told a change succeeded that has not happened.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from mq.daemon.remoting_keys import server_keys
from mq.protocol.bodies import DataVersion
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:  # pragma: no cover
    from mq.daemon.broker.controller import BrokerController
    from mq.remoting import Connection as RemotingConnection

log = logging.getLogger(__name__)

INT_MAX = str(2**31 - 1)
LONG_MAX = str(2**63 - 1)

#: every key of RocketMQ 4.9.7's getBrokerConfig (BrokerConfig, NettyServerConfig, NettyClientConfig,
#: MessageStoreConfig; ``haMasterAddress`` and the DLedger keys are null by default and so absent)
ROCKETMQ_KEYS = frozenset("""
rocketmqHome namesrvAddr brokerIP1 brokerIP2 brokerName brokerClusterName brokerId brokerPermission
defaultTopicQueueNums autoCreateTopicEnable clusterTopicEnable brokerTopicEnable autoCreateSubscriptionGroup
messageStorePlugIn msgTraceTopicName traceTopicEnable sendMessageThreadPoolNums putMessageFutureThreadPoolNums
pullMessageThreadPoolNums processReplyMessageThreadPoolNums queryMessageThreadPoolNums adminBrokerThreadPoolNums
clientManageThreadPoolNums consumerManageThreadPoolNums heartbeatThreadPoolNums endTransactionThreadPoolNums
flushConsumerOffsetInterval flushConsumerOffsetHistoryInterval rejectTransactionMessage
fetchNamesrvAddrByAddressServer sendThreadPoolQueueCapacity putThreadPoolQueueCapacity pullThreadPoolQueueCapacity
replyThreadPoolQueueCapacity queryThreadPoolQueueCapacity clientManagerThreadPoolQueueCapacity
consumerManagerThreadPoolQueueCapacity heartbeatThreadPoolQueueCapacity endTransactionPoolQueueCapacity
filterServerNums longPollingEnable shortPollingTimeMills notifyConsumerIdsChangedEnable highSpeedMode
commercialEnable commercialTimerCount commercialTransCount commercialBigCount commercialBaseCount transferMsgByHeap
maxDelayTime regionId registerBrokerTimeoutMills slaveReadEnable disableConsumeIfConsumerReadSlowly
consumerFallbehindThreshold brokerFastFailureEnable waitTimeMillsInSendQueue waitTimeMillsInPullQueue
waitTimeMillsInHeartbeatQueue waitTimeMillsInTransactionQueue startAcceptSendRequestTimeStamp traceOn
enableCalcFilterBitMap expectConsumerNumUseFilter maxErrorRateOfBloomFilter filterDataCleanTimeSpan
filterSupportRetry enablePropertyFilter compressedRegister forceRegister registerNameServerPeriod
transactionTimeOut transactionCheckMax transactionCheckInterval aclEnable storeReplyMessageEnable enableDetailStat
autoDeleteUnusedStats isolateLogEnable
listenPort serverWorkerThreads serverCallbackExecutorThreads serverSelectorThreads serverOnewaySemaphoreValue
serverAsyncSemaphoreValue serverChannelMaxIdleTimeSeconds serverSocketSndBufSize serverSocketRcvBufSize
writeBufferHighWaterMark writeBufferLowWaterMark serverSocketBacklog serverPooledByteBufAllocatorEnable
useEpollNativeSelector
clientWorkerThreads clientCallbackExecutorThreads clientOnewaySemaphoreValue clientAsyncSemaphoreValue
connectTimeoutMillis channelNotActiveInterval clientChannelMaxIdleTimeSeconds clientSocketSndBufSize
clientSocketRcvBufSize clientPooledByteBufAllocatorEnable clientCloseSocketIfTimeout useTLS
storePathRootDir storePathCommitLog mappedFileSizeCommitLog mappedFileSizeConsumeQueue enableConsumeQueueExt
mappedFileSizeConsumeQueueExt bitMapLengthConsumeQueueExt flushIntervalCommitLog commitIntervalCommitLog
useReentrantLockWhenPutMessage flushCommitLogTimed flushIntervalConsumeQueue cleanResourceInterval
deleteCommitLogFilesInterval deleteConsumeQueueFilesInterval destroyMapedFileIntervalForcibly
redeleteHangedFileInterval deleteWhen diskMaxUsedSpaceRatio fileReservedTime putMsgIndexHightWater maxMessageSize
checkCRCOnRecover flushCommitLogLeastPages commitCommitLogLeastPages flushLeastPagesWhenWarmMapedFile
flushConsumeQueueLeastPages flushCommitLogThoroughInterval commitCommitLogThoroughInterval
flushConsumeQueueThoroughInterval maxTransferBytesOnMessageInMemory maxTransferCountOnMessageInMemory
maxTransferBytesOnMessageInDisk maxTransferCountOnMessageInDisk accessMessageInMemoryMaxRatio messageIndexEnable
maxHashSlotNum maxIndexNum maxMsgsNumBatch messageIndexSafe haListenPort haSendHeartbeatInterval
haHousekeepingInterval haTransferBatchSize haSlaveFallbehindMax brokerRole flushDiskType syncFlushTimeout
slaveTimeout messageDelayLevel flushDelayOffsetInterval cleanFileForciblyEnable warmMapedFileEnable
offsetCheckInSlave debugLockEnable duplicationEnable diskFallRecorded osPageCacheBusyTimeOutMills
defaultQueryMaxNum transientStorePoolEnable transientStorePoolSize fastFailIfNoBufferInStorePool
enableDLegerCommitLog isEnableBatchPush enableScheduleMessageStats enableLmq enableMultiDispatch
maxLmqConsumeQueueNum enableScheduleAsyncDeliver scheduleAsyncDeliverMaxPendingLimit
scheduleAsyncDeliverMaxResendNum2Blocked
""".split())

#: RocketMQ keys spelled otherwise than the camelCase of this broker's field: key -> (config part, field)
_SPELLED: dict[str, tuple[str, str]] = {
    "osPageCacheBusyTimeOutMills": ("store", "os_page_cache_busy_timeout_mills"),
    "checkCRCOnRecover": ("store", "check_crc_on_recover"),
}
#: fields shown under a RocketMQ key computed from them (``_derived``), not under their own name
_SHOWN_AS_DERIVED = frozenset({"broker_ip1", "broker_ip2", "store_path_commit_log", "ha_listen_port",
                               "ha_master_address"})

#: Keys whose RocketMQ default is true of this broker: the feature is off here and RocketMQ's default is "off", or
#: the key only matters with a feature this broker does not have, or RocketMQ 4.9.7 never reads it.
_ROCKETMQ_DEFAULTS = {
    # features this broker does not have, off
    "messageStorePlugIn": "", "fetchNamesrvAddrByAddressServer": "false", "highSpeedMode": "false",
    "disableConsumeIfConsumerReadSlowly": "false", "startAcceptSendRequestTimeStamp": "0",
    "enableCalcFilterBitMap": "false", "autoDeleteUnusedStats": "false", "isolateLogEnable": "false",
    "enableConsumeQueueExt": "false", "debugLockEnable": "false", "fastFailIfNoBufferInStorePool": "false",
    "enableDLegerCommitLog": "false", "isEnableBatchPush": "false", "enableLmq": "false",
    "enableMultiDispatch": "false", "enableScheduleAsyncDeliver": "false", "useTLS": "false",
    # what this broker does, as RocketMQ's default says
    "transferMsgByHeap": "true",  # a pull's records are copied into the answer
    "enableDetailStat": "true",  # per topic and per topic@group statistics are kept
    "useReentrantLockWhenPutMessage": "true",  # the put lock is a blocking lock, not a spin lock
    "flushCommitLogTimed": "true",  # the ASYNC_FLUSH thread sleeps its interval, puts do not wake it
    "clientSocketSndBufSize": "0", "clientSocketRcvBufSize": "0",  # the operating system's buffers
    # only with a feature this broker does not have
    "consumerFallbehindThreshold": "17179869184", "expectConsumerNumUseFilter": "32",
    "maxErrorRateOfBloomFilter": "20", "filterDataCleanTimeSpan": "86400000",
    "mappedFileSizeConsumeQueueExt": "50331648", "bitMapLengthConsumeQueueExt": "112",
    "commitIntervalCommitLog": "200", "commitCommitLogLeastPages": "4", "commitCommitLogThoroughInterval": "200",
    "transientStorePoolSize": "5", "maxLmqConsumeQueueNum": "20000", "scheduleAsyncDeliverMaxPendingLimit": "2000",
    "scheduleAsyncDeliverMaxResendNum2Blocked": "3", "flushLeastPagesWhenWarmMapedFile": "4096",
    "redeleteHangedFileInterval": "120000", "commercialBaseCount": "1",
    # never read by RocketMQ 4.9.7 either
    "flushConsumerOffsetHistoryInterval": "60000", "commercialEnable": "true", "commercialTimerCount": "1",
    "commercialTransCount": "1", "commercialBigCount": "1", "maxDelayTime": "40", "putMsgIndexHightWater": "600000",
    "channelNotActiveInterval": "60000",
}
#: Keys whose value describes this broker where RocketMQ's default would not.
_THIS_BROKER = {
    # the one event loop thread also runs the outbound client and completes puts (the server's keys: see
    # mq.daemon.remoting_keys)
    "clientWorkerThreads": "1", "putMessageFutureThreadPoolNums": "1",
    # answered on the event loop as read: one "thread", nothing queued
    "pullMessageThreadPoolNums": "1", "pullThreadPoolQueueCapacity": "0", "clientManageThreadPoolNums": "1",
    "clientManagerThreadPoolQueueCapacity": "0", "consumerManageThreadPoolNums": "1",
    "consumerManagerThreadPoolQueueCapacity": "0", "putThreadPoolQueueCapacity": "0",
    # limits not enforced here
    "clientOnewaySemaphoreValue": INT_MAX, "clientAsyncSemaphoreValue": INT_MAX,
    "waitTimeMillsInPullQueue": LONG_MAX, "waitTimeMillsInHeartbeatQueue": LONG_MAX,
    "waitTimeMillsInTransactionQueue": LONG_MAX,
    # no pooled buffers; connections to the name servers are never closed for idleness or after a timeout
    "clientPooledByteBufAllocatorEnable": "false",
    "clientChannelMaxIdleTimeSeconds": "0", "clientCloseSocketIfTimeout": "false",
    # no statistics of consumers falling behind onto disk, nor of schedule deliveries per level
    "diskFallRecorded": "false", "enableScheduleMessageStats": "false",
}


def _group(c: "BrokerController", name: str) -> Any:
    return c.server.registry.groups.get(name) or c.server.registry.group(name)


def _derived(c: "BrokerController") -> dict[str, str]:
    """The keys computed from what the broker runs with."""
    cfg, scfg = c.config, c.store_config
    default = _group(c, "default").limits
    out = server_keys(c.server)
    out.update({
        "brokerIP1": cfg.advertised_host,
        "brokerIP2": cfg.broker_ip2 or cfg.advertised_host,
        "storePathCommitLog": scfg.store_path_commit_log or str(scfg.commit_log_dir()),
        "haListenPort": str(c.ha_port),
        "connectTimeoutMillis": str(int(c.registrar.client.connect_timeout * 1000)),
        # END_TRANSACTION, SEND_REPLY_MESSAGE and CONSUMER_SEND_MSG_BACK run in the default worker group
        "endTransactionThreadPoolNums": str(default.concurrency),
        "endTransactionPoolQueueCapacity": str(default.queue_capacity),
        "processReplyMessageThreadPoolNums": str(default.concurrency),
        "replyThreadPoolQueueCapacity": str(default.queue_capacity),
        # RocketMQ's default, the number of processors, which mqadmin exportMetrics reports as cpuNum
        "clientCallbackExecutorThreads": str(os.cpu_count() or 1),
    })
    if scfg.ha_master_address:  # RocketMQ leaves a null key out
        out["haMasterAddress"] = scfg.ha_master_address
    home = os.environ.get("ROCKETMQ_HOME")
    if home:  # where plain_acl.yml is read from; RocketMQ leaves the key out when it is not set
        out["rocketmqHome"] = home
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _field_keys(config: Any, part: str) -> dict[str, str]:
    """key -> field of a config dataclass's scalar fields, under RocketMQ's spelling where it differs."""
    spelled = {f: k for k, (p, f) in _SPELLED.items() if p == part}
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in _SHOWN_AS_DERIVED or not isinstance(value, (bool, int, float, str)):
            continue
        out[spelled.get(f.name, camel(f.name))] = f.name
    return out


def broker_config_table(c: "BrokerController") -> dict[str, str]:
    """Every key getBrokerConfig answers with its value: RocketMQ's keys, then this broker's own."""
    table = dict(_ROCKETMQ_DEFAULTS)
    table.update(_THIS_BROKER)
    for config in (c.config, c.store_config):
        for key, name in _field_keys(config, "broker" if config is c.config else "store").items():
            table[key] = _text(getattr(config, name))
    table.update(_derived(c))
    table["filterServerNums"] = "0"  # no filter servers
    return table


# -- updateBrokerConfig ------------------------------------------------------------------------------------
#: RocketMQ 4.9.7 keys read again on every use that this broker also applies at once: key -> (part, field)
RUNTIME_KEYS: dict[str, tuple[str, str]] = {
    **{camel(f): ("broker", f) for f in (
        "broker_permission", "auto_create_topic_enable", "auto_create_subscription_group",
        "default_topic_queue_nums", "reject_transaction_message", "notify_consumer_ids_changed_enable",
        "long_polling_enable", "short_polling_time_mills", "wait_time_mills_in_send_queue",
        "broker_fast_failure_enable", "trace_on", "region_id", "register_broker_timeout_mills",
        "compressed_register", "force_register", "transaction_check_interval", "transaction_time_out",
        "transaction_check_max", "store_reply_message_enable", "enable_property_filter", "filter_support_retry",
        "channel_expired_timeout")},
    **{camel(f): ("store", f) for f in (
        "file_reserved_time", "delete_when", "disk_max_used_space_ratio", "disk_space_warning_level_ratio",
        "clean_file_forcibly_enable", "max_transfer_bytes_on_message_in_memory",
        "max_transfer_count_on_message_in_memory", "max_transfer_bytes_on_message_in_disk",
        "max_transfer_count_on_message_in_disk", "max_msgs_num_batch", "sync_flush_timeout", "max_message_size",
        "flush_interval_commit_log", "flush_commit_log_least_pages", "flush_commit_log_thorough_interval",
        "flush_interval_consume_queue", "flush_consume_queue_least_pages", "flush_consume_queue_thorough_interval",
        "access_message_in_memory_max_ratio", "default_query_max_num", "offset_check_in_slave",
        "slave_read_enable", "slave_timeout")},
    "osPageCacheBusyTimeOutMills": ("store", "os_page_cache_busy_timeout_mills"),
}
#: the camelCase of a field is accepted too (``osPageCacheBusyTimeoutMills``)
_RUNTIME_BY_ALIAS = {**RUNTIME_KEYS, **{camel(f): (p, f) for p, f in RUNTIME_KEYS.values()}}


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties`` text (what mqadmin updateBrokerConfig sends): ``key=value`` lines, ``#`` comments."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ValueError(f"not a key=value line: {line[:60]!r}")
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out


def _known_key(key: str, config: Any, store_config: Any) -> bool:
    if key in ROCKETMQ_KEYS or key in _SPELLED:
        return True
    names = {camel(f.name) for cfg in (config, store_config) if cfg is not None for f in dataclasses.fields(cfg)}
    return key in names


def coerce_updates(config: Any, props: dict[str, str], store_config: Any = None) -> dict[str, Any]:
    """Map keys onto the fields they change, typed: ``{"broker_permission": 4, "store": {"file_reserved_time":
    48}}``; ValueError naming the key for one this broker cannot change now (or without ``store_config``, a
    store key) or a bad value."""
    out: dict[str, Any] = {}
    store_out: dict[str, Any] = {}
    for key, value in props.items():
        target = _RUNTIME_BY_ALIAS.get(key)
        if target is not None and target[0] == "store" and store_config is None:
            target = None
        if target is None:
            if not _known_key(key, config, store_config):
                raise ValueError(f"unknown broker config key {key!r}")
            keys = sorted(k for k, (p, _) in RUNTIME_KEYS.items() if store_config is not None or p == "broker")
            raise ValueError(f"{key} cannot be changed at run time (restart the broker with it in its config); "
                             f"run-time keys: {', '.join(keys)}")
        part, name = target
        cfg = config if part == "broker" else store_config
        current = getattr(cfg, name)
        try:
            if isinstance(current, bool):
                low = value.lower()
                if low not in ("true", "false"):
                    raise ValueError
                typed: Any = low == "true"
            elif isinstance(current, int):
                typed = int(value)
            else:
                typed = type(current)(value)
        except ValueError:
            raise ValueError(f"{key}: bad value {value!r} (expected {type(current).__name__})") from None
        (out if part == "broker" else store_out)[name] = typed
    if store_out:
        out["store"] = store_out
    return out


class BrokerConfigProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        #: bumped on every change (the ``version`` extField of GET_BROKER_CONFIG)
        self.config_version = DataVersion(int(time.time() * 1000), 0)

    def get_broker_config(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in broker_config_table(self.c).items())
        ext = {"version": self.config_version.to_json().decode()}
        return cmd.response(ResponseCode.SUCCESS, ext_fields=ext, body=text.encode())

    async def update_broker_config(self, conn: "RemotingConnection", cmd: RemotingCommand) -> RemotingCommand:
        try:
            props = parse_properties(bytes(cmd.body or b"").decode("utf-8"))
            updates = coerce_updates(self.c.config, props, self.c.store_config)
        except (UnicodeDecodeError, ValueError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"update broker config: {exc}")
        if not updates:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "update broker config: no key=value in the request body")
        log.info("broker config updated by %s: %s", conn.remote_addr, updates)
        store_updates = updates.pop("store", None)
        if store_updates:
            self.c.replace_store_config(**store_updates)
        if updates:
            self.c.replace_config(**updates)
        self.config_version = DataVersion(int(time.time() * 1000), self.config_version.counter + 1)
        if "broker_permission" in updates:
            await self.c.register_all(force=True)
        return cmd.response(ResponseCode.SUCCESS)


def register(controller: "BrokerController", group: str) -> BrokerConfigProcessor:
    p = BrokerConfigProcessor(controller)
    handlers: dict[int, Callable[..., Any]] = {RequestCode.GET_BROKER_CONFIG: p.get_broker_config,
                                               RequestCode.UPDATE_BROKER_CONFIG: p.update_broker_config}
    for code, handler in handlers.items():
        controller.server.register(code, handler, group=group)
    return p
