"""SQL92 property filtering against a real broker (FEATURES.md §9): refusal when enablePropertyFilter is off,
CHECK_CLIENT_CONFIG, filtered pulls of old and new messages (long polling), NO_MATCHED offsets, parse
failures, filterSupportRetry, the Python push consumer and `mq pull --sql`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

from mq.client.consumer import PushConsumer
from mq.client.hooks import ConsumeStatus
from mq.common import properties as P
from mq.config import ConsumerConfig
from mq.errors import BrokerError
from mq.protocol import headers as H
from mq.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from mq.protocol.codes import RequestCode, ResponseCode as RC
from mq.protocol.command import RemotingCommand

from .wire import props, records, send_cmd

REFUSED = "The broker does not support consumer to filter message by SQL92"
SELECTOR = "a BETWEEN 1 AND 3 AND TAGS IN ('TagA')"
FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x2, 0x4


def sql_pull(topic: str, offset: int, *, group: str = "SG", selector: str | None = SELECTOR, queue_id: int = 0,
             sys_flag: int = FLAG_SUBSCRIPTION, suspend_ms: int = 0, etype: str = "SQL92") -> RemotingCommand:
    h = H.PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                                   max_msg_nums=32, sys_flag=sys_flag, commit_offset=0,
                                   suspend_timeout_millis=suspend_ms, sub_version=0, subscription=selector,
                                   expression_type=etype)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())


def sql_heartbeat(group: str, topic: str, selector: str, etype: str = "SQL92") -> RemotingCommand:
    sd = SubscriptionData(topic=topic, sub_string=selector, sub_version=int(time.time() * 1000),
                          expression_type=etype)
    hb = HeartbeatData(client_id="127.0.0.1@sql", consumer_data_set=[ConsumerData(group_name=group,
                                                                                  subscription_data_set=[sd])])
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=hb.to_json())


def check_cmd(selector: str | None, etype: str | None = "SQL92", topic: str = "ST") -> RemotingCommand:
    sd = {"topic": topic, "subString": selector, "tagsSet": [], "codeSet": [], "subVersion": 1,
          "classFilterMode": False}
    if etype is not None:
        sd["expressionType"] = etype
    body = orjson.dumps({"clientId": "127.0.0.1@x", "group": "SG", "subscriptionData": sd})
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body)


async def send(client, addr: str, topic: str, i: int, tags: str, **extra: str) -> None:
    r = await client.invoke(addr, send_cmd(topic, b"m%d" % i, properties=props(tags, None, a=str(i % 5),
                                                                                   i=str(i), **extra)))
    assert r.code == RC.SUCCESS, r.remark


def expected(indexes) -> list[bytes]:
    return [b"m%d" % i for i in indexes if 1 <= i % 5 <= 3 and i % 2 == 0]


def test_property_filter_off_refuses_sql92(cluster, client, run):
    b = cluster.broker
    assert b.config.enable_property_filter is False

    async def main():
        await send(client, b.address, "ST", 0, "TagA")
        r = await client.invoke(b.address, sql_pull("ST", 0))
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, REFUSED)
        assert (await client.invoke(b.address, sql_heartbeat("SG", "ST", SELECTOR))).code == RC.SUCCESS
        r = await client.invoke(b.address, sql_pull("ST", 0, sys_flag=0))  # the heartbeat's subscription
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, REFUSED)
        r = await client.invoke(b.address, check_cmd(SELECTOR))
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, REFUSED)
        r = await client.invoke(b.address, check_cmd("TagA", "TAG"))
        assert r.code == RC.SUCCESS
        # a selector that does not compile is a parse failure before the enable check (Java's order)
        r = await client.invoke(b.address, sql_pull("ST", 0, selector="a >"))
        assert (r.code, r.remark) == (RC.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")

    run(main())


def test_check_client_config(broker_factory, client, run):
    b = broker_factory(enable_property_filter=True)

    async def main():
        for cmd in (check_cmd(SELECTOR), check_cmd("*", "TAG"), check_cmd("*", None), check_cmd("x", "")):
            r = await client.invoke(b.address, cmd)
            assert r.code == RC.SUCCESS, (cmd.body, r.remark)
        r = await client.invoke(b.address, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}))
        assert r.code == RC.SUCCESS  # no body: nothing to check
        r = await client.invoke(b.address, check_cmd("a = 1 AND (b > 2"))
        assert r.code == RC.SUBSCRIPTION_PARSE_FAILED
        assert "line 1, column 17" in r.remark
        r = await client.invoke(b.address, check_cmd("a > 'x'"))
        assert r.code == RC.SUBSCRIPTION_PARSE_FAILED and "cannot be compared" in r.remark
        r = await client.invoke(b.address, check_cmd("a = 1", "XPATH"))
        assert r.code == RC.SUBSCRIPTION_PARSE_FAILED

    run(main())


def test_sql92_pull_old_and_new_messages(broker_factory, client, run):
    b = broker_factory(enable_property_filter=True)

    async def main():
        for i in range(20):
            await send(client, b.address, "ST", i, "TagA" if i % 2 == 0 else "TagB")
        # request-carried selector (pull consumers)
        r = await client.invoke(b.address, sql_pull("ST", 0))
        assert r.code == RC.SUCCESS, r.remark
        assert [m.body for m in records(r)] == expected(range(20))
        assert r.ext_fields["nextBeginOffset"] == "20"
        # heartbeat-registered selector (push consumers)
        assert (await client.invoke(b.address, sql_heartbeat("SG", "ST", SELECTOR))).code == RC.SUCCESS
        r = await client.invoke(b.address, sql_pull("ST", 0, sys_flag=0))
        assert r.code == RC.SUCCESS and [m.body for m in records(r)] == expected(range(20))
        # nothing matches from 20 on: the offset still moves past what was scanned
        for i in range(20, 26):
            await send(client, b.address, "ST", i, "TagB")
        r = await client.invoke(b.address, sql_pull("ST", 20, sys_flag=0))
        assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == (RC.PULL_RETRY_IMMEDIATELY,
                                                                       "NO_MATCHED_MESSAGE", "26")
        # long polling: a held SQL92 pull is answered when a matching message arrives
        t0 = time.monotonic()
        held = asyncio.ensure_future(client.invoke(b.address, sql_pull("ST", 26, sys_flag=FLAG_SUSPEND,
                                                                       suspend_ms=10_000), timeout=15))
        await asyncio.sleep(0.3)
        assert not held.done()
        await send(client, b.address, "ST", 26, "TagA")  # a = 1, TagA: matches
        r = await held
        assert time.monotonic() - t0 < 5
        assert r.code == RC.SUCCESS and [m.body for m in records(r)] == [b"m26"]
        held = asyncio.ensure_future(client.invoke(b.address, sql_pull("ST", 27, sys_flag=FLAG_SUSPEND,
                                                                       suspend_ms=10_000), timeout=15))
        await asyncio.sleep(0.3)
        await send(client, b.address, "ST", 27, "TagA")  # a = 2, TagA: matches
        r = await held
        assert r.code == RC.SUCCESS and [m.body for m in records(r)] == [b"m27"]
        # a non-matching arrival wakes it too (tag codes cannot decide); the re-run moves the offset
        held = asyncio.ensure_future(client.invoke(b.address, sql_pull("ST", 28, sys_flag=FLAG_SUSPEND,
                                                                       suspend_ms=10_000), timeout=15))
        await asyncio.sleep(0.3)
        await send(client, b.address, "ST", 28, "TagB")
        r = await held
        assert time.monotonic() - t0 < 10
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (RC.PULL_RETRY_IMMEDIATELY, "29")

    run(main())


def test_parse_failures(broker_factory, client, run):
    b = broker_factory(enable_property_filter=True)

    async def main():
        await send(client, b.address, "ST", 1, "TagA")
        r = await client.invoke(b.address, sql_pull("ST", 0, selector="a BETWEEN 3 AND 1"))
        assert (r.code, r.remark) == (RC.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        # a heartbeat selector that does not compile is never registered (ConsumerFilterManager.build -> null)
        assert (await client.invoke(b.address, sql_heartbeat("BG", "ST", "a = = 1"))).code == RC.SUCCESS
        r = await client.invoke(b.address, sql_pull("ST", 0, group="BG", sys_flag=0))
        assert r.code == RC.FILTER_DATA_NOT_EXIST
        # the group fixes its selector: the next heartbeat registers it
        assert (await client.invoke(b.address, sql_heartbeat("BG", "ST", "i = 1"))).code == RC.SUCCESS
        r = await client.invoke(b.address, sql_pull("ST", 0, group="BG", sys_flag=0))
        assert r.code == RC.SUCCESS and [m.body for m in records(r)] == [b"m1"]

    run(main())


def test_retry_topic_filtered_only_with_filter_support_retry(broker_factory, client, run):
    for support in (False, True):
        b = broker_factory(enable_property_filter=True, filter_support_retry=support)

        async def main():
            assert (await client.invoke(b.address, sql_heartbeat("RG", "ST", "a = 2"))).code == RC.SUCCESS
            assert b.topic_config.get("%RETRY%RG") is not None
            for i in range(6):
                await send(client, b.address, "%RETRY%RG", i, "TagA", **{P.RETRY_TOPIC: "ST"})
            await send(client, b.address, "%RETRY%RG", 7, "TagA", **{P.RETRY_TOPIC: "Other"})  # no selector there
            r = await client.invoke(b.address, sql_pull("%RETRY%RG", 0, group="RG", selector="*", etype="TAG"))
            assert r.code == RC.SUCCESS
            return [m.body for m in records(r)]

        got = run(main())
        assert got == ([b"m2", b"m7"] if support else [b"m%d" % i for i in (0, 1, 2, 3, 4, 5, 7)])


def test_python_push_consumer_and_cli(broker_factory, client_config, mq_at, namesrv, client, run):
    on = broker_factory(enable_property_filter=True)

    async def consume(group: str, selector: str, n: int, timeout: float = 10.0) -> list[bytes]:
        got: list[bytes] = []

        def listener(msgs, ctx):
            got.extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS
        c = PushConsumer(ConsumerConfig(group=group, consume_from_where="FIRST"), listener, client_config())
        c.subscribe("PT", selector, expression_type="SQL92")
        await c.start()
        try:
            deadline = time.monotonic() + timeout
            while len(got) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
        finally:
            await c.shutdown(grace=0.5)
        return got

    async def main():
        for i in range(10):
            await send(client, on.address, "PT", i, "TagA" if i % 2 == 0 else "TagB")
        await on.register_all(force=True)
        got = await consume("PG1", SELECTOR, 2)
        assert sorted(got) == sorted(expected(range(10)))
        try:
            await consume("PG2", "a BETWEEN", 0)
        except BrokerError as exc:
            assert exc.code == RC.SUBSCRIPTION_PARSE_FAILED
        else:
            raise AssertionError("a selector that does not compile must fail start()")

    run(main())
    res = mq_at(namesrv.address, "pull", "-t", "PT", "--sql", SELECTOR, "--json")
    assert res.exit_code == 0, res.output
    assert sorted(r["body"] for r in orjson.loads(res.output)) == sorted(b.decode() for b in expected(range(10)))
    res = mq_at(namesrv.address, "pull", "-t", "PT", "--sql", "a >")
    assert res.exit_code != 0 and "SUBSCRIPTION_PARSE_FAILED" in str(res.exception)
    res = mq_at(namesrv.address, "pull", "-t", "PT", "--sql", "a = 1", "--expression", "TagA")
    assert res.exit_code != 0 and "exclude each other" in res.output


def test_python_clients_refused_when_filter_off(broker_factory, client_config, mq_at, namesrv, client, run):
    off = broker_factory()

    async def main():
        await send(client, off.address, "OT", 1, "TagA")
        await off.register_all(force=True)
        c = PushConsumer(ConsumerConfig(group="OG"), lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS,
                         client_config())
        c.subscribe("OT", SELECTOR, expression_type="SQL92")
        try:
            await c.start()
        except BrokerError as exc:
            assert exc.code == RC.SYSTEM_ERROR and REFUSED in str(exc)
        else:
            await c.shutdown()
            raise AssertionError("start() must fail when the broker has no property filter")

    run(main())
    res = mq_at(namesrv.address, "consume", "-t", "OT", "-g", "OG2", "--sql", SELECTOR, "--timeout", "2")
    assert res.exit_code != 0 and REFUSED in str(res.exception)
    # the real console script: one clear line on stderr and a non-zero exit
    mq_bin = str(Path(sys.executable).with_name("mq"))
    for args in (["pull", "-t", "OT", "--sql", SELECTOR], ["consume", "-t", "OT", "-g", "OG3", "--sql", SELECTOR]):
        proc = run(asyncio.to_thread(subprocess.run, [mq_bin, "-n", namesrv.address, *args], capture_output=True,
                                     text=True, timeout=60, env={**os.environ, "MQ_DEBUG": ""}), timeout=70)
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert proc.stderr.strip().count("\n") == 0 and REFUSED in proc.stderr, proc.stderr
