"""Name-server admin commands (`mq wipeWritePerm`, `addWritePerm`, `updateKvConfig`, `deleteKvConfig`,
`getNamesrvConfig`, `updateNamesrvConfig`, `topicClusterList`, `updateOrderConf`) against real daemons.

The daemons run on the test's event loop; each CLI call runs CliRunner in a worker thread so the loop keeps
serving while the command talks to it. Outcomes are checked in the daemons' own state (route table, KV store,
config) as well as in what the command prints."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest


DEAD = "127.0.0.1:1"  # nothing listens on port 1


@pytest.fixture
def second_namesrv(namesrv, namesrv_factory):
    return namesrv_factory()


def failure(res) -> str:
    """The one-line error of a failed command: an MQError, which mq.cli.main prints as ``error: ...``, exit 1."""
    from mq.errors import MQError

    assert res.exit_code == 1, res.output
    assert isinstance(res.exception, MQError), repr(res.exception)
    text = str(res.exception)
    assert "\n" not in text
    return text


def ok_json(res) -> dict:
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads(res.stdout)


def route_perm(mq, topic: str) -> dict[str, int]:
    route = ok_json(mq("topicRoute", "-t", topic, "--json"))
    return {q["brokerName"]: q["perm"] for q in route["queueDatas"]}


def create_topic(mq, topic: str, cluster: str = "DefaultCluster") -> None:
    res = mq("updateTopic", "-t", topic, "-c", cluster, "-r", "2", "-w", "2")
    assert res.exit_code == 0, res.output


def test_wipe_then_add_write_perm_changes_the_route(cluster, mq):
    create_topic(mq, "PermT")
    name = cluster.broker.broker_name
    assert route_perm(mq, "PermT") == {name: 6}

    res = mq("wipeWritePerm", "-b", name)
    assert res.exit_code == 0, res.output
    assert cluster.namesrv_addr in res.stdout and name in res.stdout and "OK" in res.stdout
    assert route_perm(mq, "PermT") == {name: 4}
    topics_of_broker = sum(1 for qds in cluster.namesrv.table.topic_queue_table.values() if name in qds)

    out = ok_json(mq("addWritePerm", "-b", name, "--json"))
    assert out == {"broker": name, "results": [{"namesrv": cluster.namesrv_addr, "ok": True, "error": None,
                                                "addTopicCount": topics_of_broker}]}
    assert route_perm(mq, "PermT") == {name: 6}

    wiped = ok_json(mq("wipeWritePerm", "-b", name, "--json"))
    assert wiped["results"][0]["wipeTopicCount"] == topics_of_broker >= 2  # PermT and the broker's own topics
    ok_json(mq("addWritePerm", "-b", name, "--json"))
    # an unknown broker name changes nothing and is not an error (as in RocketMQ)
    assert ok_json(mq("wipeWritePerm", "-b", "no-such-broker", "--json"))["results"][0]["wipeTopicCount"] == 0
    assert route_perm(mq, "PermT") == {name: 6}


def test_wipe_write_perm_with_an_unreachable_second_namesrv(cluster, mq_at):
    name = cluster.broker.broker_name
    both = f"{cluster.namesrv_addr};{DEAD}"
    res = mq_at(both, "wipeWritePerm", "-b", name)
    err = failure(res)
    assert cluster.namesrv_addr in res.stdout and DEAD in res.stdout  # both rows printed
    assert "OK" in res.stdout
    assert err.startswith(f"wipe write perm of broker {name} failed on 1 of 2") and DEAD in err
    assert cluster.namesrv_addr not in err
    # the reachable name server did the work
    assert all(qds[name].perm & 2 == 0 for qds in cluster.namesrv.table.topic_queue_table.values() if name in qds)

    res = mq_at(both, "addWritePerm", "-b", name, "--json")
    failure(res)
    rows = json.loads(res.stdout)["results"]
    assert [(r["namesrv"], r["ok"]) for r in rows] == [(cluster.namesrv_addr, True), (DEAD, False)]
    assert rows[0]["addTopicCount"] >= 1 and rows[1]["addTopicCount"] is None
    assert "connection refused" in rows[1]["error"]
    assert all(qds[name].perm & 2 for qds in cluster.namesrv.table.topic_queue_table.values() if name in qds)


def test_kv_config_goes_to_every_namesrv(namesrv, second_namesrv, mq_at):
    both = f"{namesrv.address};{second_namesrv.address}"
    res = mq_at(both, "updateKvConfig", "-s", "MyNs", "-k", "color", "-v", "blue")
    assert res.exit_code == 0, res.output
    assert namesrv.address in res.stdout and second_namesrv.address in res.stdout
    assert namesrv.kv.get("MyNs", "color") == "blue" and second_namesrv.kv.get("MyNs", "color") == "blue"

    out = ok_json(mq_at(both, "updateKvConfig", "-s", "MyNs", "-k", "color", "-v", "green", "--json"))
    assert out["value"] == "green" and [r["ok"] for r in out["results"]] == [True, True]
    assert namesrv.kv.get("MyNs", "color") == "green" and second_namesrv.kv.get("MyNs", "color") == "green"

    out = ok_json(mq_at(both, "deleteKvConfig", "-s", "MyNs", "-k", "color", "--json"))
    assert [r["namesrv"] for r in out["results"]] == [namesrv.address, second_namesrv.address]
    assert namesrv.kv.get("MyNs", "color") is None and second_namesrv.kv.get("MyNs", "color") is None

    res = mq_at(f"{namesrv.address};{DEAD}", "updateKvConfig", "-s", "MyNs", "-k", "k2", "-v", "v2")
    assert DEAD in failure(res) and DEAD in res.stdout
    assert namesrv.kv.get("MyNs", "k2") == "v2"


def test_get_and_update_namesrv_config(namesrv, second_namesrv, mq_at):
    both = f"{namesrv.address};{second_namesrv.address}"
    out = ok_json(mq_at(both, "getNamesrvConfig", "--json"))
    by_addr = {r["namesrv"]: r["config"] for r in out["results"]}
    # the port it listens on (configured as 0: any free one)
    assert by_addr[namesrv.address]["listenPort"] == str(namesrv.port)
    assert by_addr[namesrv.address]["orderMessageEnable"] == "false"
    assert set(by_addr) == {namesrv.address, second_namesrv.address}

    res = mq_at(namesrv.address, "getNamesrvConfig")
    assert res.exit_code == 0 and f"Name server {namesrv.address}" in res.stdout and "orderMessageEnable" in res.stdout

    res = mq_at(both, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert res.exit_code == 0, res.output
    assert namesrv.processors.config.order_message_enable is True
    assert second_namesrv.processors.config.order_message_enable is True
    out = ok_json(mq_at(both, "getNamesrvConfig", "--json"))
    assert [r["config"]["orderMessageEnable"] for r in out["results"]] == ["true", "true"]

    # a key the server will not change at run time: refused by the server, one error line naming the updatable keys
    res = mq_at(namesrv.address, "updateNamesrvConfig", "-k", "listenPort", "-v", "1234")
    err = failure(res)
    assert "listenPort" in err and "updatable" in err and "orderMessageEnable" in err
    assert namesrv.processors.config.listen_port == 0

    res = mq_at(f"{namesrv.address};{DEAD}", "getNamesrvConfig", "--json")
    assert DEAD in failure(res)
    assert [r["ok"] for r in json.loads(res.stdout)["results"]] == [True, False]


def test_refused_namesrv_config_through_the_executable(namesrv, run):
    """The same refusal as a user sees it: `python -m mq.cli.main`, exit 1, one error line, no traceback."""
    async def go():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mq.cli.main", "-n", namesrv.address, "updateNamesrvConfig", "-k", "kvConfigPath",
            "-v", "/tmp/x", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode, out.decode(), err.decode()

    code, out, err = run(go(), timeout=60)
    assert code == 1
    assert namesrv.address in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: update name server config kvConfigPath failed on 1 of 1")
    assert "cannot update 'kvConfigPath' at run time" in lines[0]


def test_topic_cluster_list(cluster, mq, broker_factory):
    create_topic(mq, "OneClusterT")
    out = ok_json(mq("topicClusterList", "-t", "OneClusterT", "--json"))
    assert out == {"topic": "OneClusterT", "clusters": ["DefaultCluster"],
                   "brokers": {"DefaultCluster": [cluster.broker.broker_name]}}

    other = broker_factory(broker_cluster_name="OtherCluster", broker_name="broker-other")
    create_topic(mq, "TwoClusterT", cluster="DefaultCluster")
    create_topic(mq, "TwoClusterT", cluster="OtherCluster")
    out = ok_json(mq("topicClusterList", "-t", "TwoClusterT", "--json"))
    assert out["clusters"] == ["DefaultCluster", "OtherCluster"]
    assert out["brokers"]["OtherCluster"] == [other.broker_name]
    res = mq("topicClusterList", "-t", "TwoClusterT")
    assert res.exit_code == 0 and "OtherCluster" in res.stdout and "broker-other" in res.stdout

    res = mq("topicClusterList", "-t", "NoSuchTopicHere")
    assert "NoSuchTopicHere" in failure(res)


def test_update_order_conf_put_get_delete(cluster, mq, mq_at):
    create_topic(mq, "OrderT")
    name = cluster.broker.broker_name
    res = mq("updateOrderConf", "-t", "OrderT", "-m", "put", "-v", f"{name}:2; other-broker:4")
    assert res.exit_code == 0, res.output
    assert cluster.namesrv.kv.get("ORDER_TOPIC_CONFIG", "OrderT") == f"{name}:2;other-broker:4"

    out = ok_json(mq("updateOrderConf", "-t", "OrderT", "-m", "get", "--json"))
    assert out == {"topic": "OrderT", "orderConf": f"{name}:2;other-broker:4", "brokers": {name: 2, "other-broker": 4}}
    res = mq("updateOrderConf", "-t", "OrderT", "-m", "get")
    assert res.exit_code == 0 and f"orderConf of OrderT: {name}:2;other-broker:4" in res.stdout

    # producers see it in the route once the name server serves order confs
    assert ok_json(mq("topicRoute", "-t", "OrderT", "--json")).get("orderTopicConf") is None
    assert mq("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true").exit_code == 0
    assert ok_json(mq("topicRoute", "-t", "OrderT", "--json"))["orderTopicConf"] == f"{name}:2;other-broker:4"

    out = ok_json(mq("updateOrderConf", "-t", "OrderT", "-m", "delete", "--json"))
    assert out["method"] == "delete" and out["results"][0]["ok"] is True
    assert cluster.namesrv.kv.get("ORDER_TOPIC_CONFIG", "OrderT") is None
    res = mq("updateOrderConf", "-t", "OrderT", "-m", "get")
    assert "has no order conf" in failure(res)
    assert ok_json(mq("topicRoute", "-t", "OrderT", "--json")).get("orderTopicConf") is None

    res = mq_at(f"{cluster.namesrv_addr};{DEAD}", "updateOrderConf", "-t", "OrderT", "-m", "put", "-v", f"{name}:1")
    assert DEAD in failure(res) and DEAD in res.stdout
    assert cluster.namesrv.kv.get("ORDER_TOPIC_CONFIG", "OrderT") == f"{name}:1"


def test_value_stored_by_hand_is_shown_raw(cluster, mq):
    assert mq("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "HandT", "-v", "garbage").exit_code == 0
    res = mq("updateOrderConf", "-t", "HandT", "-m", "get")
    assert res.exit_code == 0 and "orderConf of HandT: garbage" in res.stdout and "cannot parse" in res.stderr
    assert ok_json(mq("updateOrderConf", "-t", "HandT", "-m", "get", "--json"))["brokers"] is None
