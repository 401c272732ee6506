"""Refusal texts, side by side with RocketMQ 4.9.7's own broker and name server.

Operators grep logs and client errors for RocketMQ's remarks ("topic[X] not exist, apply first please!", "Check
signature failed for accessKey=...", "[TIMEOUT_CLEAN_QUEUE]broker busy ..."). Every probe of
``refusal_probes.PROBES`` is sent, raw, to RocketMQ's daemons (``$MQ_JAVA_BROKER_CLASSPATH``) and to ours, both
configured alike (ACL on, no auto-creation); the answers' codes and remarks must be the same, up to addresses.
Without the classpath or java the test skips. ``MQ_SHOW_REFUSALS=1`` (with ``-s``) prints every answer of both.
Where mq answers otherwise on purpose, ``KNOWN_DIFFERENCES`` says why."""

from __future__ import annotations

import asyncio
import os

import pytest

from mq.errors import RemotingTimeoutError
from mq.protocol.command import RemotingCommand
from mq.remoting import RemotingClient
from tests.interop.conftest import Daemons
from tests.interop.java_broker import JavaBrokerUnavailable, JavaCluster
from tests.interop.refusal_probes import (ACL_YAML, BROKER_CONF, KNOWN_DIFFERENCES, PROBES, SETUP, Probe, normalise,
                                          same_refusal)

pytestmark = pytest.mark.interop


async def _answers(namesrv: str, broker: str, probes: list[Probe]) -> list[tuple[int, str | None]]:
    out = []
    for p in probes:
        client = RemotingClient(name="refusal-probe")
        client.credentials = p.creds
        try:
            cmd = RemotingCommand.request(p.code, dict(p.ext), p.body)
            try:
                resp = await client.invoke(namesrv if p.to == "namesrv" else broker, cmd, 5.0)
            except RemotingTimeoutError:  # RocketMQ's name server leaves an unknown request unanswered
                out.append((-1, "no answer"))
            else:
                out.append((resp.code, resp.remark))
        finally:
            await client.close()
    return out


def _run(namesrv: str, broker: str, store: str) -> dict[str, tuple[int, str | None]]:
    setup = asyncio.run(_answers(namesrv, broker, SETUP))
    assert all(code == 0 for code, _ in setup), list(zip((p.name for p in SETUP), setup))
    answers = asyncio.run(_answers(namesrv, broker, PROBES))
    return {p.name: (code, normalise(remark, store)) for p, (code, remark) in zip(PROBES, answers)}


@pytest.fixture
def java_answers(tmp_path_factory):
    root = tmp_path_factory.mktemp("java")
    (root / "conf").mkdir()
    (root / "conf" / "plain_acl.yml").write_text(ACL_YAML)
    cluster = JavaCluster(root, **BROKER_CONF)
    try:
        cluster.start()
    except JavaBrokerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield _run(cluster.namesrv, cluster.broker_addr, str(cluster.store))
    finally:
        cluster.stop()


def test_refusals_read_as_rocketmqs(java_answers, tmp_path):
    (tmp_path / "plain_acl.yml").write_text(ACL_YAML)
    d = Daemons(str(tmp_path), broker_options={
        "acl_enable": True, "acl_file": str(tmp_path / "plain_acl.yml"), "auto_create_topic_enable": False,
        "auto_create_subscription_group": False, "broker_name": "java-broker"})
    d.start()
    try:
        ours = _run(d.namesrv.address, d.broker.address, str(tmp_path / "store"))
    finally:
        d.stop()
    if os.environ.get("MQ_SHOW_REFUSALS"):
        for name in java_answers:
            print(f"{name}:\n  rocketmq {java_answers[name]}\n  mq       {ours[name]}")
    differences = {name: {"rocketmq": java_answers[name], "mq": ours[name]} for name in java_answers
                   if name not in KNOWN_DIFFERENCES and not same_refusal(java_answers[name], ours[name])}
    assert not differences, "\n".join(f"{k}:\n  rocketmq {v['rocketmq']}\n  mq       {v['mq']}"
                                      for k, v in differences.items())
