"""Settings of what runs as a client of a cluster: the client library (``ClientConfig``, ``ProducerConfig``,
``ConsumerConfig``, ``OrderlyConfig``) and the web console (``DashboardConfig``); re-exported by ``mq.config``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What every client (producer, consumer) of one ``MQClientInstance`` shares: RocketMQ ``ClientConfig``.

    Intervals are seconds (RocketMQ's are ms: ``pollNameServerInterval`` 30000 -> 30.0)."""

    #: Name servers, ``;``-separated.
    namesrv_addr: str = "127.0.0.1:9876"
    #: Empty: the first non-loopback IPv4 address of this host (RocketMQ ``RemotingUtil.getLocalAddress``).
    client_ip: str = ""
    #: "DEFAULT" becomes the PID, as in Java; give each client in one process its own name to get its own id.
    instance_name: str = "DEFAULT"
    #: Appended to the client id (``ip@instance@unit``) when set.
    unit_name: str = ""
    #: Routes of the topics in use are refreshed this often, seconds.
    poll_name_server_interval: float = 30.0
    #: A heartbeat with every group goes to every known broker this often, seconds.
    heartbeat_broker_interval: float = 30.0
    #: Consumer offsets are committed this often, seconds.
    persist_consumer_offset_interval: float = 5.0
    #: rocketmq.client.rebalance.waitInterval
    rebalance_interval: float = 20.0
    #: Delay before retrying a pull or a send-back after an exception (pullTimeDelayMillsWhenException).
    pull_time_delay_when_exception: float = 1.0
    #: Timeout of a TCP connection to a broker or name server, seconds.
    connect_timeout: float = 3.0
    #: Timeout of admin-style calls to brokers and name servers (offset queries, heartbeats, route lookups).
    call_timeout: float = 3.0
    #: BROADCASTING offsets: <dir>/<clientId>/<group>/offsets.json (rocketmq.client.localOffsetStoreDir).
    local_offset_store_dir: str = str(Path.home() / ".rocketmq_offsets")
    #: Largest body, in bytes, a consumer inflates from a compressed message; a body that would inflate past
    #: it is skipped with a WARNING, as a zlib bomb (4 MiB of zlib can inflate to 4 GiB). Producers check
    #: maxMessageSize (4 MiB by default) before they compress, so real bodies stay far below.
    max_inflated_body_size: int = 64 * 1024 * 1024
    #: ACL: with an access key every request is signed (RocketMQ's AclClientRPCHook)
    access_key: str = ""
    #: ACL: the secret key that signs requests with ``access_key``.
    secret_key: str = field(default="", repr=False)
    #: ACL: a session token sent with signed requests (optional).
    security_token: str = field(default="", repr=False)

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """``DefaultMQProducer`` settings (FEATURES.md §6.1); timeouts in seconds."""

    #: Producer group name.
    group: str = "DEFAULT_PRODUCER"
    #: Timeout of one send, retries included, seconds.
    send_msg_timeout: float = 3.0
    #: Extra attempts of a failed synchronous send (on another broker where there is one).
    retry_times_when_send_failed: int = 2
    #: Extra attempts of a failed asynchronous send.
    retry_times_when_send_async_failed: int = 2
    #: Also retry a send answered with a non-OK store status (flush or slave timeout).
    retry_another_broker_when_not_store_ok: bool = False
    #: Bodies of at least this many bytes are zlib-compressed (not batches).
    compress_msg_body_over_howmuch: int = 4096
    #: zlib level of that compression.
    compress_level: int = 5
    #: Largest body accepted by ``send``, bytes.
    max_message_size: int = 4 * 1024 * 1024
    #: Queues asked for when a send creates a topic through ``create_topic_key``.
    default_topic_queue_nums: int = 4
    #: Template topic whose route serves a topic that does not exist yet (auto-creation).
    create_topic_key: str = "TBW102"
    #: Avoid brokers that answered slowly or failed recently (latency fault tolerance).
    send_latency_fault_enable: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """``DefaultMQPushConsumer`` settings (FEATURES.md §5.6); times in seconds.

    ``message_model``: "CLUSTERING" or "BROADCASTING"; ``consume_from_where``: "LAST", "FIRST" or "TIMESTAMP"
    (``consume_timestamp`` as RocketMQ's yyyyMMddHHmmss, empty = 30 minutes ago)."""

    #: Consumer group name.
    group: str = "DEFAULT_CONSUMER"
    #: CLUSTERING (each message to one member of the group) or BROADCASTING (to every member).
    message_model: str = "CLUSTERING"
    #: Where a group with no committed offset starts: LAST, FIRST or TIMESTAMP.
    consume_from_where: str = "LAST"
    #: TIMESTAMP's start, ``yyyyMMddHHmmss``; empty: 30 minutes ago.
    consume_timestamp: str = ""
    #: Messages asked for per pull.
    pull_batch_size: int = 32
    #: A queue stops pulling while this many of its messages wait to be consumed.
    pull_threshold_for_queue: int = 1000
    #: A queue stops pulling while this many bytes of its messages wait to be consumed.
    pull_threshold_size_for_queue: int = 100 * 1024 * 1024
    #: A queue stops pulling while its waiting messages span more offsets than this.
    consume_concurrently_max_span: int = 2000
    #: Listener calls running at once.
    consume_thread_max: int = 20
    #: Messages handed to one listener call.
    consume_message_batch_max_size: int = 1
    #: Pause after each pull of a queue, seconds.
    pull_interval: float = 0.0
    #: Pause of a flow-controlled queue before it checks again, seconds.
    flow_control_delay: float = 0.05
    #: How long the broker may hold a pull that finds nothing, seconds.
    broker_suspend_max_time: float = 15.0
    #: Timeout of such a held pull on the client side, seconds.
    consumer_timeout_when_suspend: float = 30.0
    #: -1: 16 (the broker's retryMaxTimes).
    max_reconsume_times: int = -1
    #: Local re-consume delay when a send-back fails (Java: 5 s).
    local_retry_delay: float = 5.0
    #: Pulls carry the subscription expression, and the broker filters by it.
    post_subscription_when_pull: bool = True
    #: MessageListenerOrderly: queue-locked, one batch at a time per queue (timings in ``OrderlyConfig``).
    consume_orderly: bool = False


@dataclass(frozen=True, slots=True)
class OrderlyConfig:
    """Orderly push consumption (``ConsumeMessageOrderlyService``, ``ProcessQueue``, ``RebalancePushImpl``),
    RocketMQ 4.9 defaults in seconds; tests shorten them."""

    #: suspendCurrentQueueTimeMillis: pause of a queue after SUSPEND_CURRENT_QUEUE_A_MOMENT (clamped 0.01..30).
    suspend_current_queue_time: float = 1.0
    #: REBALANCE_LOCK_INTERVAL: LOCK_BATCH_MQ of every owned queue this often (the first after 1 s).
    lock_interval: float = 20.0
    #: REBALANCE_LOCK_MAX_LIVE_TIME: a client-side lock not renewed for this long no longer allows consuming.
    lock_max_live_time: float = 30.0
    #: Wait before pulling again a queue that is not locked, or re-locking after a failed lock (3000 ms).
    lock_retry_delay: float = 3.0
    #: UNLOCK_DELAY_TIME_MILLS: a removed queue that still had cached messages is unlocked this much later.
    unlock_delay: float = 20.0
    #: How long a rebalance waits for a removed queue's in-flight batch before trying again next time (1000 ms).
    consume_lock_wait: float = 1.0
    #: MAX_TIME_CONSUME_CONTINUOUSLY: one queue yields to the others after consuming this long.
    max_time_consume_continuously: float = 60.0


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """The web console (``mq dashboard``): where it listens, the cluster it shows and who may use it."""

    #: Address the console binds to (``--host`` overrides it). Any address but a loopback one requires a login:
    #: the console refuses to start without ``usersFile``.
    host: str = "127.0.0.1"
    #: HTTP port of the console (``--port`` overrides it).
    listen_port: int = 8080
    #: Name servers of the cluster shown, ``;``-separated; empty: ``-n``, else ``$NAMESRV_ADDR``, else
    #: 127.0.0.1:9876.
    namesrv_addr: str = ""
    #: ACL: the access key the console signs its requests with (a cluster with aclEnable); empty: unsigned.
    access_key: str = ""
    #: ACL: the secret key that goes with ``accessKey``.
    secret_key: str = field(default="", repr=False)
    #: YAML file of the accounts that may log in (``users: [{username, password, role}]``, passwords hashed with
    #: ``mq dashboard hash-password``); empty: no login, allowed only on a loopback address.
    users_file: str = ""
    #: Ask for a login even on a loopback address (needs ``usersFile``).
    login_required: bool = False
    #: Secret that signs session cookies; empty: a random one at each start (everyone logs in again after a
    #: restart).
    session_secret: str = field(default="", repr=False)
    #: A login lasts this long, seconds.
    session_max_age: int = 8 * 3600
    #: Session cookies only over HTTPS (set it when a TLS proxy is in front of the console).
    secure_cookies: bool = False
    #: Folder where ``mq trace analyze --html`` reports are written; the newest ``*.html`` in it is shown.
    #: Empty: no report page.
    trace_report_dir: str = ""
    #: Trace topic that message traces are read from.
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    #: Live figures (lag, TPS, cluster state) refresh this often, seconds.
    refresh_interval: float = 5.0
    #: Timeout of each call the console makes to a name server or broker, seconds.
    admin_timeout: float = 5.0
    #: Most messages a query by time range or by key shows (newest first).
    max_query_messages: int = 500
