"""Every mqadmin subcommand (rocketmq-tools 4.9.7) against our daemons and against RocketMQ 4.9.7's own, side by
side: the same commands, in the same order, on two fresh clusters; the outputs, normalised, must be the same.

Normalising removes only what differs between any two runs: addresses (name server, broker, clients), message
ids, timestamps and dates, store paths, and for the few commands that print measurements (send round trips,
TPS, hours since the earliest message, disk use) those figures. What remains, every key, column, status and
word, must match. Where a value is ours by design (getBrokerConfig's, brokerStatus's), the keys and the form of
each value are compared.

mqadmin 4.9.7 has 57 subcommands; 56 run on both sides (``test_every_subcommand_is_covered`` checks the list
mqadmin prints against this module). One is left out (``NOT_COMPARED``): ``startMonitoring`` runs until killed
and logs its findings instead of printing them. Four are compared in part,
because what they print is a measurement: ``clusterRT`` (its header: the round trips are timings),
``sendMsgStatus`` and ``checkMsgSendRT`` (every line with its figures left out), ``statsAll`` (the same);
``clusterList``'s ``#Hour`` column is left out (RocketMQ 4.9.7 reports -1 as the earliest message time until it
has written 8 MB of log).

Needs ``java``, ``$MQ_MQADMIN_CLASSPATH`` and ``$MQ_JAVA_BROKER_CLASSPATH`` (and ``$MQ_JAVA_CLIENT_CLASSPATH``
for the online consumer and producer); skips otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from mq.protocol import headers as H
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand
from tests.interop.build_cache import ClientUnavailable
from tests.interop.conftest import Daemons
from tests.interop.java_broker import JavaBrokerUnavailable, JavaCluster

pytestmark = pytest.mark.interop
LOGBACK = '<?xml version="1.0" encoding="UTF-8"?>\n<configuration><root level="OFF"/></configuration>\n'
#: subcommands not compared, and why
NOT_COMPARED = {
    "startMonitoring": "it runs until killed and logs its findings rather than printing them",
}
#: getBrokerConfig keys whose value describes this broker, not RocketMQ's default (admin_config.py says why)
OURS_BY_DESIGN = {
    "clientCloseSocketIfTimeout", "diskFallRecorded", "enableScheduleMessageStats",
    "serverPooledByteBufAllocatorEnable", "clientPooledByteBufAllocatorEnable", "useEpollNativeSelector",
}


class Side:
    """One cluster (name server and broker) and mqadmin pointed at it."""

    def __init__(self, name: str, ns: str, broker: str, store: str, home: Path) -> None:
        self.name, self.ns, self.broker, self.store, self.home = name, ns, broker, store, home
        self.classpath = os.environ["MQ_MQADMIN_CLASSPATH"]
        #: other paths that differ between the sides -> what they are called in normalised output
        self.paths: dict[str, str] = {}

    def admin(self, *args: str, timeout: float = 90, kill_after: float | None = None) -> str:
        argv = ["java", "-cp", self.classpath, f"-Drocketmq.home.dir={self.home}", f"-Duser.home={self.home}",
                "org.apache.rocketmq.tools.command.MQAdminStartup", *args, "-n", self.ns]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             stdin=subprocess.DEVNULL, cwd=self.home)
        try:
            out, _ = p.communicate(timeout=kill_after or timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            if kill_after is None:
                raise
        return out

    def raw(self, code: int, header=None, body: bytes | None = None, to_broker: bool = True):
        """One request straight over the wire (what no mqadmin subcommand does, e.g. committing an offset)."""
        import asyncio

        from mq.remoting import RemotingClient

        async def call():
            c = RemotingClient(name="side-by-side")
            try:
                return await c.invoke(self.broker if to_broker else self.ns,
                                      RemotingCommand.request(code, header.to_ext() if header else {}, body), 10)
            finally:
                await c.close()
        return asyncio.run(call())

    def normalise(self, text: str) -> str:
        for path, name in self.paths.items():  # first: such a path may lie under the store
            text = text.replace(path, name)
        text = text.replace(self.ns, "<ns>").replace(self.broker, "<broker>").replace(self.store, "<store>")
        text = text.replace(str(self.home), "<home>")
        text = re.sub(r"\b[0-9A-F]{32,}\b", "<msgid>", text)
        text = re.sub(r"(?<![\d.])1[6-9]\d{11}\b", "<ts>", text)
        text = re.sub(r"(?<=Config)@[0-9a-f]+\b", "@<hash>", text)  # Object.toString's identity hash
        text = re.sub(r"\d{4}-\d\d-\d\d[ T#]\d\d:\d\d:\d\d(?:[.,:]\d{3})?", "<date>", text)
        text = re.sub(r"/?(?:\d{1,3}\.){3}\d{1,3}:\d+", "<addr>", text)
        text = re.sub(r"(?:\d{1,3}\.){3}\d{1,3}@\S+", "<clientId>", text)
        return text


def _free_of_exceptions(text: str) -> bool:
    return "Exception" not in text


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    if shutil.which("java") is None or not os.environ.get("MQ_MQADMIN_CLASSPATH"):
        pytest.skip("set MQ_MQADMIN_CLASSPATH (rocketmq-tools 4.9.x) and have java to run mqadmin")
    root = tmp_path_factory.mktemp("sbs")
    java = JavaCluster(root / "rocketmq", brokerName="broker-a")
    try:
        java.start()
    except JavaBrokerUnavailable as exc:
        pytest.skip(str(exc))
    ours = Daemons(str(root / "mq"))
    ours.start()
    made = []
    try:
        for name, ns, broker, store in (("rocketmq", java.namesrv, java.broker_addr, str(java.store)),
                                         ("mq", ours.namesrv.address, ours.broker.address, str(root / "mq" / "store"))):
            home = root / f"home-{name}"
            (home / "conf").mkdir(parents=True)
            (home / "conf" / "logback_tools.xml").write_text(LOGBACK)
            made.append(Side(name, ns, broker, store, home))
        yield made
    finally:
        ours.stop()
        java.stop()


def both(sides, *args: str, **kw) -> tuple[str, str]:
    """Run one mqadmin subcommand on both sides (RocketMQ's first); the normalised outputs."""
    out = []
    for side in sides:
        argv = [side.broker if a == "@BROKER" else a for a in args]
        out.append(side.normalise(side.admin(*argv, **kw)))
    return out[0], out[1]


def _drop(text: str, *patterns: str) -> str:
    for p in patterns:
        text = re.sub(p, "<n>", text)
    return text


def test_every_subcommand_is_covered(tmp_path):
    """Each subcommand mqadmin lists is run by a test of this module, or named in NOT_COMPARED with the reason."""
    if shutil.which("java") is None or not os.environ.get("MQ_MQADMIN_CLASSPATH"):
        pytest.skip("set MQ_MQADMIN_CLASSPATH (rocketmq-tools 4.9.x) and have java to run mqadmin")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "logback_tools.xml").write_text(LOGBACK)
    listing = subprocess.run(["java", "-cp", os.environ["MQ_MQADMIN_CLASSPATH"], f"-Drocketmq.home.dir={tmp_path}",
                              "org.apache.rocketmq.tools.command.MQAdminStartup"], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL).stdout
    commands = re.findall(r"^   (\w+) ", listing, re.M)
    assert len(commands) >= 57, listing
    source = Path(__file__).read_text()
    run_here = {c for c in commands if f'"{c}"' in source.replace(f'"{c}": ', "")}
    assert not set(commands) - run_here - set(NOT_COMPARED), set(commands) - run_here - set(NOT_COMPARED)
    assert not run_here & set(NOT_COMPARED)


def test_topics_groups_and_routes(sides):
    rocketmq, ours = both(sides, "updateTopic", "-c", "DefaultCluster", "-t", "SbsT", "-r", "4", "-w", "4")
    assert rocketmq == ours and "create topic to <broker> success." in ours
    for args in (["updateTopic", "-b", "@BROKER", "-t", "SbsOrder", "-r", "2", "-w", "2", "-o", "true"],
                 ["updateSubGroup", "-c", "DefaultCluster", "-g", "SbsG", "-r", "5"],
                 ["updateSubGroup", "-b", "@BROKER", "-g", "SbsOther", "-d", "false"],
                 ["topicRoute", "-t", "SbsT"], ["topicRoute", "-t", "SbsT", "-l"],
                 ["topicClusterList", "-t", "SbsT"], ["topicStatus", "-t", "SbsT"],
                 ["getConsumerConfig", "-g", "SbsG"], ["updateTopicPerm", "-t", "SbsT", "-c", "DefaultCluster", "-p", "4"],
                 ["topicRoute", "-t", "SbsT"], ["updateTopicPerm", "-t", "SbsT", "-b", "@BROKER", "-p", "6"],
                 ["allocateMQ", "-t", "SbsT", "-i", "c1,c2,c3"],
                 ["topicRoute", "-t", "NoSuchTopic"]):
        rocketmq, ours = both(sides, *args)
        assert rocketmq == ours, (args, rocketmq, ours)


def test_messages(sides):
    """Sends to fixed queues (so both sides store the same thing at the same offsets), then every way mqadmin
    reads messages back."""
    for i, (tag, key) in enumerate((("TagA", "sbskey"), ("TagB", "key2"), ("TagA", "key3"))):
        rocketmq, ours = both(sides, "sendMessage", "-t", "SbsT", "-p", f"body {i}", "-c", tag, "-k", key,
                              "-b", "broker-a", "-i", str(i % 2))
        assert rocketmq == ours and "SEND_OK" in ours, (rocketmq, ours)
    offset_ids = []
    for side in sides:
        text = side.admin("queryMsgByKey", "-t", "SbsT", "-k", "sbskey")
        uniq = re.search(r"^([0-9A-F]{32,})\s", text, re.M).group(1)
        view = side.admin("queryMsgByUniqueKey", "-t", "SbsT", "-i", uniq)
        offset = int(re.search(r"CommitLog Offset:\s+(\d+)", view).group(1))
        host, port = side.broker.split(":")
        offset_id = "".join(f"{int(b):02X}" for b in host.split(".")) + f"{int(port):08X}{offset:016X}"
        offset_ids.append((uniq, offset_id))
    for args in (["queryMsgByKey", "-t", "SbsT", "-k", "sbskey"],
                 ["queryMsgByOffset", "-t", "SbsT", "-b", "broker-a", "-i", "0", "-o", "0"],
                 ["queryMsgByOffset", "-t", "SbsT", "-b", "broker-a", "-i", "1", "-o", "0"],
                 ["printMsg", "-t", "SbsT"], ["printMsg", "-t", "SbsT", "-c", "UTF-8", "-s", "TagB", "-d", "true"],
                 ["printMsgByQueue", "-t", "SbsT", "-a", "broker-a", "-i", "0", "-p", "true"],
                 ["printMsgByQueue", "-t", "SbsT", "-a", "broker-a", "-i", "1", "-r", "true", "-c", "UTF-8"],
                 ["queryCq", "-t", "SbsT", "-q", "0", "-i", "0", "-c", "2"],
                 ["consumeMessage", "-t", "SbsT", "-b", "broker-a", "-i", "0", "-o", "0", "-c", "2"],
                 ["topicStatus", "-t", "SbsT"], ["queryMsgTraceById", "-i", "NoSuchMsg"]):
        rocketmq, ours = both(sides, *args)
        assert rocketmq == ours, (args, rocketmq, ours)
    views = []
    for side, (uniq, offset_id) in zip(sides, offset_ids):
        views.append([side.normalise(side.admin("queryMsgByUniqueKey", "-t", "SbsT", "-i", uniq)),
                      side.normalise(side.admin("queryMsgById", "-i", offset_id))])
    assert views[0] == views[1], views


def test_offsets_and_groups(sides):
    """A group with committed offsets and no consumer online: progress, statistics, and the offset resets that
    then fall back to mqadmin's old reset."""
    for side in sides:
        for qid, offset in ((0, 1), (1, 0)):
            resp = side.raw(RequestCode.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader(
                consumer_group="SbsG", topic="SbsT", queue_id=qid, commit_offset=offset))
            assert resp.code == 0, resp.remark
    for args in (["consumerProgress", "-g", "SbsG"], ["brokerConsumeStats", "-b", "@BROKER"],
                 ["consumerConnection", "-g", "SbsG"], ["consumerStatus", "-g", "SbsG"],
                 ["producerConnection", "-g", "SbsNoProducer", "-t", "SbsT"],
                 ["cloneGroupOffset", "-s", "SbsG", "-d", "SbsG2", "-t", "SbsT"],
                 ["consumerProgress", "-g", "SbsG2"],
                 ["resetOffsetByTime", "-g", "SbsG", "-t", "SbsT", "-s", "0"],
                 ["consumerProgress", "-g", "SbsG"],
                 ["skipAccumulatedMessage", "-g", "SbsG", "-t", "SbsT"],
                 ["consumerProgress", "-g", "SbsG"],
                 ["resetOffsetByTime", "-g", "SbsNoOffsets", "-t", "SbsT", "-s", "now"],
                 ["deleteSubGroup", "-c", "DefaultCluster", "-g", "SbsOther"],
                 ["getConsumerConfig", "-g", "SbsOther"]):
        rocketmq, ours = both(sides, *args)
        rocketmq, ours = (_drop(t, r"(?<=Consume TPS: )\S+", r"(?<=Diff Total: )\d+") for t in (rocketmq, ours))
        assert rocketmq == ours, (args, rocketmq, ours)


def test_online_clients(sides):
    """A Java push consumer and RocketMQ's example transactional producer online: connections, status, progress
    and the broker's producer table."""
    from tests.interop import java_client

    try:
        driver = java_client.build()
    except ClientUnavailable as exc:
        pytest.skip(str(exc))
    examples = os.environ.get("MQ_JAVA_EXAMPLE_CLASSPATH")
    if not examples:
        pytest.skip("set MQ_JAVA_EXAMPLE_CLASSPATH: RocketMQ's example transactional producer stays online")
    producer_group = "please_rename_unique_group_name"
    results = []
    for side in sides:
        side.admin("updateTopic", "-c", "DefaultCluster", "-t", "SbsT", "-r", "4", "-w", "4")
        consumer = subprocess.Popen([*driver, "consume", side.ns, "SbsT", "SbsLiveG", "*", "1000", "60", "tag"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    stdin=subprocess.DEVNULL)
        # RocketMQ's example transactional producer runs until killed (NAMESRV_ADDR names the name server)
        producer = subprocess.Popen(["java", "-cp", examples, "org.apache.rocketmq.example.transaction."
                                     "TransactionProducer"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True, stdin=subprocess.DEVNULL, env={**os.environ, "NAMESRV_ADDR": side.ns})
        try:
            assert json.loads(consumer.stdout.readline()).get("started")
            assert producer.stdout.readline().startswith("SendResult [sendStatus=SEND_OK")
            # until the producer is registered and the consumer has committed its offsets (every 5 s)
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and (
                    side.raw(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                             H.GetProducerConnectionListRequestHeader(producer_group=producer_group)).code != 0
                    or not _consume_stats(side, "SbsLiveG")):
                time.sleep(0.5)
            out = {}
            for args in (["consumerConnection", "-g", "SbsLiveG"],
                         ["producerConnection", "-g", producer_group, "-t", "TopicTest1234"],
                         ["consumerStatus", "-g", "SbsLiveG"], ["consumerProgress", "-g", "SbsLiveG"],
                         ["producer", "-b", side.broker]):
                text = side.normalise(side.admin(*args))
                # the clients' own CLIENT_INNER_PRODUCER (and mqadmin's, when its first heartbeat beats the query)
                text = "\n".join(line for line in text.splitlines() if "CLIENT_INNER_PRODUCER" not in line)
                text = _drop(text, r"(?<=lastUpdateTimestamp=)\S+", r"(?<=Consume TPS: )\S+")
                out[args[0]] = re.sub(r" +", " ", text)  # column padding follows the width of client ids
            results.append(out)
        finally:
            for p in (consumer, producer):
                p.kill()
                p.communicate()
    for name in results[0]:
        assert results[0][name] == results[1][name], (name, results[0][name], results[1][name])


def _consume_stats(side: Side, group: str) -> dict:
    """The queues for which ``group`` has committed offsets on ``side``'s broker."""
    from mq.protocol.bodies import ConsumeStats

    resp = side.raw(RequestCode.GET_CONSUME_STATS, H.GetConsumeStatsRequestHeader(consumer_group=group))
    return ConsumeStats.from_json(resp.body).offset_table if resp.code == 0 and resp.body else {}


def test_name_server_and_kv(sides):
    for args in (["updateKvConfig", "-s", "SbsNS", "-k", "k1", "-v", "v1"], ["deleteKvConfig", "-s", "SbsNS", "-k", "k1"],
                 ["updateOrderConf", "-t", "SbsT", "-v", "broker-a:4", "-m", "put"],
                 ["updateOrderConf", "-t", "SbsT", "-m", "get"], ["updateOrderConf", "-t", "SbsT", "-m", "delete"],
                 ["wipeWritePerm", "-b", "broker-a"], ["addWritePerm", "-b", "broker-a"],
                 ["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false"],
                 ["topicList"], ["topicList", "-c"]):
        rocketmq, ours = both(sides, *args)
        if args[0] in ("wipeWritePerm", "addWritePerm"):  # the topics counted: topicList compares them below
            rocketmq, ours = (re.sub(r"OK, \d+", "OK, <n>", t) for t in (rocketmq, ours))
        if args[0] == "topicList":
            # the half-message topics come with each broker's first transaction check, and %RETRY%TOOLS_CONSUMER
            # with mqadmin's own first heartbeat (when the command lasts longer than a second)
            rocketmq, ours = ("\n".join(sorted(ln for ln in t.splitlines()
                                               if "RMQ_SYS_TRANS" not in ln and "TOOLS_CONSUMER" not in ln))
                              for t in (rocketmq, ours))
        assert rocketmq == ours, (args, rocketmq, ours)
    rocketmq, ours = both(sides, "getNamesrvConfig")
    keys = [set(re.findall(r"^(\w+)\s+=", t, re.M)) - {"rocketmqHome"} for t in (rocketmq, ours)]  # $ROCKETMQ_HOME
    assert keys[0] and keys[0] <= keys[1], keys[0] - keys[1]


def _kv(text: str, sep: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in (ln.split(sep, 1) for ln in text.splitlines()
                                              if sep in ln and not ln.startswith("==="))}


def _shape(value: str) -> str:
    """The form of a value: digits become 9, so "0.29" and "0.31" compare equal, "0.2900" does not."""
    return re.sub(r"\d+", "9", value)


def test_broker_config_status_and_cluster(sides):
    rocketmq, ours = both(sides, "updateBrokerConfig", "-b", "@BROKER", "-k", "maxMessageSize", "-v", "4194304")
    assert rocketmq == ours, (rocketmq, ours)
    rocketmq, ours = both(sides, "updateBrokerConfig", "-c", "DefaultCluster", "-k", "osPageCacheBusyTimeOutMills",
                          "-v", "1000")
    assert rocketmq == ours, (rocketmq, ours)
    rocketmq, ours = both(sides, "getBrokerConfig", "-b", "@BROKER")
    theirs, mine = _kv(rocketmq, "="), _kv(ours, "=")
    assert set(theirs) - {"rocketmqHome"} <= set(mine), set(theirs) - set(mine)
    differing = {k: (v, mine[k]) for k, v in theirs.items() if k in mine and _shape(mine[k]) != _shape(v)
                 and k not in OURS_BY_DESIGN and not k.startswith(("storePath", "namesrv"))}
    assert not differing, differing
    rocketmq, ours = both(sides, "brokerStatus", "-b", "@BROKER")
    theirs, mine = _kv(rocketmq, ":"), _kv(ours, ":")
    assert set(theirs) <= set(mine), set(theirs) - set(mine)
    for key, value in theirs.items():  # the same format: TPS windows, latencies, ratios, byte counts, ...
        if key in ("runtime", "commitLogDirCapacity", "bootTimestamp", "earliestMessageTimeStamp") or \
                key.startswith("commitLogDiskRatio_"):
            continue
        if key.endswith("Tps"):  # three windows of 10, 60 and 600 samples, a window empty until it has them
            assert len(mine[key].split()) == len(value.split()), (key, value, mine[key])
            continue
        number = r"-?\d+(\.\d+)?(E-?\d+)?"
        assert _shape(mine[key]) == _shape(value) or re.fullmatch(number, mine[key]) and \
            re.fullmatch(number, value), (key, value, mine[key])
    rocketmq, ours = both(sides, "clusterList")
    # #Hour: RocketMQ 4.9.7 reads the earliest message's time only once 8 MB of log are written (-1 before: some
    # 500,000 hours); ours is the real one. The figures, and the padding that follows them, are left out.
    rocketmq, ours = (re.sub(r"\s+", " ", _drop(t, r"\d+\.\d+")) for t in (rocketmq, ours))
    assert rocketmq == ours, (rocketmq, ours)
    for args in (["sendMsgStatus", "-b", "broker-a", "-c", "2"], ["checkMsgSendRT", "-t", "SbsT", "-a", "2", "-s", "32"],
                 ["statsAll", "-t", "SbsT"], ["statsAll"]):
        rocketmq, ours = both(sides, *args)
        drop = (r"(?<=rt=)\d+", r"(?<=queueOffset=)\d+", r"\b\d+(\.\d+)?\b")
        rocketmq, ours = (sorted(ln for ln in _drop(t, *drop).splitlines() if "RMQ_SYS_TRANS" not in ln)
                          for t in (rocketmq, ours))  # RocketMQ's half-message topics come with its first check
        assert rocketmq == ours, (args, rocketmq, ours)
    rocketmq, ours = both(sides, "clusterRT", "-a", "1", "-s", "32", "-i", "1", kill_after=15)
    header = [t.splitlines()[0] if t.strip() else "" for t in (rocketmq, ours)]
    assert header[0] == header[1]
    for command in ("cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic"):
        rocketmq, ours = both(sides, command, "-c", "DefaultCluster")
        assert rocketmq == ours, (command, rocketmq, ours)


def test_exports(sides, tmp_path):
    docs = []
    for side in sides:
        target = tmp_path / side.name
        for command in ("exportMetadata", "exportConfigs", "exportMetrics"):
            out = side.admin(command, "-c", "DefaultCluster", "-f", str(target))
            assert "success" in out and _free_of_exceptions(out), out
        docs.append({name: json.loads((target / f"{name}.json").read_text())
                     for name in ("metadata", "configs", "metrics")})
    rocketmq, ours = docs
    assert {t for t in rocketmq["metadata"]["topicConfigTable"] if not t.startswith("RMQ_SYS_TRANS")} == \
        {t for t in ours["metadata"]["topicConfigTable"] if not t.startswith("RMQ_SYS_TRANS")}
    assert rocketmq["metadata"]["subscriptionGroupTable"].keys() == ours["metadata"]["subscriptionGroupTable"].keys()
    assert rocketmq["configs"] == ours["configs"]

    def keys(doc, prefix=""):
        return {prefix + k for k in doc} | {x for k, v in doc.items() if isinstance(v, dict)
                                           for x in keys(v, prefix + k + ".")}
    assert keys(rocketmq["metrics"]) == keys(ours["metrics"])
    quota = ours["metrics"]["evaluateReport"]["broker-a"]["runtimeQuota"]
    assert float(quota["messageAverageSize"]) > 0, quota  # the broker's putMessageAverageSize, as RocketMQ's
    assert rocketmq["metrics"]["evaluateReport"]["broker-a"]["runtimeEnv"] == \
        ours["metrics"]["evaluateReport"]["broker-a"]["runtimeEnv"]


def test_delete_topic(sides):
    rocketmq, ours = both(sides, "deleteTopic", "-c", "DefaultCluster", "-t", "SbsOrder")
    assert rocketmq == ours, (rocketmq, ours)
    rocketmq, ours = both(sides, "topicRoute", "-t", "SbsOrder")
    assert rocketmq == ours, (rocketmq, ours)


ACL = ("globalWhiteRemoteAddresses:\naccounts:\n  - accessKey: sbsadmin01\n    secretKey: sbssecret01\n"
       "    admin: true\n")


def test_acl_commands(tmp_path):
    """mqadmin's ACL subcommands, signed with an admin account (conf/tools.yml), against two ACL brokers."""
    if shutil.which("java") is None or not os.environ.get("MQ_MQADMIN_CLASSPATH"):
        pytest.skip("set MQ_MQADMIN_CLASSPATH (rocketmq-tools 4.9.x) and have java to run mqadmin")
    (tmp_path / "rocketmq" / "conf").mkdir(parents=True)
    (tmp_path / "rocketmq" / "conf" / "plain_acl.yml").write_text(ACL)
    java = JavaCluster(tmp_path / "rocketmq", brokerName="broker-a", aclEnable="true")
    try:
        java.start()
    except JavaBrokerUnavailable as exc:
        java.stop()
        pytest.skip(str(exc))
    (tmp_path / "mq").mkdir()
    (tmp_path / "mq" / "plain_acl.yml").write_text(ACL)
    ours = Daemons(str(tmp_path / "mq"), broker_options={"acl_enable": True,
                                                         "acl_file": str(tmp_path / "mq" / "plain_acl.yml")})
    ours.start()
    try:
        sides = []
        for name, ns, broker, store in (("rocketmq", java.namesrv, java.broker_addr, str(java.store)),
                                         ("mq", ours.namesrv.address, ours.broker.address, str(tmp_path / "mq"))):
            home = tmp_path / f"home-{name}"
            (home / "conf").mkdir(parents=True)
            (home / "conf" / "logback_tools.xml").write_text(LOGBACK)
            (home / "conf" / "tools.yml").write_text("accessKey: sbsadmin01\nsecretKey: sbssecret01\n")
            sides.append(Side(name, ns, broker, store, home))
        sides[0].paths = {str(tmp_path / "rocketmq" / "conf" / "plain_acl.yml"): "<acl file>"}
        sides[1].paths = {str(tmp_path / "mq" / "plain_acl.yml"): "<acl file>"}
        for args in (["updateAclConfig", "-b", "@BROKER", "-a", "sbsapp001", "-s", "sbsappsecret", "-i", "PUB",
                      "-t", "SbsT=PUB|SUB"],
                     ["updateAclConfig", "-c", "DefaultCluster", "-a", "sbsapp001", "-s", "sbsappsecret", "-u", "SUB"],
                     ["getAclConfig", "-b", "@BROKER"], ["getAclConfig", "-c", "DefaultCluster"],
                     ["updateGlobalWhiteAddr", "-b", "@BROKER", "-g", "10.10.103.*"],
                     ["deleteAclConfig", "-b", "@BROKER", "-a", "sbsapp001"], ["getAclConfig", "-b", "@BROKER"]):
            rocketmq, ours_out = both(sides, *args)
            assert rocketmq == ours_out, (args, rocketmq, ours_out)
        rocketmq, ours_out = both(sides, "clusterAclConfigVersion", "-c", "DefaultCluster")
        drop = (r"counter=\d+", r"<date>", r"\b\d+\b")
        assert _drop(rocketmq, *drop) == _drop(ours_out, *drop), (rocketmq, ours_out)
    finally:
        ours.stop()
        java.stop()
